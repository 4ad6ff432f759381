/*
 * A service to start from: one context per domain (per socket), a serving
 * thread bound to each, the weights replicated on each domain's node, small
 * requests as tasks on the domain's workers and big ones split over the
 * domain. Its model is one layer, softmax(x W); `nxr demo` (service/) is
 * the same shape with a real model, peers and measurements.
 * Run: bazel run //examples:service
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/nxr.h"
#include "service/queue.h"

#define IN       64
#define OUT      32
#define BIG_ROWS 8 /* requests with this many rows use the whole domain */

struct domain_service {
    const nxr_domain_t *domain;
    nxr_ctx_t *ctx; /* driven by this domain's serving thread only */
    float *weights; /* IN x OUT, on the domain's node */
    struct svc_queue queue;
    pthread_t thread;
};

/* One request computed with the domain's kernels: in place on one thread
 * inside a task, over the domain's team from the serving thread. */
static int compute(struct domain_service *s, struct svc_request *r)
{
    nxr_buffer_t *logits;
    int rc = nxr_buffer_acquire(s->domain, r->rows * OUT * sizeof(float), &logits);
    if (rc != 0)
        return rc;
    nxr_sgemm_args_t g = {
        .m = r->rows,
        .n = OUT,
        .k = IN,
        .alpha = 1,
        .a = r->input,
        .lda = IN,
        .b = s->weights,
        .ldb = OUT,
        .beta = 0,
        .c = nxr_buffer_data(logits),
        .ldc = OUT,
    };
    rc = nxr_sgemm(s->ctx, &g);
    if (rc == 0)
        rc = nxr_softmax(s->ctx, r->rows, OUT, g.c, OUT, r->output, OUT);
    nxr_buffer_release(logits);
    return rc;
}

/* A small request as a task: one worker computes it, kernels in place. */
static int small_task(void *arg, size_t index)
{
    struct svc_request *r = arg;
    (void)index;
    svc_request_complete(r, compute(r->path_data, r));
    return 0;
}

static void *serve(void *arg)
{
    struct domain_service *s = arg;
    /* Bound to the domain (verified): the work it runs itself (big
     * requests, as participant 0) stays on the domain's CPUs. */
    nxr_thread_binding_t *previous = NULL;
    if (nxr_ctx_bind(s->ctx, &previous) != 0)
        fprintf(stderr, "domain %d: serving thread not bound\n", nxr_domain_id(s->domain));
    for (struct svc_request *r; (r = svc_queue_take_all(&s->queue)) != NULL;) {
        for (struct svc_request *next; r != NULL; r = next) {
            next = r->next;
            if (r->rows >= BIG_ROWS) {
                svc_request_complete(r, compute(s, r)); /* big: INNER */
                continue;
            }
            r->path_data = s;
            int rc = nxr_submit(s->ctx, 1, small_task, r, NULL); /* small: one worker */
            if (rc != 0)
                svc_request_complete(r, rc);
        }
    }
    nxr_thread_binding_restore(previous);
    return NULL;
}

static int domain_start(struct domain_service *s, nxr_runtime_t *rt, size_t i)
{
    s->domain = nxr_runtime_domain_at(rt, i);
    svc_queue_init(&s->queue);
    /* The domain's replica of the weights: memory bound to its node. */
    int rc = nxr_domain_malloc(s->domain, IN * OUT * sizeof(float), 0, (void **)&s->weights);
    if (rc != 0)
        return rc;
    for (size_t k = 0; k < IN * OUT; k++)
        s->weights[k] = (float)((k * 7919) % 101) / 1000.0f - 0.05f;
    if ((rc = nxr_ctx_create(&s->ctx, rt, nxr_domain_id(s->domain))) == 0 &&
        (rc = -pthread_create(&s->thread, NULL, serve, s)) != 0) {
        nxr_ctx_destroy(s->ctx); /* a failed start leaves nothing behind */
        s->ctx = NULL;
    }
    if (rc != 0)
        nxr_domain_free(s->weights);
    return rc;
}

static void domain_stop(struct domain_service *s)
{
    svc_queue_close(&s->queue);
    pthread_join(s->thread, NULL);
    svc_queue_destroy(&s->queue);
    nxr_ctx_destroy(s->ctx);
    nxr_domain_free(s->weights);
}

int main(void)
{
    nxr_runtime_t *rt;
    int rc = nxr_runtime_create(&rt, NULL); /* one domain per NUMA node */
    if (rc != 0) {
        fprintf(stderr, "runtime: %s\n", nxr_strerror(rc));
        return 1;
    }
    size_t n = nxr_runtime_domain_count(rt);
    static float in[16 * IN], out[16 * OUT];
    for (size_t i = 0; i < 16 * IN; i++)
        in[i] = (float)(i % 13) / 13.0f;
    struct domain_service *ds = calloc(n, sizeof(*ds));
    rc = ds == NULL ? -ENOMEM : 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = domain_start(&ds[i], rt, i);
    /* A client: requests of 1..16 rows, round-robin over the domains. */
    struct svc_request r;
    svc_request_init(&r);
    double checksum = 0;
    for (size_t k = 0; k < 32 && rc == 0; k++) {
        svc_request_arm(&r);
        r.rows = 1 + k % 16;
        r.input = in;
        r.output = out;
        svc_queue_push(&ds[k % n].queue, &r);
        rc = svc_request_wait(&r);
        for (size_t j = 0; j < r.rows * OUT; j++)
            checksum += out[j];
    }
    svc_request_destroy(&r);
    for (size_t i = 0; ds != NULL && i < n; i++)
        if (ds[i].ctx != NULL)
            domain_stop(&ds[i]);
    free(ds);
    nxr_runtime_destroy(rt);
    if (rc != 0) {
        fprintf(stderr, "service: %s\n", nxr_strerror(rc));
        return 1;
    }
    /* Every row is a probability distribution: the rows sum to 1 each. */
    printf("served 32 requests on %zu domain(s); probabilities sum to %.4f (rows: 272)\n", n,
           checksum);
    return checksum > 271.99 && checksum < 272.01 ? 0 : 1;
}
