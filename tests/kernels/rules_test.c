/*
 * The run rules (kernels/rules.c) as a pure function, with a fake provider of each
 * class: what runs inline, on the domain, under the exclusive permit, and
 * what is rejected with which typed error.
 */
#include <criterion/criterion.h>

#include "kernels/internal/provider.h"
#include "kernels/internal/rules.h"

enum { PARTIAL = 0, WHOLE = 1 };

static struct nxr__run_decision decide(enum nxr_count_control c, enum nxr_provider_runs_on p,
                                       unsigned budget, bool whole, enum nxr_provider_policy pol,
                                       int global)
{
    const struct nxr__run_situation s = {
        .budget = budget, .whole_allowed_set = whole, .policy = pol, .global_threads = global};
    return nxr__provider_decide(c, p, &s);
}

#define EXPECT(d, want_run, want_threads, want_status)                                             \
    do {                                                                                           \
        const struct nxr__run_decision d_ = (d);                                                   \
        cr_assert_eq(d_.run, (want_run), "run %s, want %s", nxr__run_name(d_.run),                 \
                     nxr__run_name(want_run));                                                     \
        cr_assert_eq(d_.threads, (unsigned)(want_threads));                                        \
        cr_assert_eq(d_.status, (want_status), "status %s", nxr_strerror(d_.status));              \
    } while (0)

static const enum nxr_provider_policy policies[] = {NXR_PROVIDER_STRICT,
                                                    NXR_PROVIDER_PROCESS_EXCLUSIVE};

Test(kernels_rules, impossible_combinations_are_eprovider)
{
    const struct {
        enum nxr_count_control c;
        enum nxr_provider_runs_on p;
    } bad[] = {
        {NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_CALLING_THREAD},
        {NXR_COUNT_SEQUENTIAL, NXR_RUNS_ON_ENGINE_WORKERS},
        {NXR_COUNT_SEQUENTIAL, NXR_RUNS_ON_EXTERNAL_WORKERS},
        {NXR_COUNT_CLAMP_TO_ONE, NXR_RUNS_ON_ENGINE_WORKERS},
        {NXR_COUNT_CLAMP_TO_ONE, NXR_RUNS_ON_EXTERNAL_WORKERS},
        {NXR_COUNT_GLOBAL_OR_UNCONTROLLED, NXR_RUNS_ON_ENGINE_WORKERS},
        {NXR_COUNT_GLOBAL_OR_UNCONTROLLED, NXR_RUNS_ON_CALLING_THREAD},
        {(enum nxr_count_control)7, NXR_RUNS_ON_ENGINE_WORKERS},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        cr_assert_not(nxr__classification_valid(bad[i].c, bad[i].p));
        for (int w = 0; w < 2; ++w)
            for (int m = 0; m < 2; ++m)
                EXPECT(decide(bad[i].c, bad[i].p, 1, w, policies[m], 1), NXR_RUN_REJECT, 0,
                       NXR_EPROVIDER);
    }
}

Test(kernels_rules, zero_budget_is_ebudget)
{
    EXPECT(decide(NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_ENGINE_WORKERS, 0, WHOLE,
                  NXR_PROVIDER_STRICT, 0),
           NXR_RUN_REJECT, 0, NXR_EBUDGET);
}

/* Native: budget 1 inline, more on the domain's own workers, in any mode. */
Test(kernels_rules, engine_workers)
{
    for (int m = 0; m < 2; ++m)
        for (int w = 0; w < 2; ++w) {
            EXPECT(
                decide(NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_ENGINE_WORKERS, 1, w, policies[m], 0),
                NXR_RUN_INLINE, 1, 0);
            EXPECT(
                decide(NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_ENGINE_WORKERS, 6, w, policies[m], 0),
                NXR_RUN_DOMAIN, 6, 0);
        }
}

/* Sequential and clamp-to-one: always inline, one thread, even for a
 * budget of eight (the budget is an upper bound). */
Test(kernels_rules, calling_thread_only)
{
    const enum nxr_count_control cs[] = {NXR_COUNT_SEQUENTIAL, NXR_COUNT_CLAMP_TO_ONE};
    for (int c = 0; c < 2; ++c)
        for (int m = 0; m < 2; ++m)
            for (int w = 0; w < 2; ++w) {
                EXPECT(decide(cs[c], NXR_RUNS_ON_CALLING_THREAD, 1, w, policies[m], 4),
                       NXR_RUN_INLINE, 1, 0);
                EXPECT(decide(cs[c], NXR_RUNS_ON_CALLING_THREAD, 8, w, policies[m], 4),
                       NXR_RUN_INLINE, 1, 0);
            }
}

/* A library with a true per-call count but its own workers (MKL-like). */
Test(kernels_rules, per_call_bound_external_workers)
{
    const enum nxr_count_control c = NXR_COUNT_PER_CALL_BOUND;
    const enum nxr_provider_runs_on p = NXR_RUNS_ON_EXTERNAL_WORKERS;
    EXPECT(decide(c, p, 1, PARTIAL, NXR_PROVIDER_STRICT, 0), NXR_RUN_INLINE, 1, 0);
    EXPECT(decide(c, p, 4, PARTIAL, NXR_PROVIDER_STRICT, 0), NXR_RUN_REJECT, 0, NXR_EPLACEMENT);
    EXPECT(decide(c, p, 4, WHOLE, NXR_PROVIDER_STRICT, 0), NXR_RUN_DOMAIN, 4, 0);
    EXPECT(decide(c, p, 4, PARTIAL, NXR_PROVIDER_PROCESS_EXCLUSIVE, 0), NXR_RUN_EXCLUSIVE, 4, 0);
}

/* Parallel OpenBLAS: GLOBAL_OR_UNCONTROLLED x EXTERNAL_WORKERS. */
Test(kernels_rules, global_count_strict)
{
    const enum nxr_count_control c = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    const enum nxr_provider_runs_on p = NXR_RUNS_ON_EXTERNAL_WORKERS;
    const enum nxr_provider_policy s = NXR_PROVIDER_STRICT;
    /* Count already 1: inline on the calling worker, any domain, any budget. */
    EXPECT(decide(c, p, 1, PARTIAL, s, 1), NXR_RUN_INLINE, 1, 0);
    EXPECT(decide(c, p, 4, PARTIAL, s, 1), NXR_RUN_INLINE, 1, 0);
    EXPECT(decide(c, p, 4, WHOLE, s, 1), NXR_RUN_INLINE, 1, 0);
    /* Count above one in a partial domain: its workers would leave it. */
    EXPECT(decide(c, p, 1, PARTIAL, s, 2), NXR_RUN_REJECT, 0, NXR_EPLACEMENT);
    EXPECT(decide(c, p, 4, PARTIAL, s, 2), NXR_RUN_REJECT, 0, NXR_EPLACEMENT);
    /* The whole allowed set: accepted at OpenBLAS's own count when it fits. */
    EXPECT(decide(c, p, 2, WHOLE, s, 2), NXR_RUN_DOMAIN, 2, 0);
    EXPECT(decide(c, p, 8, WHOLE, s, 4), NXR_RUN_DOMAIN, 4, 0);
    /* ... but not above the budget (strict never changes the count). */
    EXPECT(decide(c, p, 2, WHOLE, s, 8), NXR_RUN_REJECT, 0, NXR_EPLACEMENT);
    /* An unknown count cannot be shown to be 1. */
    EXPECT(decide(c, p, 4, WHOLE, s, 0), NXR_RUN_REJECT, 0, NXR_EPLACEMENT);
}

Test(kernels_rules, global_count_process_exclusive)
{
    const enum nxr_count_control c = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    const enum nxr_provider_runs_on p = NXR_RUNS_ON_EXTERNAL_WORKERS;
    const enum nxr_provider_policy x = NXR_PROVIDER_PROCESS_EXCLUSIVE;
    /* Every call takes the exclusive permit and runs at the budget. */
    EXPECT(decide(c, p, 2, PARTIAL, x, 8), NXR_RUN_EXCLUSIVE, 2, 0);
    EXPECT(decide(c, p, 3, WHOLE, x, 1), NXR_RUN_EXCLUSIVE, 3, 0);
    EXPECT(decide(c, p, 1, PARTIAL, x, 1), NXR_RUN_EXCLUSIVE, 1, 0);
}

/* decide_now reads the provider's global count at the time of the call. */
static int fake_count = 1;

static int fake_get(void *self)
{
    (void)self;
    return fake_count;
}

static void fake_set(void *self, int n)
{
    (void)self;
    fake_count = n;
}

static int fake_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *a)
{
    (void)self;
    (void)call;
    (void)a;
    return 0;
}

Test(kernels_rules, decide_now_reads_the_global_count)
{
    static const struct nxr_gemm_ops ops = {.sgemm = fake_sgemm};
    static const struct nxr_global_threads_ops threads = {.get = fake_get, .set = fake_set};
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "fake-global";
    d.count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS;
    d.gemm = &ops;
    d.global_threads = &threads;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    fake_count = 1;
    EXPECT(nxr__provider_decide_now(p, 4, false, NXR_PROVIDER_STRICT), NXR_RUN_INLINE, 1, 0);
    fake_count = 3;
    EXPECT(nxr__provider_decide_now(p, 4, false, NXR_PROVIDER_STRICT), NXR_RUN_REJECT, 0,
           NXR_EPLACEMENT);
    EXPECT(nxr__provider_decide_now(p, 4, true, NXR_PROVIDER_STRICT), NXR_RUN_DOMAIN, 3, 0);
    EXPECT(nxr__provider_decide_now(p, 4, false, NXR_PROVIDER_PROCESS_EXCLUSIVE), NXR_RUN_EXCLUSIVE,
           4, 0);
    cr_assert_eq(fake_count, 3, "deciding never changes the count");
    nxr_provider_destroy(p);
}
