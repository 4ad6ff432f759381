/*
 * A service to start from: one context per domain (per socket), a serving
 * thread bound to each, the weights replicated on each domain's node, small
 * requests as tasks on the domain's workers and big ones split over the
 * domain. Its model is one layer, softmax(x W); `nxr demo` (service/) is
 * the same shape with a real model, peers and measurements.
 * Run: bazel run //examples:service
 * Outside the tree: cc service.c $(pkg-config --cflags --libs nxr) -pthread
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* nxr's headers use cpu_set_t */
#endif
#include <nxr/nxr.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define IN       64
#define OUT      32
#define BIG_ROWS 8 /* requests with this many rows use the whole domain */

/* ---- the service's own plumbing (nxr has none of it): a request a client
 * waits for, and a queue of them per domain. -------------------------------- */
struct request {
    size_t rows;
    const float *input;   /* rows x IN */
    float *output;        /* rows x OUT */
    void *path_data;      /* the domain serving it */
    struct request *next; /* the queue's */
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;
    int rc;
};

static void request_complete(struct request *r, int rc)
{
    pthread_mutex_lock(&r->lock);
    r->rc = rc;
    r->done = true;
    pthread_cond_signal(&r->done_cond);
    pthread_mutex_unlock(&r->lock);
}

/* Bounded by the serving thread: every queued request is completed, by its
 * computation or with an error (serve() below). */
static int request_wait(struct request *r)
{
    pthread_mutex_lock(&r->lock);
    while (!r->done)
        pthread_cond_wait(&r->done_cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
    return r->rc;
}

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t nonempty;
    struct request *head, *tail;
    bool closed;
};

static void queue_push(struct queue *q, struct request *r)
{
    r->next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail != NULL)
        q->tail->next = r;
    else
        q->head = r;
    q->tail = r;
    pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}

/* Every waiting request, oldest first; NULL once the queue is closed and
 * empty. Bounded by queue_close, which domain_stop calls. */
static struct request *queue_take_all(struct queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->head == NULL && !q->closed)
        pthread_cond_wait(&q->nonempty, &q->lock);
    struct request *all = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    return all;
}

static void queue_close(struct queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = true;
    pthread_cond_broadcast(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}

/* ---- the service on nxr ---------------------------------------------------- */
struct domain_service {
    nxr_domain_t *domain;
    nxr_ctx_t *ctx; /* driven by this domain's serving thread only */
    float *weights; /* IN x OUT, on the domain's node */
    struct queue queue;
    pthread_t thread;
};

/* One request computed with the domain's kernels: in place on one thread
 * inside a task, over the domain's team from the serving thread. */
static int compute(struct domain_service *s, struct request *r)
{
    nxr_buffer_t *logits;
    int rc = nxr_buffer_acquire(s->domain, r->rows * OUT * sizeof(float), &logits);
    if (rc != 0)
        return rc;
    struct nxr_sgemm_args g = {
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
    struct request *r = arg;
    (void)index;
    request_complete(r, compute(r->path_data, r));
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
    for (struct request *r; (r = queue_take_all(&s->queue)) != NULL;) {
        for (struct request *next; r != NULL; r = next) {
            next = r->next;
            if (r->rows >= BIG_ROWS) {
                request_complete(r, compute(s, r)); /* big: INNER */
                continue;
            }
            r->path_data = s;
            int rc = nxr_submit(s->ctx, 1, small_task, r, NULL); /* small: one worker */
            if (rc != 0)
                request_complete(r, rc);
        }
    }
    nxr_thread_binding_restore(previous);
    return NULL;
}

static int domain_start(struct domain_service *s, nxr_runtime_t *rt, size_t i)
{
    s->domain = nxr_runtime_domain_at(rt, i);
    s->queue = (struct queue){.head = NULL};
    pthread_mutex_init(&s->queue.lock, NULL);
    pthread_cond_init(&s->queue.nonempty, NULL);
    /* The domain's replica of the weights: memory bound to its node. */
    int rc = nxr_domain_malloc(s->domain, IN * OUT * sizeof(float), 0, (void **)&s->weights);
    if (rc != 0)
        return rc;
    for (size_t k = 0; k < IN * OUT; k++)
        s->weights[k] = (float)((k * 7919) % 101) / 1000.0f - 0.05f;
    if ((rc = nxr_ctx_create(rt, nxr_domain_id(s->domain), &s->ctx)) == 0 &&
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
    queue_close(&s->queue);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->queue.nonempty);
    pthread_mutex_destroy(&s->queue.lock);
    nxr_ctx_destroy(s->ctx);
    nxr_domain_free(s->weights);
}

int main(void)
{
    nxr_runtime_t *rt;
    int rc = nxr_runtime_create(NULL, &rt); /* one domain per NUMA node */
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
    struct request r = {.rows = 0};
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.done_cond, NULL);
    double checksum = 0;
    for (size_t k = 0; k < 32 && rc == 0; k++) {
        r.done = false;
        r.rows = 1 + k % 16;
        r.input = in;
        r.output = out;
        queue_push(&ds[k % n].queue, &r);
        rc = request_wait(&r);
        for (size_t j = 0; j < r.rows * OUT; j++)
            checksum += out[j];
    }
    pthread_cond_destroy(&r.done_cond);
    pthread_mutex_destroy(&r.lock);
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
