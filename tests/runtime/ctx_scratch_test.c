/*
 * Per-call scratch through a context (runtime/kernel_call.c, runtime/kernel_wrappers.c): it is one
 * buffer of the calling domain's pool, sliced per thread, released after
 * the call. Checked from the outside: a spy provider records the areas it
 * was handed, and the pool itself -- its statistics, and the buffer it hands
 * out next (LIFO: the buffer released last) -- says where they came from.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "ctx_support.h"

TestSuite(kernels_ctx_scratch, .timeout = 60);

#define SPY_BYTES  ((size_t)40000) /* per thread; a multiple of 64 is not required */
#define SPY_ROUND  ((SPY_BYTES + 63) / 64 * 64)
#define SPY_MAX_TH 8

struct spy {
    atomic_int calls;
    atomic_uint threads;
    atomic_size_t bytes;
    atomic_uintptr_t area[SPY_MAX_TH];
};

static struct spy spy;

static size_t spy_scratch(void *self, const struct nxr_sgemm_args *args)
{
    (void)self, (void)args;
    return SPY_BYTES;
}

static int spy_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *args)
{
    (void)self, (void)args;
    unsigned n = call->threads < SPY_MAX_TH ? call->threads : SPY_MAX_TH;
    for (unsigned w = 0; w < n; w++) {
        atomic_store(&spy.area[w], (uintptr_t)call->scratch[w]);
        memset(call->scratch[w], 0x5a, call->scratch_bytes); /* usable, whole */
    }
    atomic_store(&spy.threads, call->threads);
    atomic_store(&spy.bytes, call->scratch_bytes);
    atomic_fetch_add(&spy.calls, 1);
    return 0;
}

static const struct nxr_gemm_ops spy_ops = {.sgemm_scratch = spy_scratch, .sgemm = spy_sgemm};

/* SEQUENTIAL x CALLING_THREAD runs inline on any domain with one thread;
 * PER_CALL_BOUND x ENGINE_WORKERS gets the domain's budget. */
static nxr_provider_t *spy_create(enum nxr_count_control count,
                                  enum nxr_provider_runs_on placement)
{
    memset(&spy, 0, sizeof spy);
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "scratch-spy";
    d.family = NXR_FAMILY_GEMM;
    d.count = count;
    d.runs_on = placement;
    d.gemm = &spy_ops;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    return p;
}

static struct nxr_pool_stats stats(nxr_domain_t *d)
{
    struct nxr_pool_stats s;
    cr_assert_eq(nxr_pool_stats(d, &s), 0);
    return s;
}

Test(kernels_ctx_scratch, comes_from_the_calling_domains_pool_and_goes_back)
{
    nxr_provider_t *p = spy_create(NXR_COUNT_SEQUENTIAL, NXR_RUNS_ON_CALLING_THREAD);
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    /* Two domains on the same CPU: any machine has it, and the pools differ. */
    o.domains = nxr_test_expand("0:%0;1:%0 shared");
    o.gemm = p;
    ctx_rt_open(&r, &o);
    nxr_domain_t *d0 = nxr_runtime_domain_at(r.rt, 0), *d1 = nxr_runtime_domain_at(r.rt, 1);
    struct nxr_pool_stats a0 = stats(d0), a1 = stats(d1);

    struct nxr_sgemm_args g = fake_args();
    cr_assert_eq(nxr_sgemm(r.ctx[1], &g), 0);
    cr_assert_eq(atomic_load(&spy.calls), 1);
    unsigned th = atomic_load(&spy.threads);
    cr_assert_eq(th, 1, "a sequential provider gets one thread");
    cr_assert_geq(atomic_load(&spy.bytes), SPY_BYTES);
    uintptr_t area = atomic_load(&spy.area[0]);
    cr_assert_eq(area % 64, 0, "scratch is 64-byte aligned");

    /* Domain 1's pool lent it and has it back; domain 0's never saw it. */
    struct nxr_pool_stats b0 = stats(d0), b1 = stats(d1);
    cr_assert_eq(b1.misses, a1.misses + 1, "the first call's scratch is a fresh pool buffer");
    cr_assert_eq(b1.outstanding, 0, "released after the call");
    cr_assert_eq(b1.cached_buffers, a1.cached_buffers + 1, "and cached for the next call");
    cr_assert_eq(b0.hits + b0.misses, a0.hits + a0.misses, "domain 0's pool is not involved");
    cr_assert_eq(b0.cached_buffers, a0.cached_buffers);

    /* Same shape again: the same memory, from the cache, nothing new. */
    cr_assert_eq(nxr_sgemm(r.ctx[1], &g), 0);
    struct nxr_pool_stats c1 = stats(d1);
    cr_assert_eq(atomic_load(&spy.area[0]), area, "the second call reuses the first one's scratch");
    cr_assert_eq(c1.hits, b1.hits + 1);
    cr_assert_eq(c1.misses, b1.misses);

    /* LIFO: the buffer domain 1's pool hands out next is that scratch. */
    nxr_buffer_t *next;
    cr_assert_eq(nxr_buffer_acquire(d1, SPY_ROUND * th, &next), 0);
    cr_assert_eq((uintptr_t)nxr_buffer_data(next), area);
    cr_assert_eq(nxr_buffer_domain(next), 1);
    nxr_buffer_release(next);

    ctx_rt_close(&r);
    nxr_provider_destroy(p);
}

Test(kernels_ctx_scratch, each_thread_gets_its_own_slice_of_one_buffer)
{
    NXR_TEST_NEED_CPUS(2);
    nxr_provider_t *p = spy_create(NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_ENGINE_WORKERS);
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.domains = nxr_test_expand("0:%0,%1");
    o.gemm = p;
    ctx_rt_open(&r, &o);
    nxr_domain_t *d = nxr_runtime_domain_at(r.rt, 0);
    struct nxr_pool_stats s0 = stats(d);
    struct nxr_sgemm_args g = fake_args();
    cr_assert_eq(nxr_sgemm(r.ctx[0], &g), 0);
    cr_assert_eq(atomic_load(&spy.threads), 2, "budget 2");
    size_t bytes = atomic_load(&spy.bytes);
    cr_assert_eq(bytes % 64, 0);
    uintptr_t w0 = atomic_load(&spy.area[0]), w1 = atomic_load(&spy.area[1]);
    cr_assert_eq(w1, w0 + bytes, "thread 1's area follows thread 0's, no overlap");
    struct nxr_pool_stats s1 = stats(d);
    cr_assert_eq(s1.misses, s0.misses + 1, "one buffer for both threads");
    cr_assert_eq(s1.outstanding, 0);
    /* The buffer the pool hands out next (LIFO) is that one, whole. */
    nxr_buffer_t *next;
    cr_assert_eq(nxr_buffer_acquire(d, 2 * bytes, &next), 0);
    cr_assert_eq((uintptr_t)nxr_buffer_data(next), w0);
    cr_assert_geq(nxr_buffer_size(next), 2 * bytes);
    nxr_buffer_release(next);
    ctx_rt_close(&r);
    nxr_provider_destroy(p);
}

Test(kernels_ctx_scratch, native_gemm_packing_scratch_is_reused_from_the_pool)
{
    NXR_TEST_NEED_CPUS(2);
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.domains = nxr_test_expand("0:%0,%1");
    ctx_rt_open(&r, &o); /* native GEMM: per-thread packing scratch */
    nxr_domain_t *d = nxr_runtime_domain_at(r.rt, 0);
    enum { M = 256, N = 256, K = 256 };
    static float a[M * K], b[K * N], c[M * N];
    for (size_t i = 0; i < M * K; i++)
        a[i] = b[i] = 1.0f;
    struct nxr_sgemm_args g = {.m = M, .n = N, .k = K, .alpha = 1, .a = a, .lda = K, .b = b,
                          .ldb = N, .c = c, .ldc = N};
    struct nxr_pool_stats s0 = stats(d);
    cr_assert_eq(nxr_sgemm(r.ctx[0], &g), 0);
    cr_assert_eq(c[0], (float)K);
    cr_assert_eq(c[M * N - 1], (float)K);
    struct nxr_pool_stats s1 = stats(d);
    cr_assert_eq(s1.misses, s0.misses + 1, "one buffer for all threads' packing scratch");
    cr_assert_eq(s1.outstanding, 0);
    for (int round = 0; round < 3; round++)
        cr_assert_eq(nxr_sgemm(r.ctx[0], &g), 0);
    struct nxr_pool_stats s2 = stats(d);
    cr_assert_eq(s2.misses, s1.misses, "steady state: every call reuses the cached scratch");
    cr_assert_eq(s2.hits, s1.hits + 3);
    cr_assert_eq(s2.outstanding, 0);
    ctx_rt_close(&r);
}
