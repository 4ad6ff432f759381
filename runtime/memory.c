/*
 * Domain memory: the runtime's side of alloc/. Creates and destroys every
 * domain's pool and forwards the public per-domain memory calls of
 * alloc/nxr_alloc.h to the domain's pool (alloc/ does not know the layout
 * of struct nxr_domain).
 */
#include <errno.h>
#include <string.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/pool.h"
#include "alloc/internal/registry.h"
#include "base/internal/sys.h"
#include "runtime/internal/runtime.h"

int nxr__runtime_pools_create(nxr_runtime_t *rt, char *err, size_t errsz)
{
    for (size_t i = 0; i < rt->domain_count; i++) {
        struct nxr_domain *d = rt->domains[i];
        struct nxr__pool_opts opts = {
            .domain_id = d->spec.id,
            .node = d->spec.node,
            .cap_bytes = rt->settings.pool_cap,
            .registry = rt->registry,
        };
        int rc = nxr__pool_create(&d->pool, &opts, err, errsz);
        if (rc != 0)
            return rc; /* the pools made so far go with nxr_runtime_destroy */
    }
    return 0;
}

int nxr__runtime_pools_destroy(nxr_runtime_t *rt)
{
    int status = 0;
    for (size_t i = 0; i < rt->domain_count; i++) {
        int rc = nxr__pool_destroy(rt->domains[i]->pool);
        rt->domains[i]->pool = NULL;
        if (rc != 0 && status == 0)
            status = rc;
    }
    return status;
}

int nxr_buffer_acquire(nxr_domain_t *d, size_t size, nxr_buffer_t **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (d == NULL)
        return -EINVAL;
    if (nxr__runtime_forked(d->rt))
        return NXR_EFORKED;
    return nxr__pool_acquire(d->pool, size, out);
}

int nxr_pool_stats(const nxr_domain_t *d, struct nxr_pool_stats *out)
{
    if (d == NULL || out == NULL)
        return -EINVAL;
    if (nxr__runtime_forked(d->rt))
        return NXR_EFORKED;
    nxr__pool_stats(d->pool, out);
    return 0;
}

int nxr_pool_set_cap(nxr_domain_t *d, size_t cap_bytes)
{
    if (d == NULL)
        return -EINVAL;
    if (nxr__runtime_forked(d->rt))
        return NXR_EFORKED;
    nxr__pool_set_cap(d->pool, cap_bytes);
    return 0;
}

int nxr_pool_trim(nxr_domain_t *d)
{
    if (d == NULL)
        return -EINVAL;
    if (nxr__runtime_forked(d->rt))
        return NXR_EFORKED;
    nxr__pool_trim(d->pool);
    return 0;
}

enum nxr_mem_binding nxr_domain_mem_binding(const nxr_domain_t *d)
{
    return nxr__arena_binding(nxr__pool_arena(d->pool));
}

int nxr_domain_malloc(nxr_domain_t *d, size_t size, size_t alignment, void **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (d == NULL || size == 0 || (alignment & (alignment - 1)) != 0)
        return -EINVAL;
    if (nxr__runtime_forked(d->rt))
        return NXR_EFORKED;
    return nxr__arena_alloc(nxr__pool_arena(d->pool), size, alignment != 0 ? alignment : 16, out);
}

void nxr_domain_free(void *ptr)
{
    nxr__arena_free(ptr);
}

int nxr_scope_create(nxr_domain_t *d, const struct nxr_scope_opts *opts, nxr_scope_t **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (d == NULL)
        return -EINVAL;
    if (nxr__runtime_forked(d->rt))
        return NXR_EFORKED;
    return nxr__scope_create(d->pool, opts, out);
}

int nxr_mem_domain(const nxr_runtime_t *rt, const void *ptr, nxr_domain_t **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (rt == NULL)
        return -EINVAL;
    NXR__HANDLE_CHECK(rt, "runtime");
    if (nxr__runtime_forked(rt))
        return NXR_EFORKED;
    int id;
    if (ptr == NULL || !nxr__registry_find(rt->registry, ptr, &id))
        return NXR_ENODOMAIN;
    return nxr_runtime_domain(rt, id, out);
}

int nxr_mem_rehome(nxr_domain_t *d, const void *src, size_t size, size_t alignment,
                   void **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (src == NULL)
        return -EINVAL;
    void *dst;
    int rc = nxr_domain_malloc(d, size, alignment, &dst);
    if (rc != 0)
        return rc;
    memcpy(dst, src, size);
    *out = dst;
    return 0;
}
