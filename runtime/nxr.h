/*
 * nxr: a NUMA-aware executor runtime. This is the public header; include it
 * and link //:nxr.
 *
 * A runtime (nxr_runtime_t) discovers the machine, forms resource domains
 * (one per NUMA node by default, see domains/nxr_domains.h) and starts, for
 * each managed domain, a worker team confined to the domain's CPU set and
 * verified. Everything is torn down by nxr_runtime_destroy.
 *
 * Threads: nxr_runtime_create/destroy are called by the owner; every const
 * accessor may be called from any thread while the runtime lives.
 * Environment (read at creation unless opts.ignore_env): NXR_TOPOLOGY,
 * NXR_DOMAINS, NXR_NUM_THREADS, NXR_SPIN, NXR_DISPLAY_ENV (see README).
 */
#ifndef NXR_H
#define NXR_H

#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>

#include "alloc/nxr_alloc.h"
#include "domains/nxr_domains.h"
#include "runtime/nxr_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nxr_runtime nxr_runtime_t;
typedef struct nxr_domain nxr_domain_t;

struct nxr_runtime_opts {
    /* NULL: NXR_TOPOLOGY, else this system. "hwloc", "synthetic:<hwloc
     * synthetic description>" or "xml:<path>". */
    const char *topology;
    /* Declared domains; when both are unset, NXR_DOMAINS, else one domain
     * per NUMA node. Setting both is -EINVAL. */
    const char *domains; /* NXR_DOMAINS grammar */
    const struct nxr_domain_decl *domain_decls;
    size_t domain_decl_count;
    /* Narrows the process's allowed set (sched_getaffinity); never widens. */
    hwloc_const_bitmap_t allowed_cpus;
    /* Caps every domain's budget (0: NXR_NUM_THREADS, else no cap). */
    int num_threads;
    /* Iterations a worker spins before parking (-1: NXR_SPIN, else the
     * default; 0: park at once). */
    int spin;
    /* Ignore every NXR_* environment variable (tests, embedders that
     * configure nxr only through this struct). */
    bool ignore_env;
    /* On failure, a message naming what was wrong (optional). */
    char *errbuf;
    size_t errbuf_size;
};

/* Fills opts with defaults: everything unset, spin -1, env honoured. */
NXR_API void nxr_runtime_opts_init(struct nxr_runtime_opts *opts);

/*
 * Creates a runtime. opts may be NULL (defaults). Validation (topology,
 * domains) completes before any thread starts. Returns 0 and *out, or:
 * -EINVAL (NULL out, bad option), NXR_ESYNTAX, NXR_ETOPOLOGY, NXR_ENODOMAIN,
 * NXR_EEMPTYSET, NXR_EDISALLOWED, NXR_EDUPID, NXR_EOVERLAP, NXR_EBUDGET,
 * NXR_EPLACEMENT (a worker's affinity could not be set or verified), -EAGAIN
 * (a thread could not be created), -ENOMEM. On failure *out is NULL and no
 * thread, permit or allocation of nxr's is left behind. Blocks until every
 * worker has started and verified its placement.
 */
NXR_API int nxr_runtime_create(nxr_runtime_t **out, const struct nxr_runtime_opts *opts);

/* Stops and joins every worker and frees the runtime. NULL is a no-op. Must
 * not be called from an nxr worker or while other threads use the runtime. */
NXR_API void nxr_runtime_destroy(nxr_runtime_t *rt);

/* Number of domains (>= 1). */
NXR_API size_t nxr_runtime_domain_count(const nxr_runtime_t *rt);

/* The i-th domain in creation order (NULL when i is out of range). */
NXR_API const nxr_domain_t *nxr_runtime_domain_at(const nxr_runtime_t *rt, size_t i);

/* Looks a domain up by id: 0, NXR_ENODOMAIN or -EINVAL (NULL argument). */
NXR_API int nxr_runtime_domain(const nxr_runtime_t *rt, int id, const nxr_domain_t **out);

/* "hwloc", "synthetic" or "xml". */
NXR_API const char *nxr_runtime_topology_source(const nxr_runtime_t *rt);

/* False when the topology carried no NUMA information. */
NXR_API bool nxr_runtime_has_numa(const nxr_runtime_t *rt);

/* The allowed set the runtime was built from (owned by the runtime). */
NXR_API hwloc_const_bitmap_t nxr_runtime_allowed_cpus(const nxr_runtime_t *rt);

NXR_API int nxr_domain_id(const nxr_domain_t *d);
/* OS NUMA node id, or NXR_NODE_NONE. */
NXR_API int nxr_domain_node(const nxr_domain_t *d);
/* The domain's CPU set (owned by the runtime); NULL for caller-managed. */
NXR_API hwloc_const_bitmap_t nxr_domain_cpuset(const nxr_domain_t *d);
NXR_API enum nxr_admission nxr_domain_admission(const nxr_domain_t *d);
NXR_API enum nxr_placement nxr_domain_placement(const nxr_domain_t *d);
/* Threads the domain's executor has. */
NXR_API unsigned nxr_domain_workers(const nxr_domain_t *d);
/* Most threads one operation in the domain may use. */
NXR_API unsigned nxr_domain_budget(const nxr_domain_t *d);

enum nxr_describe_format {
    NXR_DESCRIBE_TEXT = 0,
    NXR_DESCRIBE_JSON = 1,
};

/*
 * Describes the runtime: topology (source, nodes, CPUs, allowed set) and per
 * domain id, node, CPUs, admission, placement, workers, budget, executor
 * owner, and the domain's memory ("pool": binding, arena, cap, cached bytes
 * and buffers, outstanding, hits, misses, drops; see alloc/nxr_alloc.h).
 * JSON is one object: {"topology": {...}, "domains": [...]}.
 * Returns 0 and a NUL-terminated string in *out that the caller releases
 * with free(); -EINVAL or -ENOMEM (then *out is NULL).
 */
NXR_API int nxr_runtime_describe(const nxr_runtime_t *rt, enum nxr_describe_format format,
                                 char **out);

#ifdef __cplusplus
}
#endif

#endif /* NXR_H */
