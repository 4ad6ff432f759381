/*
 * Providers and bundles: validation at creation (every NXR_EPROVIDER case),
 * immutability and reference counting, typed slots, NXR_EUNSUPPORTED, no
 * silent fallback, and the floating-point environment check around foreign
 * providers (a fake that flips flush-to-zero or the rounding mode).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fenv.h>
#include <string.h>

#include "kernels/internal/fpenv_arch.h"
#include "kernels/internal/provider.h"
#include "ref.h"
#include "base/internal/sys.h"

/* ---- fakes ------------------------------------------------------------------ */

enum fake_mode { FAKE_OK, FAKE_FAIL, FAKE_FLIP_FTZ, FAKE_FLIP_ROUNDING, FAKE_FAIL_AND_FLIP };

struct fake {
    enum fake_mode mode;
    int calls;
    int released;
};

static int fake_act(struct fake *f)
{
    f->calls++;
    switch (f->mode) {
    case FAKE_OK:
        return 0;
    case FAKE_FAIL:
        return -EIO;
    case FAKE_FLIP_FTZ:
        nxr__fpenv_write_control(nxr__fpenv_read_control() | nxr__fpenv_ftz_bit());
        return 0;
    case FAKE_FLIP_ROUNDING:
        fesetround(FE_TOWARDZERO);
        return 0;
    case FAKE_FAIL_AND_FLIP:
        nxr__fpenv_write_control(nxr__fpenv_read_control() | nxr__fpenv_ftz_bit());
        return -EIO;
    }
    return 0;
}

static int fake_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *a)
{
    (void)call;
    (void)a;
    return fake_act(self);
}

static int fake_sum(void *self, const struct nxr_kernel_call *call, size_t n, const float *x, float *out)
{
    (void)call;
    (void)n;
    (void)x;
    *out = 42.0f;
    return fake_act(self);
}

static void fake_release(void *self)
{
    ((struct fake *)self)->released++;
}

static int fake_get(void *self)
{
    (void)self;
    return 1;
}

static void fake_set(void *self, int n)
{
    (void)self;
    (void)n;
}

static const struct nxr_gemm_ops fake_gemm_ops = {.sgemm = fake_sgemm}; /* no batch */
static const struct nxr_reduction_ops fake_reduction_ops = {.sum = fake_sum};
static const struct nxr_global_threads_ops fake_threads = {.get = fake_get, .set = fake_set};

static struct nxr_provider_desc gemm_desc(struct fake *f)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "fake-gemm";
    d.family = NXR_FAMILY_GEMM;
    d.count = NXR_COUNT_SEQUENTIAL;
    d.runs_on = NXR_RUNS_ON_CALLING_THREAD;
    d.gemm = &fake_gemm_ops;
    d.self = f;
    d.release = fake_release;
    return d;
}

/* ---- creation ------------------------------------------------------------------ */

Test(kernels_provider, create_rejects_bad_arguments_with_einval)
{
    struct fake f = {0};
    struct nxr_provider_desc d = gemm_desc(&f);
    nxr_provider_t *p = (void *)1;
    cr_assert_eq(nxr_provider_create(NULL, &p), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(nxr_provider_create(&d, NULL), -EINVAL);
    d.name = "";
    cr_assert_eq(nxr_provider_create(&d, &p), -EINVAL);
    d.name = "x";
    d.family = NXR_FAMILY_COUNT;
    cr_assert_eq(nxr_provider_create(&d, &p), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(f.released, 0, "release is not called for a provider never created");
}

Test(kernels_provider, create_rejects_impossible_providers_with_eprovider)
{
    struct fake f = {0};
    nxr_provider_t *p = (void *)1;
    struct nxr_provider_desc d = gemm_desc(&f);
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS; /* sequential with workers */
    cr_assert_eq(nxr_provider_create(&d, &p), NXR_EPROVIDER);
    cr_assert_null(p);

    d = gemm_desc(&f);
    d.gemm = NULL; /* no table */
    cr_assert_eq(nxr_provider_create(&d, &p), NXR_EPROVIDER);

    d = gemm_desc(&f);
    d.reduction = &fake_reduction_ops; /* a second table */
    cr_assert_eq(nxr_provider_create(&d, &p), NXR_EPROVIDER);

    static const struct nxr_gemm_ops empty = {0};
    d = gemm_desc(&f);
    d.gemm = &empty;
    cr_assert_eq(nxr_provider_create(&d, &p), NXR_EPROVIDER);

    d = gemm_desc(&f); /* global count without a way to read and set it */
    d.count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS;
    cr_assert_eq(nxr_provider_create(&d, &p), NXR_EPROVIDER);
    d.global_threads = &fake_threads;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    nxr_provider_destroy(p);
    cr_assert_eq(f.released, 1);
}

static int fake_sgemm_fused(void *self, const struct nxr_kernel_call *call,
                            const struct nxr_sgemm_args *a, const struct nxr_sgemm_epilogue *e)
{
    (void)call;
    (void)a;
    (void)e;
    return fake_act(self);
}

static size_t fake_scratch(void *self, const struct nxr_sgemm_args *a)
{
    (void)self;
    (void)a;
    return 0;
}

static int fake_binary_rows(void *self, const struct nxr_kernel_call *call, enum nxr_binary_op op,
                            size_t rows, size_t cols, const float *x, size_t ldx, const float *row,
                            float *out, size_t ldo)
{
    (void)call;
    (void)op;
    (void)rows;
    (void)cols;
    (void)x;
    (void)ldx;
    (void)row;
    (void)out;
    (void)ldo;
    return fake_act(self);
}

/* Any one op of the family's table is enough, the optional ones too: the
 * set is every kernel of the family (kernels/internal/kernel_table.h). */
Test(kernels_provider, create_accepts_a_table_of_one_optional_op)
{
    struct fake f = {0};
    nxr_provider_t *p = NULL;
    static const struct nxr_gemm_ops fused_only = {.sgemm_fused = fake_sgemm_fused};
    struct nxr_provider_desc d = gemm_desc(&f);
    d.gemm = &fused_only;
    cr_assert_eq(nxr_provider_create(&d, &p), 0, "sgemm_fused alone: %s", nxr_last_error());
    nxr_provider_destroy(p);

    static const struct nxr_elementwise_ops rows_only = {.binary_rows = fake_binary_rows};
    d = gemm_desc(&f);
    d.family = NXR_FAMILY_ELEMENTWISE;
    d.gemm = NULL;
    d.elementwise = &rows_only;
    cr_assert_eq(nxr_provider_create(&d, &p), 0, "binary_rows alone: %s", nxr_last_error());
    nxr_provider_destroy(p);

    static const struct nxr_gemm_ops scratch_only = {.sgemm_scratch = fake_scratch};
    d = gemm_desc(&f);
    d.gemm = &scratch_only; /* a size, no kernel */
    cr_assert_eq(nxr_provider_create(&d, &p), NXR_EPROVIDER);
    cr_assert_eq(f.released, 2);
}

Test(kernels_provider, create_fails_cleanly_without_memory)
{
    struct fake f = {0};
    struct nxr_provider_desc d = gemm_desc(&f);
    for (long n = 1; n <= 2; ++n) {
        nxr_provider_t *p = (void *)1;
        nxr__fault_arm(NXR_FAULT_ALLOC, n);
        cr_assert_eq(nxr_provider_create(&d, &p), -ENOMEM, "allocation %ld", n);
        nxr__fault_arm(0, 0);
        cr_assert_null(p);
    }
    cr_assert_eq(f.released, 0);
}

Test(kernels_provider, immutable_after_creation)
{
    struct fake f = {0};
    char name[] = "fake-gemm";
    struct nxr_provider_desc d = gemm_desc(&f);
    d.name = name;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    name[0] = 'X';
    d.count = NXR_COUNT_CLAMP_TO_ONE;
    cr_assert_str_eq(nxr_provider_name(p), "fake-gemm");
    cr_assert_eq(nxr_provider_family(p), NXR_FAMILY_GEMM);
    cr_assert_eq(nxr_provider_count_control(p), NXR_COUNT_SEQUENTIAL);
    cr_assert_eq(nxr_provider_runs_on(p), NXR_RUNS_ON_CALLING_THREAD);
    cr_assert(nxr_provider_is_foreign(p));
    nxr_provider_destroy(p);
    nxr_provider_destroy(NULL);
}

Test(kernels_provider, native_providers_are_engine_workers)
{
    for (int f = 0; f < NXR_FAMILY_COUNT; ++f) {
        nxr_provider_t *p;
        cr_assert_eq(nxr_provider_native_create((enum nxr_provider_family)f, &p), 0);
        cr_assert_eq(nxr_provider_count_control(p), NXR_COUNT_PER_CALL_BOUND);
        cr_assert_eq(nxr_provider_runs_on(p), NXR_RUNS_ON_ENGINE_WORKERS);
        cr_assert_not(nxr_provider_is_foreign(p));
        cr_assert_eq(strncmp(nxr_provider_name(p), "native-", 7), 0);
        nxr_provider_destroy(p);
    }
    nxr_provider_t *p = (void *)1;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_COUNT, &p), -EINVAL);
    cr_assert_null(p);
}

/* ---- bundles -------------------------------------------------------------------- */

Test(kernels_provider, bundle_slots_and_references)
{
    struct fake f = {0};
    struct nxr_provider_desc d = gemm_desc(&f);
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    struct nxr_provider_bundle_opts o;
    nxr_provider_bundle_opts_init(&o);
    o.providers[NXR_FAMILY_REDUCTION] = p; /* the wrong slot */
    nxr_provider_bundle_t *b = (void *)1;
    cr_assert_eq(nxr_provider_bundle_create(&o, &b), -EINVAL);
    cr_assert_null(b);

    nxr_provider_bundle_opts_init(&o);
    o.providers[NXR_FAMILY_GEMM] = p;
    cr_assert_eq(nxr_provider_bundle_create(&o, &b), 0);
    nxr_provider_destroy(p); /* the bundle holds its own reference */
    cr_assert_eq(f.released, 0);
    cr_assert_eq(nxr_provider_bundle_get(b, NXR_FAMILY_GEMM), p);
    for (int fam = 1; fam < NXR_FAMILY_COUNT; ++fam)
        cr_assert_not(nxr_provider_is_foreign(nxr_provider_bundle_get(b, fam)), "native default");
    cr_assert_null(nxr_provider_bundle_get(b, NXR_FAMILY_COUNT));
    const struct nxr_kernel_call call = {.threads = 1};
    struct nxr_sgemm_args g = {0};
    cr_assert_eq(nxr__bundle_sgemm(b, &call, &g), 0);
    cr_assert_eq(f.calls, 1);
    nxr_provider_bundle_destroy(b);
    cr_assert_eq(f.released, 1, "released exactly once, with the last reference");
    nxr_provider_bundle_destroy(NULL);
}

Test(kernels_provider, missing_op_is_eunsupported)
{
    struct fake f = {0};
    struct nxr_provider_desc d = gemm_desc(&f);
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    struct nxr_provider_bundle_opts o;
    nxr_provider_bundle_opts_init(&o);
    o.providers[NXR_FAMILY_GEMM] = p;
    nxr_provider_bundle_t *b;
    cr_assert_eq(nxr_provider_bundle_create(&o, &b), 0);
    const struct nxr_kernel_call call = {.threads = 1};
    struct nxr_sgemm_batch_args batch = {0};
    cr_assert_eq(nxr__bundle_sgemm_batch(b, &call, &batch), NXR_EUNSUPPORTED);
    cr_assert_eq(f.calls, 0, "nothing else ran in its place");
    /* An op value the native table does not know. */
    float x[4] = {1, 2, 3, 4}, out[4];
    cr_assert_eq(nxr__bundle_binary(b, &call, (enum nxr_binary_op)99, 4, x, x, out),
                 NXR_EUNSUPPORTED);
    cr_assert_eq(nxr__bundle_unary(b, &call, (enum nxr_unary_op)99, 4, x, out), NXR_EUNSUPPORTED);
    nxr_provider_bundle_destroy(b);
    nxr_provider_destroy(p);
}

Test(kernels_provider, provider_error_does_not_fall_back)
{
    struct fake f = {.mode = FAKE_FAIL};
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "fake-sum";
    d.family = NXR_FAMILY_REDUCTION;
    d.count = NXR_COUNT_CLAMP_TO_ONE;
    d.runs_on = NXR_RUNS_ON_CALLING_THREAD;
    d.reduction = &fake_reduction_ops;
    d.self = &f;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    struct nxr_provider_bundle_opts o;
    nxr_provider_bundle_opts_init(&o);
    o.providers[NXR_FAMILY_REDUCTION] = p;
    nxr_provider_bundle_t *b;
    cr_assert_eq(nxr_provider_bundle_create(&o, &b), 0);
    const struct nxr_kernel_call call = {.threads = 1};
    float x[3] = {1, 2, 3}, s = 0;
    cr_assert_eq(nxr__bundle_sum(b, &call, 3, x, &s), -EIO);
    cr_assert_eq(s, 42.0f, "the fake wrote it; the native sum (6) never ran");
    cr_assert_eq(nxr__bundle_max(b, &call, 3, x, &s), NXR_EUNSUPPORTED, "no max in the fake");
    nxr_provider_bundle_destroy(b);
    nxr_provider_destroy(p);
}

Test(kernels_provider, native_gemm_through_the_bundle)
{
    nxr_provider_bundle_t *b;
    cr_assert_eq(nxr_provider_bundle_create(NULL, &b), 0);
    float a[6] = {1, 2, 3, 4, 5, 6}, bm[6] = {1, 0, 0, 1, 1, 1}, c[4];
    struct nxr_sgemm_args g = {.m = 2,
                          .n = 2,
                          .k = 3,
                          .alpha = 1,
                          .a = a,
                          .lda = 3,
                          .b = bm,
                          .ldb = 2,
                          .beta = 0,
                          .c = c,
                          .ldc = 2};
    struct nxr_kernel_call call = {.threads = 1};
    /* 2 x 2 is a small shape: its path packs nothing, so needs no scratch;
     * the tile loop's shapes do. */
    cr_assert_eq(nxr__bundle_sgemm(b, &call, &g), 0, "a small shape without scratch");
    struct nxr_sgemm_args big = g;
    big.m = big.n = 17;
    big.k = 0; /* no operand read: C = 0 */
    float cbig[17 * 17];
    big.c = cbig;
    big.ldc = 17;
    cr_assert_eq(nxr__bundle_sgemm(b, &call, &big), 0);
    big.k = 1;
    big.a = a;
    big.lda = 1;
    big.b = a;
    big.ldb = 17;
    cr_assert_eq(nxr__bundle_sgemm(b, &call, &big), -EINVAL, "no scratch");
    cr_assert_gt(nxr__bundle_sgemm_scratch(b, &big), 0, "the tile loop packs");
    cr_assert_eq(nxr__bundle_sgemm_scratch(b, &g), 0, "the small path packs nothing");
    memset(c, 0, sizeof c);
    const size_t bytes = nxr__bundle_sgemm_scratch(b, &big);
    void *scratch = ref_scratch(bytes);
    void *const scr[1] = {scratch};
    call.scratch = scr;
    call.scratch_bytes = bytes;
    cr_assert_eq(nxr__bundle_sgemm(b, &call, &g), 0);
    cr_assert_eq(c[0], 4.0f);
    cr_assert_eq(c[1], 5.0f);
    cr_assert_eq(c[2], 10.0f);
    cr_assert_eq(c[3], 11.0f);
    free(scratch);
    nxr_provider_bundle_destroy(b);
}

/* ---- the floating-point environment around foreign providers ---------------------- */

static int call_fake(enum fake_mode mode, struct nxr_fpenv *before, struct nxr_fpenv *after)
{
    struct fake f = {.mode = mode};
    struct nxr_provider_desc d = gemm_desc(&f);
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    struct nxr_provider_bundle_opts o;
    nxr_provider_bundle_opts_init(&o);
    o.providers[NXR_FAMILY_GEMM] = p;
    nxr_provider_bundle_t *b;
    cr_assert_eq(nxr_provider_bundle_create(&o, &b), 0);
    const struct nxr_kernel_call call = {.threads = 1};
    struct nxr_sgemm_args g = {0};
    nxr_fpenv_get(before);
    const int rc = nxr__bundle_sgemm(b, &call, &g);
    nxr_fpenv_get(after);
    cr_assert_eq(f.calls, 1);
    nxr_provider_bundle_destroy(b);
    nxr_provider_destroy(p);
    return rc;
}

Test(kernels_provider, fpenv_flush_to_zero_flip_is_caught_and_restored)
{
    struct nxr_fpenv before, after;
    if (!(nxr_fpenv_get(&before), before.supported))
        cr_skip_test("no observable FP environment on this target");
    cr_assert_eq(call_fake(FAKE_FLIP_FTZ, &before, &after), NXR_EFPENV);
    cr_assert(nxr_fpenv_equal(&before, &after));
    cr_assert_not(nxr_fpenv_flush_to_zero(&after));
    /* Gradual underflow is back: a subnormal result survives. */
    volatile float tiny = 1e-38f;
    volatile float sub = tiny * 0.01f;
    cr_assert_neq(sub, 0.0f);
}

Test(kernels_provider, fpenv_rounding_flip_is_caught_and_restored)
{
    struct nxr_fpenv before, after;
    if (!(nxr_fpenv_get(&before), before.supported))
        cr_skip_test("no observable FP environment on this target");
    cr_assert_eq(call_fake(FAKE_FLIP_ROUNDING, &before, &after), NXR_EFPENV);
    cr_assert(nxr_fpenv_equal(&before, &after));
    cr_assert_eq(nxr_fpenv_rounding(&after), NXR_ROUND_NEAREST);
    cr_assert_eq(fegetround(), FE_TONEAREST);
}

Test(kernels_provider, provider_error_wins_over_fpenv_but_env_is_restored)
{
    struct nxr_fpenv before, after;
    cr_assert_eq(call_fake(FAKE_FAIL_AND_FLIP, &before, &after), -EIO);
    cr_assert(nxr_fpenv_equal(&before, &after));
}

Test(kernels_provider, clean_provider_passes_the_check)
{
    struct nxr_fpenv before, after;
    cr_assert_eq(call_fake(FAKE_OK, &before, &after), 0);
    cr_assert(nxr_fpenv_equal(&before, &after));
}

Test(kernels_provider, names)
{
    cr_assert_str_eq(nxr_provider_family_name(NXR_FAMILY_NORM), "norm");
    cr_assert_str_eq(nxr_count_control_name(NXR_COUNT_GLOBAL_OR_UNCONTROLLED),
                     "global-or-uncontrolled");
    cr_assert_str_eq(nxr_provider_runs_on_name(NXR_RUNS_ON_EXTERNAL_WORKERS),
                     "external-workers");
    cr_assert_str_eq(nxr_provider_family_name(NXR_FAMILY_COUNT), "?");
    cr_assert(nxr_status_is_nxr(NXR_EPROVIDER));
    cr_assert_eq(strncmp(nxr_strerror(NXR_EPROVIDER), "NXR_EPROVIDER", 13), 0);
}
