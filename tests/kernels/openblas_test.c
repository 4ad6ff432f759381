/*
 * The OpenBLAS provider: classification matches what the linked library
 * reports, the fallback-core diagnosis, GEMM results, and OpenBLAS's
 * process-global thread count: the same before and after every call through
 * nxr, set and restored by the guard, never exceeded by a call.
 *
 * OPENBLAS_CORETYPE must not be set for these tests (or in CI): it would
 * make the probe describe a forced core instead of the library's choice.
 */
#include <cblas.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/internal/openblas.h"
#include "kernels/internal/provider.h"
#include "kernels/internal/rules.h"
#include "ref.h"

Test(kernels_openblas, coretype_is_not_forced)
{
    cr_assert_null(getenv("OPENBLAS_CORETYPE"), "tests and CI must not set OPENBLAS_CORETYPE");
}

Test(kernels_openblas, probe_matches_the_library)
{
    nxr_openblas_info_t info;
    nxr_openblas_probe(&info);
    cr_assert_eq(info.parallel, openblas_get_parallel());
    cr_assert_eq(info.threads, openblas_get_num_threads());
    cr_assert_str_eq(info.core, openblas_get_corename());
    cr_assert_eq(strncmp(info.config, openblas_get_config(), sizeof info.config - 1), 0);
    switch (info.parallel) {
    case 0:
        cr_assert_eq(info.threading, NXR_OPENBLAS_SEQUENTIAL);
        cr_assert_eq(info.count, NXR_COUNT_SEQUENTIAL);
        cr_assert_eq(info.placement, NXR_RUNS_ON_CALLING_THREAD);
        break;
    case 1:
    case 2:
        cr_assert_eq(info.threading,
                     info.parallel == 1 ? NXR_OPENBLAS_PTHREADS : NXR_OPENBLAS_OPENMP);
        cr_assert_eq(info.count, NXR_COUNT_GLOBAL_OR_UNCONTROLLED);
        cr_assert_eq(info.placement, NXR_RUNS_ON_EXTERNAL_WORKERS);
        break;
    default:
        cr_assert_eq(info.threading, NXR_OPENBLAS_UNKNOWN);
        cr_assert_eq(info.count, NXR_COUNT_GLOBAL_OR_UNCONTROLLED);
    }
    char msg[256];
    cr_assert_eq(info.core_fallback,
                 nxr__openblas_core_fallback(info.core, nxr__cpu_tier(), msg, sizeof msg));
    cr_assert_str_eq(info.diagnostic, msg);

    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_openblas_create(&p), 0);
    cr_assert_eq(nxr_provider_count_control(p), info.count);
    cr_assert_eq(nxr_provider_placement(p), info.placement);
    cr_assert(nxr_provider_is_foreign(p));
    nxr_provider_destroy(p);
}

Test(kernels_openblas, classification_of_each_threading_model)
{
    enum nxr_openblas_threading t;
    enum nxr_count_control c;
    enum nxr_provider_placement pl;
    nxr__openblas_classify(0, &t, &c, &pl);
    cr_assert(t == NXR_OPENBLAS_SEQUENTIAL && c == NXR_COUNT_SEQUENTIAL &&
              pl == NXR_RUNS_ON_CALLING_THREAD);
    nxr__openblas_classify(1, &t, &c, &pl);
    cr_assert(t == NXR_OPENBLAS_PTHREADS && c == NXR_COUNT_GLOBAL_OR_UNCONTROLLED &&
              pl == NXR_RUNS_ON_EXTERNAL_WORKERS);
    nxr__openblas_classify(2, &t, &c, &pl);
    cr_assert(t == NXR_OPENBLAS_OPENMP && c == NXR_COUNT_GLOBAL_OR_UNCONTROLLED &&
              pl == NXR_RUNS_ON_EXTERNAL_WORKERS);
    nxr__openblas_classify(9, &t, &c, &pl);
    cr_assert(t == NXR_OPENBLAS_UNKNOWN && c == NXR_COUNT_GLOBAL_OR_UNCONTROLLED);
}

Test(kernels_openblas, fallback_core_diagnosis)
{
    char msg[256];
    cr_assert(nxr__openblas_core_fallback("Prescott", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert_not_null(strstr(msg, "Prescott"));
    cr_assert(nxr__openblas_core_fallback("PRESCOTT", NXR_TIER_AVX2, msg, sizeof msg));
    cr_assert(nxr__openblas_core_fallback("Sandybridge", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert(nxr__openblas_core_fallback("Nehalem", NXR_TIER_AVX2, msg, sizeof msg));
    /* Matching or one tier below is normal (Haswell kernels on Zen 4). */
    cr_assert_not(nxr__openblas_core_fallback("Cooperlake", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert_str_eq(msg, "");
    cr_assert_not(nxr__openblas_core_fallback("Haswell", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert_not(nxr__openblas_core_fallback("Zen", NXR_TIER_AVX2, msg, sizeof msg));
    cr_assert_not(nxr__openblas_core_fallback("Prescott", NXR_TIER_SSE, msg, sizeof msg));
    /* Unknown names or CPUs never flag. */
    cr_assert_not(nxr__openblas_core_fallback("NeoverseV2", NXR_TIER_AVX512, msg, sizeof msg));
    cr_assert_not(nxr__openblas_core_fallback("Prescott", NXR_TIER_UNKNOWN, msg, sizeof msg));
}

/* ---- calls and the global count ------------------------------------------------------ */

struct fixture {
    nxr_provider_t *p;
    nxr_provider_bundle_t *b;
    float a[65 * 33], bm[33 * 7], c[65 * 7];
    nxr_sgemm_args_t g;
};

static void setup(struct fixture *f)
{
    cr_assert_eq(nxr_provider_openblas_create(&f->p), 0);
    struct nxr_provider_bundle_opts o;
    nxr_provider_bundle_opts_init(&o);
    o.providers[NXR_FAMILY_GEMM] = f->p;
    cr_assert_eq(nxr_provider_bundle_create(&o, &f->b), 0);
    uint64_t s = 5;
    for (size_t i = 0; i < sizeof f->a / sizeof f->a[0]; ++i)
        f->a[i] = ref_uniform(&s, -1, 1);
    for (size_t i = 0; i < sizeof f->bm / sizeof f->bm[0]; ++i)
        f->bm[i] = ref_uniform(&s, -1, 1);
    f->g = (nxr_sgemm_args_t){.m = 65,
                              .n = 7,
                              .k = 33,
                              .alpha = 1,
                              .a = f->a,
                              .lda = 33,
                              .b = f->bm,
                              .ldb = 7,
                              .beta = 0,
                              .c = f->c,
                              .ldc = 7};
}

static void teardown(struct fixture *f)
{
    nxr_provider_bundle_destroy(f->b);
    nxr_provider_destroy(f->p);
}

static void check_result(const struct fixture *f)
{
    for (size_t i = 0; i < 65; ++i)
        for (size_t j = 0; j < 7; ++j) {
            double dot = 0, mag = 0;
            for (size_t k = 0; k < 33; ++k) {
                dot += (double)f->a[i * 33 + k] * f->bm[k * 7 + j];
                mag += fabs((double)f->a[i * 33 + k] * f->bm[k * 7 + j]);
            }
            cr_assert(fabs(f->c[i * 7 + j] - dot) <= 2.0 * 35 * U_F32 * mag);
        }
}

Test(kernels_openblas, count_is_unchanged_by_calls_through_nxr)
{
    struct fixture f;
    setup(&f);
    const int before = openblas_get_num_threads();
    const nxr_kernel_call_t call = {.threads = (unsigned)before};
    cr_assert_eq(nxr__bundle_sgemm(f.b, &call, &f.g), 0, "no FP environment change either");
    check_result(&f);
    nxr_sgemm_batch_args_t batch = {.gemm = f.g, .batch = 2};
    cr_assert_eq(nxr__bundle_sgemm_batch(f.b, &call, &batch), 0);
    cr_assert_eq(openblas_get_num_threads(), before);
    teardown(&f);
}

struct guarded {
    struct fixture *f;
    unsigned threads;
    int seen;
    int rc;
    bool meddle; /* the call changes the count itself */
};

static int guarded_call(void *arg)
{
    struct guarded *g = arg;
    g->seen = openblas_get_num_threads();
    const nxr_kernel_call_t call = {.threads = g->threads};
    g->rc = nxr__bundle_sgemm(g->f->b, &call, &g->f->g);
    if (g->meddle)
        openblas_set_num_threads(g->seen + 1);
    return g->rc;
}

/* What the exclusive-permit path does: count = budget, restore after. */
Test(kernels_openblas, guard_sets_the_budget_and_restores)
{
    struct fixture f;
    setup(&f);
    if (nxr_provider_count_control(f.p) != NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
        cr_skip_test("sequential OpenBLAS: no global count to guard");
    const int before = openblas_get_num_threads();
    struct guarded g = {.f = &f, .threads = 1};
    cr_assert_eq(nxr__global_threads_run(f.p, 1, guarded_call, &g), 0);
    cr_assert_eq(g.seen, 1);
    check_result(&f);
    cr_assert_eq(openblas_get_num_threads(), before);

    g = (struct guarded){.f = &f, .threads = 2, .meddle = true};
    cr_assert_eq(nxr__global_threads_run(f.p, 2, guarded_call, &g), 0);
    cr_assert_eq(g.seen, 2);
    cr_assert_eq(openblas_get_num_threads(), before, "restored even after the call moved it");
    teardown(&f);
}

/* A call never runs wider than it was granted. */
Test(kernels_openblas, count_above_the_grant_is_eplacement)
{
    struct fixture f;
    setup(&f);
    if (nxr_provider_count_control(f.p) != NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
        cr_skip_test("sequential OpenBLAS: always one thread");
    const int before = openblas_get_num_threads();
    struct guarded g = {.f = &f, .threads = 1};
    cr_assert_eq(nxr__global_threads_run(f.p, 2, guarded_call, &g), NXR_EPLACEMENT);
    cr_assert_eq(openblas_get_num_threads(), before);
    teardown(&f);
}

Test(kernels_openblas, guard_rejects_bad_arguments)
{
    struct fixture f;
    setup(&f);
    struct guarded g = {.f = &f, .threads = 1};
    cr_assert_eq(nxr__global_threads_run(f.p, 0, guarded_call, &g), -EINVAL);
    nxr_provider_t *native;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_GEMM, &native), 0);
    cr_assert_eq(nxr__global_threads_run(native, 1, guarded_call, &g), -EINVAL,
                 "no global count to set");
    nxr_provider_destroy(native);
    teardown(&f);
}

/* This process's OpenBLAS through the rules: strict placement, with the
 * domain being the whole allowed set, runs it at its own count. */
Test(kernels_openblas, rules_for_this_process)
{
    struct fixture f;
    setup(&f);
    if (nxr_provider_count_control(f.p) != NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
        cr_skip_test("sequential OpenBLAS");
    const int count = openblas_get_num_threads();
    struct nxr__run_decision d =
        nxr__provider_decide_now(f.p, (unsigned)count, false, NXR_PROVIDER_STRICT);
    if (count == 1)
        cr_assert_eq(d.run, NXR_RUN_INLINE);
    else
        cr_assert_eq(d.status, NXR_EPLACEMENT);
    d = nxr__provider_decide_now(f.p, (unsigned)count, true, NXR_PROVIDER_STRICT);
    cr_assert_eq(d.run, count == 1 ? NXR_RUN_INLINE : NXR_RUN_DOMAIN);
    cr_assert_eq(openblas_get_num_threads(), count);
    teardown(&f);
}

Test(kernels_openblas, oversized_dimensions_are_eunsupported)
{
    struct fixture f;
    setup(&f);
    const nxr_kernel_call_t call = {.threads = 64};
    nxr_sgemm_args_t g = f.g;
    g.alpha = 0; /* nothing is read, but cblas cannot express the size */
    g.n = (size_t)1 << 32;
    g.ldc = g.n;
    cr_assert_eq(nxr__bundle_sgemm(f.b, &call, &g), NXR_EUNSUPPORTED);
    teardown(&f);
}
