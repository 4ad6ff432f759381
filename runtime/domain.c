/*
 * Domain lookup and accessors: read-only views of what the runtime built.
 */
#include <errno.h>

#include "runtime/internal/runtime.h"

size_t nxr_runtime_domain_count(const nxr_runtime_t *rt)
{
    return rt->domain_count;
}

const nxr_domain_t *nxr_runtime_domain_at(const nxr_runtime_t *rt, size_t i)
{
    return i < rt->domain_count ? &rt->domains[i] : NULL;
}

int nxr_runtime_domain(const nxr_runtime_t *rt, int id, const nxr_domain_t **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (rt == NULL)
        return -EINVAL;
    /* Linear: a runtime has a handful of domains, and ids are sparse. */
    for (size_t i = 0; i < rt->domain_count; i++) {
        if (rt->domains[i].spec.id == id) {
            *out = &rt->domains[i];
            return 0;
        }
    }
    return NXR_ENODOMAIN;
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
    return d->team != NULL ? nxr__team_size(d->team) : 0;
}

unsigned nxr_domain_budget(const nxr_domain_t *d)
{
    return d->spec.budget;
}
