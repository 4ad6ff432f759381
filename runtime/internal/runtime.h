/*
 * The runtime's internal layout, shared by the runtime package's files and
 * the internal tests. Nothing outside runtime/ and tests/ includes it.
 */
#ifndef NXR_INTERNAL_RUNTIME_H
#define NXR_INTERNAL_RUNTIME_H

#include "domains/internal/plan.h"
#include "domains/internal/topology.h"
#include "executor/internal/team.h"
#include "runtime/nxr.h"

/* The default spin bound, in pause iterations (see README "Knobs"). */
#define NXR_SPIN_DEFAULT 4096u

struct nxr_domain {
    struct nxr__domain_spec spec; /* id, node, cpus, budget, admission */
    enum nxr_placement placement;
    struct nxr__team *team; /* managed domains: the built-in team */
    struct nxr__pool *pool; /* node-local pool and arena (alloc/) */
    nxr_runtime_t *rt;
};

/* Settings resolved from options and environment (see options.c). */
struct nxr__settings {
    const char *topology;
    const char *domains;
    unsigned num_threads; /* 0: no cap */
    unsigned spin;
    bool display_env;
};

struct nxr_runtime {
    struct nxr__topology topo;
    struct nxr__settings settings;
    struct nxr_domain *domains;
    size_t domain_count;
};

/* Creates every domain's pool (runtime/memory.c); on failure the pools made
 * so far are left for nxr__runtime_pools_destroy. 0, -ENOMEM. */
int nxr__runtime_pools_create(nxr_runtime_t *rt, char *err, size_t errsz);

/* Destroys every pool: 0, or NXR_EOUTSTANDING when buffers or domain memory
 * were still out (reported on stderr; what they need is kept). */
int nxr__runtime_pools_destroy(nxr_runtime_t *rt);

/* Resolves opts + environment into settings. 0 or NXR_ESYNTAX/-EINVAL. */
int nxr__settings_resolve(struct nxr__settings *s, const struct nxr_runtime_opts *opts, char *err,
                          size_t errsz);

#endif /* NXR_INTERNAL_RUNTIME_H */
