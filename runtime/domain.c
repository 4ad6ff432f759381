/*
 * Domain lookup and accessors: read-only views of what the runtime built.
 */
#include <errno.h>
#include <sched.h>

#include "base/internal/last_error.h"
#include "base/internal/lock_rank.h"
#include "base/internal/sys.h"
#include "domains/internal/cpuset.h"
#include "runtime/internal/runtime.h"

/* The table may grow under an attach: every read takes the lock. The cast
 * drops const only to lock; the runtime's observable state is unchanged. */
static void lock(const nxr_runtime_t *rt)
{
    NXR__HANDLE_CHECK(rt, "runtime");
    /* Inherited through fork: a parent thread may have held the lock, and no
     * thread of this process can attach to this runtime (every call on it
     * is NXR_EFORKED), so the accessors read without it. */
    if (!nxr__runtime_forked(rt))
        nxr__lock(&((nxr_runtime_t *)rt)->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
}

static void unlock(const nxr_runtime_t *rt)
{
    if (!nxr__runtime_forked(rt))
        nxr__unlock(&((nxr_runtime_t *)rt)->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
}

/* The checks every lookup starts with: 0, or its failure (out is then NULL). */
static int lookup_begins(const char *call, const nxr_runtime_t *rt, nxr_domain_t **out)
{
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (rt == NULL || out == NULL)
        return nxr__fail(-EINVAL, call, "%s is NULL", rt == NULL ? "rt" : "out");
    if (nxr__runtime_forked(rt))
        return nxr__fail(NXR_EFORKED, call, "the runtime was created before this process forked");
    return 0;
}

size_t nxr_runtime_domain_count(const nxr_runtime_t *rt)
{
    if (rt == NULL)
        return 0;
    lock(rt);
    size_t n = rt->domain_count;
    unlock(rt);
    return n;
}

nxr_domain_t *nxr_runtime_domain_at(const nxr_runtime_t *rt, size_t i)
{
    if (rt == NULL)
        return NULL;
    lock(rt);
    nxr_domain_t *d = i < rt->domain_count ? rt->domains[i] : NULL;
    unlock(rt);
    return d;
}

int nxr_runtime_domain(const nxr_runtime_t *rt, int id, nxr_domain_t **out)
{
    int rc = lookup_begins(__func__, rt, out);
    if (rc != 0)
        return rc;
    /* Linear: a runtime has a handful of domains, and ids are sparse. */
    rc = NXR_ENODOMAIN;
    lock(rt);
    for (size_t i = 0; i < rt->domain_count; i++) {
        if (rt->domains[i]->spec.id == id) {
            *out = rt->domains[i];
            rc = 0;
            break;
        }
    }
    unlock(rt);
    return rc == 0 ? 0 : nxr__fail(rc, __func__, "no domain has id %d", id);
}

/* Of the domains that match, a managed one before an external one, then the
 * lowest id: one answer whatever the table order. Caller holds the lock. */
static bool better(const struct nxr_domain *cand, const struct nxr_domain *best)
{
    if (best == NULL)
        return true;
    bool cm = cand->spec.admission == NXR_ADMISSION_MANAGED;
    bool bm = best->spec.admission == NXR_ADMISSION_MANAGED;
    if (cm != bm)
        return cm;
    return cand->spec.id < best->spec.id;
}

/* nxr_runtime_domain_of_cpu without the call's bracket (the lookups share it). */
static struct nxr_domain *domain_of_cpu(const nxr_runtime_t *rt, int cpu)
{
    struct nxr_domain *best = NULL;
    lock(rt);
    for (size_t i = 0; i < rt->domain_count; i++) {
        struct nxr_domain *d = rt->domains[i];
        hwloc_const_bitmap_t cpus = nxr_domain_cpuset(d);
        if (cpus != NULL && hwloc_bitmap_isset(cpus, (unsigned)cpu) && better(d, best))
            best = d;
    }
    unlock(rt);
    return best;
}

int nxr_runtime_domain_of_cpu(const nxr_runtime_t *rt, int cpu, nxr_domain_t **out)
{
    int rc = lookup_begins(__func__, rt, out);
    if (rc != 0)
        return rc;
    if (cpu < 0)
        return nxr__fail(-EINVAL, __func__, "cpu %d is negative", cpu);
    *out = domain_of_cpu(rt, cpu);
    return *out != NULL ? 0 : nxr__fail(NXR_ENODOMAIN, __func__, "no domain holds CPU %d", cpu);
}

int nxr_runtime_domain_of_node(const nxr_runtime_t *rt, int node, nxr_domain_t **out)
{
    int rc = lookup_begins(__func__, rt, out);
    if (rc != 0)
        return rc;
    if (node < 0)
        return nxr__fail(-EINVAL, __func__, "node %d is negative", node);
    struct nxr_domain *best = NULL;
    lock(rt);
    for (size_t i = 0; i < rt->domain_count; i++) {
        struct nxr_domain *d = rt->domains[i];
        if (d->spec.node == node && better(d, best))
            best = d;
    }
    unlock(rt);
    *out = best;
    return best != NULL ? 0 : nxr__fail(NXR_ENODOMAIN, __func__, "no domain is on node %d", node);
}

int nxr_runtime_domain_here(const nxr_runtime_t *rt, nxr_domain_t **out)
{
    int rc = lookup_begins(__func__, rt, out);
    if (rc != 0)
        return rc;
    hwloc_bitmap_t mine = nxr__cpuset_alloc();
    if (mine == NULL)
        return nxr__fail(-ENOMEM, __func__, "out of memory");
    rc = nxr__affinity_self(mine);
    struct nxr_domain *best = NULL;
    if (rc == 0 && !hwloc_bitmap_iszero(mine)) {
        lock(rt);
        for (size_t i = 0; i < rt->domain_count; i++) {
            struct nxr_domain *d = rt->domains[i];
            hwloc_const_bitmap_t cpus = nxr_domain_cpuset(d);
            if (cpus != NULL && hwloc_bitmap_isincluded(mine, cpus) && better(d, best))
                best = d;
        }
        unlock(rt);
    }
    hwloc_bitmap_free(mine);
    if (best != NULL) {
        *out = best;
        return 0;
    }
    /* Not confined to one domain: where it runs now. */
    int cpu = sched_getcpu();
    if (cpu < 0)
        return nxr__fail(-errno, __func__, "sched_getcpu: %s", nxr_strerror(-errno));
    *out = domain_of_cpu(rt, cpu);
    return *out != NULL ? 0
                        : nxr__fail(NXR_ENODOMAIN, __func__,
                                    "the thread's CPUs lie in no one domain, and no domain holds "
                                    "CPU %d, where it runs now",
                                    cpu);
}

const nxr_provider_bundle_t *nxr_runtime_providers(const nxr_runtime_t *rt)
{
    if (rt == NULL)
        return NULL;
    return rt->providers;
}

const char *nxr_runtime_topology_source(const nxr_runtime_t *rt)
{
    if (rt == NULL)
        return NULL;
    return nxr__topology_source_name(rt->topo.source);
}

bool nxr_runtime_has_numa(const nxr_runtime_t *rt)
{
    if (rt == NULL)
        return false;
    return rt->topo.has_numa;
}

hwloc_const_bitmap_t nxr_runtime_allowed_cpus(const nxr_runtime_t *rt)
{
    if (rt == NULL)
        return NULL;
    return rt->topo.allowed;
}

int nxr_domain_id(const nxr_domain_t *d)
{
    if (d == NULL)
        return -1;
    return d->spec.id;
}

int nxr_domain_node(const nxr_domain_t *d)
{
    if (d == NULL)
        return NXR_NODE_NONE;
    return d->spec.node;
}

hwloc_const_bitmap_t nxr_domain_cpuset(const nxr_domain_t *d)
{
    if (d == NULL)
        return NULL;
    return d->spec.admission == NXR_ADMISSION_CALLER_MANAGED ? NULL : d->spec.cpus;
}

enum nxr_admission nxr_domain_admission(const nxr_domain_t *d)
{
    if (d == NULL)
        return NXR_ADMISSION_MANAGED;
    return d->spec.admission;
}

enum nxr_placement nxr_domain_placement(const nxr_domain_t *d)
{
    if (d == NULL)
        return NXR_PLACEMENT_NONE;
    return d->placement;
}

unsigned nxr_domain_workers(const nxr_domain_t *d)
{
    if (d == NULL)
        return 0;
    return d->exec.executor.workers;
}

unsigned nxr_domain_budget(const nxr_domain_t *d)
{
    if (d == NULL)
        return 0;
    return d->admission_ready ? nxr__exec_budget(&d->exec) : d->spec.budget;
}

enum nxr__budget_limit nxr__domain_limit_now(const struct nxr_domain *d)
{
    return nxr_domain_budget(d) < d->spec.budget ? NXR_BUDGET_LIMIT_QUOTA : d->spec.limited_by;
}

const char *nxr_domain_budget_limit(const nxr_domain_t *d)
{
    if (d == NULL)
        return NULL;
    return nxr__budget_limit_name(nxr__domain_limit_now(d));
}
