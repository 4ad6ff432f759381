/*
 * Routing by the inputs' bytes (runtime/nxr_route.h): the resolver that picks a
 * call's domain from where its inputs live, its counters, and the
 * accessors around it.
 */
#include <errno.h>
#include <stdlib.h>

#include "alloc/internal/registry.h"
#include "base/internal/last_error.h"
#include "base/internal/sys.h"
#include "runtime/internal/route.h"
#include "runtime/internal/runtime.h"

const char *nxr_route_reason_name(enum nxr_route_reason reason)
{
    switch (reason) {
    case NXR_ROUTE_REASON_EXPLICIT:
        return "explicit";
    case NXR_ROUTE_REASON_MOST_BYTES:
        return "most-bytes";
    case NXR_ROUTE_REASON_TIE:
        return "tie";
    case NXR_ROUTE_REASON_DEFAULT:
        return "default";
    }
    return "unknown";
}

const char *nxr_route_policy_name(enum nxr_route_policy policy)
{
    switch (policy) {
    case NXR_ROUTE_MOST_BYTES:
        return "most-bytes";
    case NXR_ROUTE_SINGLE_DOMAIN:
        return "single-domain";
    case NXR_ROUTE_DEFAULT:
        break;
    }
    return "unknown";
}

nxr_domain_t *nxr_runtime_default_domain(const nxr_runtime_t *rt)
{
    if (rt == NULL)
        return NULL;
    NXR__HANDLE_CHECK(rt, "runtime");
    return rt->default_domain;
}

enum nxr_route_policy nxr_runtime_route_policy(const nxr_runtime_t *rt)
{
    if (rt == NULL)
        return NXR_ROUTE_DEFAULT;
    NXR__HANDLE_CHECK(rt, "runtime");
    return rt->settings.route;
}

/* Inputs of one call are few (a kernel has at most four); a caller of
 * nxr_runtime_route may pass more, which costs one heap array. */
#define STACK_INPUTS 16

int nxr__place(const nxr_runtime_t *rt, const struct nxr_mem_ref *inputs, size_t n,
               struct nxr_route *out, struct nxr_domain **domain)
{
    int stack_ids[STACK_INPUTS];
    int *ids = n <= STACK_INPUTS ? stack_ids : nxr__malloc(n * sizeof(*ids));
    if (ids == NULL)
        return -ENOMEM;
    /* Each input's domain once; -1 for none (ids are >= 0). */
    for (size_t i = 0; i < n; i++) {
        if (inputs[i].ptr == NULL || inputs[i].bytes == 0 ||
            !nxr__registry_find(rt->registry, inputs[i].ptr, &ids[i]))
            ids[i] = -1;
    }
    struct nxr_route p = {.domain_id = -1, .reason = NXR_ROUTE_REASON_DEFAULT};
    bool tie = false;
    /* Per distinct domain (first occurrence), its bytes: quadratic in n,
     * which is a handful. */
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0)
            continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = ids[j] == ids[i];
        if (seen)
            continue;
        size_t bytes = 0;
        for (size_t j = i; j < n; j++) {
            if (ids[j] == ids[i])
                bytes = bytes + inputs[j].bytes < bytes ? SIZE_MAX : bytes + inputs[j].bytes;
        }
        p.domains++;
        p.counted_bytes = p.counted_bytes + bytes < bytes ? SIZE_MAX : p.counted_bytes + bytes;
        if (p.domain_id < 0 || bytes > p.domain_bytes) {
            p.domain_id = ids[i];
            p.domain_bytes = bytes;
            tie = false;
        } else if (bytes == p.domain_bytes) {
            tie = true;
            if (ids[i] < p.domain_id)
                p.domain_id = ids[i];
        }
    }
    if (ids != stack_ids)
        free(ids);
    nxr_domain_t *d = rt->default_domain;
    if (p.domain_id < 0) {
        p.domain_id = d->spec.id;
    } else {
        p.reason = tie ? NXR_ROUTE_REASON_TIE : NXR_ROUTE_REASON_MOST_BYTES;
        /* The registry holds only this runtime's domains' ranges. */
        if (nxr_runtime_domain(rt, p.domain_id, &d) != 0)
            return NXR_ENODOMAIN;
    }
    *out = p;
    *domain = (struct nxr_domain *)d;
    if (p.domains > 1 && rt->settings.route == NXR_ROUTE_SINGLE_DOMAIN)
        return NXR_EMIXED;
    return 0;
}

int nxr_runtime_route(const nxr_runtime_t *rt, const struct nxr_mem_ref *inputs, size_t n,
                      struct nxr_route *out)
{
    nxr__call_begin();
    if (rt == NULL || out == NULL || (inputs == NULL && n > 0))
        return nxr__fail(-EINVAL, __func__, "%s",
                         rt == NULL    ? "rt is NULL"
                         : out == NULL ? "out is NULL"
                                       : "inputs is NULL with n > 0");
    NXR__HANDLE_CHECK(rt, "runtime");
    if (nxr__runtime_forked(rt))
        return nxr__fail(NXR_EFORKED, __func__,
                         "the runtime was created before this process forked");
    struct nxr_domain *d;
    int rc = nxr__place(rt, inputs, n, out, &d);
    if (rc == NXR_EMIXED)
        return nxr__fail(rc, __func__, "the inputs lie on %u domains (single-domain policy)",
                         out->domains);
    return rc == 0 ? 0 : nxr__fail(rc, __func__, "%s", nxr_strerror(rc));
}

void nxr__place_count(nxr_runtime_t *rt, struct nxr_domain *d, const struct nxr_route *p, int rc)
{
    /* Relaxed: counters for diagnostics, ordered with nothing. */
    if (rc == NXR_EMIXED)
        atomic_fetch_add_explicit(&rt->refused_mixed, 1, memory_order_relaxed);
    else if (rc == 0 && (unsigned)p->reason <= NXR_ROUTE_REASON_DEFAULT)
        atomic_fetch_add_explicit(&d->placed[p->reason], 1, memory_order_relaxed);
}
