/*
 * The error-detail channel (nxr_last_error, base/nxr_status.h), over the
 * whole public API: ONE table with a row for every NXR_API function of the
 * installed headers. The list of functions is generated from the headers
 * (tests/support/api_functions.py, the genrule of this package) and the first test
 * fails if a declared function has no row, so a new function cannot be
 * missed. A row is either
 *  - FALLIBLE: a call with one bad argument, and (where one can be made
 *    here) a call that succeeds. Each runs right after a marker failure of
 *    another function: the bad call's detail must be its own (not the
 *    marker's), non-empty and start with "<function>: "; the good call must
 *    leave the slot empty;
 *  - CANNOT_FAIL: a getter, a name, an *_init or a destroy, called with a
 *    NULL handle where it takes one: it must not crash and must leave the
 *    marker's detail where it was (the rule: only fallible calls touch the
 *    slot).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/nxr_omp.h"
#include "runtime/nxr.h"
#include "runtime/nxr_ctx_kernels.h"
#include "runtime/nxr_memory.h"
#include "runtime/nxr_route.h"
#include "runtime/nxr_span.h"
#include "runtime/nxr_step.h"
#include "runtime/nxr_weights.h"
#include "tests/support/cpus.h"

/* ---- the fixture: one of everything a row needs ----------------------------- */

static struct {
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;  /* on domain 0 */
    nxr_ctx_t *span; /* over domains 0 and 1 */
    nxr_domain_t *d0;
    nxr_buffer_t *buf;
    nxr_scope_t *scope;
    nxr_weights_t *weights;
    nxr_shards_t *shards; /* 4 rows of 4 floats over the span */
    nxr_job_t *job;       /* submitted before the marker, waited for by a row */
    hwloc_bitmap_t cpus;  /* the first allowed CPU */
    float w[16];
} fx;

static int task(void *arg, size_t index)
{
    (void)arg, (void)index;
    return 0;
}

static void body(void *arg, size_t b, size_t e, unsigned worker)
{
    (void)arg, (void)b, (void)e, (void)worker;
}

static void map(void *arg, size_t b, size_t e, void *partial)
{
    (void)arg;
    *(size_t *)partial += e - b;
}

static void combine(void *arg, void *result, const void *partial)
{
    (void)arg;
    *(size_t *)result += *(const size_t *)partial;
}

static void setup(void)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.domains = nxr_test_expand("0:%0;1:%0 shared");
    cr_assert_eq(nxr_runtime_create(&o, &fx.rt), 0, "%s", nxr_last_error());
    cr_assert_eq(nxr_ctx_create(fx.rt, 0, &fx.ctx), 0, "%s", nxr_last_error());
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    so.every = true;
    cr_assert_eq(nxr_span_create(fx.rt, &so, &fx.span), 0, "%s", nxr_last_error());
    cr_assert_eq(nxr_runtime_domain(fx.rt, 0, &fx.d0), 0);
    cr_assert_eq(nxr_buffer_acquire(fx.d0, 256, &fx.buf), 0);
    cr_assert_eq(nxr_scope_create(fx.d0, NULL, &fx.scope), 0);
    for (int i = 0; i < 16; i++)
        fx.w[i] = (float)i;
    struct nxr_weights_desc wd;
    nxr_weights_desc_init(&wd);
    wd.k = wd.n = wd.ldw = 4;
    wd.w = fx.w;
    cr_assert_eq(nxr_weights_create(fx.rt, &wd, &fx.weights), 0, "%s", nxr_last_error());
    cr_assert_eq(nxr_shards_create(fx.span, 4, 4 * sizeof(float), NULL, 2, &fx.shards), 0, "%s",
                 nxr_last_error());
    fx.cpus = nxr_test_cpus(0, 1);
}

static void teardown(void)
{
    nxr_job_detach(fx.job);
    nxr_shards_destroy(fx.shards);
    nxr_weights_destroy(fx.weights);
    nxr_scope_destroy(fx.scope);
    nxr_buffer_release(fx.buf);
    nxr_ctx_destroy(fx.span);
    nxr_ctx_destroy(fx.ctx);
    nxr_runtime_destroy(fx.rt);
    hwloc_bitmap_free(fx.cpus);
    memset(&fx, 0, sizeof(fx));
}

/* ---- the rows' calls ------------------------------------------------------------ */

/* BAD(name) { ... }: the bad call of a row; GOOD(name) { ... }: its good one,
 * which returns NOT_HERE when this machine cannot give the success (no NUMA
 * support, a kernel without the query). */
#define NOT_HERE  1
#define BAD(fn)   static int bad_##fn(void)
#define GOOD(fn)  static int good_##fn(void)
#define NULLS(fn) static void nulls_##fn(void)

static hwloc_bitmap_t out_set;
static nxr_domain_t *out_d;
static void *out_p;
static size_t out_n, out_b, out_e;
static float v4[4] = {1, 2, 3, 4}, o4[4];

/* domains */
BAD(nxr_cpuset_parse)
{
    return nxr_cpuset_parse("1-", &out_set);
}
GOOD(nxr_cpuset_parse)
{
    int rc = nxr_cpuset_parse("0-1", &out_set);
    hwloc_bitmap_free(out_set);
    return rc;
}
BAD(nxr_cpuset_format)
{
    char b[8];
    return nxr_cpuset_format(NULL, b, sizeof(b), &out_n);
}
GOOD(nxr_cpuset_format)
{
    char b[64];
    return nxr_cpuset_format(fx.cpus, b, sizeof(b), &out_n);
}
BAD(nxr_cpuset_from_cpu_set)
{
    return nxr_cpuset_from_cpu_set(NULL, sizeof(cpu_set_t), &out_set);
}
GOOD(nxr_cpuset_from_cpu_set)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(0, &s);
    int rc = nxr_cpuset_from_cpu_set(&s, sizeof(s), &out_set);
    hwloc_bitmap_free(out_set);
    return rc;
}
BAD(nxr_cpuset_to_cpu_set)
{
    cpu_set_t s;
    return nxr_cpuset_to_cpu_set(NULL, &s, sizeof(s));
}
GOOD(nxr_cpuset_to_cpu_set)
{
    cpu_set_t s;
    return nxr_cpuset_to_cpu_set(fx.cpus, &s, sizeof(s));
}

/* executor */
BAD(nxr_job_wait)
{
    return nxr_job_wait(NULL);
}
static void prep_job(void)
{
    cr_assert_eq(nxr_submit(fx.ctx, 2, task, NULL, &fx.job), 0, "%s", nxr_last_error());
}
GOOD(nxr_job_wait)
{
    nxr_job_t *j = fx.job;
    fx.job = NULL;
    return nxr_job_wait(j);
}
/* libnxr_omp's one function, outside libnxr and its slot: it fails
 * (-EINVAL) without a detail, and leaves the slot as it was. */
NULLS(omp_executor_init)
{
    struct nxr_executor e;
    cr_expect_eq(nxr_omp_executor_init(NULL, 1), -EINVAL);
    cr_expect_eq(nxr_omp_executor_init(&e, -1), -EINVAL);
    cr_expect_eq(nxr_omp_executor_init(&e, 1), 0);
}

/* alloc */
BAD(nxr_buffer_export)
{
    void *p;
    size_t n;
    return nxr_buffer_export(NULL, &p, &n);
}
GOOD(nxr_buffer_export)
{
    void *p;
    size_t n;
    return nxr_buffer_export(fx.buf, &p, &n);
}
BAD(nxr_mem_node)
{
    return nxr_mem_node(NULL);
}
GOOD(nxr_mem_node)
{
    memset(nxr_buffer_data(fx.buf), 0, 64);
    int node = nxr_mem_node(nxr_buffer_data(fx.buf));
    return node == -ENOSYS ? NOT_HERE : node < 0 ? node : 0; /* no NUMA support here */
}
BAD(nxr_mem_pages_on_node)
{
    size_t pages, on;
    return nxr_mem_pages_on_node(NULL, 64, 0, &pages, &on);
}
GOOD(nxr_mem_pages_on_node)
{
    memset(nxr_buffer_data(fx.buf), 0, 64);
    int node = nxr_domain_node(fx.d0);
    size_t pages, on;
    int rc = nxr_mem_pages_on_node(nxr_buffer_data(fx.buf), 64, node < 0 ? 0 : node, &pages, &on);
    return rc == -ENOSYS ? NOT_HERE : rc; /* no NUMA support here */
}
BAD(nxr_scope_alloc)
{
    return nxr_scope_alloc(NULL, 64, &out_p);
}
GOOD(nxr_scope_alloc)
{
    return nxr_scope_alloc(fx.scope, 64, &out_p);
}

/* kernels: providers and the FP environment */
BAD(nxr_provider_native_create)
{
    nxr_provider_t *p;
    return nxr_provider_native_create((enum nxr_provider_family)99, &p);
}
GOOD(nxr_provider_native_create)
{
    nxr_provider_t *p = NULL;
    int rc = nxr_provider_native_create(NXR_FAMILY_GEMM, &p);
    nxr_provider_destroy(p);
    return rc;
}
BAD(nxr_provider_openblas_create)
{
    return nxr_provider_openblas_create(NULL);
}
BAD(nxr_fpenv_check)
{
    return nxr_fpenv_check(NULL);
}
GOOD(nxr_fpenv_check)
{
    struct nxr_fpenv e;
    nxr_fpenv_get(&e);
    return nxr_fpenv_check(&e);
}
BAD(nxr_provider_create)
{
    nxr_provider_t *p;
    return nxr_provider_create(NULL, &p);
}
BAD(nxr_provider_bundle_create)
{
    return nxr_provider_bundle_create(NULL, NULL);
}
GOOD(nxr_provider_bundle_create)
{
    struct nxr_provider_bundle_opts o;
    nxr_provider_bundle_opts_init(&o);
    nxr_provider_bundle_t *b = NULL;
    int rc = nxr_provider_bundle_create(&o, &b);
    nxr_provider_bundle_destroy(b);
    return rc;
}

/* runtime */
BAD(nxr_runtime_create)
{
    return nxr_runtime_create(NULL, NULL);
}
GOOD(nxr_runtime_create)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.domains = nxr_test_expand("0:%0");
    nxr_runtime_t *rt = NULL;
    int rc = nxr_runtime_create(&o, &rt);
    nxr_runtime_destroy(rt);
    return rc;
}
BAD(nxr_runtime_domain)
{
    return nxr_runtime_domain(fx.rt, 99, &out_d);
}
GOOD(nxr_runtime_domain)
{
    return nxr_runtime_domain(fx.rt, 1, &out_d);
}
BAD(nxr_runtime_domain_of_cpu)
{
    return nxr_runtime_domain_of_cpu(fx.rt, -1, &out_d);
}
GOOD(nxr_runtime_domain_of_cpu)
{
    return nxr_runtime_domain_of_cpu(fx.rt, nxr_test_cpu(0), &out_d);
}
BAD(nxr_runtime_domain_of_node)
{
    return nxr_runtime_domain_of_node(fx.rt, -7, &out_d);
}
BAD(nxr_runtime_domain_here)
{
    return nxr_runtime_domain_here(NULL, &out_d);
}
BAD(nxr_runtime_attach)
{
    return nxr_runtime_attach(fx.rt, NULL);
}
BAD(nxr_run_across)
{
    return nxr_run_across(fx.rt, NULL, 1, 1, task, NULL);
}
GOOD(nxr_run_across)
{
    int ids[1] = {0};
    return nxr_run_across(fx.rt, ids, 1, 2, task, NULL);
}
BAD(nxr_runtime_describe)
{
    char *s;
    return nxr_runtime_describe(fx.rt, (enum nxr_describe_format)9, &s);
}
GOOD(nxr_runtime_describe)
{
    char *s = NULL;
    int rc = nxr_runtime_describe(fx.rt, NXR_DESCRIBE_TEXT, &s);
    free(s);
    return rc;
}
BAD(nxr_runtime_stats)
{
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, NULL, 0);
    s.size = 1; /* below the first version's */
    return nxr_runtime_stats(fx.rt, &s);
}
BAD(nxr_runtime_refresh_budget)
{
    return nxr_runtime_refresh_budget(NULL);
}
GOOD(nxr_runtime_refresh_budget)
{
    return nxr_runtime_refresh_budget(fx.rt);
}
BAD(nxr_runtime_metrics)
{
    size_t len;
    return nxr_runtime_metrics(fx.rt, NULL, 0, &len); /* -ENOSPC: only asks the length */
}
GOOD(nxr_runtime_metrics)
{
    static char buf[1 << 16];
    size_t len;
    return nxr_runtime_metrics(fx.rt, buf, sizeof(buf), &len);
}
BAD(nxr_top_read)
{
    struct nxr_top t;
    nxr_top_init(&t, NULL, 0, NULL, 0);
    t.size = 1; /* below the first version's */
    return nxr_top_read(NULL, 0, &t);
}
GOOD(nxr_top_read)
{
    /* A registry of the test's own (created, empty): nothing is asked. */
    char dir[512];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(dir, sizeof(dir), "%s/error_channel_top", tmp != NULL ? tmp : "/tmp");
    struct nxr_top t;
    nxr_top_init(&t, NULL, 0, NULL, 0);
    return nxr_top_read(dir, 0, &t);
}
GOOD(nxr_runtime_stats)
{
    struct nxr_domain_stats d[4];
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, d, 4);
    return nxr_runtime_stats(fx.rt, &s);
}

/* contexts */
BAD(nxr_ctx_create)
{
    nxr_ctx_t *c;
    return nxr_ctx_create(fx.rt, 99, &c);
}
GOOD(nxr_ctx_create)
{
    nxr_ctx_t *c = NULL;
    int rc = nxr_ctx_create(fx.rt, 1, &c);
    nxr_ctx_destroy(c);
    return rc;
}
BAD(nxr_ctx_create_here)
{
    nxr_ctx_t *c;
    return nxr_ctx_create_here(NULL, &c);
}
BAD(nxr_ctx_alloc)
{
    return nxr_ctx_alloc(NULL, 64, &out_p);
}
GOOD(nxr_ctx_alloc)
{
    return nxr_ctx_alloc(fx.ctx, 64, &out_p);
}
BAD(nxr_ctx_alloc_for)
{
    return nxr_ctx_alloc_for(NULL, NULL, 0, 64, &out_p);
}
GOOD(nxr_ctx_alloc_for)
{
    return nxr_ctx_alloc_for(fx.ctx, NULL, 0, 64, &out_p);
}
BAD(nxr_ctx_last_route)
{
    struct nxr_route r;
    return nxr_ctx_last_route(NULL, &r);
}
GOOD(nxr_ctx_last_route)
{
    struct nxr_route r;
    return nxr_ctx_last_route(fx.ctx, &r);
}
BAD(nxr_ctx_bind)
{
    return nxr_ctx_bind(fx.ctx, NULL);
}
GOOD(nxr_ctx_bind)
{
    nxr_thread_binding_t *prev = NULL;
    int rc = nxr_ctx_bind(fx.ctx, &prev);
    if (rc == 0)
        rc = nxr_thread_binding_restore(prev);
    return rc;
}

/* nxr_thread_binding_restore from a thread that did not bind: a thread
 * binds and waits; the row's bad call restores its handle here (-EINVAL,
 * the handle kept); then the thread restores it itself. */
static struct {
    pthread_t thread;
    pthread_barrier_t bound, done;
    nxr_thread_binding_t *handle;
} other;

static void *other_binds(void *unused)
{
    (void)unused;
    cr_assert_eq(nxr_ctx_bind(fx.ctx, &other.handle), 0);
    pthread_barrier_wait(&other.bound);
    pthread_barrier_wait(&other.done);
    cr_assert_eq(nxr_thread_binding_restore(other.handle), 0);
    return NULL;
}

static void prep_restore(void)
{
    pthread_barrier_init(&other.bound, NULL, 2);
    pthread_barrier_init(&other.done, NULL, 2);
    cr_assert_eq(pthread_create(&other.thread, NULL, other_binds, NULL), 0);
    pthread_barrier_wait(&other.bound);
}

static void after_restore(void)
{
    pthread_barrier_wait(&other.done);
    pthread_join(other.thread, NULL);
    pthread_barrier_destroy(&other.bound);
    pthread_barrier_destroy(&other.done);
}

BAD(nxr_thread_binding_restore)
{
    return nxr_thread_binding_restore(other.handle);
}
GOOD(nxr_thread_binding_restore)
{
    return nxr_thread_binding_restore(NULL);
}

BAD(nxr_parallel_for)
{
    return nxr_parallel_for(NULL, 0, 4, 1, body, NULL);
}
GOOD(nxr_parallel_for)
{
    return nxr_parallel_for(fx.ctx, 0, 4, 1, body, NULL);
}
BAD(nxr_parallel_for_opts)
{
    return nxr_parallel_for_opts(NULL, 0, 4, NULL, body, NULL);
}
GOOD(nxr_parallel_for_opts)
{
    return nxr_parallel_for_opts(fx.ctx, 0, 4, NULL, body, NULL);
}
BAD(nxr_parallel_reduce)
{
    size_t zero = 0, r;
    return nxr_parallel_reduce(NULL, 0, 4, 1, sizeof(size_t), &zero, map, combine, NULL, &r);
}
GOOD(nxr_parallel_reduce)
{
    size_t zero = 0, r;
    return nxr_parallel_reduce(fx.ctx, 0, 4, 1, sizeof(size_t), &zero, map, combine, NULL, &r);
}
BAD(nxr_run)
{
    return nxr_run(NULL, NXR_MODE_SEQUENTIAL, 2, task, NULL);
}
GOOD(nxr_run)
{
    return nxr_run(fx.ctx, NXR_MODE_SEQUENTIAL, 2, task, NULL);
}
BAD(nxr_submit)
{
    nxr_job_t *j;
    return nxr_submit(NULL, 2, task, NULL, &j);
}
GOOD(nxr_submit)
{
    nxr_job_t *j = NULL;
    int rc = nxr_submit(fx.ctx, 2, task, NULL, &j);
    nxr_job_detach(j); /* not nxr_job_wait: the row checks submit's own slot */
    return rc;
}

/* kernels through a context */
static const struct nxr_sgemm_args gemm2 = {
    .m = 2, .n = 2, .k = 1, .alpha = 1, .a = v4, .lda = 1, .b = v4, .ldb = 2, .c = o4, .ldc = 2};
BAD(nxr_sgemm)
{
    return nxr_sgemm(NULL, &gemm2);
}
GOOD(nxr_sgemm)
{
    return nxr_sgemm(fx.ctx, &gemm2);
}
BAD(nxr_sgemm_batch)
{
    return nxr_sgemm_batch(fx.ctx, NULL);
}
GOOD(nxr_sgemm_batch)
{
    struct nxr_sgemm_batch_args b = {.gemm = gemm2, .batch = 1};
    return nxr_sgemm_batch(fx.ctx, &b);
}
/* No epilogue: the call is nxr_sgemm's, but the detail names nxr_sgemm_fused. */
BAD(nxr_sgemm_fused)
{
    return nxr_sgemm_fused(fx.ctx, NULL, NULL);
}
GOOD(nxr_sgemm_fused)
{
    float bias[2] = {1, 1};
    struct nxr_sgemm_epilogue ep = {.bias = bias, .activation = NXR_ACTIVATION_SILU};
    return nxr_sgemm_fused(fx.ctx, &gemm2, &ep);
}
BAD(nxr_binary)
{
    return nxr_binary(NULL, NXR_BINARY_ADD, 4, v4, v4, o4);
}
GOOD(nxr_binary)
{
    return nxr_binary(fx.ctx, NXR_BINARY_ADD, 4, v4, v4, o4);
}
BAD(nxr_binary_rows)
{
    return nxr_binary_rows(NULL, NXR_BINARY_MUL, 2, 2, v4, 2, v4, o4, 2);
}
GOOD(nxr_binary_rows)
{
    return nxr_binary_rows(fx.ctx, NXR_BINARY_MUL, 2, 2, v4, 2, v4, o4, 2);
}
BAD(nxr_scale)
{
    return nxr_scale(NULL, 4, v4, 2.0f, o4);
}
GOOD(nxr_scale)
{
    return nxr_scale(fx.ctx, 4, v4, 2.0f, o4);
}
BAD(nxr_unary)
{
    return nxr_unary(NULL, NXR_UNARY_SILU, 4, v4, o4);
}
GOOD(nxr_unary)
{
    return nxr_unary(fx.ctx, NXR_UNARY_SILU, 4, v4, o4);
}
BAD(nxr_triad)
{
    return nxr_triad(NULL, 4, v4, v4, 2.0f, o4);
}
GOOD(nxr_triad)
{
    return nxr_triad(fx.ctx, 4, v4, v4, 2.0f, o4);
}
BAD(nxr_sum)
{
    return nxr_sum(NULL, 4, v4, o4);
}
GOOD(nxr_sum)
{
    return nxr_sum(fx.ctx, 4, v4, o4);
}
BAD(nxr_max)
{
    return nxr_max(NULL, 4, v4, o4);
}
GOOD(nxr_max)
{
    return nxr_max(fx.ctx, 4, v4, o4);
}
BAD(nxr_argmax)
{
    return nxr_argmax(NULL, 4, v4, &out_n);
}
GOOD(nxr_argmax)
{
    return nxr_argmax(fx.ctx, 4, v4, &out_n);
}
BAD(nxr_softmax)
{
    return nxr_softmax(NULL, 2, 2, v4, 2, o4, 2);
}
GOOD(nxr_softmax)
{
    return nxr_softmax(fx.ctx, 2, 2, v4, 2, o4, 2);
}
BAD(nxr_rmsnorm)
{
    return nxr_rmsnorm(NULL, 2, 2, v4, 2, v4, 1e-5f, o4, 2);
}
GOOD(nxr_rmsnorm)
{
    return nxr_rmsnorm(fx.ctx, 2, 2, v4, 2, v4, 1e-5f, o4, 2);
}
BAD(nxr_layernorm)
{
    return nxr_layernorm(NULL, 2, 2, v4, 2, v4, v4, 1e-5f, o4, 2);
}
GOOD(nxr_layernorm)
{
    return nxr_layernorm(fx.ctx, 2, 2, v4, 2, v4, v4, 1e-5f, o4, 2);
}

/* memory */
BAD(nxr_mem_domain)
{
    return nxr_mem_domain(NULL, nxr_buffer_data(fx.buf), &out_d);
}
GOOD(nxr_mem_domain)
{
    return nxr_mem_domain(fx.rt, nxr_buffer_data(fx.buf), &out_d);
}
BAD(nxr_mem_rehome)
{
    return nxr_mem_rehome(NULL, v4, sizeof(v4), 0, &out_p);
}
GOOD(nxr_mem_rehome)
{
    void *p = NULL;
    int rc = nxr_mem_rehome(fx.d0, v4, sizeof(v4), 0, &p);
    nxr_domain_free(p);
    return rc;
}
BAD(nxr_buffer_acquire)
{
    nxr_buffer_t *b;
    return nxr_buffer_acquire(NULL, 64, &b);
}
GOOD(nxr_buffer_acquire)
{
    nxr_buffer_t *b = NULL;
    int rc = nxr_buffer_acquire(fx.d0, 64, &b);
    nxr_buffer_release(b);
    return rc;
}
BAD(nxr_pool_stats)
{
    struct nxr_pool_stats s;
    return nxr_pool_stats(NULL, &s);
}
GOOD(nxr_pool_stats)
{
    struct nxr_pool_stats s;
    return nxr_pool_stats(fx.d0, &s);
}
BAD(nxr_pool_set_cap)
{
    return nxr_pool_set_cap(NULL, 0);
}
GOOD(nxr_pool_set_cap)
{
    return nxr_pool_set_cap(fx.d0, NXR_POOL_DEFAULT_CAP);
}
BAD(nxr_pool_trim)
{
    return nxr_pool_trim(NULL);
}
GOOD(nxr_pool_trim)
{
    return nxr_pool_trim(fx.d0);
}
BAD(nxr_domain_malloc)
{
    return nxr_domain_malloc(NULL, 64, 0, &out_p);
}
GOOD(nxr_domain_malloc)
{
    void *p = NULL;
    int rc = nxr_domain_malloc(fx.d0, 64, 0, &p);
    nxr_domain_free(p);
    return rc;
}
BAD(nxr_scope_create)
{
    nxr_scope_t *s;
    return nxr_scope_create(NULL, NULL, &s);
}
GOOD(nxr_scope_create)
{
    nxr_scope_t *s = NULL;
    int rc = nxr_scope_create(fx.d0, NULL, &s);
    nxr_scope_destroy(s);
    return rc;
}
BAD(nxr_runtime_route)
{
    struct nxr_route r;
    return nxr_runtime_route(NULL, NULL, 0, &r);
}
GOOD(nxr_runtime_route)
{
    struct nxr_route r;
    struct nxr_mem_ref in = {.ptr = nxr_buffer_data(fx.buf), .bytes = 64};
    return nxr_runtime_route(fx.rt, &in, 1, &r);
}

/* spans, shards, weights */
BAD(nxr_span_create)
{
    nxr_ctx_t *c;
    return nxr_span_create(fx.rt, NULL, &c);
}
GOOD(nxr_span_create)
{
    struct nxr_span_opts o;
    nxr_span_opts_init(&o);
    o.every = true;
    nxr_ctx_t *c = NULL;
    int rc = nxr_span_create(fx.rt, &o, &c);
    nxr_ctx_destroy(c);
    return rc;
}
BAD(nxr_span_share)
{
    return nxr_span_share(NULL, 8, 0, &out_b, &out_e);
}
GOOD(nxr_span_share)
{
    return nxr_span_share(fx.span, 8, 1, &out_b, &out_e);
}
BAD(nxr_shards_create)
{
    nxr_shards_t *s;
    return nxr_shards_create(NULL, 4, 16, NULL, 2, &s);
}
GOOD(nxr_shards_create)
{
    nxr_shards_t *s = NULL;
    int rc = nxr_shards_create(fx.span, 4, 16, NULL, 2, &s);
    nxr_shards_destroy(s);
    return rc;
}
BAD(nxr_shards_part)
{
    struct nxr_shard p;
    return nxr_shards_part(NULL, 0, &p);
}
GOOD(nxr_shards_part)
{
    struct nxr_shard p;
    return nxr_shards_part(fx.shards, 1, &p);
}
static float lin_y[4];
static struct nxr_span_linear_args linear_args(void)
{
    return (struct nxr_span_linear_args){.m = 1,
                                         .k = 4,
                                         .n = 4,
                                         .x = v4,
                                         .ldx = 4,
                                         .w = fx.shards,
                                         .layout = NXR_SHARD_BY_OUTPUT,
                                         .y = lin_y,
                                         .ldy = 4};
}
BAD(nxr_span_linear)
{
    struct nxr_span_linear_args a = linear_args();
    return nxr_span_linear(NULL, &a);
}
GOOD(nxr_span_linear)
{
    struct nxr_span_linear_args a = linear_args();
    return nxr_span_linear(fx.span, &a);
}
BAD(nxr_weights_create)
{
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    nxr_weights_t *w;
    return nxr_weights_create(NULL, &d, &w);
}
GOOD(nxr_weights_create)
{
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = d.n = d.ldw = 4;
    d.w = fx.w;
    nxr_weights_t *w = NULL;
    int rc = nxr_weights_create(fx.rt, &d, &w);
    nxr_weights_destroy(w);
    return rc;
}
BAD(nxr_weights_create_format)
{
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = d.n = d.ldw = 4;
    d.w = fx.w;
    nxr_weights_t *w;
    return nxr_weights_create_format(fx.rt, &d, (enum nxr_weights_format)9, &w);
}
GOOD(nxr_weights_create_format)
{
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = d.n = d.ldw = 4;
    d.w = fx.w;
    nxr_weights_t *w = NULL;
    int rc = nxr_weights_create_format(fx.rt, &d, NXR_WEIGHTS_Q8_BLOCK32, &w);
    nxr_weights_destroy(w);
    return rc;
}
BAD(nxr_weights_copy)
{
    const void *p;
    size_t n;
    return nxr_weights_copy(NULL, fx.d0, &p, &n);
}
GOOD(nxr_weights_copy)
{
    const void *p;
    size_t n;
    return nxr_weights_copy(fx.weights, fx.d0, &p, &n);
}
BAD(nxr_weights_huge_pages)
{
    bool advised;
    size_t bytes;
    return nxr_weights_huge_pages(NULL, fx.d0, &advised, &bytes);
}
GOOD(nxr_weights_huge_pages)
{
    bool advised;
    size_t bytes;
    int rc = nxr_weights_huge_pages(fx.weights, fx.d0, &advised, &bytes);
    return rc == -ENOSYS ? NOT_HERE : rc; /* the kernel cannot say */
}
static struct nxr_sgemm_packed_args packed_args(void)
{
    return (struct nxr_sgemm_packed_args){
        .m = 1, .alpha = 1, .a = v4, .lda = 4, .w = fx.weights, .c = o4, .ldc = 4};
}
BAD(nxr_sgemm_packed)
{
    struct nxr_sgemm_packed_args a = packed_args();
    return nxr_sgemm_packed(NULL, &a, NULL);
}
GOOD(nxr_sgemm_packed)
{
    struct nxr_sgemm_packed_args a = packed_args();
    return nxr_sgemm_packed(fx.ctx, &a, NULL);
}

/* runtime/nxr_step.h: a one-product step over the fixture's weights. */
BAD(nxr_step_create)
{
    return nxr_step_create(NULL);
}
GOOD(nxr_step_create)
{
    nxr_step_t *s;
    int rc = nxr_step_create(&s);
    nxr_step_destroy(s);
    return rc;
}
BAD(nxr_step_add_sgemm_packed)
{
    struct nxr_sgemm_packed_args a = packed_args();
    return nxr_step_add_sgemm_packed(NULL, &a, NULL);
}
GOOD(nxr_step_add_sgemm_packed)
{
    nxr_step_t *s;
    struct nxr_sgemm_packed_args a = packed_args();
    int rc = nxr_step_create(&s);
    if (rc == 0)
        rc = nxr_step_add_sgemm_packed(s, &a, NULL);
    nxr_step_destroy(s);
    return rc;
}
BAD(nxr_step_add_loop)
{
    return nxr_step_add_loop(NULL, 0, 4, 1, body, NULL);
}
GOOD(nxr_step_add_loop)
{
    nxr_step_t *s;
    int rc = nxr_step_create(&s);
    if (rc == 0)
        rc = nxr_step_add_loop(s, 0, 4, 1, body, NULL);
    nxr_step_destroy(s);
    return rc;
}
BAD(nxr_step_add_barrier)
{
    return nxr_step_add_barrier(NULL);
}
GOOD(nxr_step_add_barrier)
{
    nxr_step_t *s;
    int rc = nxr_step_create(&s);
    if (rc == 0)
        rc = nxr_step_add_barrier(s);
    nxr_step_destroy(s);
    return rc;
}
BAD(nxr_step_run)
{
    return nxr_step_run(fx.ctx, NULL);
}
GOOD(nxr_step_run)
{
    nxr_step_t *s;
    struct nxr_sgemm_packed_args a = packed_args();
    int rc = nxr_step_create(&s);
    if (rc == 0)
        rc = nxr_step_add_sgemm_packed(s, &a, NULL);
    if (rc == 0)
        rc = nxr_step_run(fx.ctx, s);
    nxr_step_destroy(s);
    return rc;
}

/* ---- the calls of functions that cannot fail (NULL handles where they take one) ---- */

NULLS(getters_of_a_runtime)
{
    cr_expect_null(nxr_runtime_providers(NULL));
    cr_expect_eq(nxr_runtime_domain_count(NULL), 0);
    cr_expect_null(nxr_runtime_domain_at(NULL, 0));
    cr_expect_null(nxr_runtime_default_domain(NULL));
    cr_expect_eq(nxr_runtime_route_policy(NULL), NXR_ROUTE_DEFAULT);
    cr_expect_null(nxr_runtime_topology_source(NULL));
    cr_expect_not(nxr_runtime_has_numa(NULL));
    cr_expect_null(nxr_runtime_allowed_cpus(NULL));
    const char *src = "x";
    cr_expect_eq(nxr_runtime_cpu_quota(NULL, &src), 0);
    cr_expect_null(src);
}

NULLS(getters_of_a_domain)
{
    cr_expect_eq(nxr_domain_id(NULL), -1);
    cr_expect_eq(nxr_domain_node(NULL), NXR_NODE_NONE);
    cr_expect_null(nxr_domain_cpuset(NULL));
    cr_expect_eq(nxr_domain_admission(NULL), NXR_ADMISSION_MANAGED);
    cr_expect_eq(nxr_domain_placement(NULL), NXR_PLACEMENT_NONE);
    cr_expect_eq(nxr_domain_workers(NULL), 0);
    cr_expect_eq(nxr_domain_budget(NULL), 0);
    cr_expect_null(nxr_domain_budget_limit(NULL));
    cr_expect_eq(nxr_domain_mem_binding(NULL), NXR_MEM_NO_NODE);
}

NULLS(getters_of_a_context)
{
    cr_expect_null(nxr_ctx_domain(NULL));
    cr_expect_eq(nxr_ctx_budget(NULL), 0);
    cr_expect_eq(nxr_span_domain_count(NULL), 0);
    cr_expect_null(nxr_span_domain_at(NULL, 0));
    nxr_ctx_reset(NULL);
    nxr_ctx_destroy(NULL);
}

NULLS(getters_of_memory)
{
    cr_expect_null(nxr_buffer_data(NULL));
    cr_expect_eq(nxr_buffer_size(NULL), 0);
    cr_expect_eq(nxr_buffer_domain(NULL), -1);
    nxr_buffer_release(NULL);
    cr_expect_eq(nxr_pool_class_size(0), nxr_pool_class_size(1));
    nxr_domain_free(NULL);
    struct nxr_scope_stats st;
    nxr_scope_stats(NULL, &st);
    cr_expect_eq(st.reserved_bytes, 0);
    nxr_scope_reset(NULL);
    nxr_scope_destroy(NULL);
    cr_expect_eq(nxr_shards_count(NULL), 0);
    cr_expect_null(nxr_shards_row(NULL, 0));
    nxr_shards_destroy(NULL);
    cr_expect_eq(nxr_weights_k(NULL), 0);
    cr_expect_eq(nxr_weights_n(NULL), 0);
    cr_expect_eq(nxr_weights_format(NULL), NXR_WEIGHTS_F32);
    nxr_weights_destroy(NULL);
    nxr_step_destroy(NULL);
}

NULLS(getters_of_a_provider)
{
    cr_expect_null(nxr_provider_name(NULL));
    cr_expect_eq(nxr_provider_family(NULL), NXR_FAMILY_GEMM);
    cr_expect_eq(nxr_provider_count_control(NULL), NXR_COUNT_PER_CALL_BOUND);
    cr_expect_eq(nxr_provider_runs_on(NULL), NXR_RUNS_ON_ENGINE_WORKERS);
    cr_expect_not(nxr_provider_is_foreign(NULL));
    cr_expect_null(nxr_provider_bundle_get(NULL, NXR_FAMILY_GEMM));
    nxr_provider_destroy(NULL);
    nxr_provider_bundle_destroy(NULL);
    struct nxr_openblas_info info;
    nxr_openblas_probe(&info);
}

NULLS(names_and_status)
{
    cr_expect_not_null(nxr_strerror(-EINVAL));
    cr_expect(nxr_status_is_nxr(NXR_EBROKEN));
    cr_expect_gt(nxr_version(), 0);
    cr_expect_not_null(nxr_version_string());
    cr_expect_not_null(nxr_admission_name(NXR_ADMISSION_MANAGED));
    cr_expect_not_null(nxr_placement_name(NXR_PLACEMENT_NONE));
    cr_expect_not_null(nxr_mem_binding_name(NXR_MEM_BOUND));
    cr_expect_not_null(nxr_provider_family_name(NXR_FAMILY_GEMM));
    cr_expect_not_null(nxr_count_control_name(NXR_COUNT_PER_CALL_BOUND));
    cr_expect_not_null(nxr_provider_runs_on_name(NXR_RUNS_ON_ENGINE_WORKERS));
    cr_expect_not_null(nxr_route_reason_name(NXR_ROUTE_REASON_EXPLICIT));
    cr_expect_not_null(nxr_route_policy_name(NXR_ROUTE_MOST_BYTES));
    cr_expect_not_null(nxr_ctx_last_error(NULL));
}

NULLS(inits)
{
    struct nxr_domain_decl dd;
    nxr_domain_decl_init(&dd);
    struct nxr_for_opts fo;
    nxr_for_opts_init(&fo);
    struct nxr_scope_opts so;
    nxr_scope_opts_init(&so);
    struct nxr_provider_desc pd;
    nxr_provider_desc_init(&pd);
    struct nxr_provider_bundle_opts bo;
    nxr_provider_bundle_opts_init(&bo);
    struct nxr_runtime_opts ro;
    nxr_runtime_opts_init(&ro);
    struct nxr_external_decl ed;
    nxr_external_decl_init(&ed);
    struct nxr_runtime_stats rs;
    nxr_runtime_stats_init(&rs, NULL, 0);
    nxr_runtime_stats_init(NULL, NULL, 0); /* a no-op */
    struct nxr_top top;
    nxr_top_init(&top, NULL, 0, NULL, 0);
    nxr_top_init(NULL, NULL, 0, NULL, 0); /* a no-op */
    struct nxr_span_opts spo;
    nxr_span_opts_init(&spo);
    struct nxr_weights_desc wd;
    nxr_weights_desc_init(&wd);
    nxr_job_detach(NULL);
    nxr_runtime_destroy(NULL);
}

NULLS(fpenv)
{
    struct nxr_fpenv e;
    nxr_fpenv_get(&e);
    nxr_fpenv_set(&e);
    cr_expect(nxr_fpenv_equal(&e, &e));
    (void)nxr_fpenv_is_default(&e);
    (void)nxr_fpenv_flush_to_zero(&e);
    (void)nxr_fpenv_denormals_are_zero(&e);
    (void)nxr_fpenv_rounding(&e);
}

NULLS(last_error)
{
    (void)nxr_last_error();
}

/* ---- the table ----------------------------------------------------------------- */

struct row {
    const char *name;
    void (*fn)(void);  /* the function itself: a row of a function that is gone does not build */
    int (*bad)(void);  /* FALLIBLE: a call with one bad argument */
    int (*good)(void); /* a call that succeeds (NULL: none can be made here; the reason below) */
    void (*prep)(void), (*after)(void); /* around the row, before the marker */
    void (*nulls)(void);                /* CANNOT_FAIL: the calls that exercise it */
    const char *why;                    /* why it cannot fail, or why it has no good call */
};

#define FN(f) ((void (*)(void))(f))
/* A fallible function: its bad and good calls (above). */
#define FALLIBLE(f)                                                                                \
    {                                                                                              \
#f, FN(f), bad_##f, good_##f, NULL, NULL, NULL, NULL                                       \
    }
/* A fallible function with no success to be had here, and why. */
#define FALLIBLE_BAD_ONLY(f, why)                                                                  \
    {                                                                                              \
#f, FN(f), bad_##f, NULL, NULL, NULL, NULL, why                                            \
    }
#define FALLIBLE_AROUND(f, prep, after)                                                            \
    {                                                                                              \
#f, FN(f), bad_##f, good_##f, prep, after, NULL, NULL                                      \
    }
/* A function that cannot fail, the calls that exercise it, and why. */
#define CANNOT_FAIL(f, nulls, why)                                                                 \
    {                                                                                              \
#f, FN(f), NULL, NULL, NULL, NULL, nulls_##nulls, why                                      \
    }

static const struct row rows[] = {
    /* base/nxr_status.h, base/nxr_version.h */
    CANNOT_FAIL(nxr_strerror, names_and_status, "a static name for any int"),
    CANNOT_FAIL(nxr_status_is_nxr, names_and_status, "a predicate"),
    CANNOT_FAIL(nxr_last_error, last_error, "the slot itself"),
    CANNOT_FAIL(nxr_version, names_and_status, "a constant"),
    CANNOT_FAIL(nxr_version_string, names_and_status, "a constant"),
    /* domains/nxr_domains.h */
    CANNOT_FAIL(nxr_domain_decl_init, inits, "fills the caller's struct"),
    CANNOT_FAIL(nxr_admission_name, names_and_status, "a static name"),
    CANNOT_FAIL(nxr_placement_name, names_and_status, "a static name"),
    FALLIBLE(nxr_cpuset_parse),
    FALLIBLE(nxr_cpuset_format),
    FALLIBLE(nxr_cpuset_from_cpu_set),
    FALLIBLE(nxr_cpuset_to_cpu_set),
    /* executor/nxr_executor.h, executor/nxr_omp.h */
    CANNOT_FAIL(nxr_for_opts_init, inits, "fills the caller's struct"),
    FALLIBLE_AROUND(nxr_job_wait, prep_job, NULL),
    CANNOT_FAIL(nxr_job_detach, inits, "a destroy (NULL is a no-op)"),
    CANNOT_FAIL(nxr_omp_executor_init, omp_executor_init,
                "outside libnxr (libnxr_omp): -EINVAL for out NULL or threads < 0, no detail"),
    /* alloc/nxr_alloc.h */
    CANNOT_FAIL(nxr_pool_class_size, getters_of_memory, "a getter (0 past the largest class)"),
    CANNOT_FAIL(nxr_buffer_release, getters_of_memory, "a destroy (NULL is a no-op)"),
    CANNOT_FAIL(nxr_buffer_data, getters_of_memory, "a getter (NULL for NULL)"),
    CANNOT_FAIL(nxr_buffer_size, getters_of_memory, "a getter (0 for NULL)"),
    CANNOT_FAIL(nxr_buffer_domain, getters_of_memory, "a getter (-1 for NULL)"),
    FALLIBLE(nxr_buffer_export),
    CANNOT_FAIL(nxr_mem_binding_name, names_and_status, "a static name"),
    FALLIBLE(nxr_mem_node),
    FALLIBLE(nxr_mem_pages_on_node),
    CANNOT_FAIL(nxr_scope_opts_init, inits, "fills the caller's struct"),
    FALLIBLE(nxr_scope_alloc),
    CANNOT_FAIL(nxr_scope_reset, getters_of_memory, "ends a step (NULL is a no-op)"),
    CANNOT_FAIL(nxr_scope_stats, getters_of_memory, "a getter (zeros for NULL)"),
    CANNOT_FAIL(nxr_scope_destroy, getters_of_memory, "a destroy (NULL is a no-op)"),
    /* kernels/nxr_kernels.h */
    CANNOT_FAIL(nxr_provider_family_name, names_and_status, "a static name"),
    FALLIBLE(nxr_provider_native_create),
    FALLIBLE_BAD_ONLY(nxr_provider_openblas_create,
                      "whether OpenBLAS loads depends on the machine (tests/kernels)"),
    CANNOT_FAIL(nxr_provider_destroy, getters_of_a_provider, "a destroy (NULL is a no-op)"),
    CANNOT_FAIL(nxr_provider_name, getters_of_a_provider, "a getter (NULL for NULL)"),
    CANNOT_FAIL(nxr_provider_family, getters_of_a_provider, "a getter"),
    CANNOT_FAIL(nxr_fpenv_get, fpenv, "reads the thread's environment"),
    CANNOT_FAIL(nxr_fpenv_set, fpenv, "writes the thread's environment"),
    CANNOT_FAIL(nxr_fpenv_equal, fpenv, "a predicate"),
    CANNOT_FAIL(nxr_fpenv_is_default, fpenv, "a predicate"),
    CANNOT_FAIL(nxr_fpenv_flush_to_zero, fpenv, "a predicate"),
    CANNOT_FAIL(nxr_fpenv_denormals_are_zero, fpenv, "a predicate"),
    CANNOT_FAIL(nxr_fpenv_rounding, fpenv, "a getter"),
    FALLIBLE(nxr_fpenv_check),
    /* kernels/nxr_provider.h */
    CANNOT_FAIL(nxr_count_control_name, names_and_status, "a static name"),
    CANNOT_FAIL(nxr_provider_runs_on_name, names_and_status, "a static name"),
    CANNOT_FAIL(nxr_provider_desc_init, inits, "fills the caller's struct"),
    FALLIBLE_BAD_ONLY(nxr_provider_create,
                      "a foreign provider's success: tests/kernels/provider_test"),
    CANNOT_FAIL(nxr_provider_count_control, getters_of_a_provider, "a getter"),
    CANNOT_FAIL(nxr_provider_runs_on, getters_of_a_provider, "a getter"),
    CANNOT_FAIL(nxr_provider_is_foreign, getters_of_a_provider, "a predicate"),
    CANNOT_FAIL(nxr_provider_bundle_opts_init, inits, "fills the caller's struct"),
    FALLIBLE(nxr_provider_bundle_create),
    CANNOT_FAIL(nxr_provider_bundle_destroy, getters_of_a_provider, "a destroy (NULL is a no-op)"),
    CANNOT_FAIL(nxr_provider_bundle_get, getters_of_a_provider, "a getter (NULL for NULL)"),
    CANNOT_FAIL(nxr_openblas_probe, getters_of_a_provider, "reports what it found"),
    /* runtime/nxr.h */
    CANNOT_FAIL(nxr_runtime_opts_init, inits, "fills the caller's struct"),
    FALLIBLE(nxr_runtime_create),
    CANNOT_FAIL(nxr_runtime_destroy, inits, "a destroy (NULL is a no-op)"),
    CANNOT_FAIL(nxr_runtime_providers, getters_of_a_runtime, "a getter"),
    CANNOT_FAIL(nxr_runtime_domain_count, getters_of_a_runtime, "a getter"),
    CANNOT_FAIL(nxr_runtime_domain_at, getters_of_a_runtime, "a getter (NULL out of range)"),
    FALLIBLE(nxr_runtime_domain),
    FALLIBLE(nxr_runtime_domain_of_cpu),
    FALLIBLE_BAD_ONLY(nxr_runtime_domain_of_node, "the machine may have no node here"),
    FALLIBLE_BAD_ONLY(nxr_runtime_domain_here,
                      "the test thread's CPUs need not lie in one domain (runtime_test)"),
    CANNOT_FAIL(nxr_runtime_default_domain, getters_of_a_runtime, "a getter"),
    CANNOT_FAIL(nxr_runtime_route_policy, getters_of_a_runtime, "a getter"),
    CANNOT_FAIL(nxr_runtime_topology_source, getters_of_a_runtime, "a getter"),
    CANNOT_FAIL(nxr_runtime_has_numa, getters_of_a_runtime, "a predicate"),
    CANNOT_FAIL(nxr_runtime_allowed_cpus, getters_of_a_runtime, "a getter"),
    CANNOT_FAIL(nxr_domain_id, getters_of_a_domain, "a getter"),
    CANNOT_FAIL(nxr_domain_node, getters_of_a_domain, "a getter"),
    CANNOT_FAIL(nxr_domain_cpuset, getters_of_a_domain, "a getter"),
    CANNOT_FAIL(nxr_domain_admission, getters_of_a_domain, "a getter"),
    CANNOT_FAIL(nxr_domain_placement, getters_of_a_domain, "a getter"),
    CANNOT_FAIL(nxr_domain_workers, getters_of_a_domain, "a getter"),
    CANNOT_FAIL(nxr_domain_budget, getters_of_a_domain, "a getter"),
    CANNOT_FAIL(nxr_domain_budget_limit, getters_of_a_domain, "a getter"),
    CANNOT_FAIL(nxr_runtime_cpu_quota, getters_of_a_runtime, "a getter"),
    CANNOT_FAIL(nxr_external_decl_init, inits, "fills the caller's struct"),
    FALLIBLE_BAD_ONLY(nxr_runtime_attach, "attaching a host executor: attach_test"),
    FALLIBLE(nxr_run_across),
    FALLIBLE(nxr_runtime_describe),
    /* runtime/nxr_stats.h */
    FALLIBLE(nxr_runtime_stats),
    FALLIBLE(nxr_runtime_metrics),
    FALLIBLE(nxr_runtime_refresh_budget),
    /* runtime/nxr_top.h */
    FALLIBLE(nxr_top_read),
    CANNOT_FAIL(nxr_top_init, inits, "fills the caller's struct"),
    CANNOT_FAIL(nxr_runtime_stats_init, inits, "fills the caller's struct"),
    /* runtime/nxr_ctx.h */
    FALLIBLE(nxr_ctx_create),
    FALLIBLE_BAD_ONLY(nxr_ctx_create_here, "as nxr_runtime_domain_here"),
    CANNOT_FAIL(nxr_ctx_destroy, getters_of_a_context, "a destroy (NULL is a no-op)"),
    CANNOT_FAIL(nxr_ctx_domain, getters_of_a_context, "a getter"),
    CANNOT_FAIL(nxr_ctx_budget, getters_of_a_context, "a getter"),
    CANNOT_FAIL(nxr_ctx_last_error, names_and_status, "the slot itself (deprecated alias)"),
    FALLIBLE(nxr_ctx_alloc),
    FALLIBLE(nxr_ctx_alloc_for),
    CANNOT_FAIL(nxr_ctx_reset, getters_of_a_context, "ends a step (NULL is a no-op)"),
    FALLIBLE(nxr_ctx_last_route),
    FALLIBLE(nxr_ctx_bind),
    FALLIBLE_AROUND(nxr_thread_binding_restore, prep_restore, after_restore),
    FALLIBLE(nxr_parallel_for),
    FALLIBLE(nxr_parallel_for_opts),
    FALLIBLE(nxr_parallel_reduce),
    FALLIBLE(nxr_run),
    FALLIBLE(nxr_submit),
    /* runtime/nxr_ctx_kernels.h */
    FALLIBLE(nxr_sgemm),
    FALLIBLE(nxr_sgemm_batch),
    FALLIBLE(nxr_sgemm_fused),
    FALLIBLE(nxr_binary),
    FALLIBLE(nxr_binary_rows),
    FALLIBLE(nxr_scale),
    FALLIBLE(nxr_unary),
    FALLIBLE(nxr_triad),
    FALLIBLE(nxr_sum),
    FALLIBLE(nxr_max),
    FALLIBLE(nxr_argmax),
    FALLIBLE(nxr_softmax),
    FALLIBLE(nxr_rmsnorm),
    FALLIBLE(nxr_layernorm),
    /* runtime/nxr_memory.h */
    FALLIBLE(nxr_mem_domain),
    FALLIBLE(nxr_mem_rehome),
    FALLIBLE(nxr_buffer_acquire),
    FALLIBLE(nxr_pool_stats),
    FALLIBLE(nxr_pool_set_cap),
    FALLIBLE(nxr_pool_trim),
    CANNOT_FAIL(nxr_domain_mem_binding, getters_of_a_domain, "a getter"),
    FALLIBLE(nxr_domain_malloc),
    CANNOT_FAIL(nxr_domain_free, getters_of_memory, "a destroy (NULL is a no-op)"),
    FALLIBLE(nxr_scope_create),
    /* runtime/nxr_route.h */
    CANNOT_FAIL(nxr_route_reason_name, names_and_status, "a static name"),
    CANNOT_FAIL(nxr_route_policy_name, names_and_status, "a static name"),
    FALLIBLE(nxr_runtime_route),
    /* runtime/nxr_span.h */
    CANNOT_FAIL(nxr_span_opts_init, inits, "fills the caller's struct"),
    FALLIBLE(nxr_span_create),
    CANNOT_FAIL(nxr_span_domain_count, getters_of_a_context, "a getter"),
    CANNOT_FAIL(nxr_span_domain_at, getters_of_a_context, "a getter (NULL out of range)"),
    FALLIBLE(nxr_span_share),
    FALLIBLE(nxr_shards_create),
    CANNOT_FAIL(nxr_shards_destroy, getters_of_memory, "a destroy (NULL is a no-op)"),
    CANNOT_FAIL(nxr_shards_count, getters_of_memory, "a getter"),
    FALLIBLE(nxr_shards_part),
    CANNOT_FAIL(nxr_shards_row, getters_of_memory, "a getter (NULL out of range)"),
    FALLIBLE(nxr_span_linear),
    /* runtime/nxr_weights.h */
    CANNOT_FAIL(nxr_weights_desc_init, inits, "fills the caller's struct"),
    FALLIBLE(nxr_weights_create),
    FALLIBLE(nxr_weights_create_format),
    CANNOT_FAIL(nxr_weights_destroy, getters_of_memory, "a destroy (NULL is a no-op)"),
    CANNOT_FAIL(nxr_weights_k, getters_of_memory, "a getter (0 for NULL)"),
    CANNOT_FAIL(nxr_weights_n, getters_of_memory, "a getter (0 for NULL)"),
    CANNOT_FAIL(nxr_weights_format, getters_of_memory, "a getter (f32 for NULL)"),
    FALLIBLE(nxr_weights_copy),
    FALLIBLE(nxr_weights_huge_pages),
    FALLIBLE(nxr_sgemm_packed),
    /* runtime/nxr_step.h */
    FALLIBLE(nxr_step_create),
    CANNOT_FAIL(nxr_step_destroy, getters_of_memory, "a destroy (NULL is a no-op)"),
    FALLIBLE(nxr_step_add_sgemm_packed),
    FALLIBLE(nxr_step_add_loop),
    FALLIBLE(nxr_step_add_barrier),
    FALLIBLE(nxr_step_run),
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* Every NXR_API function of the public headers (generated). */
static const char *const declared[] = {
#define NXR__API_FUNCTION(name) #name,
#include "tests/runtime/api_functions.inc"
#undef NXR__API_FUNCTION
};

#define NDECLARED (sizeof(declared) / sizeof(declared[0]))

static const struct row *row_of(const char *name)
{
    for (size_t i = 0; i < NROWS; i++) {
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    }
    return NULL;
}

/* One offending row, on stderr (the suite's summary assertion counts them). */
static void __attribute__((format(printf, 1, 2))) report(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("[ERR ] ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- the marker ------------------------------------------------------------------ */

static char marker[512];

/* A failure of another function than `name`, whose detail the row's call
 * must then replace (or, for a function that cannot fail, keep). */
static void marker_failure(const char *name)
{
    hwloc_bitmap_t s = NULL;
    nxr_ctx_t *c = NULL;
    int rc = strcmp(name, "nxr_cpuset_parse") != 0 ? nxr_cpuset_parse("marker", &s)
                                                   : nxr_ctx_create(fx.rt, 77, &c);
    cr_assert_neq(rc, 0);
    snprintf(marker, sizeof(marker), "%s", nxr_last_error());
    cr_assert_neq(marker[0], '\0', "the marker failure left no detail");
}

TestSuite(runtime_error_channel, .init = setup, .fini = teardown, .timeout = 120);

Test(runtime_error_channel, every_declared_function_has_a_row)
{
    size_t missing = 0;
    for (size_t i = 0; i < NDECLARED; i++) {
        if (row_of(declared[i]) == NULL) {
            report("%s is declared NXR_API but has no row in this table", declared[i]);
            missing++;
        }
    }
    for (size_t i = 0; i < NROWS; i++) {
        bool found = false;
        for (size_t j = 0; j < NDECLARED && !found; j++)
            found = strcmp(rows[i].name, declared[j]) == 0;
        cr_expect(found, "the row %s names no declared function", rows[i].name);
    }
    cr_expect_eq(missing, 0, "%zu declared function(s) without a row", missing);
}

Test(runtime_error_channel, a_failure_leaves_its_own_detail_naming_the_call)
{
    size_t stale = 0, empty = 0, misnamed = 0, fallible = 0;
    for (size_t i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        if (r->bad == NULL)
            continue;
        fallible++;
        if (r->prep != NULL)
            r->prep();
        marker_failure(r->name);
        int rc = r->bad();
        const char *got = nxr_last_error();
        char prefix[96];
        snprintf(prefix, sizeof(prefix), "%s: ", r->name);
        cr_expect_neq(rc, 0, "%s: the bad call succeeded", r->name);
        if (strcmp(got, marker) == 0) {
            report("%s (rc %d) left the marker's detail \"%s\"", r->name, rc, got);
            stale++;
        } else if (got[0] == '\0') {
            report("%s (rc %d) left no detail", r->name, rc);
            empty++;
        } else if (strncmp(got, prefix, strlen(prefix)) != 0) {
            report("%s (rc %d): the detail \"%s\" does not name the call", r->name, rc, got);
            misnamed++;
        }
        if (r->after != NULL)
            r->after();
    }
    cr_expect_eq(stale + empty + misnamed, 0,
                 "of %zu fallible functions, %zu left the earlier detail, %zu none, %zu one "
                 "not naming the call",
                 fallible, stale, empty, misnamed);
}

Test(runtime_error_channel, a_success_leaves_the_slot_empty)
{
    size_t stale = 0, failed = 0, tried = 0;
    for (size_t i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        if (r->good == NULL)
            continue;
        tried++;
        if (r->prep != NULL)
            r->prep();
        marker_failure(r->name);
        int rc = r->good();
        const char *got = nxr_last_error();
        if (rc == NOT_HERE) {
            tried--;
        } else if (rc != 0) {
            report("%s: the good call failed: %s (%s)", r->name, nxr_strerror(rc), got);
            failed++;
        } else if (got[0] != '\0') {
            report("%s succeeded and left \"%s\"", r->name, got);
            stale++;
        }
        if (r->after != NULL)
            r->after();
    }
    cr_expect_eq(stale + failed, 0, "of %zu successes, %zu left a detail, %zu failed", tried, stale,
                 failed);
}

Test(runtime_error_channel, a_function_that_cannot_fail_keeps_the_detail_and_takes_null)
{
    for (size_t i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        if (r->nulls == NULL)
            continue;
        cr_assert_not_null(r->why, "%s: a function that cannot fail says why", r->name);
        marker_failure(r->name);
        r->nulls();
        cr_expect_str_eq(nxr_last_error(), marker, "%s (%s) changed the detail", r->name, r->why);
    }
}
