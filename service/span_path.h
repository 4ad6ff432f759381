/*
 * The demo's span path (`nxr demo --span`): one request at a time across
 * every domain. One serving thread drives a span over every domain of the
 * runtime (runtime/nxr_span.h); each weight matrix is sharded by its input
 * rows across the members, part i in member i's node memory, so every
 * GEMM of every request runs on every domain, each on its own shard
 * (nxr_span_linear, NXR_SHARD_BY_INNER), and the partials are added in
 * member order. Norms, bias, activations and the softmax run on the span's
 * first member. The latency mode, beside the per-domain (throughput) mode.
 */
#ifndef NXR_SERVICE_SPAN_PATH_H
#define NXR_SERVICE_SPAN_PATH_H

#include <stddef.h>

#include "runtime/nxr.h"
#include "service/model.h"
#include "service/request.h"

struct svc_span_path;

/*
 * Opens the span over every domain of rt and starts the serving thread.
 * weights: one copy of the model (svc_model_floats floats), read while the
 * path runs; its matrices are sharded at their first use (the warm-up).
 * Returns 0 and *out, or the span's error with why filled, -ENOMEM, -EAGAIN
 * (nothing left running).
 */
int svc_span_path_start(struct svc_span_path **out, nxr_runtime_t *rt,
                        const struct svc_model_shape *shape, const float *weights, char *why,
                        size_t whysz);

/* Queues r (FIFO): the svc_submit_fn of service/load.h. */
int svc_span_path_submit(void *path, struct svc_request *r);

/* Members of the span (every domain of the runtime). */
size_t svc_span_path_members(const struct svc_span_path *p);

/* Member i's domain and the fraction of its shards' pages on its node
 * (the lowest over the matrices; -1: unknown). Call after serving. */
nxr_domain_t *svc_span_path_member(const struct svc_span_path *p, size_t i,
                                         double *on_node);

/* Stops the serving thread after the queue drained and frees the shards.
 * NULL is a no-op. */
void svc_span_path_stop(struct svc_span_path *p);

#endif /* NXR_SERVICE_SPAN_PATH_H */
