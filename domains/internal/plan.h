/*
 * Domain planning: from a topology (and, optionally, caller declarations) to
 * the validated list of domains a runtime will build. Pure data: no thread
 * starts here, which is why every validation error surfaces before any does.
 */
#ifndef NXR_INTERNAL_PLAN_H
#define NXR_INTERNAL_PLAN_H

#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>

#include "domains/internal/topology.h"
#include "domains/nxr_domains.h"

/* What set a domain's budget below its CPU count (docs/contracts.md, "What
 * the process can really get"): each step only lowers, and the last one that
 * lowered it is named. */
enum nxr__budget_limit {
    NXR_BUDGET_LIMIT_NONE = 0,    /* the budget is the domain's CPU count */
    NXR_BUDGET_LIMIT_DECLARED,    /* the declaration's own budget */
    NXR_BUDGET_LIMIT_QUOTA,       /* the CPU quota (cgroup, NXR_CPU_QUOTA) */
    NXR_BUDGET_LIMIT_NUM_THREADS, /* NXR_NUM_THREADS / opts.num_threads */
};

/* "quota", "num_threads", ... or NULL for NXR_BUDGET_LIMIT_NONE. */
const char *nxr__budget_limit_name(enum nxr__budget_limit limit);

struct nxr__domain_spec {
    int id;
    int node;            /* OS node id or NXR_NODE_NONE */
    hwloc_bitmap_t cpus; /* owned; subset of the allowed set */
    unsigned budget;     /* 1..weight(cpus) */
    enum nxr__budget_limit limited_by;
    enum nxr_admission admission;
};

struct nxr__plan {
    struct nxr__domain_spec *domains;
    size_t count;
    bool declared; /* from caller declarations rather than the node layout */
};

/* Most domains one runtime declares (NXR_DOMAINS or opts.domain_decls):
 * each has a team of threads and an arena, and creation cost grows with the
 * square of the count (the overlap checks); larger is refused, naming this
 * bound (NXR_ESYNTAX for the string, -EINVAL for declarations). */
#define NXR__DOMAINS_MAX 256

/*
 * The default plan: one MANAGED domain per NUMA node with at least one
 * allowed CPU (id = node OS id, CPUs = node set ∩ allowed, budget = their
 * count), or, without NUMA information, one domain 0 over the allowed set.
 * Returns 0, NXR_ENODOMAIN (no allowed CPU at all) or -ENOMEM.
 */
int nxr__plan_default(struct nxr__plan *plan, const struct nxr__topology *topo, char *err,
                      size_t errsz);

/*
 * A plan from caller declarations, validated in this order, first failure
 * wins: more than NXR__DOMAINS_MAX declarations -EINVAL; per declaration (in order) -EINVAL
 * (negative id), NXR_EEMPTYSET, NXR_EDISALLOWED, NXR_EBUDGET; then across declarations NXR_EDUPID
 * and NXR_EOVERLAP (two overlapping domains, neither declared shared). The message in err names the
 * domain(s) and CPUs. n == 0 is NXR_ENODOMAIN.
 */
int nxr__plan_declared(struct nxr__plan *plan, const struct nxr__topology *topo,
                       const struct nxr_domain_decl *decls, size_t n, char *err, size_t errsz);

/* Lowers every budget to at most cap (cap 0: no change); a budget it lowers
 * is marked NXR_BUDGET_LIMIT_NUM_THREADS. */
void nxr__plan_cap_budgets(struct nxr__plan *plan, unsigned cap);

/*
 * Fits the budgets' sum into cpus (a CPU quota; 0: no change). When the sum
 * already fits nothing changes. Otherwise each domain's share is
 * proportional to its CPU count, floor(cpus * weight / total), at least 1,
 * and what the floors leave goes one by one to the largest remainders (ties:
 * the earlier domain), so the shares sum to cpus unless there are more
 * domains than cpus (then each keeps 1: a domain with no thread could run
 * nothing). A budget is then lowered to its share, never raised, and marked
 * NXR_BUDGET_LIMIT_QUOTA when it was lowered. Overlapping (shared) domains
 * count fully: the arbiter keeps them from running at once, so this is
 * conservative for them.
 */
void nxr__plan_fit_cpus(struct nxr__plan *plan, unsigned cpus);

void nxr__plan_fini(struct nxr__plan *plan);

/*
 * Parses the NXR_DOMAINS grammar (see nxr_domains.h) into declarations whose
 * `cpus` bitmaps the caller frees with nxr__decls_free. Returns 0,
 * NXR_ESYNTAX (message names the position), NXR_EBUDGET (a written budget
 * of 0) or -ENOMEM; *out is NULL on error.
 */
int nxr__decls_parse(const char *spec, struct nxr_domain_decl **out, size_t *count, char *err,
                     size_t errsz);

void nxr__decls_free(struct nxr_domain_decl *decls, size_t count);

#endif /* NXR_INTERNAL_PLAN_H */
