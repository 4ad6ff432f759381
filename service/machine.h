/*
 * What the machine can do, measured in the demo's own run, on the domains
 * it serves from: the GEMM peak (native SGEMM at 2048 x 2048 x 2048, the
 * size where the kernel is at its best, split over the domain's workers)
 * and the streaming-read bandwidth of the domain's node memory (nxr_sum
 * over 256 MiB: a vectorised sum with several accumulators, on the same
 * workers). Each domain is measured alone, one after the other, and the
 * figures are summed: the service runs every domain at once, on disjoint
 * CPUs. The demo sets its achieved GFLOP/s and weight GB/s against them.
 *
 * This is a measurement on a possibly shared machine: the best of a few
 * repetitions within a short time budget, not a specification.
 */
#ifndef NXR_SERVICE_MACHINE_H
#define NXR_SERVICE_MACHINE_H

#include <stddef.h>

#include "runtime/nxr.h"

struct svc_machine {
    double gemm_peak_gflops; /* summed over the domains */
    double read_gbs;         /* summed over the domains; 1 GB = 1e9 bytes */
    size_t domains;          /* domains measured */
};

/* Measures every domain of rt for about `seconds` in all (at least two
 * repetitions of each measurement, whatever the budget). Blocks; from a
 * thread outside any body, while nothing else runs on rt's domains.
 * Returns 0, or the first failure (-ENOMEM, a kernel's error) with *out
 * zeroed and err saying what failed. Leaves nothing allocated. */
int svc_machine_measure(nxr_runtime_t *rt, double seconds, struct svc_machine *out, char *err,
                        size_t errsz);

#endif /* NXR_SERVICE_MACHINE_H */
