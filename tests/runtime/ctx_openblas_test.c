/*
 * OpenBLAS as the GEMM provider of a runtime (opts.providers[GEMM] =
 * nxr_provider_openblas_create, what NXR_GEMM=openblas selects), called
 * through contexts. OpenBLAS's thread count is process-global
 * (openblas_set_num_threads); nxr may change it only inside the exclusive
 * permit and must put it back. So:
 *  - strict policy: the count is the same before and after every call, on
 *    the whole-set domain (runs when the count fits the budget, here the
 *    number of allowed CPUs; NXR_EPLACEMENT one above it), at count 1
 *    (inline, on the calling thread), and on a partial one-CPU domain with a
 *    count above one (NXR_EPLACEMENT, C untouched);
 *  - exclusive policy: during the call the exclusive permit is held and the
 *    count is the domain's budget (seen by a spy provider over the real
 *    library), after it the count is what it was;
 *  - NXR_GEMM=openblas and NXR_PROVIDER_POLICY from the environment do the
 *    same.
 * The expected outcomes come from those rules as docs/guide.md states them and
 * from counts the tests set, never from nxr's own rule function.
 * Debian's OpenBLAS is the pthreads build (count = number of CPUs unless
 * OPENBLAS_NUM_THREADS is set); a sequential build skips the count tests.
 * These tests never set OPENBLAS_CORETYPE.
 *
 * Results are checked against a double reference:
 * |C - ref| <= 2 (k + 2) u sum_p |a_ip b_pj|, u = 2^-24.
 */
#include <cblas.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctx_support.h"
#include "tests/kernels/ref.h"

TestSuite(kernels_ctx_openblas, .timeout = 60);

enum { M = 257, N = 129, K = 65 };

struct problem {
    float *a, *b, *c;
    struct nxr_sgemm_args g;
};

static void problem_init(struct problem *pr, uint64_t seed)
{
    pr->a = ref_fill(M * K, seed, -1, 1);
    pr->b = ref_fill(K * N, seed + 1, -1, 1);
    pr->c = ref_fill(M * N, seed + 2, -1, 1);
    pr->g = (struct nxr_sgemm_args){.m = M,
                               .n = N,
                               .k = K,
                               .alpha = 1,
                               .a = pr->a,
                               .lda = K,
                               .b = pr->b,
                               .ldb = N,
                               .beta = 0,
                               .c = pr->c,
                               .ldc = N};
}

static void problem_fini(struct problem *pr)
{
    free(pr->a);
    free(pr->b);
    free(pr->c);
}

static void expect_product(const struct problem *pr)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double dot = 0, mag = 0;
            for (size_t p = 0; p < K; p++) {
                double t = (double)pr->a[i * K + p] * pr->b[p * N + j];
                dot += t;
                mag += fabs(t);
            }
            cr_assert(fabs(pr->c[i * N + j] - dot) <= 2.0 * (K + 2) * U_F32 * mag,
                      "C[%zu][%zu] = %.9g, want %.9g", i, j, pr->c[i * N + j], dot);
        }
}

static nxr_provider_t *openblas_or_skip(void)
{
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_openblas_create(&p), 0);
    if (nxr_provider_count_control(p) != NXR_COUNT_GLOBAL_OR_UNCONTROLLED) {
        nxr_provider_destroy(p);
        cr_skip_test("sequential OpenBLAS: no process-global count");
    }
    return p;
}

static void open_with(struct ctx_rt *r, nxr_provider_t *p, const char *domains, int policy)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.domains = domains != NULL ? nxr_test_expand(domains) : NULL; /* tests/support/cpus.h */
    o.policy = policy;
    o.gemm = p;
    ctx_rt_open(r, &o);
}

/* The whole allowed set as one domain (ctx_support.h's default): under the
 * strict policy OpenBLAS may run there with its own threads, at most the
 * budget of them. */
static void strict_whole_set_case(nxr_provider_t *p, int count, int want)
{
    const int original = openblas_get_num_threads();
    openblas_set_num_threads(count);
    struct ctx_rt r;
    open_with(&r, p, NULL, NXR_PROVIDER_STRICT);
    cr_assert_eq(nxr_ctx_budget(r.ctx[0]), (unsigned)nxr_test_cpu_count());
    struct problem pr;
    problem_init(&pr, 1);
    float *c0 = malloc(sizeof(float) * M * N);
    memcpy(c0, pr.c, sizeof(float) * M * N);
    int rc = nxr_sgemm(r.ctx[0], &pr.g);
    cr_assert_eq(rc, want, "count %d, budget %u: %s", count, nxr_ctx_budget(r.ctx[0]),
                 nxr_strerror(rc));
    if (want == 0) {
        expect_product(&pr);
        /* Two items sharing A and B, each with its own C (items may not
         * share C: stride_c 0 with batch 2 is -EINVAL). */
        float *cs = ref_fill(2 * M * N, 9, -1, 1);
        struct nxr_sgemm_batch_args batch = {.gemm = pr.g, .batch = 2, .stride_c = M * N};
        batch.gemm.c = cs;
        cr_assert_eq(nxr_sgemm_batch(r.ctx[0], &batch), 0);
        for (int it = 0; it < 2; it++) {
            struct problem item = pr;
            item.c = cs + it * M * N;
            expect_product(&item);
        }
        free(cs);
    } else {
        cr_assert_eq(memcmp(c0, pr.c, sizeof(float) * M * N), 0, "C untouched");
    }
    cr_assert_eq(openblas_get_num_threads(), count, "the count is unchanged");
    free(c0);
    problem_fini(&pr);
    ctx_rt_close(&r);
    openblas_set_num_threads(original);
}

Test(kernels_ctx_openblas, strict_whole_set_domain_runs_at_a_count_within_the_budget)
{
    nxr_provider_t *p = openblas_or_skip();
    strict_whole_set_case(p, nxr_test_cpu_count(), 0);
    nxr_provider_destroy(p);
}

Test(kernels_ctx_openblas, strict_whole_set_domain_refuses_a_count_above_the_budget)
{
    nxr_provider_t *p = openblas_or_skip();
    strict_whole_set_case(p, nxr_test_cpu_count() + 1, NXR_EPLACEMENT);
    nxr_provider_destroy(p);
}

/* ---- a spy over the real library ------------------------------------------------- */

/* A spy over the real library: the OpenBLAS provider's classification and
 * global count, with an sgemm that records the live count before calling
 * cblas_sgemm. */
static int spy_seen;
static pthread_t spy_thread;
static const nxr_runtime_t *spy_rt; /* whose arbiter the spy looks at */
static bool spy_exclusive;

static int spy_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *g)
{
    (void)self;
    (void)call;
    spy_seen = openblas_get_num_threads();
    spy_thread = pthread_self();
    spy_exclusive = spy_rt != NULL && ctx_arbiter(spy_rt).exclusive_held;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)g->n, (int)g->k,
                g->alpha, g->a, (int)g->lda, g->b, (int)g->ldb, g->beta, g->c, (int)g->ldc);
    return 0;
}

static int spy_get(void *self)
{
    (void)self;
    return openblas_get_num_threads();
}

static void spy_set(void *self, int n)
{
    (void)self;
    openblas_set_num_threads(n);
}

static const struct nxr_gemm_ops spy_ops = {.sgemm = spy_sgemm};
static const struct nxr_global_threads_ops spy_threads = {.get = spy_get, .set = spy_set};

static nxr_provider_t *spy_create(void)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "openblas-spy";
    d.count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS;
    d.gemm = &spy_ops;
    d.global_threads = &spy_threads;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    return p;
}

/* At a process-wide count of 1 OpenBLAS runs on the thread that calls it:
 * under the strict policy that fits any domain, whole or partial, and the
 * call is made inline (on the calling thread when it is on the domain). */
Test(kernels_ctx_openblas, strict_count_one_runs_inline_on_any_domain)
{
    nxr_provider_t *p = openblas_or_skip();
    const int original = openblas_get_num_threads();
    openblas_set_num_threads(1);
    const char *layouts[] = {NULL, "0:%0;1:%1"};
    for (int l = 0; l < 2; l++) {
        if (l == 1 && nxr_test_cpu_count() < 2)
            break; /* the partial layout needs two CPUs */
        struct ctx_rt r;
        open_with(&r, p, layouts[l], NXR_PROVIDER_STRICT);
        for (size_t d = 0; d < r.nctx; d++) {
            struct problem pr;
            problem_init(&pr, 2 + d);
            int rc = nxr_sgemm(r.ctx[d], &pr.g);
            cr_assert_eq(rc, 0, "%s domain %zu: %s", layouts[l] ? layouts[l] : "whole set", d,
                         nxr_strerror(rc));
            expect_product(&pr);
            cr_assert_eq(openblas_get_num_threads(), 1);
            problem_fini(&pr);
        }
        ctx_rt_close(&r);
    }
    nxr_provider_destroy(p);

    /* The spy over the same library: on the calling thread (it is on the
     * whole-set domain), no exclusive permit. */
    p = spy_create();
    struct ctx_rt r;
    open_with(&r, p, NULL, NXR_PROVIDER_STRICT);
    spy_rt = r.rt;
    spy_exclusive = true;
    struct problem pr;
    problem_init(&pr, 5);
    cr_assert_eq(nxr_sgemm(r.ctx[0], &pr.g), 0);
    expect_product(&pr);
    cr_assert(pthread_equal(spy_thread, pthread_self()), "inline: the calling thread");
    cr_assert_not(spy_exclusive, "no exclusive permit at count 1");
    cr_assert_eq(spy_seen, 1);
    spy_rt = NULL;
    problem_fini(&pr);
    ctx_rt_close(&r);
    nxr_provider_destroy(p);
    openblas_set_num_threads(original);
}

Test(kernels_ctx_openblas, strict_partial_domain_with_count_two_is_eplacement)
{
    if (nxr_test_cpu_count() < 2)
        cr_skip_test("\"0:0;1:1\" needs two CPUs");
    nxr_provider_t *p = openblas_or_skip();
    const int original = openblas_get_num_threads();
    openblas_set_num_threads(2);
    struct ctx_rt r;
    open_with(&r, p, "0:%0;1:%1", NXR_PROVIDER_STRICT);
    struct problem pr;
    problem_init(&pr, 3);
    float *c0 = malloc(sizeof(float) * M * N);
    memcpy(c0, pr.c, sizeof(float) * M * N);
    for (size_t d = 0; d < r.nctx; d++) {
        cr_assert_eq(nxr_sgemm(r.ctx[d], &pr.g), NXR_EPLACEMENT);
        cr_assert_eq(memcmp(c0, pr.c, sizeof(float) * M * N), 0, "C untouched");
        cr_assert_eq(openblas_get_num_threads(), 2);
    }
    free(c0);
    problem_fini(&pr);
    ctx_rt_close(&r);
    nxr_provider_destroy(p);
    openblas_set_num_threads(original);
}

static void exclusive_case(nxr_provider_t *p, const char *domains, int count_before, bool spy)
{
    const int original = openblas_get_num_threads();
    openblas_set_num_threads(count_before);
    struct ctx_rt r;
    open_with(&r, p, domains, NXR_PROVIDER_PROCESS_EXCLUSIVE);
    spy_rt = r.rt;
    for (size_t d = 0; d < r.nctx; d++) {
        struct problem pr;
        problem_init(&pr, 10 + d);
        spy_seen = -1;
        spy_exclusive = false;
        cr_assert_eq(nxr_sgemm(r.ctx[d], &pr.g), 0);
        expect_product(&pr);
        if (spy) {
            cr_assert_eq(spy_seen, (int)nxr_ctx_budget(r.ctx[d]),
                         "during the call the count is the budget");
            cr_assert(spy_exclusive, "during the call the exclusive permit is held");
        }
        cr_assert_eq(openblas_get_num_threads(), count_before, "%s domain %zu: restored",
                     domains ? domains : "default", d);
        cr_assert_not(ctx_arbiter(r.rt).exclusive_held);
        problem_fini(&pr);
    }
    spy_rt = NULL;
    ctx_rt_close(&r);
    openblas_set_num_threads(original);
}

Test(kernels_ctx_openblas, exclusive_sets_the_budget_and_restores_the_count)
{
    nxr_provider_t *p = openblas_or_skip();
    /* Default domain (budget = CPUs) from a count of 1; one-CPU domains
     * (budget 1) from a count of 2. */
    exclusive_case(p, NULL, 1, false);
    if (nxr_test_cpu_count() >= 2)
        exclusive_case(p, "0:%0;1:%1", 2, false);
    nxr_provider_destroy(p);

    p = spy_create();
    exclusive_case(p, NULL, 1, true);
    if (nxr_test_cpu_count() >= 2)
        exclusive_case(p, "0:%0;1:%1", 2, true);
    nxr_provider_destroy(p);
}

/* ---- the environment ------------------------------------------------------------ */

/* Each row: the policy from the environment, the count the process sets
 * (1, or one above the domain's budget) and the outcome the rules give:
 * count 1 runs under either policy; above the budget, strict refuses and
 * exclusive runs it at the budget and puts the count back. */
Test(kernels_ctx_openblas, environment_selects_openblas_and_the_policy)
{
    nxr_provider_t *probe = openblas_or_skip();
    nxr_provider_destroy(probe);
    const int original = openblas_get_num_threads();
    static const struct {
        const char *policy;
        bool above; /* count = budget + 1 (else 1) */
        bool runs;
    } rows[] = {
        {"strict", false, true},
        {"strict", true, false},
        {"exclusive", false, true},
        {"exclusive", true, true},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        setenv("NXR_GEMM", "openblas", 1);
        setenv("NXR_PROVIDER_POLICY", rows[i].policy, 1);
        nxr_runtime_t *rt;
        struct nxr_runtime_opts o;
        nxr_runtime_opts_init(&o); /* the environment is honoured */
        cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
        const nxr_provider_t *gemm =
            nxr_provider_bundle_get(nxr_runtime_providers(rt), NXR_FAMILY_GEMM);
        cr_assert_str_eq(nxr_provider_name(gemm), "openblas");
        cr_assert_eq(rt->settings.policy, strcmp(rows[i].policy, "strict") == 0
                                              ? NXR_PROVIDER_STRICT
                                              : NXR_PROVIDER_PROCESS_EXCLUSIVE);
        nxr_ctx_t *ctx;
        cr_assert_eq(nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, 0)), &ctx), 0);
        const int count = rows[i].above ? (int)nxr_ctx_budget(ctx) + 1 : 1;
        openblas_set_num_threads(count);
        struct problem pr;
        problem_init(&pr, 20 + (uint64_t)i);
        float *c0 = malloc(sizeof(float) * M * N);
        memcpy(c0, pr.c, sizeof(float) * M * N);
        int rc = nxr_sgemm(ctx, &pr.g);
        if (rows[i].runs) {
            cr_assert_eq(rc, 0, "%s, count %d: %s", rows[i].policy, count, nxr_strerror(rc));
            expect_product(&pr);
        } else {
            cr_assert_eq(rc, NXR_EPLACEMENT, "%s, count %d: %s", rows[i].policy, count,
                         nxr_strerror(rc));
            cr_assert_eq(memcmp(c0, pr.c, sizeof(float) * M * N), 0, "C untouched");
        }
        cr_assert_eq(openblas_get_num_threads(), count, "%s: the count is unchanged",
                     rows[i].policy);
        free(c0);
        problem_fini(&pr);
        nxr_ctx_destroy(ctx);
        nxr_runtime_destroy(rt);
    }
    unsetenv("NXR_GEMM");
    unsetenv("NXR_PROVIDER_POLICY");
    openblas_set_num_threads(original);
}
