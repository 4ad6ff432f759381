/*
 * Routing by the inputs' bytes (runtime/nxr_route.h) through a routing context
 * (NXR_DOMAIN_AUTO): a call runs on the domain holding the most input bytes,
 * a tie goes to the lowest id, inputs nxr did not allocate are ignored, the
 * default domain is used when none counts, the single-domain policy refuses
 * mixed inputs, inputs are never copied (the provider sees the caller's own
 * pointers), outputs allocated for a call's inputs land on the domain it
 * runs on, and all of it is counted in nxr_runtime_describe.
 *
 * The runtime has domains 7 and 2 (declared in that order, so "lowest id"
 * and "first in the table" differ), both on the first allowed CPU
 * ("shared"): placement is about memory, and this runs on one CPU. A
 * recording GEMM provider notes the pointers it was given and the domain of
 * the body it ran in (the executor's body marker, white-box).
 *
 * A synthetic two-node machine (nodes 0 and 2, one allowed CPU each; needs
 * two CPUs) places a native GEMM by its inputs' node domain. The last test
 * needs two NUMA nodes: it checks with the kernel
 * (nxr_mem_node) that an output allocated for inputs on node 1's domain
 * lives on node 1 once the call has written it. It skips here and runs in
 * the 2-node VM (tools/vm_test.sh).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <numa.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/internal/exec.h"
#include "runtime/nxr.h"
#include "tests/support/cpus.h"
#include "tests/support/runtime.h"

struct recorder {
    int calls;
    const float *a, *b;
    float *c;
    int domain; /* the domain whose body the call ran in */
};

static struct recorder rec;

static int record_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *g)
{
    struct recorder *r = self;
    (void)call;
    r->calls++;
    r->a = g->a;
    r->b = g->b;
    r->c = g->c;
    r->domain = nxr__tls.depth > 0 && nxr__tls.exec != NULL ? nxr__tls.exec->spec->id : -1;
    for (size_t i = 0; i < g->m; i++) /* an output the test can see */
        for (size_t j = 0; j < g->n; j++)
            g->c[i * g->ldc + j] = 1.0f;
    return 0;
}

static const struct nxr_gemm_ops record_ops = {.sgemm = record_sgemm};

static nxr_runtime_t *rt;
static nxr_ctx_t *ctx; /* placing */
static nxr_domain_t *d2, *d7;

static void open_runtime(enum nxr_route_policy policy)
{
    static struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, "7:%0;2:%0 shared", NXR_TEST_PARK);
    struct nxr_provider_desc pd;
    nxr_provider_desc_init(&pd);
    pd.name = "recorder";
    pd.family = NXR_FAMILY_GEMM;
    pd.count = NXR_COUNT_SEQUENTIAL;
    pd.runs_on = NXR_RUNS_ON_CALLING_THREAD;
    pd.gemm = &record_ops;
    pd.self = &rec;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&pd, &p), 0);
    fx.opts.route_policy = policy;
    fx.opts.providers[NXR_FAMILY_GEMM] = p;
    NXR_TEST_RUNTIME_OPEN(&fx);
    rt = fx.rt;
    nxr_provider_destroy(p);
    cr_assert_eq(nxr_runtime_domain(rt, 2, &d2), 0);
    cr_assert_eq(nxr_runtime_domain(rt, 7, &d7), 0);
    cr_assert_eq(nxr_ctx_create(rt, NXR_DOMAIN_AUTO, &ctx), 0);
    memset(&rec, 0, sizeof(rec));
    rec.domain = -2;
}

static void teardown(void)
{
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    ctx = NULL;
    rt = NULL;
}

TestSuite(runtime_route, .fini = teardown, .timeout = 60);

static float *on(nxr_domain_t *d, size_t floats)
{
    float *p;
    cr_assert_eq(nxr_domain_malloc(d, floats * sizeof(float), 64, (void **)&p), 0);
    for (size_t i = 0; i < floats; i++)
        p[i] = (float)(i % 7);
    return p;
}

/* C (m x n) = A (m x k) B (k x n), beta 0: inputs A and B. */
static struct nxr_sgemm_args gemm(size_t m, size_t n, size_t k, const float *a, const float *b,
                             float *c)
{
    return (struct nxr_sgemm_args){.m = m, .n = n, .k = k, .alpha = 1, .a = a, .lda = k, .b = b,
                              .ldb = n, .c = c, .ldc = n};
}

static struct nxr_route last(void)
{
    struct nxr_route p;
    cr_assert_eq(nxr_ctx_last_route(ctx, &p), 0);
    return p;
}

Test(runtime_route, the_domain_with_the_most_input_bytes_runs_the_call)
{
    open_runtime(NXR_ROUTE_DEFAULT);
    float *a = on(d7, 64 * 32), *b = on(d2, 32 * 16), c[64 * 16];
    struct nxr_sgemm_args g = gemm(64, 16, 32, a, b, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0, "%s", nxr_last_error());
    struct nxr_route p = last();
    cr_assert_eq(p.domain_id, 7, "A (8 KiB) is on 7, B (2 KiB) on 2");
    cr_assert_eq(p.reason, NXR_ROUTE_REASON_MOST_BYTES);
    cr_assert_eq(p.domain_bytes, 64 * 32 * sizeof(float));
    cr_assert_eq(p.counted_bytes, (64 * 32 + 32 * 16) * sizeof(float));
    cr_assert_eq(p.domains, 2);
    cr_assert_eq(rec.calls, 1);
    cr_assert_eq(rec.domain, 7, "and the call ran as a body of domain 7");
    nxr_domain_free(a);
    nxr_domain_free(b);
}

Test(runtime_route, a_tie_goes_to_the_lowest_id_whatever_the_order)
{
    open_runtime(NXR_ROUTE_DEFAULT);
    /* Equal bytes: A (32 x 32) on 7, listed first; B (32 x 32) on 2. */
    float *a = on(d7, 32 * 32), *b = on(d2, 32 * 32), c[32 * 32];
    struct nxr_sgemm_args g = gemm(32, 32, 32, a, b, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    cr_assert_eq(last().domain_id, 2);
    cr_assert_eq(last().reason, NXR_ROUTE_REASON_TIE);
    cr_assert_eq(rec.domain, 2);
    /* The same with the operands' domains swapped. */
    float *a2 = on(d2, 32 * 32), *b2 = on(d7, 32 * 32);
    g = gemm(32, 32, 32, a2, b2, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    cr_assert_eq(last().domain_id, 2);
    cr_assert_eq(last().reason, NXR_ROUTE_REASON_TIE);
    nxr_domain_free(a);
    nxr_domain_free(b);
    nxr_domain_free(a2);
    nxr_domain_free(b2);
}

Test(runtime_route, inputs_of_unknown_domain_do_not_count)
{
    open_runtime(NXR_ROUTE_DEFAULT);
    /* A is large but the host's; B is small and on 7. */
    float *a = malloc(256 * 256 * sizeof(float)), *b = on(d7, 256 * 4), c[256 * 4];
    cr_assert_not_null(a);
    memset(a, 0, 256 * 256 * sizeof(float));
    struct nxr_sgemm_args g = gemm(256, 4, 256, a, b, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    struct nxr_route p = last();
    cr_assert_eq(p.domain_id, 7);
    cr_assert_eq(p.reason, NXR_ROUTE_REASON_MOST_BYTES);
    cr_assert_eq(p.counted_bytes, 256 * 4 * sizeof(float), "only B counted");
    cr_assert_eq(p.domains, 1);
    free(a);
    nxr_domain_free(b);
}

Test(runtime_route, no_input_with_a_domain_means_the_default_domain)
{
    open_runtime(NXR_ROUTE_DEFAULT);
    cr_assert_eq(nxr_domain_id(nxr_runtime_default_domain(rt)), 2, "the lowest id, not the first");
    static float a[16 * 16], b[16 * 16], c[16 * 16];
    struct nxr_sgemm_args g = gemm(16, 16, 16, a, b, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    cr_assert_eq(last().domain_id, 2);
    cr_assert_eq(last().reason, NXR_ROUTE_REASON_DEFAULT);
    cr_assert_eq(last().counted_bytes, 0);
    cr_assert_eq(rec.domain, 2);
    cr_assert_eq(nxr_domain_id(nxr_ctx_domain(ctx)), 2, "loops and memory use it too");
}

Test(runtime_route, single_domain_policy_refuses_mixed_inputs_and_runs_nothing)
{
    open_runtime(NXR_ROUTE_SINGLE_DOMAIN);
    cr_assert_eq(nxr_runtime_route_policy(rt), NXR_ROUTE_SINGLE_DOMAIN);
    float *a = on(d7, 16 * 16), *b = on(d2, 16 * 16), c[16 * 16];
    struct nxr_sgemm_args g = gemm(16, 16, 16, a, b, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), NXR_EMIXED);
    cr_assert_eq(rec.calls, 0, "the provider never ran");
    cr_assert(strstr(nxr_last_error(), "2 domains") != NULL, "%s",
              nxr_last_error());
    struct nxr_route p;
    cr_assert_eq(nxr_runtime_route(rt, (struct nxr_mem_ref[]){{a, 1024}, {b, 1024}}, 2, &p),
                 NXR_EMIXED, "the resolver gives the same answer");
    cr_assert_eq(p.domains, 2);
    /* One domain plus host memory is not mixed. */
    static float host[16 * 16];
    g = gemm(16, 16, 16, a, host, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    cr_assert_eq(last().domain_id, 7);
    cr_assert_eq(rec.calls, 1);
    nxr_domain_free(a);
    nxr_domain_free(b);
}

Test(runtime_route, inputs_are_never_copied)
{
    open_runtime(NXR_ROUTE_DEFAULT);
    float *a = on(d7, 48 * 8), *b = on(d2, 8 * 8);
    float *c = on(d2, 48 * 8);
    float a0 = a[5], b0 = b[5];
    struct nxr_sgemm_args g = gemm(48, 8, 8, a, b, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    cr_assert_eq(last().domain_id, 7, "runs on 7 although B and C are on 2");
    cr_assert_eq(rec.a, a, "the provider got the caller's A");
    cr_assert_eq(rec.b, b, "the caller's B, read remotely");
    cr_assert_eq(rec.c, c, "and wrote the caller's C");
    cr_assert_eq(a[5], a0);
    cr_assert_eq(b[5], b0);
    nxr_domain_t *d;
    cr_assert_eq(nxr_mem_domain(rt, b, &d), 0);
    cr_assert_eq(d, d2, "B still belongs to 2");
    nxr_domain_free(a);
    nxr_domain_free(b);
    nxr_domain_free(c);
}

Test(runtime_route, outputs_allocated_for_the_inputs_land_where_the_call_runs)
{
    open_runtime(NXR_ROUTE_DEFAULT);
    float *a = on(d7, 40 * 40), *b = on(d2, 40 * 10);
    struct nxr_mem_ref in[2] = {{a, 40 * 40 * sizeof(float)}, {b, 40 * 10 * sizeof(float)}};
    float *c;
    cr_assert_eq(nxr_ctx_alloc_for(ctx, in, 2, 40 * 10 * sizeof(float), (void **)&c), 0);
    nxr_domain_t *owner;
    cr_assert_eq(nxr_mem_domain(rt, c, &owner), 0);
    cr_assert_eq(owner, d7, "C is allocated on 7");
    struct nxr_sgemm_args g = gemm(40, 10, 40, a, b, c);
    g.beta = 1; /* C counts as an input now: on 7, it only adds to 7 */
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    cr_assert_eq(last().domain_id, 7);
    cr_assert_eq(rec.c, c);
    cr_assert_eq(c[0], 1.0f, "the call wrote the output it was given");
    nxr_ctx_reset(ctx);
    nxr_domain_free(a);
    nxr_domain_free(b);
}

Test(runtime_route, c_counts_as_an_input_only_when_it_is_read)
{
    open_runtime(NXR_ROUTE_DEFAULT);
    /* A (40 x 40, 6400 bytes) on 7; B (40 x 10, 1600 bytes) and C (40 x 10
     * with ldc 100: 15640 bytes from its first element to its last) on 2. */
    float *a = on(d7, 40 * 40), *b = on(d2, 40 * 10), *c = on(d2, 40 * 100);
    struct nxr_sgemm_args g = gemm(40, 10, 40, a, b, c);
    g.ldc = 100;
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    cr_assert_eq(last().domain_id, 7, "beta 0: C is only written, A outweighs B");
    cr_assert_eq(last().counted_bytes, (40 * 40 + 40 * 10) * sizeof(float));
    g.beta = 1;
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    cr_assert_eq(last().domain_id, 2, "beta 1: C is read, and B + C outweigh A");
    cr_assert_eq(last().domain_bytes, (40 * 10 + 39 * 100 + 10) * sizeof(float));
    nxr_domain_free(a);
    nxr_domain_free(b);
    nxr_domain_free(c);
}

Test(runtime_route, a_context_on_a_domain_is_explicit_and_counts_nothing)
{
    open_runtime(NXR_ROUTE_DEFAULT);
    nxr_ctx_t *on2;
    cr_assert_eq(nxr_ctx_create(rt, 2, &on2), 0);
    float *a = on(d7, 64 * 64), *b = on(d7, 64 * 64), c[64 * 64];
    struct nxr_sgemm_args g = gemm(64, 64, 64, a, b, c);
    cr_assert_eq(nxr_sgemm(on2, &g), 0);
    cr_assert_eq(rec.domain, 2, "the context's domain, wherever the inputs are");
    struct nxr_route p;
    cr_assert_eq(nxr_ctx_last_route(on2, &p), 0);
    cr_assert_eq(p.reason, NXR_ROUTE_REASON_EXPLICIT);
    cr_assert_eq(p.domain_id, 2);
    cr_assert_eq(nxr_ctx_last_route(ctx, &p), -ENOENT, "the routing context placed nothing yet");
    nxr_ctx_destroy(on2);
    nxr_domain_free(a);
    nxr_domain_free(b);
}

/* The "placed" object of domain id in a describe JSON. */
static void expect_counts(const char *json, int id, int most, int tie, int dflt)
{
    char key[32], want[128];
    snprintf(key, sizeof(key), "{\"id\":%d,", id);
    const char *obj = strstr(json, key);
    cr_assert_not_null(obj, "%s in %s", key, json);
    const char *placed = strstr(obj, "\"placed\":");
    cr_assert_not_null(placed);
    snprintf(want, sizeof(want), "\"placed\":{\"most_bytes\":%d,\"tie\":%d,\"default\":%d}", most,
             tie, dflt);
    cr_assert_eq(strncmp(placed, want, strlen(want)), 0, "domain %d: %.80s, want %s", id, placed,
                 want);
}

Test(runtime_route, placements_and_refusals_are_counted_in_describe)
{
    open_runtime(NXR_ROUTE_SINGLE_DOMAIN);
    float *a = on(d7, 16 * 16), *b = on(d2, 16 * 16), c[16 * 16];
    static float host[16 * 16];
    struct nxr_sgemm_args g = gemm(16, 16, 16, a, host, c); /* 7, most bytes */
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    g = gemm(16, 16, 16, host, host, c); /* default: 2 */
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    g = gemm(16, 16, 16, a, b, c); /* refused */
    cr_assert_eq(nxr_sgemm(ctx, &g), NXR_EMIXED);
    char *json;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_JSON, &json), 0);
    expect_counts(json, 7, 2, 0, 0);
    expect_counts(json, 2, 0, 0, 1);
    cr_assert(strstr(json, "\"placement\":{\"policy\":\"single-domain\",\"default_domain\":2,"
                           "\"refused_mixed\":1}") != NULL,
              "%s", json);
    free(json);
    char *text;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_TEXT, &text), 0);
    cr_assert(strstr(text, "placed calls: most-bytes 2, tie 0, default 0") != NULL, "%s", text);
    cr_assert(strstr(text, "refused as mixed 1") != NULL, "%s", text);
    free(text);
    nxr_domain_free(a);
    nxr_domain_free(b);
}

Test(runtime_route, resolver_bad_arguments)
{
    open_runtime(NXR_ROUTE_DEFAULT);
    struct nxr_route p;
    cr_assert_eq(nxr_runtime_route(NULL, NULL, 0, &p), -EINVAL);
    cr_assert_eq(nxr_runtime_route(rt, NULL, 0, NULL), -EINVAL);
    cr_assert_eq(nxr_runtime_route(rt, NULL, 1, &p), -EINVAL);
    cr_assert_eq(nxr_runtime_route(rt, NULL, 0, &p), 0, "no inputs: the default");
    cr_assert_eq(p.domain_id, 2);
    cr_assert_eq(p.reason, NXR_ROUTE_REASON_DEFAULT);
}

/* ---- a synthetic two-node machine ------------------------------------------- */

Test(runtime_route, synthetic_two_nodes_place_by_the_inputs_node_domain)
{
    NXR_TEST_NEED_CPUS(2);
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, "synthetic:pack:2 numa:1(indexes=0,2) pu:1(indexes=%0,%1)",
                     NXR_TEST_TOPOLOGY | NXR_TEST_PARK);
    rt = fx.rt;
    cr_assert_eq(nxr_runtime_domain_count(rt), 2, "one domain per node: 0 and 2");
    cr_assert_eq(nxr_runtime_domain_of_node(rt, 0, &d2), 0);
    cr_assert_eq(nxr_runtime_domain_of_node(rt, 2, &d7), 0, "the sparse node id 2");
    cr_assert_eq(nxr_ctx_create(rt, NXR_DOMAIN_AUTO, &ctx), 0);
    /* Native GEMM, inputs mostly on node 2's domain. */
    const size_t m = 96, n = 64, k = 48;
    float *a = on(d7, m * k), *b = on(d2, k * n);
    struct nxr_mem_ref in[2] = {{a, m * k * sizeof(float)}, {b, k * n * sizeof(float)}};
    float *c;
    cr_assert_eq(nxr_ctx_alloc_for(ctx, in, 2, m * n * sizeof(float), (void **)&c), 0);
    nxr_domain_t *owner;
    cr_assert_eq(nxr_mem_domain(rt, c, &owner), 0);
    cr_assert_eq(owner, d7);
    struct nxr_sgemm_args g = gemm(m, n, k, a, b, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0, "%s", nxr_last_error());
    cr_assert_eq(last().domain_id, nxr_domain_id(d7));
    cr_assert_eq(last().reason, NXR_ROUTE_REASON_MOST_BYTES);
    for (size_t i = 0; i < m; i++) /* the product is right wherever it ran */
        for (size_t j = 0; j < n; j++) {
            float want = 0;
            for (size_t p = 0; p < k; p++)
                want += a[i * k + p] * b[p * n + j];
            cr_assert(fabsf(c[i * n + j] - want) <= 1e-3f * (1 + fabsf(want)), "C[%zu][%zu]", i, j);
        }
    if (nxr_domain_mem_binding(d7) == NXR_MEM_BOUND)
        cr_assert_eq(nxr_mem_node(c), 2, "on a machine with node 2, C is there");
    nxr_ctx_reset(ctx);
    nxr_domain_free(a);
    nxr_domain_free(b);
}

/* ---- two real nodes (the VM) ------------------------------------------------- */

Test(runtime_route, in_two_nodes_the_output_lives_on_the_chosen_domains_node)
{
    int nodes = numa_available() < 0 ? 0 : numa_max_node() + 1;
    if (nodes < 2) {
        cr_assert_null(getenv("NXR_TEST_NEED_NODE1"), "the VM has %d node(s)", nodes);
        cr_skip_test("needs two NUMA nodes (this machine has %d); run tools/vm_test.sh", nodes);
    }
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_PARK); /* one domain per node, native GEMM */
    rt = fx.rt;
    nxr_domain_t *n1;
    cr_assert_eq(nxr_runtime_domain_of_node(rt, 1, &n1), 0);
    cr_assert_eq(nxr_domain_mem_binding(n1), NXR_MEM_BOUND);
    cr_assert_eq(nxr_ctx_create(rt, NXR_DOMAIN_AUTO, &ctx), 0);
    const size_t m = 512, n = 512, k = 64;
    float *a = on(n1, m * k), *b = on(n1, k * n);
    struct nxr_mem_ref in[2] = {{a, m * k * sizeof(float)}, {b, k * n * sizeof(float)}};
    float *c;
    cr_assert_eq(nxr_ctx_alloc_for(ctx, in, 2, m * n * sizeof(float), (void **)&c), 0);
    struct nxr_sgemm_args g = gemm(m, n, k, a, b, c);
    cr_assert_eq(nxr_sgemm(ctx, &g), 0, "%s", nxr_last_error());
    cr_assert_eq(last().domain_id, nxr_domain_id(n1));
    size_t pages, on_1;
    cr_assert_eq(nxr_mem_pages_on_node(c, m * n * sizeof(float), 1, &pages, &on_1), 0, "%s",
                 nxr_last_error());
    cr_assert_eq(on_1, pages, "%zu of the output's %zu pages on node 1", on_1, pages);
    nxr_ctx_reset(ctx);
    nxr_domain_free(a);
    nxr_domain_free(b);
}
