/* Weight replicas and their placement (see weights.h). */
#include "service/weights.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

int svc_replica_create(struct svc_replica *out, const nxr_domain_t *d, const float *master,
                       size_t bytes)
{
    memset(out, 0, sizeof(*out));
    out->domain = d;
    void *w = NULL;
    long page = sysconf(_SC_PAGESIZE);
    int rc = nxr_domain_malloc(d, bytes, (size_t)(page > 0 ? page : 4096), &w);
    if (rc != 0)
        return rc;
    /* The arena's extents are bound to the node before they are touched:
     * this first write places every page there, whichever CPU copies. */
    memcpy(w, master, bytes);
    out->w = w;
    out->bytes = bytes;
    svc_replica_verify(out);
    return 0;
}

void svc_replica_verify(struct svc_replica *r)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t first = (uintptr_t)r->w / page * page;
    const uintptr_t end = (uintptr_t)r->w + r->bytes;
    const int node = nxr_domain_node(r->domain);
    r->pages = 0;
    r->pages_on_node = 0;
    for (uintptr_t p = first; p < end; p += page) {
        r->pages++;
        if (node != NXR_NODE_NONE && nxr_mem_node((const void *)p) == node)
            r->pages_on_node++;
    }
    r->on_node = node == NXR_NODE_NONE || r->pages == 0
                     ? -1.0
                     : (double)r->pages_on_node / (double)r->pages;
}

void svc_replica_destroy(struct svc_replica *r)
{
    if (r == NULL || r->w == NULL)
        return;
    nxr_domain_free(r->w);
    r->w = NULL;
}
