/*
 * Steps (runtime/nxr_step.h): a sequence of packed products and loops run
 * as one region gives the same bits as the same operations called one by
 * one (nxr_sgemm_packed, nxr_parallel_for), with 1 and 2 participants
 * through nxr_step_run, in place inside a body, and with 3 and 4 on a team
 * bigger than a 2-CPU machine (runtime/internal/step.h: the prepared run as
 * a region of a team of the test's choosing); a step finishes while every
 * worker is held before it claims (the caller runs every slot: a worker
 * that does not wake is never waited for); bad input is refused with a
 * typed error naming the problem and runs nothing.
 *
 * No timing: a held worker waits on a flag the test sets after the step
 * returned (bounded, so a step that waited for it fails the test instead
 * of hanging it).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "executor/internal/team.h"
#include "runtime/internal/step.h"
#include "tests/runtime/ctx_support.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

#define BOUND_MS 20000

enum { K = 64, N1 = 96, N3 = 33, MMAX = 17 };

/* The operations' operands: x (m x K) through W1 (N1 x K) into h; h
 * squashed in place; h through W2 (K x N1) added onto y; x doubled into d
 * (independent of the product beside it); y through W3 (N3 x K) with a
 * bias and ReLU into z. */
struct model {
    size_t m;
    float x[MMAX * K], w1[N1 * K], w2[K * N1], w3[N3 * K], bias[N3];
    nxr_weights_t *p1, *p2, *p3;
};

struct acts {
    float h[MMAX * N1], y[MMAX * K], d[MMAX * K], z[MMAX * N3];
};

struct loop_arg {
    struct acts *a;
    const struct model *mo;
    atomic_int calls;
};

static void squash(void *p, size_t b, size_t e, unsigned worker)
{
    struct loop_arg *l = p;
    (void)worker;
    for (size_t i = b; i < e; i++)
        l->a->h[i] = l->a->h[i] / (1.0f + fabsf(l->a->h[i]));
    atomic_fetch_add(&l->calls, 1);
}

static void twice(void *p, size_t b, size_t e, unsigned worker)
{
    struct loop_arg *l = p;
    (void)worker;
    for (size_t i = b; i < e; i++)
        l->a->d[i] = 2.0f * l->mo->x[i];
    atomic_fetch_add(&l->calls, 1);
}

static float fill(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffff) / 32768.0f - 1.0f;
}

static nxr_weights_t *pack(nxr_runtime_t *rt, const float *w, size_t out, size_t in)
{
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.w = w;
    d.trans = true;
    d.k = in;
    d.n = out;
    d.ldw = in;
    nxr_weights_t *p;
    int rc = nxr_weights_create(rt, &d, &p);
    cr_assert_eq(rc, 0, "nxr_weights_create: %s (%s)", nxr_strerror(rc), nxr_last_error());
    return p;
}

static void model_make(struct model *mo, nxr_runtime_t *rt, size_t m)
{
    uint64_t s = 42 + m;
    mo->m = m;
    for (size_t i = 0; i < sizeof mo->x / sizeof(float); i++)
        mo->x[i] = fill(&s);
    for (size_t i = 0; i < N1 * K; i++)
        mo->w1[i] = fill(&s), mo->w2[i] = fill(&s);
    for (size_t i = 0; i < N3 * K; i++)
        mo->w3[i] = fill(&s);
    for (size_t i = 0; i < N3; i++)
        mo->bias[i] = fill(&s);
    mo->p1 = pack(rt, mo->w1, N1, K);
    mo->p2 = pack(rt, mo->w2, K, N1);
    mo->p3 = pack(rt, mo->w3, N3, K);
}

static void model_free(struct model *mo)
{
    nxr_weights_destroy(mo->p1);
    nxr_weights_destroy(mo->p2);
    nxr_weights_destroy(mo->p3);
}

static void acts_reset(struct acts *a)
{
    memset(a, 0, sizeof *a);
    uint64_t s = 7;
    for (size_t i = 0; i < MMAX * K; i++)
        a->y[i] = fill(&s); /* the residual P2 adds onto */
}

static struct nxr_sgemm_packed_args product(const float *a, size_t m, const nxr_weights_t *w,
                                            float beta, float *c)
{
    return (struct nxr_sgemm_packed_args){.m = m,
                                          .alpha = 1.0f,
                                          .a = a,
                                          .lda = nxr_weights_k(w),
                                          .w = w,
                                          .beta = beta,
                                          .c = c,
                                          .ldc = nxr_weights_n(w)};
}

/* The step over a (the pointers are taken when the operations are added). */
static nxr_step_t *step_make(const struct model *mo, struct acts *a, struct loop_arg *l)
{
    const size_t m = mo->m;
    static const struct nxr_sgemm_epilogue *none = NULL;
    struct nxr_sgemm_epilogue relu = {.bias = mo->bias, .activation = NXR_ACTIVATION_SILU};
    nxr_step_t *s;
    cr_assert_eq(nxr_step_create(&s), 0);
    struct nxr_sgemm_packed_args g1 = product(mo->x, m, mo->p1, 0.0f, a->h);
    struct nxr_sgemm_packed_args g2 = product(a->h, m, mo->p2, 1.0f, a->y);
    struct nxr_sgemm_packed_args g3 = product(a->y, m, mo->p3, 0.0f, a->z);
    cr_assert_eq(nxr_step_add_sgemm_packed(s, &g1, none), 0);
    cr_assert_eq(nxr_step_add_barrier(s), 0);
    cr_assert_eq(nxr_step_add_loop(s, 0, m * N1, 7, squash, l), 0);
    cr_assert_eq(nxr_step_add_barrier(s), 0);
    cr_assert_eq(nxr_step_add_sgemm_packed(s, &g2, none), 0);
    cr_assert_eq(nxr_step_add_loop(s, 0, m * K, 0, twice, l), 0);
    cr_assert_eq(nxr_step_add_barrier(s), 0);
    cr_assert_eq(nxr_step_add_sgemm_packed(s, &g3, &relu), 0);
    return s;
}

/* The same operations one by one. */
static void one_by_one(nxr_ctx_t *ctx, const struct model *mo, struct acts *a, struct loop_arg *l)
{
    const size_t m = mo->m;
    struct nxr_sgemm_epilogue relu = {.bias = mo->bias, .activation = NXR_ACTIVATION_SILU};
    struct nxr_sgemm_packed_args g1 = product(mo->x, m, mo->p1, 0.0f, a->h);
    struct nxr_sgemm_packed_args g2 = product(a->h, m, mo->p2, 1.0f, a->y);
    struct nxr_sgemm_packed_args g3 = product(a->y, m, mo->p3, 0.0f, a->z);
    cr_assert_eq(nxr_sgemm_packed(ctx, &g1, NULL), 0);
    cr_assert_eq(nxr_parallel_for(ctx, 0, m * N1, 7, squash, l), 0);
    cr_assert_eq(nxr_sgemm_packed(ctx, &g2, NULL), 0);
    cr_assert_eq(nxr_parallel_for(ctx, 0, m * K, 0, twice, l), 0);
    cr_assert_eq(nxr_sgemm_packed(ctx, &g3, &relu), 0);
}

static void assert_same(const struct acts *got, const struct acts *want, const char *how)
{
    cr_assert_eq(memcmp(got->h, want->h, sizeof got->h), 0, "%s: h differs", how);
    cr_assert_eq(memcmp(got->y, want->y, sizeof got->y), 0, "%s: y differs", how);
    cr_assert_eq(memcmp(got->d, want->d, sizeof got->d), 0, "%s: d differs", how);
    cr_assert_eq(memcmp(got->z, want->z, sizeof got->z), 0, "%s: z differs", how);
}

static const size_t ms[] = {1, 4, 17};

Test(runtime_step, same_bits_as_one_by_one, .timeout = 120)
{
    for (int threads = 1; threads <= 2; threads++) {
        struct ctx_rt_opts o;
        ctx_rt_opts_init(&o);
        o.num_threads = threads;
        struct ctx_rt r;
        ctx_rt_open(&r, &o);
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            static struct model mo;
            static struct acts want, got;
            model_make(&mo, r.rt, ms[mi]);
            struct loop_arg lw = {.a = &want, .mo = &mo}, lg = {.a = &got, .mo = &mo};
            acts_reset(&want);
            one_by_one(r.ctx[0], &mo, &want, &lw);
            nxr_step_t *s = step_make(&mo, &got, &lg);
            for (int again = 0; again < 3; again++) {
                acts_reset(&got);
                int rc = nxr_step_run(r.ctx[0], s);
                cr_assert_eq(rc, 0, "nxr_step_run: %s (%s)", nxr_strerror(rc), nxr_last_error());
                char how[64];
                snprintf(how, sizeof how, "budget %d, m %zu, run %d", threads, ms[mi], again);
                assert_same(&got, &want, how);
            }
            nxr_step_destroy(s);
            model_free(&mo);
        }
        ctx_rt_close(&r);
    }
}

/* Domain 0's GEMM kernel calls and packed bytes streamed (its counters). */
static void gemm_counts(nxr_runtime_t *rt, uint64_t *calls, uint64_t *bytes)
{
    struct nxr_domain_stats d[1];
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, d, 1);
    cr_assert_eq(nxr_runtime_stats(rt, &s), 0);
    cr_assert_geq(s.domain_count, 1);
    *calls = d[0].kernel_calls[NXR_FAMILY_GEMM];
    *bytes = d[0].weight_bytes;
}

/* The counters say of a step what they say of its operations called one
 * by one (nxr top and the metrics page read them: a service that moved to
 * steps must not go dark there); a refused step counts nothing. */
Test(runtime_step, counts_as_the_calls_it_replaces, .timeout = 60)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    struct ctx_rt r;
    ctx_rt_open(&r, &o);
    static struct model mo;
    static struct acts a;
    model_make(&mo, r.rt, 4);
    struct loop_arg l = {.a = &a, .mo = &mo};
    uint64_t c0, b0, c1, b1, c2, b2, c3, b3;
    gemm_counts(r.rt, &c0, &b0);
    one_by_one(r.ctx[0], &mo, &a, &l);
    gemm_counts(r.rt, &c1, &b1);
    nxr_step_t *s = step_make(&mo, &a, &l);
    cr_assert_eq(nxr_step_run(r.ctx[0], s), 0);
    gemm_counts(r.rt, &c2, &b2);
    cr_assert_eq(c1 - c0, 3, "the three calls one by one counted %llu",
                 (unsigned long long)(c1 - c0));
    cr_assert_gt(b1 - b0, 0, "the calls one by one streamed no weight bytes");
    cr_assert_eq(c2 - c1, c1 - c0, "a step counted %llu GEMM calls, its calls one by one %llu",
                 (unsigned long long)(c2 - c1), (unsigned long long)(c1 - c0));
    cr_assert_eq(b2 - b1, b1 - b0, "a step counted %llu weight bytes, its calls one by one %llu",
                 (unsigned long long)(b2 - b1), (unsigned long long)(b1 - b0));
    nxr_step_destroy(s);
    /* Refused (a product's lda below its k): nothing runs, nothing counts. */
    nxr_step_t *bad;
    cr_assert_eq(nxr_step_create(&bad), 0);
    struct nxr_sgemm_packed_args g = product(mo.x, 4, mo.p1, 0.0f, a.h);
    g.lda = 1;
    cr_assert_eq(nxr_step_add_sgemm_packed(bad, &g, NULL), 0);
    cr_assert_eq(nxr_step_run(r.ctx[0], bad), -EINVAL);
    gemm_counts(r.rt, &c3, &b3);
    cr_assert_eq(c3, c2, "a refused step counted GEMM calls");
    cr_assert_eq(b3, b2, "a refused step counted weight bytes");
    nxr_step_destroy(bad);
    model_free(&mo);
    ctx_rt_close(&r);
}

/* Inside a body of the domain the step runs in place, on that thread. */
struct nested {
    nxr_ctx_t *ctx;
    const nxr_step_t *step;
    int rc;
};

static void run_nested(void *p, size_t b, size_t e, unsigned worker)
{
    struct nested *n = p;
    (void)b, (void)e, (void)worker;
    n->rc = nxr_step_run(n->ctx, n->step);
}

Test(runtime_step, in_place_inside_a_body, .timeout = 60)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    struct ctx_rt r;
    ctx_rt_open(&r, &o);
    static struct model mo;
    static struct acts want, got;
    model_make(&mo, r.rt, 4);
    struct loop_arg lw = {.a = &want, .mo = &mo}, lg = {.a = &got, .mo = &mo};
    acts_reset(&want);
    one_by_one(r.ctx[0], &mo, &want, &lw);
    nxr_step_t *s = step_make(&mo, &got, &lg);
    acts_reset(&got);
    struct nested n = {.ctx = r.ctx[0], .step = s, .rc = -1};
    uint64_t regions = ctx_regions(r.ctx[0]);
    cr_assert_eq(nxr_parallel_for(r.ctx[0], 0, 1, 1, run_nested, &n), 0);
    cr_assert_eq(n.rc, 0, "nested nxr_step_run: %s", nxr_strerror(n.rc));
    cr_assert_eq(ctx_nested_regions(r.ctx[0]), 0, "the nested step fanned out");
    cr_assert_leq(ctx_regions(r.ctx[0]) - regions, 1);
    assert_same(&got, &want, "in place");
    nxr_step_destroy(s);
    model_free(&mo);
    ctx_rt_close(&r);
}

/* ---- teams bigger than the machine, and workers that never wake ------------ */

struct holder {
    atomic_int release;   /* the test sets it once the step returned */
    atomic_int held;      /* workers that reached the hook */
    atomic_int timed_out; /* a worker gave up waiting: the step waited for it */
    struct nxr__team_claim_hook hook;
};

static void hold(void *arg, unsigned worker, uint32_t gen)
{
    struct holder *h = arg;
    (void)worker, (void)gen;
    if (atomic_load(&h->release) != 0)
        return;
    atomic_fetch_add(&h->held, 1);
    nxr_test_wait_at_least(&h->release, 1, BOUND_MS);
    if (atomic_load(&h->release) == 0)
        atomic_store(&h->timed_out, 1);
}

static struct nxr__team *team_of(unsigned size)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    cr_assert_not_null(cpus);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            hwloc_bitmap_set(cpus, (unsigned)c);
    struct nxr__team_opts o = {.domain_id = 9, .size = size, .spin = 64};
    struct nxr__team *t;
    char err[256];
    cr_assert_eq(nxr__team_create(&t, cpus, &o, err, sizeof err), 0, "%s", err);
    hwloc_bitmap_free(cpus);
    return t;
}

/* The step as a region of `team` with `slots` participants. */
static void run_on_team(nxr_ctx_t *ctx, const nxr_step_t *s, struct nxr__team *team, unsigned slots,
                        bool caller_joins)
{
    struct nxr__step_run *run;
    char why[256] = "";
    int rc = nxr__step_run_prepare(ctx, s, slots, false, &run, why, sizeof why);
    cr_assert_eq(rc, 0, "prepare: %s (%s)", nxr_strerror(rc), why);
    nxr__team_run(team, nxr__step_region, run, slots, caller_joins);
    cr_assert_eq(nxr__step_run_status(run), 0);
    nxr__step_run_free(run);
}

Test(runtime_step, same_bits_with_three_and_four_participants, .timeout = 120)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    struct ctx_rt r;
    ctx_rt_open(&r, &o);
    for (unsigned size = 3; size <= 4; size++) {
        struct nxr__team *team = team_of(size);
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            static struct model mo;
            static struct acts want, got;
            model_make(&mo, r.rt, ms[mi]);
            struct loop_arg lw = {.a = &want, .mo = &mo}, lg = {.a = &got, .mo = &mo};
            acts_reset(&want);
            one_by_one(r.ctx[0], &mo, &want, &lw);
            nxr_step_t *s = step_make(&mo, &got, &lg);
            for (int joins = 0; joins <= 1; joins++) {
                acts_reset(&got);
                unsigned slots = size + (unsigned)joins;
                run_on_team(r.ctx[0], s, team, slots, joins != 0);
                char how[64];
                snprintf(how, sizeof how, "%u participants, m %zu", slots, ms[mi]);
                assert_same(&got, &want, how);
            }
            nxr_step_destroy(s);
            model_free(&mo);
        }
        nxr__team_destroy(team);
    }
    ctx_rt_close(&r);
}

Test(runtime_step, finishes_with_every_worker_held, .timeout = 120)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    struct ctx_rt r;
    ctx_rt_open(&r, &o);
    static struct model mo;
    static struct acts want, got;
    model_make(&mo, r.rt, 4);
    struct loop_arg lw = {.a = &want, .mo = &mo}, lg = {.a = &got, .mo = &mo};
    acts_reset(&want);
    one_by_one(r.ctx[0], &mo, &want, &lw);
    nxr_step_t *s = step_make(&mo, &got, &lg);
    struct nxr__team *team = team_of(3);
    struct holder h = {0};
    h.hook = (struct nxr__team_claim_hook){.fn = hold, .arg = &h};
    nxr__team_set_claim_hook(team, &h.hook);
    acts_reset(&got);
    /* 4 slots, the caller's and three workers' that never claim: the
     * caller runs them all, one after another. */
    run_on_team(r.ctx[0], s, team, 4, true);
    const int held = atomic_load(&h.held);
    atomic_store(&h.release, 1);
    assert_same(&got, &want, "every worker held");
    cr_assert_leq(held, 3);
    nxr__team_destroy(team); /* joins the workers: every hook call is over */
    cr_assert_eq(atomic_load(&h.timed_out), 0,
                 "the step returned only after a held worker gave up: it waited for a worker "
                 "that had not claimed");
    nxr_step_destroy(s);
    model_free(&mo);
    ctx_rt_close(&r);
}

/* ---- bad input ---------------------------------------------------------------- */

Test(runtime_step, bad_input_is_refused_and_runs_nothing, .timeout = 60)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    struct ctx_rt r;
    ctx_rt_open(&r, &o);
    static struct model mo;
    static struct acts a;
    model_make(&mo, r.rt, 1);
    struct loop_arg l = {.a = &a, .mo = &mo};
    nxr_step_t *s;
    cr_assert_eq(nxr_step_create(NULL), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "out is NULL") != NULL, "%s", nxr_last_error());
    cr_assert_eq(nxr_step_create(&s), 0);

    struct nxr_sgemm_packed_args g = product(mo.x, 1, mo.p1, 0.0f, a.h);
    cr_assert_eq(nxr_step_add_sgemm_packed(NULL, &g, NULL), -EINVAL);
    cr_assert_eq(nxr_step_add_sgemm_packed(s, NULL, NULL), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "args is NULL") != NULL, "%s", nxr_last_error());
    struct nxr_sgemm_packed_args bad = g;
    bad.w = NULL;
    cr_assert_eq(nxr_step_add_sgemm_packed(s, &bad, NULL), -EINVAL);
    bad = g;
    bad.m = 0;
    cr_assert_eq(nxr_step_add_sgemm_packed(s, &bad, NULL), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "m is 0") != NULL, "%s", nxr_last_error());
    bad = g;
    bad.alpha = 0.0f;
    cr_assert_eq(nxr_step_add_sgemm_packed(s, &bad, NULL), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "alpha is 0") != NULL, "%s", nxr_last_error());
    cr_assert_eq(nxr_step_add_loop(s, 0, 4, 1, NULL, &l), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "fn is NULL") != NULL, "%s", nxr_last_error());
    cr_assert_eq(nxr_step_add_loop(s, 5, 4, 1, twice, &l), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "begin > end") != NULL, "%s", nxr_last_error());
    cr_assert_eq(nxr_step_add_barrier(NULL), -EINVAL);

    /* A loop, then a product whose arguments break nxr_sgemm_packed's rules
     * (lda < k): refused by the run, naming the operation, and the loop
     * before it never ran. */
    cr_assert_eq(nxr_step_add_loop(s, 0, K, 0, twice, &l), 0);
    cr_assert_eq(nxr_step_add_barrier(s), 0);
    bad = g;
    bad.lda = K - 1;
    cr_assert_eq(nxr_step_add_sgemm_packed(s, &bad, NULL), 0);
    cr_assert_eq(nxr_step_run(r.ctx[0], s), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "operation 1") != NULL, "%s", nxr_last_error());
    cr_assert_eq(atomic_load(&l.calls), 0, "a loop ran in a refused step");
    cr_assert_eq(nxr_step_run(r.ctx[0], NULL), -EINVAL);
    cr_assert_eq(nxr_step_run(NULL, s), -EINVAL);
    nxr_step_destroy(s);
    nxr_step_destroy(NULL);

    /* An empty step runs and does nothing. */
    cr_assert_eq(nxr_step_create(&s), 0);
    cr_assert_eq(nxr_step_run(r.ctx[0], s), 0);
    nxr_step_destroy(s);
    model_free(&mo);
    ctx_rt_close(&r);
}

/* ---- a chunk that does not finish: the barrier's stall report ------------------ */

static atomic_int stall_lines;

static void count_sink(void *arg, const char *line)
{
    (void)arg;
    if (strstr(line, "a step's barrier (operation 0 not complete)") != NULL)
        atomic_fetch_add(&stall_lines, 1);
}

/* The single chunk of operation 0 holds its thread until the participant
 * waiting at the barrier behind it has reported. */
static void hold_until_reported(void *arg, size_t b, size_t e, unsigned worker)
{
    atomic_int *gave_up = arg;
    (void)b, (void)e, (void)worker;
    nxr_test_wait_at_least(&stall_lines, 1, BOUND_MS);
    if (atomic_load(&stall_lines) == 0)
        atomic_store(gave_up, 1);
}

static void nothing(void *arg, size_t b, size_t e, unsigned worker)
{
    (void)arg, (void)b, (void)e, (void)worker;
}

Test(runtime_step, a_barrier_past_the_stall_threshold_reports, .timeout = 120)
{
    /* One domain over two allowed CPUs, whatever the nodes (a 4-node VM has
     * one CPU per node, so the default domains would have budget 1). */
    struct nxr_test_runtime fx;
    NXR_TEST_NEED_CPUS(nxr_test_runtime_cpus_needed("0:%0,%1"));
    nxr_test_runtime_opts(&fx, "0:%0,%1", 0);
    fx.opts.num_threads = 2;
    fx.opts.stall_report_ms = 20;
    NXR_TEST_RUNTIME_OPEN(&fx);
    nxr_runtime_t *rt = fx.rt;
    rt->stall.sink = count_sink; /* before any operation */
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, 0)), &ctx), 0);
    cr_assert_eq(nxr_ctx_budget(ctx), 2);
    atomic_int gave_up = 0;
    nxr_step_t *s;
    cr_assert_eq(nxr_step_create(&s), 0);
    cr_assert_eq(nxr_step_add_loop(s, 0, 1, 1, hold_until_reported, &gave_up), 0);
    cr_assert_eq(nxr_step_add_barrier(s), 0);
    cr_assert_eq(nxr_step_add_loop(s, 0, 2, 1, nothing, NULL), 0);
    atomic_store(&stall_lines, 0);
    /* Two participants: whichever takes the chunk holds it, the other
     * waits at the barrier and reports (a worker that never came would
     * leave the caller to run the chunk alone: nobody waits, the body
     * gives up after the bound, and the test fails). */
    cr_assert_eq(nxr_step_run(ctx, s), 0);
    cr_assert_eq(atomic_load(&gave_up), 0, "no stall report from the barrier");
    cr_assert_eq(atomic_load(&stall_lines), 1, "reported %d times", atomic_load(&stall_lines));
    nxr_step_destroy(s);
    nxr_ctx_destroy(ctx);
    nxr_test_runtime_close(&fx);
}

/* ---- a participant stalled in a chunk: its range's other chunks ---------------- */

struct stalled {
    atomic_int ran;     /* chunks other than the first that ran */
    atomic_int gave_up; /* the first chunk stopped waiting: the rest never ran */
};

/* Chunk 0 (the first of the first participant's range) waits until every
 * other chunk ran, which the other participant can only do by taking the
 * rest of chunk 0's range, not its own alone. */
static void first_waits_for_the_rest(void *arg, size_t b, size_t e, unsigned worker)
{
    struct stalled *st = arg;
    (void)e, (void)worker;
    if (b != 0) {
        atomic_fetch_add(&st->ran, 1);
        return;
    }
    nxr_test_wait_at_least(&st->ran, 7, BOUND_MS);
    if (atomic_load(&st->ran) < 7)
        atomic_store(&st->gave_up, 1);
}

Test(runtime_step, a_stalled_participant_holds_back_no_chunk_it_has_not_started, .timeout = 120)
{
    struct nxr_test_runtime fx;
    NXR_TEST_NEED_CPUS(nxr_test_runtime_cpus_needed("0:%0,%1"));
    nxr_test_runtime_opts(&fx, "0:%0,%1", 0);
    fx.opts.num_threads = 2;
    NXR_TEST_RUNTIME_OPEN(&fx);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(fx.rt, nxr_domain_id(nxr_runtime_domain_at(fx.rt, 0)), &ctx), 0);
    cr_assert_eq(nxr_ctx_budget(ctx), 2);
    struct stalled st = {0};
    nxr_step_t *s;
    cr_assert_eq(nxr_step_create(&s), 0);
    /* Eight chunks: two participants' ranges of four. */
    cr_assert_eq(nxr_step_add_loop(s, 0, 8, 1, first_waits_for_the_rest, &st), 0);
    cr_assert_eq(nxr_step_run(ctx, s), 0);
    cr_assert_eq(atomic_load(&st.gave_up), 0,
                 "chunk 0 waited while chunks of its range were left for its own participant");
    cr_assert_eq(atomic_load(&st.ran), 7);
    nxr_step_destroy(s);
    nxr_ctx_destroy(ctx);
    nxr_test_runtime_close(&fx);
}

/* ---- every weight format ---------------------------------------------------------- */

Test(runtime_step, same_bits_for_every_weight_format, .timeout = 60)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    struct ctx_rt r;
    ctx_rt_open(&r, &o);
    static const enum nxr_weights_format formats[] = {NXR_WEIGHTS_F32, NXR_WEIGHTS_BF16,
                                                      NXR_WEIGHTS_Q8_BLOCK32};
    static float w[N1 * K], x[MMAX * K], want[MMAX * N1], got[MMAX * N1];
    uint64_t seed = 3;
    for (size_t i = 0; i < N1 * K; i++)
        w[i] = fill(&seed);
    for (size_t i = 0; i < MMAX * K; i++)
        x[i] = fill(&seed);
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        struct nxr_weights_desc d;
        nxr_weights_desc_init(&d);
        d.w = w;
        d.trans = true;
        d.k = K;
        d.n = N1;
        d.ldw = K;
        nxr_weights_t *p;
        int rc = nxr_weights_create_format(r.rt, &d, formats[f], &p);
        cr_assert_eq(rc, 0, "format %d: %s (%s)", (int)formats[f], nxr_strerror(rc),
                     nxr_last_error());
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            struct nxr_sgemm_packed_args g = product(x, ms[mi], p, 0.0f, want);
            memset(want, 0, sizeof want);
            cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &g, NULL), 0);
            g.c = got;
            memset(got, 0, sizeof got);
            nxr_step_t *s;
            cr_assert_eq(nxr_step_create(&s), 0);
            cr_assert_eq(nxr_step_add_sgemm_packed(s, &g, NULL), 0);
            rc = nxr_step_run(r.ctx[0], s);
            cr_assert_eq(rc, 0, "nxr_step_run: %s (%s)", nxr_strerror(rc), nxr_last_error());
            cr_assert_eq(memcmp(got, want, sizeof got), 0, "format %d, m %zu: the step differs",
                         (int)formats[f], ms[mi]);
            nxr_step_destroy(s);
        }
        nxr_weights_destroy(p);
    }
    ctx_rt_close(&r);
}
