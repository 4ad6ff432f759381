/*
 * Work never leaves the domain: every operation family through a context --
 * loops, reductions, each task mode, submitted jobs, and every kernel of
 * every family at small and large sizes -- run by a caller outside the
 * domain, at budget 1 and at budget 2, does all its work on the domain's
 * CPUs. And a caller inside the domain runs small work itself.
 *
 * Where work ran is read with sched_getcpu in the work itself: in loop and
 * task bodies directly; for kernels, through a spy provider per family that
 * wraps nxr's native one. The spy records the CPU of every chunk that goes
 * through call->parallel_for and, when the call carries no parallel_for
 * (the provider computes on the thread that called it), the CPU of that
 * thread; the native kernel underneath does the real work, so a native path
 * that computed on the caller instead of going through parallel_for shows
 * up as a call with no chunk at all.
 *
 * Layouts, CPU ids from the allowed set: declared domains "0:%0;1:%1"
 * (budget 1, two CPUs), "0:%0;1:%1,%2" (budget 2, three CPUs), a synthetic
 * two-node machine on %0 and %1 (the default plan, one domain per node), and
 * the machine's own nodes when it has several (the 2- and 4-node VMs of
 * tools/vm_test.sh).
 */
#include <criterion/criterion.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/internal/provider.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

/* ---- where work ran ------------------------------------------------------------ */

#define MAX_CPU 1024

static struct {
    atomic_ulong cpus[MAX_CPU / 64]; /* CPUs where any piece of work ran */
    atomic_int pieces;               /* pieces of work recorded */
    atomic_int chunks;               /* of those, chunks through parallel_for */
} seen;

static void seen_reset(void)
{
    for (int i = 0; i < MAX_CPU / 64; i++)
        atomic_store(&seen.cpus[i], 0);
    atomic_store(&seen.pieces, 0);
    atomic_store(&seen.chunks, 0);
}

static void record_here(void)
{
    int cpu = sched_getcpu();
    cr_assert(cpu >= 0 && cpu < MAX_CPU);
    atomic_fetch_or(&seen.cpus[cpu / 64], 1ul << (cpu % 64));
    atomic_fetch_add(&seen.pieces, 1);
}

/* Every piece of work recorded since the reset ran on `cpus`, and some did. */
static void expect_on(hwloc_const_bitmap_t cpus, const char *what)
{
    cr_assert_gt(atomic_load(&seen.pieces), 0, "%s: no work was recorded", what);
    char list[64];
    hwloc_bitmap_list_snprintf(list, sizeof list, cpus);
    for (int cpu = 0; cpu < MAX_CPU; cpu++) {
        bool ran = (atomic_load(&seen.cpus[cpu / 64]) >> (cpu % 64)) & 1;
        cr_assert(!ran || hwloc_bitmap_isset(cpus, (unsigned)cpu),
                  "%s: work ran on CPU %d, outside the domain's CPUs %s", what, cpu, list);
    }
}

/* ---- the spy provider -------------------------------------------------------------- */

struct spy {
    nxr_provider_t *native; /* the real kernels */
};

struct spy_call {
    const struct nxr_kernel_call *orig;
};

struct spy_chunk {
    nxr_for_fn fn;
    void *arg;
};

static void spy_chunk_body(void *p, size_t b, size_t e, unsigned w)
{
    const struct spy_chunk *c = p;
    record_here();
    atomic_fetch_add(&seen.chunks, 1);
    c->fn(c->arg, b, e, w);
}

static int spy_parallel_for(const struct nxr_kernel_call *call, size_t n, size_t grain,
                            nxr_for_fn fn, void *arg)
{
    const struct spy_call *s = call->runner;
    struct spy_chunk c = {.fn = fn, .arg = arg};
    return s->orig->parallel_for(s->orig, n, grain, spy_chunk_body, &c);
}

/* The call the native kernel sees: chunks recorded on their way through;
 * without parallel_for the native kernel computes here, so here is where
 * the work runs. */
static struct nxr_kernel_call spy_wrap(const struct nxr_kernel_call *call, struct spy_call *s)
{
    struct nxr_kernel_call c = *call;
    if (call->parallel_for == NULL) {
        record_here();
        return c;
    }
    s->orig = call;
    c.parallel_for = spy_parallel_for;
    c.runner = s;
    return c;
}

#define SPY_OP(table, op, ...)                                                                     \
    struct spy *sp = self;                                                                         \
    struct spy_call s_;                                                                            \
    struct nxr_kernel_call c_ = spy_wrap(call, &s_);                                               \
    return sp->native->table->op(sp->native->self, &c_, __VA_ARGS__)

static size_t spy_sgemm_scratch(void *self, const struct nxr_sgemm_args *a)
{
    struct spy *sp = self;
    return sp->native->gemm->sgemm_scratch(sp->native->self, a);
}

static int spy_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *a)
{
    SPY_OP(gemm, sgemm, a);
}

static int spy_sgemm_batch(void *self, const struct nxr_kernel_call *call,
                           const struct nxr_sgemm_batch_args *a)
{
    SPY_OP(gemm, sgemm_batch, a);
}

static int spy_binary(void *self, const struct nxr_kernel_call *call, enum nxr_binary_op op,
                      size_t n, const float *x, const float *y, float *out)
{
    SPY_OP(elementwise, binary, op, n, x, y, out);
}

static int spy_scale(void *self, const struct nxr_kernel_call *call, size_t n, const float *x,
                     float alpha, float *out)
{
    SPY_OP(elementwise, scale, n, x, alpha, out);
}

static int spy_unary(void *self, const struct nxr_kernel_call *call, enum nxr_unary_op op, size_t n,
                     const float *x, float *out)
{
    SPY_OP(elementwise, unary, op, n, x, out);
}

static int spy_triad(void *self, const struct nxr_kernel_call *call, size_t n, const float *b,
                     const float *c, float s, float *a)
{
    SPY_OP(elementwise, triad, n, b, c, s, a);
}

static int spy_sum(void *self, const struct nxr_kernel_call *call, size_t n, const float *x,
                   float *out)
{
    SPY_OP(reduction, sum, n, x, out);
}

static int spy_max(void *self, const struct nxr_kernel_call *call, size_t n, const float *x,
                   float *out)
{
    SPY_OP(reduction, max, n, x, out);
}

static int spy_argmax(void *self, const struct nxr_kernel_call *call, size_t n, const float *x,
                      size_t *out)
{
    SPY_OP(reduction, argmax, n, x, out);
}

static int spy_softmax(void *self, const struct nxr_kernel_call *call, size_t rows, size_t cols,
                       const float *x, size_t ldx, float *out, size_t ldo)
{
    SPY_OP(norm, softmax, rows, cols, x, ldx, out, ldo);
}

static int spy_rmsnorm(void *self, const struct nxr_kernel_call *call, size_t rows, size_t cols,
                       const float *x, size_t ldx, const float *gamma, float eps, float *out,
                       size_t ldo)
{
    SPY_OP(norm, rmsnorm, rows, cols, x, ldx, gamma, eps, out, ldo);
}

static int spy_layernorm(void *self, const struct nxr_kernel_call *call, size_t rows, size_t cols,
                         const float *x, size_t ldx, const float *gamma, const float *beta,
                         float eps, float *out, size_t ldo)
{
    SPY_OP(norm, layernorm, rows, cols, x, ldx, gamma, beta, eps, out, ldo);
}

static const struct nxr_gemm_ops spy_gemm = {
    .sgemm_scratch = spy_sgemm_scratch, .sgemm = spy_sgemm, .sgemm_batch = spy_sgemm_batch};
static const struct nxr_elementwise_ops spy_ew = {
    .binary = spy_binary, .scale = spy_scale, .unary = spy_unary, .triad = spy_triad};
static const struct nxr_reduction_ops spy_red = {
    .sum = spy_sum, .max = spy_max, .argmax = spy_argmax};
static const struct nxr_norm_ops spy_norm = {
    .softmax = spy_softmax, .rmsnorm = spy_rmsnorm, .layernorm = spy_layernorm};

static struct spy spies[NXR_FAMILY_COUNT];
static nxr_provider_t *spy_providers[NXR_FAMILY_COUNT];

static void spies_create(void)
{
    for (int f = 0; f < NXR_FAMILY_COUNT; f++) {
        cr_assert_eq(nxr_provider_native_create((enum nxr_provider_family)f, &spies[f].native), 0);
        struct nxr_provider_desc d;
        nxr_provider_desc_init(&d);
        d.name = "spy";
        d.family = (enum nxr_provider_family)f;
        d.count = NXR_COUNT_PER_CALL_BOUND;
        d.runs_on = NXR_RUNS_ON_ENGINE_WORKERS;
        d.gemm = f == NXR_FAMILY_GEMM ? &spy_gemm : NULL;
        d.elementwise = f == NXR_FAMILY_ELEMENTWISE ? &spy_ew : NULL;
        d.reduction = f == NXR_FAMILY_REDUCTION ? &spy_red : NULL;
        d.norm = f == NXR_FAMILY_NORM ? &spy_norm : NULL;
        d.self = &spies[f];
        cr_assert_eq(nxr_provider_create(&d, &spy_providers[f]), 0);
    }
}

static void spies_destroy(void)
{
    for (int f = 0; f < NXR_FAMILY_COUNT; f++) {
        nxr_provider_destroy(spy_providers[f]);
        nxr_provider_destroy(spies[f].native);
    }
}

/* ---- the operations ---------------------------------------------------------------- */

enum { BIG = 1 << 16, ROWS = 64, COLS = 1024, GEMM_N = 96 };

static float *x, *y, *out, *gamma_, *beta_, *ga, *gb, *gc;

static void buffers_create(void)
{
    x = malloc(BIG * sizeof *x);
    y = malloc(BIG * sizeof *y);
    out = malloc(BIG * sizeof *out);
    gamma_ = malloc(COLS * sizeof *gamma_);
    beta_ = malloc(COLS * sizeof *beta_);
    ga = malloc(4 * GEMM_N * GEMM_N * sizeof *ga);
    gb = malloc(4 * GEMM_N * GEMM_N * sizeof *gb);
    gc = malloc(4 * GEMM_N * GEMM_N * sizeof *gc);
    for (size_t i = 0; i < BIG; i++) {
        x[i] = (float)(i % 13) * 0.25f - 1.0f;
        y[i] = (float)(i % 7) * 0.5f;
    }
    for (size_t i = 0; i < COLS; i++)
        gamma_[i] = 1.0f, beta_[i] = 0.5f;
    for (size_t i = 0; i < 4 * GEMM_N * GEMM_N; i++)
        ga[i] = (float)(i % 5), gb[i] = (float)(i % 3), gc[i] = 0;
}

static void buffers_destroy(void)
{
    free(x), free(y), free(out), free(gamma_), free(beta_), free(ga), free(gb), free(gc);
}

static void loop_body(void *p, size_t b, size_t e, unsigned w)
{
    (void)p, (void)b, (void)e, (void)w;
    record_here();
}

static int task_body(void *p, size_t i)
{
    (void)p, (void)i;
    record_here();
    return 0;
}

/* An INNER task is the caller's own code (it runs where the caller is);
 * the loop it makes is the work, and must go to the domain. */
static int inner_task(void *p, size_t i)
{
    (void)i;
    return nxr_parallel_for(p, 0, 4096, 1, loop_body, NULL);
}

static void map_rec(void *p, size_t b, size_t e, void *partial)
{
    (void)p, (void)b, (void)e;
    record_here();
    *(int *)partial += 1;
}

static void combine_sum(void *p, void *r, const void *partial)
{
    (void)p;
    *(int *)r += *(const int *)partial;
}

struct op {
    const char *name;
    int (*run)(nxr_ctx_t *ctx, size_t n); /* n: small or large */
};

static int op_for(nxr_ctx_t *ctx, size_t n)
{
    return nxr_parallel_for(ctx, 0, n, 0, loop_body, NULL);
}

static int op_reduce(nxr_ctx_t *ctx, size_t n)
{
    int zero = 0, r = 0;
    return nxr_parallel_reduce(ctx, 0, n, 1024, sizeof r, &zero, map_rec, combine_sum, NULL, &r);
}

static int op_sequential(nxr_ctx_t *ctx, size_t n)
{
    return nxr_run(ctx, NXR_MODE_SEQUENTIAL, n / 1024 + 1, task_body, NULL);
}

static int op_inner(nxr_ctx_t *ctx, size_t n)
{
    return nxr_run(ctx, NXR_MODE_INNER, n / 4096 + 1, inner_task, ctx);
}

static int op_outer(nxr_ctx_t *ctx, size_t n)
{
    return nxr_run(ctx, NXR_MODE_OUTER, n / 1024 + 1, task_body, NULL);
}

static int op_submit(nxr_ctx_t *ctx, size_t n)
{
    nxr_job_t *job;
    int rc = nxr_submit(ctx, n / 1024 + 1, task_body, NULL, &job);
    return rc != 0 ? rc : nxr_job_wait(job);
}

static int op_sgemm(nxr_ctx_t *ctx, size_t n)
{
    size_t d = n >= BIG ? GEMM_N : 4;
    struct nxr_sgemm_args g = {.m = d,
                               .n = d,
                               .k = d,
                               .alpha = 1,
                               .a = ga,
                               .lda = d,
                               .b = gb,
                               .ldb = d,
                               .beta = 0,
                               .c = gc,
                               .ldc = d};
    return nxr_sgemm(ctx, &g);
}

static int op_sgemm_batch(nxr_ctx_t *ctx, size_t n)
{
    size_t d = n >= BIG ? GEMM_N : 4;
    struct nxr_sgemm_batch_args g = {
        .gemm = {.m = d,
                 .n = d,
                 .k = d,
                 .alpha = 1,
                 .a = ga,
                 .lda = d,
                 .b = gb,
                 .ldb = d,
                 .beta = 0,
                 .c = gc,
                 .ldc = d},
        .batch = 4,
        .stride_a = d * d,
        .stride_b = d * d,
        .stride_c = d * d,
    };
    return nxr_sgemm_batch(ctx, &g);
}

static int op_binary(nxr_ctx_t *ctx, size_t n)
{
    return nxr_binary(ctx, NXR_BINARY_ADD, n, x, y, out);
}

static int op_scale(nxr_ctx_t *ctx, size_t n)
{
    return nxr_scale(ctx, n, x, 2.0f, out);
}

static int op_unary(nxr_ctx_t *ctx, size_t n)
{
    return nxr_unary(ctx, NXR_UNARY_SILU, n, x, out);
}

static int op_triad(nxr_ctx_t *ctx, size_t n)
{
    return nxr_triad(ctx, n, x, y, 3.0f, out);
}

static int op_sum(nxr_ctx_t *ctx, size_t n)
{
    float r;
    return nxr_sum(ctx, n, x, &r);
}

static int op_max(nxr_ctx_t *ctx, size_t n)
{
    float r;
    return nxr_max(ctx, n, x, &r);
}

static int op_argmax(nxr_ctx_t *ctx, size_t n)
{
    size_t r;
    return nxr_argmax(ctx, n, x, &r);
}

static size_t rows_of(size_t n)
{
    return n >= BIG ? ROWS : 2;
}

static int op_softmax(nxr_ctx_t *ctx, size_t n)
{
    return nxr_softmax(ctx, rows_of(n), COLS, x, COLS, out, COLS);
}

static int op_rmsnorm(nxr_ctx_t *ctx, size_t n)
{
    return nxr_rmsnorm(ctx, rows_of(n), COLS, x, COLS, gamma_, 1e-5f, out, COLS);
}

static int op_layernorm(nxr_ctx_t *ctx, size_t n)
{
    return nxr_layernorm(ctx, rows_of(n), COLS, x, COLS, gamma_, beta_, 1e-5f, out, COLS);
}

static const struct op ops[] = {
    {"parallel_for", op_for},
    {"parallel_reduce", op_reduce},
    {"run SEQUENTIAL", op_sequential},
    {"run INNER", op_inner},
    {"run OUTER", op_outer},
    {"submit", op_submit},
    {"sgemm", op_sgemm},
    {"sgemm_batch", op_sgemm_batch},
    {"binary", op_binary},
    {"scale", op_scale},
    {"unary", op_unary},
    {"triad", op_triad},
    {"sum", op_sum},
    {"max", op_max},
    {"argmax", op_argmax},
    {"softmax", op_softmax},
    {"rmsnorm", op_rmsnorm},
    {"layernorm", op_layernorm},
};

/* ---- the runtime and the caller ------------------------------------------------------- */

static nxr_runtime_t *rt;

static void open_runtime(const char *topology_tmpl, const char *domains_tmpl)
{
    spies_create();
    buffers_create();
    /* The topology template, when there is one, is the fixture's; the
     * domains are then laid over it. */
    struct nxr_test_runtime fx;
    if (topology_tmpl != NULL) {
        nxr_test_runtime_opts(&fx, topology_tmpl, NXR_TEST_PARK | NXR_TEST_TOPOLOGY);
        fx.opts.domains = domains_tmpl != NULL ? nxr_test_expand(domains_tmpl) : NULL;
    } else {
        nxr_test_runtime_opts(&fx, domains_tmpl, NXR_TEST_PARK);
    }
    for (int f = 0; f < NXR_FAMILY_COUNT; f++)
        fx.opts.providers[f] = spy_providers[f];
    NXR_TEST_RUNTIME_OPEN(&fx);
    rt = fx.rt;
}

static void close_runtime(void)
{
    nxr_runtime_destroy(rt);
    rt = NULL;
    buffers_destroy();
    spies_destroy();
}

static void pin_to(hwloc_const_bitmap_t cpus)
{
    cr_assert_eq(nxr_test_pin(cpus), 0);
}

/* The caller sits on `caller`'s CPUs, outside domain `target`: every
 * operation, small and large, runs all its work on target's CPUs. */
static void every_op_stays_on(nxr_domain_t *caller, nxr_domain_t *target, const char *layout)
{
    cr_assert_not(hwloc_bitmap_intersects(nxr_domain_cpuset(caller), nxr_domain_cpuset(target)));
    pin_to(nxr_domain_cpuset(caller));
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, nxr_domain_id(target), &ctx), 0);
    static const size_t sizes[] = {100, BIG};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        for (size_t s = 0; s < 2; s++) {
            char what[128];
            snprintf(what, sizeof what, "%s, %s work, %s, domain %d (budget %u)", ops[i].name,
                     s == 0 ? "small" : "large", layout, nxr_domain_id(target),
                     nxr_domain_budget(target));
            seen_reset();
            int rc = ops[i].run(ctx, sizes[s]);
            cr_assert_eq(rc, 0, "%s: %s", what, nxr_strerror(rc));
            expect_on(nxr_domain_cpuset(target), what);
        }
    nxr_ctx_destroy(ctx);
}

static nxr_domain_t *domain(int id)
{
    nxr_domain_t *d;
    cr_assert_eq(nxr_runtime_domain(rt, id, &d), 0, "no domain %d", id);
    return d;
}

Test(runtime_work_placement, budget_one_caller_outside, .timeout = 120)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime(NULL, "0:%0;1:%1");
    every_op_stays_on(domain(0), domain(1), "0:%0;1:%1");
    every_op_stays_on(domain(1), domain(0), "0:%0;1:%1");
    close_runtime();
}

Test(runtime_work_placement, budget_two_caller_outside, .timeout = 120)
{
    NXR_TEST_NEED_CPUS(3);
    open_runtime(NULL, "0:%0;1:%1,%2");
    every_op_stays_on(domain(0), domain(1), "0:%0;1:%1,%2");
    close_runtime();
}

Test(runtime_work_placement, synthetic_two_nodes_caller_on_the_other_node, .timeout = 120)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("synthetic:pack:2 numa:1 pu:1(indexes=%0,%1)", NULL);
    cr_assert_eq(nxr_runtime_domain_count(rt), 2u);
    every_op_stays_on(domain(0), domain(1), "synthetic 2 nodes");
    every_op_stays_on(domain(1), domain(0), "synthetic 2 nodes");
    close_runtime();
}

/* The machine's own nodes (the VMs): the caller on one node, every domain
 * of another node. Skips on one node (the VM run sets NXR_TEST_NEED_NODE1,
 * and then a skip fails). */
Test(runtime_work_placement, real_nodes_caller_on_another_node, .timeout = 300)
{
    int nodes = numa_available() < 0 ? 1 : numa_max_node() + 1;
    if (nodes < 2) {
        cr_assert_null(getenv("NXR_TEST_NEED_NODE1"), "the VM has one node");
        cr_skip_test("needs two NUMA nodes (this machine has one); run tools/vm_test.sh");
    }
    open_runtime(NULL, NULL);
    size_t n = nxr_runtime_domain_count(rt);
    cr_assert_geq(n, 2u);
    nxr_domain_t *first = nxr_runtime_domain_at(rt, 0);
    for (size_t i = 1; i < n; i++)
        every_op_stays_on(first, nxr_runtime_domain_at(rt, i), "the machine's nodes");
    every_op_stays_on(nxr_runtime_domain_at(rt, 1), first, "the machine's nodes");
    close_runtime();
}

/* The other side of the rule: a caller inside a budget-1 domain runs small
 * work itself, no hand-off (no region on the team). */
Test(runtime_work_placement, a_caller_inside_runs_small_work_itself, .timeout = 60)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime(NULL, "0:%0;1:%1");
    nxr_domain_t *d = domain(1);
    pin_to(nxr_domain_cpuset(d));
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 1, &ctx), 0);
    uint64_t regions = nxr__team_regions(ctx->domain->team);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        seen_reset();
        cr_assert_eq(ops[i].run(ctx, 100), 0, "%s", ops[i].name);
        expect_on(nxr_domain_cpuset(d), ops[i].name);
    }
    /* Submitted tasks always go to a worker (asynchronous); nothing else
     * dispatched a region. */
    cr_assert_eq(nxr__team_regions(ctx->domain->team), regions,
                 "small work from a caller inside the domain dispatched a region");
    nxr_ctx_destroy(ctx);
    close_runtime();
}

/* ---- the caller's own affinity changes ------------------------------------------------ */

static atomic_int body_worker_domain; /* nxr_test_worker_domain() in the body */
static atomic_int body_on_caller;     /* the body ran on the calling thread */
static pid_t caller_tid;

static void where_body(void *arg, size_t b, size_t e, unsigned w)
{
    (void)arg, (void)b, (void)e, (void)w;
    record_here();
    atomic_store(&body_worker_domain, nxr_test_worker_domain());
    atomic_store(&body_on_caller, (pid_t)syscall(SYS_gettid) == caller_tid);
}

/* One piece of small work; says whether the caller ran it itself. */
static bool ran_on_caller(nxr_ctx_t *ctx, nxr_domain_t *d, const char *what)
{
    seen_reset();
    atomic_store(&body_worker_domain, -2);
    uint64_t regions = nxr__team_regions(ctx->domain->team);
    cr_assert_eq(nxr_parallel_for(ctx, 0, 1, 1, where_body, NULL), 0, "%s", what);
    expect_on(nxr_domain_cpuset(d), what);
    bool mine = atomic_load(&body_on_caller);
    if (mine)
        cr_assert_eq(nxr__team_regions(ctx->domain->team), regions, "%s: a region ran", what);
    else
        cr_assert_eq(atomic_load(&body_worker_domain), nxr_domain_id(d),
                     "%s: handed off, but not to the domain's worker", what);
    return mine;
}

static void set_own_affinity(hwloc_const_bitmap_t cpus)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    int cpu;
    hwloc_bitmap_foreach_begin(cpu, cpus) CPU_SET((unsigned)cpu, &set);
    hwloc_bitmap_foreach_end();
    /* The thread's own call, not nxr_ctx_bind: nxr is not told. */
    cr_assert_eq(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
}

/* A caller that changes its own mask (pthread_setaffinity_np, nxr not told)
 * is placed by the new mask on its very next call: widened past the domain
 * it is outside (its body could migrate off the domain's CPUs mid-run, so a
 * worker runs it, whatever CPU the caller happens to be on), narrowed back
 * inside it runs small work itself again. Deterministic: the answer must not
 * depend on where the scheduler keeps the caller. */
Test(runtime_work_placement, a_caller_that_changes_its_own_mask_is_placed_by_it_at_once,
     .timeout = 60)
{
    NXR_TEST_NEED_CPUS(2); /* a mask wider than the one-CPU domain */
    open_runtime(NULL, "0:%0;1:%1");
    nxr_domain_t *d = domain(1);
    caller_tid = (pid_t)syscall(SYS_gettid);
    hwloc_bitmap_t wide = hwloc_bitmap_dup(nxr_domain_cpuset(d));
    hwloc_bitmap_or(wide, wide, nxr_domain_cpuset(domain(0)));
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 1, &ctx), 0);
    for (int round = 0; round < 3; round++) {
        set_own_affinity(nxr_domain_cpuset(d));
        cr_assert(ran_on_caller(ctx, d, "pinned inside"), "round %d: inside, not run here", round);
        cr_assert(ran_on_caller(ctx, d, "still inside"), "round %d", round);
        set_own_affinity(wide);
        cr_assert_not(ran_on_caller(ctx, d, "widened"),
                      "round %d: the caller widened its mask past the domain and still ran the "
                      "work itself",
                      round);
        cr_assert_not(ran_on_caller(ctx, d, "still wide"), "round %d", round);
    }
    set_own_affinity(nxr_domain_cpuset(d));
    cr_assert(ran_on_caller(ctx, d, "narrowed back"), "narrowed back inside, still handed off");
    nxr_ctx_destroy(ctx);
    hwloc_bitmap_free(wide);
    close_runtime();
}
