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
#include "base/internal/last_error.h"
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

/* The checks every per-domain call starts with: 0, or its failure (*out,
 * when there is one, is then NULL). */
static int domain_call_begins(const char *call, const nxr_domain_t *d, void *out, bool has_out)
{
    nxr__call_begin();
    if (has_out && out != NULL)
        *(void **)out = NULL;
    if (d == NULL || (has_out && out == NULL))
        return nxr__fail(-EINVAL, call, "%s is NULL", d == NULL ? "d" : "out");
    if (nxr__runtime_forked(d->rt))
        return nxr__fail(NXR_EFORKED, call,
                         "domain %d's runtime was created before this process forked", d->spec.id);
    return 0;
}

/* A failure of the pool or arena below, told as `call`'s. */
static int below(const char *call, const nxr_domain_t *d, int rc, size_t size)
{
    if (rc == 0)
        return 0;
    return nxr__fail(rc, call, "%zu bytes on domain %d: %s", size, d->spec.id, nxr_strerror(rc));
}

int nxr_buffer_acquire(nxr_domain_t *d, size_t size, nxr_buffer_t **out)
{
    int rc = domain_call_begins(__func__, d, out, true);
    if (rc != 0)
        return rc;
    return below(__func__, d, nxr__pool_acquire(d->pool, size, out), size);
}

int nxr_pool_stats(const nxr_domain_t *d, struct nxr_pool_stats *out)
{
    int rc = domain_call_begins(__func__, d, NULL, false);
    if (rc != 0)
        return rc;
    if (out == NULL)
        return nxr__fail(-EINVAL, __func__, "out is NULL");
    nxr__pool_stats(d->pool, out);
    return 0;
}

int nxr_pool_set_cap(nxr_domain_t *d, size_t cap_bytes)
{
    int rc = domain_call_begins(__func__, d, NULL, false);
    if (rc != 0)
        return rc;
    nxr__pool_set_cap(d->pool, cap_bytes);
    return 0;
}

int nxr_pool_trim(nxr_domain_t *d)
{
    int rc = domain_call_begins(__func__, d, NULL, false);
    if (rc != 0)
        return rc;
    nxr__pool_trim(d->pool);
    return 0;
}

enum nxr_mem_binding nxr_domain_mem_binding(const nxr_domain_t *d)
{
    if (d == NULL)
        return NXR_MEM_NO_NODE;
    return nxr__arena_binding(nxr__pool_arena(d->pool));
}

/* nxr_domain_malloc, told as `call`'s. */
static int domain_malloc(const char *call, nxr_domain_t *d, size_t size, size_t alignment,
                         void **out)
{
    int rc = domain_call_begins(call, d, out, true);
    if (rc != 0)
        return rc;
    if (size == 0)
        return nxr__fail(-EINVAL, call, "size is 0");
    if ((alignment & (alignment - 1)) != 0)
        return nxr__fail(-EINVAL, call, "alignment %zu is not a power of two", alignment);
    return below(
        call, d,
        nxr__arena_alloc(nxr__pool_arena(d->pool), size, alignment != 0 ? alignment : 16, out),
        size);
}

int nxr_domain_malloc(nxr_domain_t *d, size_t size, size_t alignment, void **out)
{
    return domain_malloc(__func__, d, size, alignment, out);
}

void nxr_domain_free(void *ptr)
{
    nxr__arena_free(ptr);
}

int nxr_scope_create(nxr_domain_t *d, const struct nxr_scope_opts *opts, nxr_scope_t **out)
{
    int rc = domain_call_begins(__func__, d, out, true);
    if (rc != 0)
        return rc;
    rc = nxr__scope_create(d->pool, opts, out);
    return rc == 0 ? 0 : nxr__fail(rc, __func__, "on domain %d: %s", d->spec.id, nxr_strerror(rc));
}

int nxr_mem_domain(const nxr_runtime_t *rt, const void *ptr, nxr_domain_t **out)
{
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (rt == NULL || out == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", rt == NULL ? "rt" : "out");
    NXR__HANDLE_CHECK(rt, "runtime");
    if (nxr__runtime_forked(rt))
        return nxr__fail(NXR_EFORKED, __func__,
                         "the runtime was created before this process forked");
    int id;
    if (ptr == NULL || !nxr__registry_find(rt->registry, ptr, &id) ||
        nxr_runtime_domain(rt, id, out) != 0)
        return nxr__fail(NXR_ENODOMAIN, __func__, "%p is not memory of the runtime", ptr);
    return 0;
}

int nxr_mem_rehome(nxr_domain_t *d, const void *src, size_t size, size_t alignment,
                   void **out)
{
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (src == NULL || out == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", src == NULL ? "src" : "out");
    void *dst;
    int rc = domain_malloc(__func__, d, size, alignment, &dst);
    if (rc != 0)
        return rc;
    memcpy(dst, src, size);
    *out = dst;
    return 0;
}
