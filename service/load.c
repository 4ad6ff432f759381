/* The client load generator (see load.h). */
#include "service/load.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

struct load {
    const struct svc_round *round;
    size_t hidden, vocab;
    svc_submit_fn submit;
    void *service;
    float *outputs;
    struct svc_load_result *out;
    /* Clients start together, when the gate opens. */
    pthread_mutex_t gate_lock;
    pthread_cond_t gate;
    bool go;
    atomic_size_t next;
    atomic_int status;
    long long deadline_ns;
    /* Latest answer time (ns), for the wall time. */
    atomic_llong last_ns;
};

long long svc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *client(void *p)
{
    struct load *L = p;
    struct svc_request r;
    svc_request_init(&r);
    pthread_mutex_lock(&L->gate_lock);
    while (!L->go)
        pthread_cond_wait(&L->gate, &L->gate_lock);
    pthread_mutex_unlock(&L->gate_lock);
    long long last = 0;
    for (bool first = true;; first = false) {
        /* Relaxed: a counter handing out distinct indices; a stale status
         * only lets one more request through. */
        if (atomic_load_explicit(&L->status, memory_order_relaxed) != 0)
            break;
        /* Past the deadline no new request goes out (each client sends at
         * least one). Indices are handed out in order and every one handed
         * out is answered, so the answered set is a prefix of the round. */
        if (!first && L->deadline_ns > 0 && svc_now_ns() > L->deadline_ns)
            break;
        size_t i = atomic_fetch_add_explicit(&L->next, 1, memory_order_relaxed);
        if (i >= L->round->count)
            break;
        svc_request_arm(&r);
        r.index = L->round->first + i;
        r.rows = L->round->rows[i];
        r.input = L->round->input + L->round->offset[i] * L->hidden;
        r.output = L->outputs + L->round->offset[i] * L->vocab;
        long long t0 = svc_now_ns();
        int rc = L->submit(L->service, &r);
        if (rc == 0)
            rc = svc_request_wait(&r);
        long long t1 = svc_now_ns();
        L->out->latency_ms[i] = (double)(t1 - t0) / 1e6;
        L->out->slot[i] = r.slot;
        if (L->out->sent_ns != NULL)
            L->out->sent_ns[i] = t0;
        last = t1;
        if (rc != 0) {
            int none = 0;
            atomic_compare_exchange_strong(&L->status, &none, rc);
        }
    }
    long long seen = atomic_load(&L->last_ns);
    while (last > seen && !atomic_compare_exchange_weak(&L->last_ns, &seen, last))
        ;
    svc_request_destroy(&r);
    return NULL;
}

static void open_gate(struct load *L)
{
    pthread_mutex_lock(&L->gate_lock);
    L->go = true;
    pthread_cond_broadcast(&L->gate);
    pthread_mutex_unlock(&L->gate_lock);
}

int svc_load_run(const struct svc_round *round, const struct svc_model_shape *shape, unsigned clients,
                 svc_submit_fn submit, void *service, float *outputs, long long deadline_ns,
                 struct svc_load_result *out)
{
    if (round == NULL || shape == NULL || clients == 0 || submit == NULL || out == NULL)
        return -EINVAL;
    out->status = 0;
    out->wall_s = 0;
    out->served = 0;
    if (round->count == 0)
        return 0;
    struct load L = {.round = round,
                     .hidden = shape->hidden,
                     .vocab = shape->vocab,
                     .submit = submit,
                     .service = service,
                     .outputs = outputs,
                     .deadline_ns = deadline_ns,
                     .out = out};
    atomic_init(&L.next, 0);
    atomic_init(&L.status, 0);
    atomic_init(&L.last_ns, 0);
    pthread_mutex_init(&L.gate_lock, NULL);
    pthread_cond_init(&L.gate, NULL);
    pthread_t *threads = calloc(clients, sizeof(*threads));
    int rc = threads == NULL ? -ENOMEM : 0;
    unsigned started = 0;
    for (; rc == 0 && started < clients; started++) {
        if ((rc = -pthread_create(&threads[started], NULL, client, &L)) != 0)
            break;
    }
    /* A client that could not start fails the round before anything is
     * sent: the started ones see the status at their first check. */
    if (rc != 0)
        atomic_store_explicit(&L.status, rc, memory_order_relaxed);
    long long t0 = svc_now_ns();
    open_gate(&L);
    for (unsigned i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    pthread_cond_destroy(&L.gate);
    pthread_mutex_destroy(&L.gate_lock);
    if (rc != 0)
        return rc;
    long long t1 = atomic_load(&L.last_ns);
    out->wall_s = t1 > t0 ? (double)(t1 - t0) / 1e9 : 0.0;
    out->status = atomic_load(&L.status);
    size_t handed = atomic_load(&L.next);
    out->served = handed < round->count ? handed : round->count;
    return out->status;
}
