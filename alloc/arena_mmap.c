/*
 * The arena back end of libnxr.so and of ThreadSanitizer builds
 * (--//alloc:arena=mmap, see internal/arena.h): every allocation is one
 * extent of its own from the extent source -- mapped, trimmed and bound to
 * the domain's node exactly as jemalloc's hooks do in the default build --
 * and a free unmaps it, unless the arena's small cache of freed mappings
 * keeps it for the next allocation of the same length (below). There is no
 * allocator, so nothing uninstrumented sits between the pool and the
 * kernel: TSan sees the pool's mutexes and free lists, and this file's.
 *
 * An allocation of `size` bytes aligned to `align` is laid out as
 *     base ... [header][data: size bytes, rounded up to pages]
 * where data = base + lead, lead = max(page, align), and the header sits
 * just below data, so free() finds the mapping from the pointer alone.
 * Wasteful (two pages for a 64-byte descriptor), and slow when it maps: an
 * mmap, mbind and munmap per allocation, and fresh pages to fault in -- and
 * an munmap in a process with threads on other CPUs costs them a TLB
 * shootdown. So a free keeps up to CACHE_EXTENTS mappings (CACHE_BYTES in
 * all) for reuse by an allocation of the same length and lead: still
 * mapped, still bound to the node, still recorded (nxr_mem_domain reports
 * freed memory nxr keeps as its domain's), pages resident. A purge
 * (nxr_pool_trim) and destroy unmap them. The pools and scopes above reuse
 * what they got, so in steady state they do not reach the arena;
 * nxr_domain_malloc/free does. What it costs against jemalloc is measured
 * by //bench:alloc_arenas (docs/guide.md gives it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/arena_head.h"
#include "alloc/internal/extent.h"
#include "base/internal/lock_rank.h"
#include "base/internal/sys.h"

/* The cache of freed mappings: a handful, for the sizes a caller frees and
 * allocates again (a service's per-request buffers). */
#define CACHE_EXTENTS 16
#define CACHE_BYTES   ((size_t)64 << 20)

struct cached_extent {
    void *base;
    size_t length; /* of the whole mapping */
    size_t lead;   /* data = base + lead */
};

struct nxr__arena {
    struct nxr__arena_head head; /* index: a serial, for describe */
    atomic_size_t allocated;     /* bytes handed out and not freed */
    /* Guards the cache and closing; held for a few loads and stores, never
     * across a system call. */
    pthread_mutex_t lock;
    struct cached_extent cache[CACHE_EXTENTS];
    size_t cached;       /* entries in cache */
    size_t cached_bytes; /* their lengths' sum, at most CACHE_BYTES */
    bool closing;        /* destroy began: frees unmap, never cache */
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
    /* Static initialisation: default attributes, nothing that can fail. */
    a->lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
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

/* Takes the whole cache out under the lock (closing: and stops caching),
 * then unmaps it outside. */
static void flush_cache(struct nxr__arena *a, bool closing)
{
    struct cached_extent out[CACHE_EXTENTS];
    nxr__lock(&a->lock, NXR__RANK_ARENA);
    size_t n = a->cached;
    memcpy(out, a->cache, n * sizeof(out[0]));
    a->cached = 0;
    a->cached_bytes = 0;
    if (closing)
        a->closing = true;
    nxr__unlock(&a->lock, NXR__RANK_ARENA);
    for (size_t i = 0; i < n; i++)
        nxr__extent_unmap_recorded(&a->head.release_failures, &a->head.record, out[i].base,
                                   out[i].length);
}

bool nxr__arena_destroy(struct nxr__arena *a, size_t *live)
{
    *live = 0;
    if (a == NULL)
        return true;
    /* Cached mappings are freed memory: unmapped now, and none cached any
     * more, so that a kept arena's late frees unmap (nothing would flush). */
    flush_cache(a, true);
    nxr__arena_detach(a); /* the registry goes with the runtime */
    *live = nxr__arena_allocated(a);
    if (*live != 0)
        return false; /* kept on purpose: its memory's headers point here */
    pthread_mutex_destroy(&a->lock);
    free(a);
    return true;
}

/* A cached mapping of exactly this length and lead, taken out; NULL: none. */
static void *take_cached(struct nxr__arena *a, size_t length, size_t lead)
{
    void *base = NULL;
    nxr__lock(&a->lock, NXR__RANK_ARENA);
    for (size_t i = 0; i < a->cached; i++) {
        if (a->cache[i].length == length && a->cache[i].lead == lead) {
            base = a->cache[i].base;
            a->cached_bytes -= length;
            a->cache[i] = a->cache[--a->cached];
            break;
        }
    }
    nxr__unlock(&a->lock, NXR__RANK_ARENA);
    return base;
}

/* Keeps a freed mapping for reuse; false: no room (or closing), unmap it. */
static bool put_cached(struct nxr__arena *a, void *base, size_t length, size_t lead)
{
    bool kept = false;
    nxr__lock(&a->lock, NXR__RANK_ARENA);
    if (!a->closing && a->cached < CACHE_EXTENTS && length <= CACHE_BYTES - a->cached_bytes) {
        a->cache[a->cached++] = (struct cached_extent){.base = base, .length = length, .lead = lead};
        a->cached_bytes += length;
        kept = true;
    }
    nxr__unlock(&a->lock, NXR__RANK_ARENA);
    return kept;
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
    void *base = take_cached(a, length, lead);
    if (base == NULL) {
        int rc = nxr__extent_map_recorded(&a->head.release_failures, &a->head.record, a->head.node,
                                          length, lead, &base);
        if (rc != 0)
            return rc;
    }
    char *data = (char *)base + lead;
    struct header *h = (struct header *)(void *)(data - sizeof(struct header));
    *h = (struct header){
        .base = base, .length = length, .size = size, .arena = a, .magic = HEADER_MAGIC};
    /* (A cached mapping's data is what its last user left; like jemalloc's,
     * nxr's arena memory is not zeroed.) */
    /* Relaxed: a statistic read at destroy, after every user is done. */
    atomic_fetch_add_explicit(&a->allocated, size, memory_order_relaxed);
    *out = data;
    return 0;
}

void nxr__arena_purge(struct nxr__arena *a)
{
    flush_cache(a, false); /* what frees kept goes back to the kernel */
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
    void *base = h->base;
    size_t length = h->length, lead = (size_t)((char *)ptr - (char *)base);
    /* Counted out before it can be reused by another thread. */
    atomic_fetch_sub_explicit(&a->allocated, size, memory_order_relaxed);
    if (put_cached(a, base, length, lead))
        return;
    /* A refused munmap leaves the range mapped (counted, still recorded); it
     * is not reused. */
    nxr__extent_unmap_recorded(&a->head.release_failures, &a->head.record, base, length);
}

void nxr__arena_free_sized(void *ptr, size_t size, size_t align)
{
    (void)size, (void)align;
    nxr__arena_free(ptr);
}
