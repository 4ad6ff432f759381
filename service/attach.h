/*
 * Attach mode: the same service on executors the host already has, through
 * nxr's adapters. For each domain of a runtime, one external executor on
 * the domain's CPUs is attached as a new domain:
 *   - openmp: a caller-managed OpenMP team (executor/nxr_omp.h) of as many
 *     threads as the domain has CPUs. OpenMP owns its threads' placement;
 *     they inherit the serving thread's binding. Placement "none".
 *   - pool: a cooperative pthread pool (service/host_pool.h) pinned to the
 *     domain's CPUs, declared with that set and arbitrated against the
 *     domain. Placement "declared".
 * The serving threads stay bound to the original domain's CPUs.
 */
#ifndef NXR_SERVICE_ATTACH_H
#define NXR_SERVICE_ATTACH_H

#include <stddef.h>

#include "runtime/nxr.h"
#include "service/host_pool.h"

enum svc_executor {
    SVC_EXECUTOR_NXR = 0,    /* nxr's own teams: nothing attached */
    SVC_EXECUTOR_OPENMP = 1,
    SVC_EXECUTOR_POOL = 2,
};

/* "nxr", "openmp", "pool". */
const char *svc_executor_name(enum svc_executor e);

/* Parses a name above: 0 or -EINVAL. */
int svc_executor_parse(const char *name, enum svc_executor *out);

struct svc_attached {
    size_t n;                 /* = the runtime's domain count before attaching */
    int ids[64];              /* ids[i]: the executor attached for domain i */
    struct host_pool *pools[64];
};

/* Attaches one executor of kind `e` per domain of rt (rt must have at most
 * 64 domains, all with a CPU set). Returns 0, or the first error with err
 * naming the domain; what was attached stays attached (the runtime releases
 * it at destroy), so call svc_attached_release either way, after
 * nxr_runtime_destroy. */
int svc_attach_executors(nxr_runtime_t *rt, enum svc_executor e, struct svc_attached *out,
                         char *err, size_t errsz);

/* Stops the pools. Only after the runtime that used them was destroyed. */
void svc_attached_release(struct svc_attached *a);

#endif /* NXR_SERVICE_ATTACH_H */
