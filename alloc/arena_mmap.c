/*
 * The arena back end of libnxr.so and of ThreadSanitizer builds
 * (--//alloc:arena=mmap, see internal/arena.h): every allocation is one
 * extent of its own from the extent source -- mapped, trimmed and bound to
 * the domain's node exactly as jemalloc's hooks do in the default build --
 * and every free unmaps it. There is no allocator, so
 * nothing uninstrumented sits between the pool and the kernel: TSan sees
 * the pool's mutexes and free lists, and its mmap/munmap interceptors tell
 * it that a reused address is fresh memory.
 *
 * An allocation of `size` bytes aligned to `align` is laid out as
 *     base ... [header][data: size bytes, rounded up to pages]
 * where data = base + lead, lead = max(page, align), and the header sits
 * just below data, so free() finds the mapping from the pointer alone.
 * Slow (mmap, mbind and munmap per allocation, and fresh pages fault in
 * again) and wasteful (two pages for a 64-byte descriptor). The pools and
 * scopes above reuse what they got, so in steady state they do not reach
 * the arena; nxr_domain_malloc/free does, every time. What it costs against
 * jemalloc is measured by //bench:alloc_arenas (the README gives it).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/arena_head.h"
#include "alloc/internal/extent.h"
#include "base/internal/sys.h"

struct nxr__arena {
    struct nxr__arena_head head; /* index: a serial, for describe */
    atomic_size_t allocated;     /* bytes handed out and not freed */
};

struct nxr__arena_head *nxr__arena_head(const struct nxr__arena *a)
{
    return (struct nxr__arena_head *)&a->head;
}

#define HEADER_MAGIC 0x6e786d61u /* "nxma" */

/* Just below the data: what free needs. */
struct header {
    void *base;     /* the mapping */
    size_t length;  /* its length */
    size_t size;    /* bytes asked for (counted in allocated) */
    struct nxr__arena *arena;
    unsigned magic;
};

/* Indexes only need to differ; relaxed: nothing else is ordered by them. */
static atomic_uint next_index;

const char *nxr__arena_kind(void)
{
    return "mmap";
}

int nxr__arena_create(struct nxr__arena **out, int node, struct nxr__registry *registry, int tag,
                      char *err, size_t errsz)
{
    *out = NULL;
    struct nxr__arena *a = nxr__calloc(1, sizeof(*a));
    if (a == NULL) {
        snprintf(err, errsz, "out of memory for the arena of node %d", node);
        return -ENOMEM;
    }
    atomic_init(&a->allocated, 0);
    int rc = nxr__arena_head_init(&a->head, node, registry, tag, err, errsz);
    if (rc != 0) {
        free(a);
        return rc;
    }
    /* The same failure point as creating a jemalloc arena in the default
     * build, so that the fault loop sees the same calls. */
    if (nxr__fault_hit(NXR_FAULT_ALLOC)) {
        snprintf(err, errsz, "creating an arena for node %d failed: %s", node,
                 nxr_strerror(-ENOMEM));
        free(a);
        return -ENOMEM;
    }
    a->head.index = atomic_fetch_add_explicit(&next_index, 1, memory_order_relaxed);
    *out = a;
    return 0;
}

size_t nxr__arena_allocated(const struct nxr__arena *a)
{
    return atomic_load_explicit(&a->allocated, memory_order_relaxed);
}

bool nxr__arena_destroy(struct nxr__arena *a, size_t *live)
{
    *live = 0;
    if (a == NULL)
        return true;
    nxr__arena_detach(a); /* the registry goes with the runtime */
    *live = nxr__arena_allocated(a);
    if (*live != 0)
        return false; /* kept on purpose: its memory's headers point here */
    free(a);
    return true;
}

int nxr__arena_alloc(struct nxr__arena *a, size_t size, size_t align, void **out)
{
    *out = NULL;
    if (nxr__fault_hit(NXR_FAULT_ALLOC))
        return -ENOMEM;
    size_t lead = align > NXR__EXTENT_PAGE ? align : NXR__EXTENT_PAGE;
    if (size > SIZE_MAX - lead - NXR__EXTENT_PAGE)
        return -ENOMEM;
    size_t length = lead + (size + NXR__EXTENT_PAGE - 1) / NXR__EXTENT_PAGE * NXR__EXTENT_PAGE;
    void *base;
    int rc = nxr__extent_map_recorded(&a->head.release_failures, &a->head.record, a->head.node, length, lead,
                                      &base);
    if (rc != 0)
        return rc;
    char *data = (char *)base + lead;
    struct header *h = (struct header *)(void *)(data - sizeof(struct header));
    *h = (struct header){
        .base = base, .length = length, .size = size, .arena = a, .magic = HEADER_MAGIC};
    /* Relaxed: a statistic read at destroy, after every user is done. */
    atomic_fetch_add_explicit(&a->allocated, size, memory_order_relaxed);
    *out = data;
    return 0;
}

void nxr__arena_purge(struct nxr__arena *a)
{
    (void)a; /* every free has unmapped already: nothing is kept */
}

void nxr__arena_free(void *ptr)
{
    if (ptr == NULL)
        return;
    struct header *h = (struct header *)(void *)((char *)ptr - sizeof(struct header));
    if (h->magic != HEADER_MAGIC) {
        fprintf(stderr, "nxr: %p was not allocated from an nxr arena\n", ptr);
        abort();
    }
    struct nxr__arena *a = h->arena;
    size_t size = h->size;
    /* A refused munmap leaves the range mapped (counted, still recorded); it
     * is not reused. */
    nxr__extent_unmap_recorded(&a->head.release_failures, &a->head.record, h->base, h->length);
    atomic_fetch_sub_explicit(&a->allocated, size, memory_order_relaxed);
}

void nxr__arena_free_sized(void *ptr, size_t size, size_t align)
{
    (void)size, (void)align;
    nxr__arena_free(ptr);
}
