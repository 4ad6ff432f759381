/*
 * Request batching in the serving path (service/server.h), made
 * deterministic without a clock: the GEMM provider is a gate around nxr's
 * native one that holds the first call it sees until the test releases
 * it, so the test knows the domain is busy while it queues more requests,
 * and that fails every call of chosen row counts (a request of 7 rows, a
 * pass of 13). On a one-CPU domain (budget 1):
 *   - the first request reaches its kernel while it is alone: it was not
 *     held back waiting for company (else the test would wait forever for
 *     the gate and time out);
 *   - the requests that queued behind it run as one pass, as many as fit
 *     in max_batch rows, the next one in a pass of its own; each is
 *     answered exactly once with the bits it gets computed alone on the
 *     test's thread;
 *   - a request that fails inside a batch fails alone: the batch's pass
 *     fails, each member runs again by itself, the others get their
 *     outputs and only the failing one its error;
 *   - with max_batch 1 nothing is batched (the path as before batching);
 *   - one closed-loop client: every pass is a pass of one request.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The native provider's table and self: white-box, so that the gate
 * computes exactly what the native provider would. */
#include "kernels/internal/provider.h"
#include "service/load.h"
#include "service/server.h"
#include "service/stream.h"
#include "tests/support/cpus.h"
#include "tests/support/runtime.h"

#define SEED 11
#define GATE_ERROR (-EIO)

/* ---- the gate: a GEMM provider around the native one ------------------- */

struct gate {
    nxr_provider_t *native, *provider;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool hold;     /* the next call waits for `released` */
    bool held;     /* a call is waiting */
    bool released;
    size_t fail_m[2]; /* calls with these m fail (0: none) */
};

static size_t gate_scratch(void *self, const struct nxr_sgemm_args *args)
{
    struct gate *g = self;
    const struct nxr_gemm_ops *ops = g->native->gemm;
    return ops->sgemm_scratch != NULL ? ops->sgemm_scratch(g->native->self, args) : 0;
}

static int gate_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *args)
{
    struct gate *g = self;
    pthread_mutex_lock(&g->lock);
    if (g->hold) {
        g->hold = false;
        g->held = true;
        pthread_cond_broadcast(&g->cond);
        /* Bounded by the test, which releases once it queued its requests
         * (and by the test's timeout). */
        while (!g->released)
            pthread_cond_wait(&g->cond, &g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    if (args->m == g->fail_m[0] || args->m == g->fail_m[1])
        return GATE_ERROR;
    return g->native->gemm->sgemm(g->native->self, call, args);
}

static const struct nxr_gemm_ops gate_ops = {.sgemm_scratch = gate_scratch, .sgemm = gate_sgemm};

static void gate_create(struct gate *g, size_t fail_a, size_t fail_b)
{
    memset(g, 0, sizeof(*g));
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->hold = true;
    g->fail_m[0] = fail_a;
    g->fail_m[1] = fail_b;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_GEMM, &g->native), 0);
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "test-gate-gemm";
    d.family = NXR_FAMILY_GEMM;
    d.count = NXR_COUNT_PER_CALL_BOUND;
    d.runs_on = NXR_RUNS_ON_ENGINE_WORKERS;
    d.gemm = &gate_ops;
    d.self = g;
    cr_assert_eq(nxr_provider_create(&d, &g->provider), 0);
}

static void gate_wait_held(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    while (!g->held) /* bounded: the first request's first GEMM call (and the timeout) */
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void gate_release(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->released = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void gate_destroy(struct gate *g)
{
    nxr_provider_destroy(g->provider);
    nxr_provider_destroy(g->native);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
}

/* ---- the model and its requests --------------------------------------- */

static struct svc_model_shape shape;
static float *weights;

static void model_make(void)
{
    shape = svc_model_shape_make(32, 2, 24);
    weights = malloc(svc_model_floats(&shape) * sizeof(float));
    svc_model_fill(&shape, SEED, weights);
}

struct req {
    struct svc_request r;
    float *in, *out, *want;
};

/* Inputs for rows[i], and each one's output computed alone on this thread
 * through a context of a clean runtime (the native provider). */
static void reqs_make(struct req *q, const size_t *rows, size_t n)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_CTX);
    nxr_runtime_t *rt = fx.rt;
    nxr_ctx_t *ctx = fx.ctx;
    for (size_t i = 0; i < n; i++) {
        q[i].in = malloc(rows[i] * shape.hidden * sizeof(float));
        q[i].out = malloc(rows[i] * shape.vocab * sizeof(float));
        q[i].want = malloc(rows[i] * shape.vocab * sizeof(float));
        memset(q[i].out, 0xff, rows[i] * shape.vocab * sizeof(float)); /* NaN: unwritten */
        svc_model_input(&shape, SEED, i, rows[i], q[i].in);
        float *scratch = malloc(svc_model_scratch_floats(&shape, rows[i]) * sizeof(float));
        cr_assert_eq(svc_model_forward(&svc_ops_nxr, ctx, &shape, weights, rows[i], q[i].in,
                                       q[i].want, scratch),
                     0);
        free(scratch);
        svc_request_init(&q[i].r);
        q[i].r.index = i;
        q[i].r.rows = rows[i];
        q[i].r.input = q[i].in;
        q[i].r.output = q[i].out;
    }
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}

static void reqs_free(struct req *q, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        svc_request_destroy(&q[i].r);
        free(q[i].in);
        free(q[i].out);
        free(q[i].want);
    }
}

static atomic_int retries, retry_status;

static void count_retry(void *arg, int status)
{
    (void)arg;
    atomic_fetch_add(&retries, 1);
    atomic_store(&retry_status, status);
}

/* A one-CPU domain on the gate, serving with max_batch. */
static void serve_start(struct gate *g, size_t max_batch, nxr_runtime_t **rt,
                        struct svc_server **srv)
{
    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, "0:%0", 0);
    fx.opts.providers[NXR_FAMILY_GEMM] = g->provider;
    NXR_TEST_RUNTIME_OPEN(&fx);
    *rt = fx.rt;
    struct svc_slot_decl slot = {.domain_id = 0, .weights = weights};
    struct svc_server_opts so = {.shape = shape, .split_rows = 1, .max_batch = max_batch,
                                 .on_retry = count_retry};
    char err[256] = "";
    atomic_store(&retries, 0);
    atomic_store(&retry_status, 0);
    cr_assert_eq(svc_server_start(srv, *rt, &slot, 1, &so, err, sizeof(err)), 0, "%s", err);
}

/*
 * A (3 rows) is taken alone and held in its first GEMM call; B, C, D, E
 * (5, 1, 7, 9 rows) queue behind it; then the gate opens. Returns the
 * slot's counters after every request was answered.
 */
static const size_t held_rows[] = {3, 5, 1, 7, 9};
#define HELD (sizeof(held_rows) / sizeof(held_rows[0]))

static struct svc_slot_stats run_held(struct req *q, size_t max_batch, size_t fail_a,
                                      size_t fail_b)
{
    struct gate g;
    gate_create(&g, fail_a, fail_b);
    nxr_runtime_t *rt;
    struct svc_server *srv;
    serve_start(&g, max_batch, &rt, &srv);
    reqs_make(q, held_rows, HELD);
    cr_assert_eq(svc_server_submit(srv, &q[0].r), 0);
    /* A is in its kernel with nothing else queued: nobody held it back. */
    gate_wait_held(&g);
    for (size_t i = 1; i < HELD; i++)
        cr_assert_eq(svc_server_submit(srv, &q[i].r), 0);
    gate_release(&g);
    for (size_t i = 0; i < HELD; i++)
        svc_request_wait(&q[i].r);
    struct svc_slot_stats st;
    svc_server_slot_stats(srv, 0, &st, NULL);
    svc_server_stop(srv);
    nxr_runtime_destroy(rt);
    gate_destroy(&g);
    for (size_t i = 0; i < HELD; i++)
        cr_expect_eq(q[i].r.answers, 1, "request %zu answered %u times", i, q[i].r.answers);
    return st;
}

static bool same_bits(const struct req *q)
{
    return memcmp(q->out, q->want, q->r.rows * shape.vocab * sizeof(float)) == 0;
}

Test(service_batching, requests_waiting_together_share_one_pass, .timeout = 60)
{
    model_make();
    struct req q[HELD];
    /* B + C + D = 13 rows fit in 16; E's 9 more do not. */
    struct svc_slot_stats st = run_held(q, 16, 0, 0);
    for (size_t i = 0; i < HELD; i++) {
        cr_expect_eq(q[i].r.status, 0, "request %zu: %s", i, q[i].r.error);
        cr_expect(same_bits(&q[i]), "request %zu: not the bits it gets alone", i);
    }
    cr_expect_eq(q[0].r.batch, 1);
    for (size_t i = 1; i <= 3; i++)
        cr_expect_eq(q[i].r.batch, 3, "request %zu ran in a pass of %u", i, q[i].r.batch);
    cr_expect_eq(q[4].r.batch, 1, "E ran in a pass of %u", q[4].r.batch);
    cr_expect_eq(st.served, HELD);
    cr_expect_eq(st.passes, 3, "%llu passes", (unsigned long long)st.passes);
    cr_expect_eq(st.pass_sizes[1], 2);
    cr_expect_eq(st.pass_sizes[3], 1);
    cr_expect_eq(st.batched, 3);
    cr_expect_eq(st.retried, 0);
    cr_expect_eq(st.errors, 0);
    cr_expect_eq(atomic_load(&retries), 0);
    reqs_free(q, HELD);
    free(weights);
}

Test(service_batching, a_failing_request_fails_alone, .timeout = 60)
{
    model_make();
    struct req q[HELD];
    /* GEMMs of 7 rows (D alone) and of 13 (the pass of B, C and D) fail. */
    struct svc_slot_stats st = run_held(q, 16, 7, 13);
    for (size_t i = 0; i < HELD; i++) {
        if (i == 3)
            continue;
        cr_expect_eq(q[i].r.status, 0, "request %zu: %s", i, q[i].r.error);
        cr_expect(same_bits(&q[i]), "request %zu: not the bits it gets alone", i);
        cr_expect_eq(q[i].r.batch, 1, "request %zu ran in a pass of %u", i, q[i].r.batch);
    }
    cr_expect_eq(q[3].r.status, GATE_ERROR, "D: %d (%s)", q[3].r.status, q[3].r.error);
    cr_expect(strstr(q[3].r.error, "nxr_sgemm") != NULL, "D was told \"%s\"", q[3].r.error);
    cr_expect_eq(atomic_load(&retries), 1);
    cr_expect_eq(atomic_load(&retry_status), GATE_ERROR);
    cr_expect_eq(st.retried, 1);
    cr_expect_eq(st.errors, 1);
    cr_expect_eq(st.batched, 0);
    /* A; the failed pass of three; B, C and D again alone; E. */
    cr_expect_eq(st.passes, 6, "%llu passes", (unsigned long long)st.passes);
    cr_expect_eq(st.pass_sizes[1], 5);
    cr_expect_eq(st.pass_sizes[3], 1);
    reqs_free(q, HELD);
    free(weights);
}

Test(service_batching, max_batch_one_runs_every_request_alone, .timeout = 60)
{
    model_make();
    struct req q[HELD];
    struct svc_slot_stats st = run_held(q, 1, 0, 0);
    for (size_t i = 0; i < HELD; i++) {
        cr_expect_eq(q[i].r.status, 0, "request %zu: %s", i, q[i].r.error);
        cr_expect(same_bits(&q[i]), "request %zu differs", i);
        cr_expect_eq(q[i].r.batch, 1);
    }
    cr_expect_eq(st.passes, HELD);
    cr_expect_eq(st.pass_sizes[1], HELD);
    cr_expect_eq(st.batched, 0);
    reqs_free(q, HELD);
    free(weights);
}

Test(service_batching, a_lone_client_is_served_one_request_per_pass, .timeout = 60)
{
    model_make();
    struct svc_stream stream = {.shape = shape, .seed = SEED, .batch_min = 1, .batch_max = 12};
    struct svc_round round;
    cr_assert_eq(svc_round_make(&round, &stream, 0, 40), 0);
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, 0);
    nxr_runtime_t *rt = fx.rt;
    const size_t n = nxr_runtime_domain_count(rt);
    struct svc_slot_decl slots[8];
    cr_assert_leq(n, 8);
    for (size_t i = 0; i < n; i++)
        slots[i] = (struct svc_slot_decl){
            .domain_id = nxr_domain_id(nxr_runtime_domain_at(rt, i)), .weights = weights};
    struct svc_server_opts so = {.shape = shape, .split_rows = 1, .max_batch = 64};
    struct svc_server *srv;
    char err[256] = "";
    cr_assert_eq(svc_server_start(&srv, rt, slots, n, &so, err, sizeof(err)), 0, "%s", err);
    float *out = malloc(round.total_rows * shape.vocab * sizeof(float));
    double *lat = calloc(round.count, sizeof(double));
    int *slot = calloc(round.count, sizeof(int));
    struct svc_load_result lr = {.latency_ms = lat, .slot = slot};
    cr_assert_eq(svc_load_run(&round, &shape, 1, svc_server_submit, srv, out, 0, &lr), 0);
    uint64_t passes = 0, alone = 0, batched = 0, served = 0;
    for (size_t i = 0; i < n; i++) {
        struct svc_slot_stats st;
        svc_server_slot_stats(srv, i, &st, NULL);
        passes += st.passes;
        alone += st.pass_sizes[1];
        batched += st.batched;
        served += st.served;
    }
    cr_expect_eq(served, round.count);
    cr_expect_eq(passes, round.count, "%llu passes for %zu requests",
                 (unsigned long long)passes, round.count);
    cr_expect_eq(alone, round.count);
    cr_expect_eq(batched, 0);
    svc_server_stop(srv);
    nxr_runtime_destroy(rt);
    free(out);
    free(lat);
    free(slot);
    svc_round_free(&round);
    free(weights);
}
