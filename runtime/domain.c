/*
 * Domain lookup and accessors: read-only views of what the runtime built.
 */
#include <errno.h>

#include "runtime/internal/runtime.h"
#include "base/internal/sys.h"

/* The table may grow under an attach: every read takes the lock. The cast
 * drops const only to lock; the runtime's observable state is unchanged. */
static void lock(const nxr_runtime_t *rt)
{
    NXR__HANDLE_CHECK(rt, "runtime");
    pthread_mutex_lock(&((nxr_runtime_t *)rt)->domains_lock);
}

static void unlock(const nxr_runtime_t *rt)
{
    pthread_mutex_unlock(&((nxr_runtime_t *)rt)->domains_lock);
}

size_t nxr_runtime_domain_count(const nxr_runtime_t *rt)
{
    lock(rt);
    size_t n = rt->domain_count;
    unlock(rt);
    return n;
}

const nxr_domain_t *nxr_runtime_domain_at(const nxr_runtime_t *rt, size_t i)
{
    lock(rt);
    const nxr_domain_t *d = i < rt->domain_count ? rt->domains[i] : NULL;
    unlock(rt);
    return d;
}

int nxr_runtime_domain(const nxr_runtime_t *rt, int id, const nxr_domain_t **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (rt == NULL)
        return -EINVAL;
    /* Linear: a runtime has a handful of domains, and ids are sparse. */
    int rc = NXR_ENODOMAIN;
    lock(rt);
    for (size_t i = 0; i < rt->domain_count; i++) {
        if (rt->domains[i]->spec.id == id) {
            *out = rt->domains[i];
            rc = 0;
            break;
        }
    }
    unlock(rt);
    return rc;
}

const nxr_provider_bundle_t *nxr_runtime_providers(const nxr_runtime_t *rt)
{
    return rt->providers;
}

const char *nxr_runtime_topology_source(const nxr_runtime_t *rt)
{
    return nxr__topology_source_name(rt->topo.source);
}

bool nxr_runtime_has_numa(const nxr_runtime_t *rt)
{
    return rt->topo.has_numa;
}

hwloc_const_bitmap_t nxr_runtime_allowed_cpus(const nxr_runtime_t *rt)
{
    return rt->topo.allowed;
}

int nxr_domain_id(const nxr_domain_t *d)
{
    return d->spec.id;
}

int nxr_domain_node(const nxr_domain_t *d)
{
    return d->spec.node;
}

hwloc_const_bitmap_t nxr_domain_cpuset(const nxr_domain_t *d)
{
    return d->spec.admission == NXR_ADMISSION_CALLER_MANAGED ? NULL : d->spec.cpus;
}

enum nxr_admission nxr_domain_admission(const nxr_domain_t *d)
{
    return d->spec.admission;
}

enum nxr_placement nxr_domain_placement(const nxr_domain_t *d)
{
    return d->placement;
}

unsigned nxr_domain_workers(const nxr_domain_t *d)
{
    return d->exec.executor.workers;
}

unsigned nxr_domain_budget(const nxr_domain_t *d)
{
    return d->spec.budget;
}
