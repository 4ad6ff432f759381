/*
 * nxr's OpenMP adapter: the host's OpenMP runtime as an nxr executor.
 *
 * OpenMP decides where its threads run (OMP_PROC_BIND, OMP_PLACES) and how
 * many exist, so nxr cannot claim a placement for them: attach this executor
 * as a CALLER_MANAGED domain. Link libnxr_omp (`pkg-config --libs nxr-omp`;
 * the host builds with -fopenmp).
 */
#ifndef NXR_OMP_H
#define NXR_OMP_H

#include "executor/nxr_executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Fills *out with an executor that runs regions as `#pragma omp parallel`
 * with up to `threads` threads and submissions as an OpenMP loop that
 * finishes before submit returns. threads 0: omp_get_max_threads().
 * Returns 0 or -EINVAL (out NULL, threads < 0). The one public function
 * that leaves nxr_last_error() alone even when it fails: it lives in
 * libnxr_omp, outside the library that holds the slot, and its only
 * failures are the two above.
 */
NXR_API int nxr_omp_executor_init(struct nxr_executor *out, int threads);

#ifdef __cplusplus
}
#endif

#endif /* NXR_OMP_H */
