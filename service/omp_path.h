/*
 * The OpenMP comparison path: the same model, written the way a service
 * that knows OpenMP but not NUMA writes it. One serving thread takes
 * requests in arrival order and computes each with every step under
 * `#pragma omp parallel for` over all allowed CPUs (intra-op parallelism,
 * one request at a time): GEMMs split by column blocks, each block one
 * cblas_sgemm at OpenBLAS count 1 (a per-thread kernel as good as nxr's),
 * norms and softmax by rows, activations by elements. Weights are one copy
 * (the first domain's replica).
 *
 * Built with -fopenmp in its own library (//service:omp), so nxr never
 * links libgomp; only the programs that compare against it do.
 */
#ifndef NXR_SERVICE_OMP_PATH_H
#define NXR_SERVICE_OMP_PATH_H

#include "service/model.h"
#include "service/ops.h"
#include "service/request.h"

struct svc_omp_path;

/* The ops over OpenMP and OpenBLAS (self: unused, NULL). */
extern const struct svc_ops svc_ops_omp;

/* Starts the serving thread with an OpenMP team of `threads` (>= 1).
 * Sets OpenBLAS's process-wide count to 1 (the blocks are the threads).
 * Returns 0 and *out, -EINVAL, -ENOMEM or -EAGAIN (nothing left running). */
int svc_omp_path_start(struct svc_omp_path **out, const struct svc_model_shape *shape,
                       const float *weights, unsigned threads);

/* Queues r (FIFO): the svc_submit_fn of service/load.h. */
int svc_omp_path_submit(void *path, struct svc_request *r);

/* Stops the serving thread after the queue drained. NULL is a no-op. */
void svc_omp_path_stop(struct svc_omp_path *p);

#endif /* NXR_SERVICE_OMP_PATH_H */
