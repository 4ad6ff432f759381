/*
 * Attach mode: the same service on executors the host already has, through
 * nxr's adapters. For each domain of a runtime, one external executor on
 * the domain's CPUs is attached as a new domain:
 *   - openmp: a caller-managed OpenMP team (executor/nxr_omp.h) of as many
 *     threads as the domain has CPUs. OpenMP owns its threads' placement;
 *     they inherit the serving thread's binding. Placement "none".
 *   - pool: a cooperative pthread pool (examples/host_pool.h) pinned to the
 *     domain's CPUs, declared with that set and arbitrated against the
 *     domain. Placement "declared".
 * The serving threads stay bound to the original domain's CPUs.
 */
#ifndef NXR_SERVICE_ATTACH_H
#define NXR_SERVICE_ATTACH_H

#include <stddef.h>

#include "runtime/nxr.h"
#include "examples/host_pool.h"

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
    int first_id;             /* domain i's executor gets id first_id + i */
    int ids[64];              /* ids[i]: the executor attached for domain i, -1: none */
    struct host_pool *pools[64];
};

/* How attach mode builds each domain's executor. Every field is optional;
 * a host (or a test) uses them to start the pool its own way or to wrap
 * what is attached (tracing, fault injection). */
struct svc_attach_hooks {
    /* Starts domain i's pool (NULL: host_pool_start); NULL when it could
     * not, which fails that domain's attach with -EAGAIN. */
    struct host_pool *(*start_pool)(void *arg, size_t i, unsigned threads, const cpu_set_t *cpus);
    /* Sees domain i's declaration just before nxr_runtime_attach and may
     * change it (wrap the executor, change the admission). 0, or an error
     * that fails that domain's attach. */
    int (*declare)(void *arg, size_t i, struct nxr_external_decl *decl);
    void *arg;
};

/* Prepares *out for rt (nothing attached yet): 0, or -EINVAL (more than 64
 * domains) with err saying so. */
int svc_attached_init(nxr_runtime_t *rt, struct svc_attached *out, char *err, size_t errsz);

/* Attaches one executor of kind `e` (not SVC_EXECUTOR_NXR) for domain i of
 * rt, on the domain's CPU set. Returns 0 with out->ids[i] set, or an error
 * (-EINVAL: no CPU set, -EAGAIN: the pool could not start, the hook's or
 * nxr_runtime_attach's error) with err naming the domain; then nothing of
 * that attempt is left (its pool stopped, the runtime unchanged), so the
 * caller may try again or serve the domain otherwise. hooks may be NULL. */
int svc_attach_domain(nxr_runtime_t *rt, enum svc_executor e, size_t i,
                      const struct svc_attach_hooks *hooks, struct svc_attached *out, char *err,
                      size_t errsz);

/* svc_attached_init, then svc_attach_domain for every domain of rt (rt must
 * have at most 64 domains, all with a CPU set). Returns 0, or the first
 * error with err naming the domain; what was attached stays attached (the
 * runtime releases it at destroy), so call svc_attached_release either way,
 * after nxr_runtime_destroy. */
int svc_attach_executors(nxr_runtime_t *rt, enum svc_executor e, struct svc_attached *out,
                         char *err, size_t errsz);

/* Stops the pools. Only after the runtime that used them was destroyed. */
void svc_attached_release(struct svc_attached *a);

#endif /* NXR_SERVICE_ATTACH_H */
