/*
 * The client load generator: `clients` threads, each a closed loop (send a
 * request, wait for its answer, send the next) over one round of the
 * stream, taking the next request index from a shared counter. Latency is
 * measured by the client, from just before it submits to just after it is
 * woken with the answer: what a caller of the service sees.
 */
#ifndef NXR_SERVICE_LOAD_H
#define NXR_SERVICE_LOAD_H

#include <stddef.h>

#include "service/request.h"
#include "service/stream.h"

/* Hands r to a serving path: 0, or an error (r is then not in flight). */
typedef int (*svc_submit_fn)(void *service, struct svc_request *r);

struct svc_load_result {
    double wall_s;     /* first submit to last answer */
    double *latency_ms; /* per request of the round (caller's array of round->count) */
    int *slot;          /* per request: the slot that served it (caller's array) */
    long long *sent_ns; /* per request: when it was sent (CLOCK_MONOTONIC); NULL: not kept */
    int status;         /* 0, or the first failure (then the round stopped early) */
    size_t served;      /* requests answered: always the round's first `served` */
};

/* Runs one round against `service`: request i's output goes to
 * outputs + round->offset[i] * shape->vocab. Blocks until every request
 * sent was answered. With deadline_ns (CLOCK_MONOTONIC, 0: none), clients
 * send no new request after it, so a round may end after its first
 * out->served requests (at least one per client). Returns 0, -EAGAIN/-ENOMEM (clients could not start: nothing was
 * sent) or the first request's failure (also in out->status). */
int svc_load_run(const struct svc_round *round, const struct svc_model_shape *shape, unsigned clients,
                 svc_submit_fn submit, void *service, float *outputs, long long deadline_ns,
                 struct svc_load_result *out);

/* CLOCK_MONOTONIC in nanoseconds. */
long long svc_now_ns(void);

#endif /* NXR_SERVICE_LOAD_H */
