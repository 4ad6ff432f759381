/* The nxr serving path (see server.h). */
#include "service/server.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/queue.h"

#define CPU_WORDS 16 /* CPUs 0..1023 recorded */

struct slot {
    struct svc_server *server;
    size_t index;
    nxr_ctx_t *ctx;
    nxr_domain_t *domain, *memory;
    nxr_ctx_t *home; /* a context on `memory`, for binding the serving thread */
    const float *weights;
    const nxr_weights_t *const *packed;
    struct svc_queue queue;
    /* Workers free to take a batch as a task: at most `budget` tasks are
     * out at once, so a batch that will split waits for at most one task
     * per worker, then has the whole domain. Under the queue's lock. */
    unsigned credits, budget;
    pthread_t thread;
    bool started;
    /* Rows routed here and not completed: the router's load signal.
     * Relaxed everywhere: a heuristic, stale values only skew routing. */
    _Alignas(64) atomic_size_t outstanding;
    /* Counters (relaxed: read after the run, or as statistics). */
    atomic_ullong served, split, errors, passes, batched, retried;
    atomic_ullong pass_sizes[SVC_PASS_SIZES];
    _Atomic uint64_t cpu_bits[CPU_WORDS];
};

struct svc_server {
    struct svc_server_opts opts;
    size_t scratch_rows_max;
    size_t n;
    /* Start handshake: each serving thread reports its binding once. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    size_t reported;
    int start_status;
    atomic_size_t turn; /* the router's round-robin start */
    struct slot slots[];
};

static void record_cpu(struct slot *s, struct svc_request *r)
{
    int cpu = sched_getcpu();
    r->cpu = cpu;
    if (cpu >= 0 && cpu < CPU_WORDS * 64)
        atomic_fetch_or_explicit(&s->cpu_bits[cpu / 64], UINT64_C(1) << (cpu % 64),
                                 memory_order_relaxed);
}

static void count_pass(struct slot *s, size_t requests)
{
    atomic_fetch_add_explicit(&s->passes, 1, memory_order_relaxed);
    size_t k = requests < SVC_PASS_SIZES - 1 ? requests : SVC_PASS_SIZES - 1;
    atomic_fetch_add_explicit(&s->pass_sizes[k], 1, memory_order_relaxed);
}

/* What this thread's last failed nxr call said (nxr_last_error: the call,
 * the argument or the domain), or the status's name when it said nothing. */
static const char *failed_call(int rc)
{
    const char *why = nxr_last_error();
    return why[0] != '\0' ? why : nxr_strerror(rc);
}

/* Computes r alone on slot s from the calling thread: in place inside a
 * task body, split over the domain from the serving thread. */
static int compute(struct slot *s, struct svc_request *r)
{
    record_cpu(s, r);
    count_pass(s, 1);
    r->batch = 1;
    const struct svc_model_shape *shape = &s->server->opts.shape;
    const size_t bytes = svc_model_scratch_floats(shape, r->rows) * sizeof(float);
    nxr_buffer_t *scratch;
    int rc = nxr_buffer_acquire(s->memory, bytes, &scratch);
    if (rc != 0) {
        svc_request_set_error(r, "scratch (%zu bytes) from domain %d's pool: %s", bytes,
                              nxr_domain_id(s->memory), nxr_strerror(rc));
        return rc;
    }
    rc = svc_model_forward_with(&svc_ops_nxr, s->ctx, shape, s->weights, s->packed, r->rows,
                                r->input, r->output, nxr_buffer_data(scratch));
    nxr_buffer_release(scratch);
    if (rc != 0)
        svc_request_set_error(r, "model on domain %d: %s", nxr_domain_id(s->domain),
                              failed_call(rc));
    return rc;
}

/* One forward pass over the `rows` rows of the batch `first`: the inputs
 * gathered into one block of the scratch, the outputs scattered back to
 * each request. Sets no request's error: a failed pass is retried. */
static int pass(struct slot *s, struct svc_request *first, size_t rows)
{
    const struct svc_model_shape *shape = &s->server->opts.shape;
    const size_t model = svc_model_scratch_floats(shape, rows);
    const size_t bytes = (model + rows * (shape->hidden + shape->vocab)) * sizeof(float);
    nxr_buffer_t *scratch;
    int rc = nxr_buffer_acquire(s->memory, bytes, &scratch);
    if (rc != 0)
        return rc;
    float *work = nxr_buffer_data(scratch), *in = work + model, *out = in + rows * shape->hidden;
    size_t at = 0;
    for (const struct svc_request *r = first; r != NULL; at += r->rows, r = r->next)
        memcpy(in + at * shape->hidden, r->input, r->rows * shape->hidden * sizeof(float));
    rc = svc_model_forward_with(&svc_ops_nxr, s->ctx, shape, s->weights, s->packed, rows, in, out,
                                work);
    at = 0;
    for (struct svc_request *r = first; rc == 0 && r != NULL; at += r->rows, r = r->next)
        memcpy(r->output, out + at * shape->vocab, r->rows * shape->vocab * sizeof(float));
    nxr_buffer_release(scratch);
    return rc;
}

static void report_retry(struct slot *s, int status)
{
    atomic_fetch_add_explicit(&s->retried, 1, memory_order_relaxed);
    if (s->server->opts.on_retry != NULL)
        s->server->opts.on_retry(s->server->opts.on_retry_arg, status);
}

/* Computes every request of the batch `first`, leaving each one's outcome
 * in its status (and error) for finish_batch: one pass for the batch, or,
 * when that fails, one per request, so that a request that fails fails
 * alone and its neighbours get the output they would have got alone (the
 * native kernels compute each row of a GEMM the same way whatever rows
 * surround it, so a batched request's bits are its bits alone). */
static void run_batch(struct slot *s, struct svc_request *first)
{
    if (first->next == NULL) {
        first->status = compute(s, first);
        return;
    }
    size_t n = 0, rows = 0;
    for (struct svc_request *r = first; r != NULL; r = r->next) {
        record_cpu(s, r);
        n++;
        rows += r->rows;
    }
    count_pass(s, n);
    int rc = pass(s, first, rows);
    if (rc == 0) {
        atomic_fetch_add_explicit(&s->batched, n, memory_order_relaxed);
        for (struct svc_request *r = first; r != NULL; r = r->next) {
            r->status = 0;
            r->batch = (unsigned)n;
        }
        return;
    }
    report_retry(s, rc);
    for (struct svc_request *r = first; r != NULL; r = r->next)
        r->status = compute(s, r);
}

/* Answers r: every request a slot took ends here, exactly once. */
static void finish(struct slot *s, struct svc_request *r, int rc)
{
    atomic_fetch_add_explicit(&s->served, 1, memory_order_relaxed);
    if (r->split)
        atomic_fetch_add_explicit(&s->split, 1, memory_order_relaxed);
    if (rc != 0)
        atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->outstanding, r->rows, memory_order_relaxed);
    svc_request_complete(r, rc);
}

/* Answers every request of a batch run_batch computed. The link is read
 * before the answer: once answered, a request is its client's again. */
static void finish_batch(struct slot *s, struct svc_request *first)
{
    for (struct svc_request *r = first, *next; r != NULL; r = next) {
        next = r->next;
        finish(s, r, r->status);
    }
}

/* Rows of the queued batch from `first` up to (not including) `end`. */
static size_t rows_until(const struct svc_request *first, const struct svc_request *end)
{
    size_t rows = 0;
    for (const struct svc_request *r = first; r != end; r = r->next)
        rows += r->rows;
    return rows;
}

/* A batch takes the whole domain only when nothing else could use a
 * worker: every worker free and no other request waiting. With other work
 * around, batch-level parallelism beats splitting one batch (a split is a
 * fork-join per kernel, and it must wait for every worker). Big enough to
 * split: split_rows (the demo's default 1 lets any batch). */
static bool split_now(const struct slot *s, const struct svc_request *first,
                      const struct svc_request *behind, unsigned free)
{
    const size_t split_rows = s->server->opts.split_rows;
    return split_rows > 0 && free == s->budget && behind == NULL &&
           rows_until(first, behind) >= split_rows;
}

/* Admission (under the queue's lock): the batch runs split (see split_now,
 * marked in first->split, no credit taken: the serving thread runs it), or
 * as a task on a worker's credit, or waits for a credit. */
static bool admit(void *arg, const struct svc_request *first, const struct svc_request *behind)
{
    struct slot *s = arg;
    if (split_now(s, first, behind, s->credits)) {
        ((struct svc_request *)first)->split = true;
        return true;
    }
    if (s->credits == 0)
        return false;
    s->credits--;
    return true;
}

/* Further batches for the same hand-off: any that has a credit. */
static bool admit_task(void *arg, const struct svc_request *first, const struct svc_request *behind)
{
    struct slot *s = arg;
    (void)first;
    (void)behind;
    if (s->credits == 0)
        return false;
    s->credits--;
    return true;
}

static bool credit_back(struct svc_queue *q, void *arg)
{
    (void)q;
    struct slot *s = arg;
    s->credits++;
    return true; /* the serving thread may admit something now */
}

/* A worker that finished a batch keeps its credit and takes the next one
 * itself: no hand-off through the serving thread, no worker going to
 * sleep and waking again. Otherwise (nothing queued, or the next batch
 * should take the whole domain once this worker is free) it gives the
 * credit back. Under the queue's lock. */
struct next {
    struct slot *slot;
    struct svc_request *first;
};

static bool next_or_release(struct svc_queue *q, void *arg)
{
    struct next *n = arg;
    const size_t max = n->slot->server->opts.max_batch;
    if (q->head != NULL &&
        !split_now(n->slot, q->head, svc_batch_end(q->head, max), n->slot->credits + 1)) {
        n->first = svc_queue_pop_batch_locked(q, max);
        return false;
    }
    n->first = NULL;
    n->slot->credits++;
    return q->head != NULL; /* the serving thread may split it now */
}

/* Batches handed to the domain's workers together: one job, one task per
 * batch. The task that finishes last frees the hand-off. */
struct handoff {
    struct slot *slot;
    atomic_size_t left;
    size_t n;
    struct svc_request *batches[];
};

/* A batch, as a task on one of the domain's workers. */
static int batch_task(void *arg, size_t index)
{
    struct handoff *h = arg;
    struct slot *s = h->slot;
    struct svc_request *first = h->batches[index];
    while (first != NULL) {
        run_batch(s, first);
        /* The next batch (or the credit back) before the answers: once
         * every client has its answer the server may stop, and nothing may
         * touch the slot after. */
        struct next n = {.slot = s};
        svc_queue_update(&s->queue, next_or_release, &n);
        finish_batch(s, first);
        first = n.first;
    }
    /* acq_rel: the freeing task sees the others' last reads of h. */
    if (atomic_fetch_sub_explicit(&h->left, 1, memory_order_acq_rel) == 1)
        free(h);
    return 0; /* each request carries its own status; the job has none */
}

/* Submits h's batches as one job. On failure each credit comes back; a
 * batch of one request is answered with the error, a batch of several
 * goes back to the front of the queue, its requests marked to run alone
 * (in order: the serving thread takes them next, each its own hand-off),
 * so that each one's answer is its own. */
static void flush(struct slot *s, struct handoff *h)
{
    atomic_init(&h->left, h->n);
    int rc = nxr_submit(s->ctx, h->n, batch_task, h, NULL);
    if (rc == 0)
        return;
    struct svc_request *again = NULL, **tail = &again;
    for (size_t i = 0; i < h->n; i++) {
        struct svc_request *first = h->batches[i];
        svc_queue_update(&s->queue, credit_back, s);
        if (first->next == NULL) {
            svc_request_set_error(first, "handing %zu batch(es) to domain %d: %s", h->n,
                                  nxr_domain_id(s->domain), failed_call(rc));
            finish(s, first, rc);
            continue;
        }
        report_retry(s, rc);
        *tail = first;
        for (struct svc_request *r = first; r != NULL; r = r->next) {
            r->alone = true;
            tail = &r->next;
        }
    }
    svc_queue_requeue(&s->queue, again);
    free(h);
}

static void report_start(struct svc_server *srv, int status)
{
    pthread_mutex_lock(&srv->lock);
    if (status != 0 && srv->start_status == 0)
        srv->start_status = status;
    srv->reported++;
    pthread_cond_signal(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
}

static void *serving_thread(void *p)
{
    struct slot *s = p;
    char name[16];
    snprintf(name, sizeof(name), "svc-d%d", nxr_domain_id(s->domain));
    pthread_setname_np(pthread_self(), name);
    nxr_thread_binding_t *previous;
    int rc = nxr_ctx_bind(s->home, &previous);
    report_start(s->server, rc);
    if (rc != 0)
        return NULL;
    const size_t max = s->server->opts.max_batch;
    struct svc_request *r;
    while ((r = svc_queue_take_batch_if(&s->queue, max, admit, s, true)) != NULL) {
        if (r->split) {
            /* Every worker is free and nothing else waits: the batch's
             * kernels split over the whole domain, this thread taking part. */
            for (struct svc_request *m = r->next; m != NULL; m = m->next)
                m->split = true;
            run_batch(s, r);
            finish_batch(s, r);
            continue;
        }
        /* A task: with it, every batch that can go now, as one job (an
         * executor that runs a job before submit returns, like the OpenMP
         * adapter, still runs them side by side). */
        struct handoff *h = malloc(sizeof(*h) + s->budget * sizeof(h->batches[0]));
        if (h == NULL) {
            svc_queue_update(&s->queue, credit_back, s);
            for (struct svc_request *m = r; m != NULL; m = m->next)
                svc_request_set_error(m, "out of memory for a hand-off to domain %d",
                                      nxr_domain_id(s->domain));
            for (struct svc_request *m = r, *next; m != NULL; m = next) {
                next = m->next;
                finish(s, m, -ENOMEM);
            }
            continue;
        }
        h->slot = s;
        h->n = 0;
        h->batches[h->n++] = r;
        while (h->n < s->budget &&
               (r = svc_queue_take_batch_if(&s->queue, max, admit_task, s, false)) != NULL)
            h->batches[h->n++] = r;
        flush(s, h);
    }
    nxr_thread_binding_restore(previous);
    return NULL;
}

static void stop_slots(struct svc_server *srv, size_t n)
{
    for (size_t i = 0; i < n; i++)
        svc_queue_close(&srv->slots[i].queue);
    for (size_t i = 0; i < n; i++) {
        struct slot *s = &srv->slots[i];
        if (s->started)
            pthread_join(s->thread, NULL);
        svc_queue_destroy(&s->queue);
        nxr_ctx_destroy(s->ctx);
        nxr_ctx_destroy(s->home);
    }
    pthread_cond_destroy(&srv->cond);
    pthread_mutex_destroy(&srv->lock);
    free(srv);
}

int svc_server_start(struct svc_server **out, nxr_runtime_t *rt, const struct svc_slot_decl *slots,
                     size_t n, const struct svc_server_opts *opts, char *err, size_t errsz)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (rt == NULL || slots == NULL || n == 0 || opts == NULL)
        return -EINVAL;
    /* aligned_alloc: struct slot keeps its hot counters on their own cache
     * line (_Alignas(64)), which calloc's 16-byte alignment would break. */
    size_t bytes = (sizeof(struct svc_server) + n * sizeof(struct slot) + 63) / 64 * 64;
    struct svc_server *srv = aligned_alloc(64, bytes);
    if (srv != NULL)
        memset(srv, 0, bytes);
    if (srv == NULL)
        return -ENOMEM;
    srv->opts = *opts;
    pthread_mutex_init(&srv->lock, NULL);
    pthread_cond_init(&srv->cond, NULL);
    int rc = 0;
    size_t made = 0, started = 0;
    for (; made < n && rc == 0; made++) {
        struct slot *s = &srv->slots[made];
        s->server = srv;
        s->index = made;
        s->weights = slots[made].weights;
        s->packed = slots[made].packed;
        svc_queue_init(&s->queue);
        rc = nxr_ctx_create(rt, slots[made].domain_id, &s->ctx);
        if (rc != 0) {
            snprintf(err, errsz, "slot %zu: context on domain %d: %s", made, slots[made].domain_id,
                     nxr_strerror(rc));
            made++;
            break;
        }
        s->domain = nxr_ctx_domain(s->ctx);
        s->memory = slots[made].memory != NULL ? slots[made].memory : s->domain;
        s->budget = s->credits = nxr_ctx_budget(s->ctx);
        rc = nxr_ctx_create(rt, nxr_domain_id(s->memory), &s->home);
        if (rc != 0)
            snprintf(err, errsz, "slot %zu: context on home domain %d: %s", made,
                     nxr_domain_id(s->memory), nxr_strerror(rc));
    }
    for (; rc == 0 && started < n; started++) {
        struct slot *s = &srv->slots[started];
        rc = -pthread_create(&s->thread, NULL, serving_thread, s);
        if (rc != 0) {
            snprintf(err, errsz, "slot %zu: serving thread: %s", started, nxr_strerror(rc));
            break;
        }
        s->started = true;
    }
    pthread_mutex_lock(&srv->lock);
    while (srv->reported < started)
        pthread_cond_wait(&srv->cond, &srv->lock);
    if (rc == 0 && srv->start_status != 0) {
        rc = srv->start_status;
        snprintf(err, errsz, "a serving thread could not be bound to its domain: %s",
                 nxr_strerror(rc));
    }
    pthread_mutex_unlock(&srv->lock);
    srv->n = made;
    if (rc != 0) {
        stop_slots(srv, made);
        return rc;
    }
    *out = srv;
    return 0;
}

int svc_server_submit(void *server, struct svc_request *r)
{
    struct svc_server *srv = server;
    if (srv == NULL || r == NULL)
        return -EINVAL;
    if (r->rows == 0 || r->input == NULL || r->output == NULL) {
        svc_request_set_error(r, "a request needs rows, an input and an output");
        return -EINVAL;
    }
    /* Ties go round-robin (the scan starts one slot further each time), so
     * an idle service spreads even one client's requests over its domains. */
    const size_t start = atomic_fetch_add_explicit(&srv->turn, 1, memory_order_relaxed) % srv->n;
    /* The first candidate is taken whatever its load reads, so that a
     * request always has a slot. */
    struct slot *best = &srv->slots[start];
    size_t least = atomic_load_explicit(&best->outstanding, memory_order_relaxed);
    for (size_t k = 1; k < srv->n; k++) {
        struct slot *s = &srv->slots[(start + k) % srv->n];
        size_t o = atomic_load_explicit(&s->outstanding, memory_order_relaxed);
        if (o < least) {
            least = o;
            best = s;
        }
    }
    r->slot = (int)best->index;
    r->path_data = best;
    r->alone = false;
    atomic_fetch_add_explicit(&best->outstanding, r->rows, memory_order_relaxed);
    if (!svc_queue_push(&best->queue, r)) {
        atomic_fetch_sub_explicit(&best->outstanding, r->rows, memory_order_relaxed);
        svc_request_set_error(r, "the service is stopping");
        return -ESHUTDOWN;
    }
    return 0;
}

size_t svc_server_slots(const struct svc_server *s)
{
    return s->n;
}

nxr_domain_t *svc_server_slot_domain(const struct svc_server *s, size_t slot)
{
    return slot < s->n ? s->slots[slot].domain : NULL;
}

void svc_server_slot_stats(const struct svc_server *srv, size_t slot, struct svc_slot_stats *out,
                           hwloc_bitmap_t cpus)
{
    const struct slot *s = &srv->slots[slot];
    out->served = atomic_load_explicit(&s->served, memory_order_relaxed);
    out->split = atomic_load_explicit(&s->split, memory_order_relaxed);
    out->errors = atomic_load_explicit(&s->errors, memory_order_relaxed);
    out->passes = atomic_load_explicit(&s->passes, memory_order_relaxed);
    out->batched = atomic_load_explicit(&s->batched, memory_order_relaxed);
    out->retried = atomic_load_explicit(&s->retried, memory_order_relaxed);
    for (size_t k = 0; k < SVC_PASS_SIZES; k++)
        out->pass_sizes[k] = atomic_load_explicit(&s->pass_sizes[k], memory_order_relaxed);
    if (cpus == NULL)
        return;
    hwloc_bitmap_zero(cpus);
    for (unsigned w = 0; w < CPU_WORDS; w++) {
        uint64_t bits = atomic_load_explicit(&s->cpu_bits[w], memory_order_relaxed);
        for (unsigned b = 0; b < 64; b++)
            if (bits & (UINT64_C(1) << b))
                hwloc_bitmap_set(cpus, w * 64 + b);
    }
}

void svc_server_reset_stats(struct svc_server *srv)
{
    for (size_t i = 0; i < srv->n; i++) {
        struct slot *s = &srv->slots[i];
        atomic_store_explicit(&s->served, 0, memory_order_relaxed);
        atomic_store_explicit(&s->split, 0, memory_order_relaxed);
        atomic_store_explicit(&s->errors, 0, memory_order_relaxed);
        atomic_store_explicit(&s->passes, 0, memory_order_relaxed);
        atomic_store_explicit(&s->batched, 0, memory_order_relaxed);
        atomic_store_explicit(&s->retried, 0, memory_order_relaxed);
        for (size_t k = 0; k < SVC_PASS_SIZES; k++)
            atomic_store_explicit(&s->pass_sizes[k], 0, memory_order_relaxed);
        for (unsigned w = 0; w < CPU_WORDS; w++)
            atomic_store_explicit(&s->cpu_bits[w], 0, memory_order_relaxed);
    }
}

void svc_server_stop(struct svc_server *s)
{
    if (s != NULL)
        stop_slots(s, s->n);
}
