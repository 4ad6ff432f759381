/* The part of an arena both back ends share (internal/arena_head.h). */
#include "alloc/internal/arena_head.h"

#include <stdio.h>

#include "base/nxr_status.h"

int nxr__arena_head_init(struct nxr__arena_head *h, int node, struct nxr__registry *registry,
                         int tag, char *err, size_t errsz)
{
    h->domain_node = node;
    atomic_init(&h->release_failures, 0);
    atomic_init(&h->record.registry, registry);
    h->record.tag = tag;
    int rc = nxr__node_probe(node, &h->binding, h->reason, sizeof(h->reason),
                             &h->release_failures);
    if (rc != 0) {
        snprintf(err, errsz, "mapping a probe page for node %d failed: %s", node, nxr_strerror(rc));
        return rc;
    }
    h->node = h->binding == NXR_MEM_BOUND ? node : -1;
    return 0;
}

void nxr__arena_detach(struct nxr__arena *a)
{
    nxr__extent_record_detach(&nxr__arena_head(a)->record);
}

unsigned long nxr__arena_release_failures(const struct nxr__arena *a)
{
    /* Relaxed: a statistic (see internal/extent.h). */
    return atomic_load_explicit(&nxr__arena_head(a)->release_failures, memory_order_relaxed);
}

unsigned nxr__arena_index(const struct nxr__arena *a)
{
    return nxr__arena_head(a)->index;
}

int nxr__arena_node(const struct nxr__arena *a)
{
    return nxr__arena_head(a)->domain_node;
}

enum nxr_mem_binding nxr__arena_binding(const struct nxr__arena *a)
{
    return nxr__arena_head(a)->binding;
}

const char *nxr__arena_binding_reason(const struct nxr__arena *a)
{
    return nxr__arena_head(a)->reason;
}
