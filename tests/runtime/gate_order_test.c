/*
 * Lock order between the global-count gate (kernels/global_count.c) and the
 * arbiter's permits: a permit is always taken before the gate, never under
 * it (docs/architecture.md, lock order). The shape that broke it: one
 * runtime under the exclusive policy with a GLOBAL_OR_UNCONTROLLED GEMM
 * provider (its calls take the exclusive permit, then the gate exclusively)
 * and a PER_CALL_BOUND x ENGINE_WORKERS provider (its calls fan out through
 * call->parallel_for, each region asking for the domain's permit). If the
 * second held the gate around its call, each would wait for what the other
 * holds: only GLOBAL providers take the gate, and only they may bring a
 * count (nxr_provider_create refuses one elsewhere).
 *
 * The interleaving is forced, not hoped for: the per-call provider's op
 * waits (bounded) until the exclusive call holds the exclusive permit or has
 * finished, and only then fans out. Needs two allowed CPUs (a one-CPU domain
 * runs the fan-out inline on the caller, with no permit); skips below that.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <pthread.h>

#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

TestSuite(runtime_gate_order, .timeout = 60);

#define MEET_MS 10000

/* ---- the GLOBAL provider: a process-global count, like parallel OpenBLAS ---- */

static atomic_int library_count;

static int global_get(void *self)
{
    (void)self;
    return atomic_load(&library_count);
}

static void global_set(void *self, int count)
{
    (void)self;
    atomic_store(&library_count, count);
}

static const struct nxr_global_threads_ops global_ops = {.get = global_get, .set = global_set};

static atomic_int global_calls;

static int global_sgemm(void *self, const struct nxr_kernel_call *call,
                        const struct nxr_sgemm_args *g)
{
    (void)self, (void)call, (void)g;
    atomic_fetch_add(&global_calls, 1);
    return 0;
}

static const struct nxr_gemm_ops global_gemm = {.sgemm = global_sgemm};

/* ---- the PER_CALL_BOUND x ENGINE_WORKERS provider ------------------------------ */

struct shape {
    nxr_runtime_t *rt;
    atomic_int in_op;          /* the per-call op is running (before its fan-out) */
    atomic_int exclusive_done; /* the exclusive call returned */
};

static struct shape the_shape;

static bool exclusive_held_or_done(void *p)
{
    struct shape *s = p;
    if (atomic_load(&s->exclusive_done))
        return true;
    struct nxr__arbiter_stats st;
    nxr__arbiter_stats(s->rt->arbiter, &st);
    return st.exclusive_held;
}

static void scale_chunk(void *p, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    float *const *io = p;
    for (size_t i = begin; i < end; i++)
        io[1][i] = 2.0f * io[0][i];
}

static int percall_scale(void *self, const struct nxr_kernel_call *call, size_t n, const float *x,
                         float alpha, float *out)
{
    (void)self, (void)alpha;
    struct shape *s = &the_shape;
    atomic_store(&s->in_op, 1);
    /* The exclusive call now holds (or held) the exclusive permit; this
     * fan-out asks for the domain's permit behind it. */
    cr_assert(nxr_test_wait_until(exclusive_held_or_done, s, MEET_MS),
              "the exclusive call neither took its permit nor finished");
    if (call->parallel_for == NULL)
        return -1;
    const float *io[2] = {x, out};
    return call->parallel_for(call, n, 1, scale_chunk, (void *)io);
}

static const struct nxr_elementwise_ops percall_elementwise = {.scale = percall_scale};

static nxr_provider_t *percall_create(void)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "percall-engine";
    d.family = NXR_FAMILY_ELEMENTWISE;
    d.count = NXR_COUNT_PER_CALL_BOUND;
    d.runs_on = NXR_RUNS_ON_ENGINE_WORKERS;
    d.elementwise = &percall_elementwise;
    /* A host wrapping a library that also has a global count might pass its
     * ops here: the gate would then wrap the fan-out's permits (this test
     * deadlocked so, before the combination was refused). */
    d.global_threads = &global_ops;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), NXR_EPROVIDER);
    d.global_threads = NULL;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    return p;
}

static nxr_provider_t *global_create(void)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "global-gemm";
    d.count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS;
    d.gemm = &global_gemm;
    d.global_threads = &global_ops;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    return p;
}

#define N 4096
static float xs[N], outs[N];

static void *percall_thread(void *p)
{
    nxr_ctx_t *ctx = p;
    return (void *)(intptr_t)nxr_scale(ctx, N, xs, 2.0f, outs);
}

Test(runtime_gate_order, exclusive_global_call_and_fanning_out_call_run_concurrently)
{
    NXR_TEST_NEED_CPUS(2); /* a one-CPU domain fans out inline, without a permit */
    atomic_store(&library_count, 1);
    nxr_provider_t *global = global_create(), *percall = percall_create();
    hwloc_bitmap_t allowed = nxr_test_cpus(0, 2);
    /* One domain over both CPUs, whatever the nodes (a 4-node VM has one
     * CPU per node): the fanning-out call needs a budget of 2. */
    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, "0:%0,%1", 0);
    fx.opts.allowed_cpus = allowed;
    fx.opts.provider_policy = NXR_PROVIDER_PROCESS_EXCLUSIVE;
    fx.opts.providers[NXR_FAMILY_GEMM] = global;
    fx.opts.providers[NXR_FAMILY_ELEMENTWISE] = percall;
    int rc = nxr_test_runtime_open(&fx);
    hwloc_bitmap_free(allowed);
    cr_assert_eq(rc, 0, "%s (%s)", nxr_strerror(rc), fx.err);
    nxr_runtime_t *rt = fx.rt;
    the_shape.rt = rt;
    int id = nxr_domain_id(nxr_runtime_domain_at(rt, 0));
    cr_assert_geq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 2u);
    nxr_ctx_t *ca, *cb;
    cr_assert_eq(nxr_ctx_create(rt, id, &ca), 0);
    cr_assert_eq(nxr_ctx_create(rt, id, &cb), 0);
    for (size_t i = 0; i < N; i++)
        xs[i] = (float)i;

    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, percall_thread, cb), 0);
    nxr_test_wait_at_least(&the_shape.in_op, 1, MEET_MS);
    cr_assert_eq(atomic_load(&the_shape.in_op), 1, "the per-call op never started");
    float a[4] = {0}, b[4] = {0}, c[4];
    struct nxr_sgemm_args g = {
        .m = 2, .n = 2, .k = 2, .alpha = 1, .a = a, .lda = 2, .b = b, .ldb = 2, .c = c, .ldc = 2};
    rc = nxr_sgemm(ca, &g); /* exclusive permit, then the gate exclusively */
    atomic_store(&the_shape.exclusive_done, 1);
    void *prc;
    pthread_join(t, &prc);
    cr_assert_eq(rc, 0, "%s", nxr_strerror(rc));
    cr_assert_eq((int)(intptr_t)prc, 0, "%s", nxr_strerror((int)(intptr_t)prc));
    cr_assert_eq(atomic_load(&global_calls), 1);
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(outs[i], 2.0f * (float)i, "out[%zu]", i);
    cr_assert_eq(atomic_load(&library_count), 1, "the count is restored");

    nxr_ctx_destroy(ca);
    nxr_ctx_destroy(cb);
    nxr_test_runtime_close(&fx);
    nxr_provider_destroy(global);
    nxr_provider_destroy(percall);
}
