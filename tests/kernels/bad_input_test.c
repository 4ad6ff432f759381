/*
 * The bad-input rows of kernels/nxr_kernels.h's
 * providers and bundles: the table's rule, and where its
 * other rows live, are in tests/support/bad_input.h.
 */
#include "tests/support/bad_input.h"

TestSuite(kernels_bad_input, .timeout = 60);

/* ---- providers and kernels ---------------------------------------------- */

static int fake_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *args)
{
    (void)self, (void)call, (void)args;
    return 0;
}

static const struct nxr_gemm_ops fake_gemm = {.sgemm = fake_sgemm};

static void expect_provider(const struct nxr_provider_desc *d, int want)
{
    nxr_provider_t *p = (nxr_provider_t *)0x1;
    int rc = nxr_provider_create(d, &p);
    cr_assert_eq(rc, want, "got %d (%s), want %d", rc, nxr_strerror(rc), want);
    cr_assert_null(p);
}

Test(kernels_bad_input, provider_create_null_arguments_empty_name_or_bad_family_are_einval)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "x";
    d.gemm = &fake_gemm;
    cr_assert_eq(nxr_provider_create(&d, NULL), -EINVAL);
    expect_provider(NULL, -EINVAL);
    d.name = NULL;
    expect_provider(&d, -EINVAL);
    d.name = "";
    expect_provider(&d, -EINVAL);
    d.name = "x";
    d.family = NXR_FAMILY_COUNT;
    expect_provider(&d, -EINVAL);
}

Test(kernels_bad_input, provider_create_impossible_classification_or_tables_is_eprovider)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "x";
    d.gemm = &fake_gemm;
    d.count = NXR_COUNT_SEQUENTIAL; /* SEQUENTIAL x ENGINE_WORKERS */
    expect_provider(&d, NXR_EPROVIDER);
    nxr_provider_desc_init(&d);
    d.name = "x"; /* no table at all */
    expect_provider(&d, NXR_EPROVIDER);
    d.gemm = &fake_gemm;
    d.norm = (const struct nxr_norm_ops *)&fake_gemm; /* a second family's table */
    expect_provider(&d, NXR_EPROVIDER);
    nxr_provider_desc_init(&d);
    d.name = "x";
    d.gemm = &fake_gemm;
    d.count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS; /* without global_threads */
    expect_provider(&d, NXR_EPROVIDER);
}

static int global_get(void *self)
{
    (void)self;
    return 1;
}

static void global_set(void *self, int count)
{
    (void)self, (void)count;
}

static int released;

static void count_release(void *self)
{
    (void)self;
    released++;
}

/* Only a GLOBAL_OR_UNCONTROLLED provider may bring a global count: nxr
 * holds the count gate around a call that has one, and a provider that fans
 * out on nxr's workers (or runs with a count of its own) would then ask for
 * permits under the gate, the reverse of the lock order (permit, then gate). */
Test(kernels_bad_input, provider_create_global_count_on_a_non_global_provider_is_eprovider)
{
    static const struct nxr_global_threads_ops ops = {.get = global_get, .set = global_set};
    static const struct {
        enum nxr_count_control count;
        enum nxr_provider_runs_on runs_on;
    } valid[] = {
        {NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_ENGINE_WORKERS},
        {NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_EXTERNAL_WORKERS},
        {NXR_COUNT_SEQUENTIAL, NXR_RUNS_ON_CALLING_THREAD},
        {NXR_COUNT_CLAMP_TO_ONE, NXR_RUNS_ON_CALLING_THREAD},
    };
    released = 0;
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        struct nxr_provider_desc d;
        nxr_provider_desc_init(&d);
        d.name = "x";
        d.gemm = &fake_gemm;
        d.count = valid[i].count;
        d.runs_on = valid[i].runs_on;
        d.release = count_release;
        nxr_provider_t *p;
        cr_assert_eq(nxr_provider_create(&d, &p), 0, "row %zu is valid without a count", i);
        nxr_provider_destroy(p);
        d.global_threads = &ops;
        expect_provider(&d, NXR_EPROVIDER);
    }
    cr_assert_eq(released, 4, "release ran for the created ones only");
}

Test(kernels_bad_input, provider_native_and_openblas_bad_arguments_are_einval)
{
    nxr_provider_t *p = (nxr_provider_t *)0x1;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_COUNT, &p), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_GEMM, NULL), -EINVAL);
    cr_assert_eq(nxr_provider_openblas_create(NULL), -EINVAL);
    nxr_provider_destroy(NULL);
}

Test(kernels_bad_input, bundle_provider_in_another_familys_slot_is_einval)
{
    nxr_provider_t *gemm;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_GEMM, &gemm), 0);
    struct nxr_provider_bundle_opts o;
    nxr_provider_bundle_opts_init(&o);
    o.providers[NXR_FAMILY_NORM] = gemm;
    nxr_provider_bundle_t *b = (nxr_provider_bundle_t *)0x1;
    cr_assert_eq(nxr_provider_bundle_create(&o, &b), -EINVAL);
    cr_assert_null(b);
    cr_assert_eq(nxr_provider_bundle_create(NULL, NULL), -EINVAL);
    nxr_provider_destroy(gemm);
    nxr_provider_bundle_destroy(NULL);
}

Test(kernels_bad_input, bundle_get_family_out_of_range_is_null)
{
    nxr_provider_bundle_t *b;
    cr_assert_eq(nxr_provider_bundle_create(NULL, &b), 0);
    cr_assert_null(nxr_provider_bundle_get(b, NXR_FAMILY_COUNT));
    cr_assert_null(nxr_provider_bundle_get(b, (enum nxr_provider_family) - 1));
    nxr_provider_bundle_destroy(b);
}
