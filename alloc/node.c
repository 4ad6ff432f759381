/*
 * Placement: the binding probe run once per domain at runtime creation, and
 * the move_pages query that lets tests and users see where pages live.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/extent.h"
#include "base/internal/last_error.h"
#include "base/internal/sys.h"
#include "base/nxr_status.h"

#define PROBE_SIZE 4096u

/* nxr_mem_node without its error detail (the probe below reports its own). */
static int page_node(const void *ptr)
{
    const void *page = (const void *)((uintptr_t)ptr & ~(uintptr_t)(PROBE_SIZE - 1));
    int status;
    int rc = nxr__move_pages_query(page, &status);
    return rc != 0 ? rc : status;
}

int nxr_mem_node(const void *ptr)
{
    nxr__call_begin();
    int node = page_node(ptr);
    if (node < 0)
        return nxr__fail(node, __func__, "the page of %p: %s%s", ptr, nxr_strerror(node),
                         node == -ENOENT || node == -EFAULT ? " (not touched yet, or not mapped)"
                                                            : "");
    return node;
}

/* One pass over the pages of [ptr, ptr + bytes): *pages, *on_node and
 * *absent (pages absent even when asked again) counted; 0 or the query's
 * error. */
static int count_pass(const void *ptr, size_t bytes, int node, size_t *pages, size_t *on_node,
                      size_t *absent)
{
    *pages = *on_node = *absent = 0;
    const uintptr_t end = (uintptr_t)ptr + bytes;
    for (uintptr_t p = (uintptr_t)ptr / PROBE_SIZE * PROBE_SIZE; p < end; p += PROBE_SIZE) {
        int where = page_node((const void *)p);
        if (where == -ENOENT) {
            /* Not present: being moved (or never written, which the caller
             * promised it was not). The read waits for the move to end; it
             * reads a byte of the range (the page's first may be someone
             * else's: a sanitizer's redzone, a neighbour's allocation). */
            (void)*(const volatile char *)(p < (uintptr_t)ptr ? (uintptr_t)ptr : p);
            where = page_node((const void *)p);
        }
        if (where < 0 && where != -ENOENT && where != -EFAULT)
            return nxr__fail(where, "nxr_mem_pages_on_node", "the page at %p: %s", (const void *)p,
                             nxr_strerror(where));
        ++*pages;
        *on_node += where == node;
        *absent += where == -ENOENT;
    }
    return 0;
}

/* Passes over a range in which some page stayed absent. The read above does
 * not wait for every move: in CI's 4-node VM a KV pool's check once again
 * found 257 of its 1025 pages absent twice, the pool's share of one 2 MiB
 * range, what a huge-page collapse takes at a time. A later pass (after
 * the rest of the range was asked) finds the range moved; the pass that
 * found the fewest absent pages is the answer. Bounded: a page absent on
 * every pass counts as not on the node. */
#define ABSENT_PASSES 3

int nxr_mem_pages_on_node(const void *ptr, size_t bytes, int node, size_t *pages, size_t *on_node)
{
    nxr__call_begin();
    if (ptr == NULL || pages == NULL || on_node == NULL || bytes == 0 || node < 0)
        return nxr__fail(-EINVAL, __func__, "%s",
                         ptr == NULL       ? "ptr is NULL"
                         : pages == NULL   ? "pages is NULL"
                         : on_node == NULL ? "on_node is NULL"
                         : bytes == 0      ? "bytes is 0"
                                           : "node is negative");
    size_t best_absent = SIZE_MAX; /* the first pass always sets the counts */
    for (unsigned pass = 0; pass < ABSENT_PASSES && best_absent > 0; pass++) {
        size_t n, on, absent;
        const int rc = count_pass(ptr, bytes, node, &n, &on, &absent);
        if (rc != 0) { /* the pages this pass asked before the failure */
            *pages = n;
            *on_node = on;
            return rc;
        }
        if (absent < best_absent) {
            best_absent = absent;
            *pages = n;
            *on_node = on;
        }
    }
    return 0;
}

const char *nxr_mem_binding_name(enum nxr_mem_binding binding)
{
    switch (binding) {
    case NXR_MEM_BOUND:
        return "bound";
    case NXR_MEM_NO_NODE:
        return "no-node";
    case NXR_MEM_UNAVAILABLE:
        return "unavailable";
    }
    return "unknown";
}

int nxr__node_probe(int node, enum nxr_mem_binding *binding, char *why, size_t whysz,
                    atomic_ulong *release_failures)
{
    why[0] = '\0';
    if (node < 0) {
        *binding = NXR_MEM_NO_NODE;
        snprintf(why, whysz, "the domain has no NUMA node");
        return 0;
    }
    void *page;
    int rc = nxr__mmap_anon(PROBE_SIZE, &page);
    if (rc != 0)
        return rc;
    *binding = NXR_MEM_UNAVAILABLE;
    rc = nxr__mbind_node(page, PROBE_SIZE, node);
    if (rc != 0) {
        snprintf(why, whysz, "mbind to node %d failed: %s", node, nxr_strerror(rc));
    } else {
        *(volatile char *)page = 1; /* fault the page in under the policy */
        int where = page_node(page);
        if (where == node)
            *binding = NXR_MEM_BOUND;
        else if (where < 0)
            snprintf(why, whysz, "move_pages query failed: %s", nxr_strerror(where));
        else
            snprintf(why, whysz, "a page bound to node %d landed on node %d", node, where);
    }
    nxr__extent_unmap(release_failures, page, PROBE_SIZE);
    return 0;
}
