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

/* The node of the page at p, of memory the caller wrote. A page the kernel
 * is moving when asked (khugepaged collapsing its range into a huge page,
 * compaction migrating it) has no answer for that moment: move_pages
 * reports it absent. Reading it waits for the move to finish, and the
 * second answer is where it lives. Only for memory the caller wrote (the
 * replicas, the packed copies, the KV pool, all written at creation): a
 * read of a page never touched maps the shared zero page, which
 * move_pages then reports on the node holding it (node 0 here). Seen
 * twice in CI's 4-node VM, never in five boots by hand: a KV pool's 1025
 * pages reported 768 on the node, and the 257 missing are exactly the
 * pool's share of its first 2 MiB-aligned range, what one collapse into a
 * huge page takes at a time. */
static int page_node_settled(uintptr_t p)
{
    int where = nxr_mem_node((const void *)p);
    if (where < 0) {
        (void)*(const volatile char *)p;
        where = nxr_mem_node((const void *)p);
    }
    return where;
}

/* Counts the pages of [data, data + bytes) and those on `node`. */
static void count_pages(const void *data, size_t bytes, int node, size_t *pages, size_t *on_node)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t first = (uintptr_t)data / page * page;
    const uintptr_t end = (uintptr_t)data + bytes;
    for (uintptr_t p = first; p < end; p += page) {
        (*pages)++;
        if (node != NXR_NODE_NONE && page_node_settled(p) == node)
            (*on_node)++;
    }
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
