/* Weight replicas and their placement (see weights.h). */
#include "service/weights.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int svc_replica_create(struct svc_replica *out, nxr_domain_t *d, const float *master,
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

int svc_packed_create(struct svc_packed *out, nxr_runtime_t *rt, const struct svc_model_shape *s,
                      const float *master, const int *ids, size_t n)
{
    memset(out, 0, sizeof(*out));
    const size_t count = svc_model_matrices(s);
    out->m = calloc(count, sizeof(out->m[0]));
    if (out->m == NULL)
        return -ENOMEM;
    int rc = 0;
    for (; out->count < count && rc == 0; out->count++) {
        const struct svc_model_matrix mx = svc_model_matrix(s, master, out->count);
        struct nxr_weights_desc d;
        nxr_weights_desc_init(&d);
        d.k = mx.k;
        d.n = mx.n;
        d.w = mx.w;
        d.ldw = mx.n;
        d.domain_ids = ids;
        d.domain_count = n;
        if ((rc = nxr_weights_create(rt, &d, &out->m[out->count])) != 0)
            break;
    }
    if (rc != 0)
        svc_packed_destroy(out);
    return rc;
}

void svc_packed_destroy(struct svc_packed *p)
{
    for (size_t i = 0; i < p->count; i++)
        nxr_weights_destroy(p->m[i]);
    free(p->m);
    p->m = NULL;
    p->count = 0;
}

/* Counts the pages of [data, data + bytes) and those on `node`: the
 * replicas, the packed copies and the KV pool are all written at creation,
 * which nxr_mem_pages_on_node needs to ask a page caught moving again: once
 * in a while CI's 4-node VM reported a KV pool's 1025 pages 768 on the node,
 * the 257 missing exactly the pool's share of its first 2 MiB-aligned
 * range, what one collapse into a huge page moves at a time. Asking each
 * page again made it rarer, not gone (it came back once, stop 45); a second
 * pass over the range now asks them after the rest. A failed query counts
 * the range's pages as off the node (never claimed to be on it). */
static void count_pages(const void *data, size_t bytes, int node, size_t *pages, size_t *on_node)
{
    size_t n = 0, on = 0;
    if (bytes == 0)
        return;
    if (node == NXR_NODE_NONE || nxr_mem_pages_on_node(data, bytes, node, &n, &on) != 0) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        n = ((uintptr_t)data + bytes - 1) / page - (uintptr_t)data / page + 1;
        on = 0;
    }
    *pages += n;
    *on_node += on;
}

void svc_replica_verify(struct svc_replica *r)
{
    const int node = nxr_domain_node(r->domain);
    r->pages = 0;
    r->pages_on_node = 0;
    count_pages(r->w, r->bytes, node, &r->pages, &r->pages_on_node);
    for (size_t i = 0; r->packed != NULL && i < r->packed->count; i++) {
        const void *data;
        size_t bytes;
        if (nxr_weights_copy(r->packed->m[i], r->domain, &data, &bytes) == 0)
            count_pages(data, bytes, node, &r->pages, &r->pages_on_node);
        else
            r->pages++; /* no copy here: never claimed to be on the node */
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
