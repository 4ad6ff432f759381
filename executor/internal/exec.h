/*
 * Per-domain execution state and the per-thread execution marker.
 *
 * struct nxr__exec is what a context reaches: the executor contract in use
 * for the domain (the built-in team's, or a caller's), the domain's CPU set
 * and budget. It is embedded in the runtime's domain and lives as long as it.
 *
 * The marker (nxr__tls) says whether the calling thread is already inside a
 * task or loop body, and as which participant; it is how one fan-out level
 * is enforced without asking any pool.
 */
#ifndef NXR_INTERNAL_EXEC_H
#define NXR_INTERNAL_EXEC_H

#include <hwloc.h>
#include <stdbool.h>

#include "executor/internal/team.h"
#include "executor/nxr_executor.h"

struct nxr__exec {
    struct nxr_executor executor; /* the contract work goes through */
    struct nxr__team *team;       /* the built-in team, or NULL */
    hwloc_const_bitmap_t cpus;    /* the domain's set; NULL for caller-managed */
    unsigned budget;              /* most participants one operation may use */
    int domain_id;
};

struct nxr__exec_tls {
    unsigned depth;       /* > 0: inside a task or loop body */
    unsigned participant; /* the index the enclosing body runs as */
};

extern _Thread_local struct nxr__exec_tls nxr__tls;

/* Fills exec->executor with the built-in team's implementation of the
 * contract (owned by nxr, fans out, not re-entrant). */
void nxr__exec_use_team(struct nxr__exec *exec, struct nxr__team *team);

/* True when the calling thread is a worker of exec's own executor. */
bool nxr__exec_is_own_worker(const struct nxr__exec *exec);

struct nxr_ctx {
    struct nxr__exec *exec;
    const void *domain; /* the public nxr_domain_t */
    void *runtime;      /* the nxr_runtime_t it belongs to */
};

#endif /* NXR_INTERNAL_EXEC_H */
