/*
 * Node-bound jemalloc arenas (see internal/arena.h): the default back end.
 *
 * The extent hooks are the only place where a domain's memory is obtained
 * from the kernel, through the extent source (internal/extent.h: mmap, then
 * mbind to the node before jemalloc or anyone touches a page). The hooks
 * find their arena by the hooks pointer jemalloc hands back (the hooks
 * are the first member of struct nxr__arena), so there is no global table.
 *
 * jemalloc calls the alloc hook for extents it carves regions from and for
 * the arena's own metadata (so that is node-local too); it calls dalloc when
 * an extent has decayed out of its caches (we decline: see hook_dalloc, the
 * pages are purged instead), and destroy for what is left when the arena is
 * destroyed (we unmap it).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/arena_head.h"
#include "alloc/internal/extent.h"
#include "alloc/internal/je.h"
#include "base/internal/sys.h"

struct nxr__arena {
    extent_hooks_t hooks;        /* first: the pointer jemalloc passes to each hook */
    struct nxr__arena_head head; /* index: jemalloc's arena index */
};

struct nxr__arena_head *nxr__arena_head(const struct nxr__arena *a)
{
    return (struct nxr__arena_head *)&a->head;
}

/*
 * Why the last alloc hook on this thread failed. jemalloc calls the hook
 * synchronously inside nxr_je_mallocx on the allocating thread, so a
 * thread-local is enough to turn its NULL back into NXR_EPLACEMENT or -ENOMEM.
 */
static _Thread_local int hook_error;

static void *hook_alloc(extent_hooks_t *hooks, void *new_addr, size_t size, size_t alignment,
                        bool *zero, bool *commit, unsigned arena_ind)
{
    (void)arena_ind;
    struct nxr__arena *a = (struct nxr__arena *)hooks;
    /* Growing in place would need the range after an existing extent; decline
     * and jemalloc allocates a new extent instead. */
    if (new_addr != NULL)
        return NULL;
    void *p;
    int rc = nxr__extent_map_recorded(&a->head.release_failures, &a->head.record, a->head.node, size, alignment,
                                      &p);
    if (rc != 0) {
        hook_error = rc;
        return NULL;
    }
    *zero = true;   /* fresh anonymous pages read as zero */
    *commit = true; /* and are accessible */
    return p;
}

/* Declined (true: jemalloc keeps the extent), as jemalloc's own default
 * hook declines with `retain`, its default on 64-bit Linux. With retain,
 * jemalloc takes address space it got from the hooks to be never given
 * back piece by piece: it keeps extents of different arenas apart only by
 * their head flags, not by arena, so an unmapped piece of one arena's
 * extent can be mapped again by another arena's hook and then merged
 * across the two (the soak saw jemalloc's extent heaps corrupted with two
 * domains and pool trims). A retained extent stays mapped and recorded in
 * the registry; its pages go back through the purge hooks (madvise), its
 * range is unmapped when the arena is destroyed (hook_destroy). */
static bool hook_dalloc(extent_hooks_t *hooks, void *addr, size_t size, bool committed,
                        unsigned arena_ind)
{
    (void)hooks, (void)addr, (void)size, (void)committed, (void)arena_ind;
    return true;
}

/* The arena is going away (detached from the registry already): a refused
 * munmap leaks the range (counted). */
static void hook_destroy(extent_hooks_t *hooks, void *addr, size_t size, bool committed,
                         unsigned arena_ind)
{
    (void)committed, (void)arena_ind;
    struct nxr__arena *a = (struct nxr__arena *)hooks;
    nxr__extent_unmap(&a->head.release_failures, addr, size);
}

/* Purged pages fault back in under the range's policy, still on the node.
 * true (refused): jemalloc treats the pages as not purged. */
static bool hook_purge_lazy(extent_hooks_t *hooks, void *addr, size_t size, size_t offset,
                            size_t length, unsigned arena_ind)
{
    (void)size, (void)arena_ind;
    struct nxr__arena *a = (struct nxr__arena *)hooks;
    return !nxr__extent_purge(&a->head.release_failures, (char *)addr + offset, length, MADV_FREE);
}

static bool hook_purge_forced(extent_hooks_t *hooks, void *addr, size_t size, size_t offset,
                              size_t length, unsigned arena_ind)
{
    (void)size, (void)arena_ind;
    struct nxr__arena *a = (struct nxr__arena *)hooks;
    return !nxr__extent_purge(&a->head.release_failures, (char *)addr + offset, length,
                              MADV_DONTNEED);
}

/* Anonymous mappings can be split and merged freely: munmap and mbind work
 * on any page range, across mappings. */
static bool hook_split(extent_hooks_t *hooks, void *addr, size_t size, size_t size_a, size_t size_b,
                       bool committed, unsigned arena_ind)
{
    (void)hooks, (void)addr, (void)size, (void)size_a, (void)size_b, (void)committed;
    (void)arena_ind;
    return false;
}

static bool hook_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a, void *addr_b,
                       size_t size_b, bool committed, unsigned arena_ind)
{
    (void)hooks, (void)addr_a, (void)size_a, (void)addr_b, (void)size_b, (void)committed;
    (void)arena_ind;
    return false;
}

const char *nxr__arena_kind(void)
{
    return "jemalloc";
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
    int rc = nxr__arena_head_init(&a->head, node, registry, tag, err, errsz);
    if (rc != 0)
        goto out_free;
    a->hooks = (extent_hooks_t){
        .alloc = hook_alloc,
        .dalloc = hook_dalloc,
        .destroy = hook_destroy,
        /* No commit/decommit: extents stay committed; purging returns pages. */
        .purge_lazy = hook_purge_lazy,
        .purge_forced = hook_purge_forced,
        .split = hook_split,
        .merge = hook_merge,
    };
    extent_hooks_t *hooks = &a->hooks;
    size_t sz = sizeof(a->head.index);
    hook_error = 0;
    rc = nxr__fault_hit(NXR_FAULT_ALLOC)
             ? ENOMEM
             : nxr_je_mallctl("arenas.create", &a->head.index, &sz, &hooks, sizeof(hooks));
    if (rc != 0) {
        /* jemalloc returns a positive errno (EAGAIN: out of arena slots). */
        rc = hook_error != 0 ? hook_error : -ENOMEM;
        snprintf(err, errsz, "creating a jemalloc arena for node %d failed: %s", node,
                 nxr_strerror(rc));
        nxr__extent_record_detach(&a->head.record); /* what a failed create may have mapped */
        goto out_free;
    }
    *out = a;
    return 0;

out_free:
    free(a);
    return rc;
}

/* Reads stats.arenas.<i>.<what> after the caller refreshed the epoch. */
static size_t arena_stat(unsigned index, const char *what)
{
    char name[64];
    size_t v = 0, sz = sizeof(v);
    snprintf(name, sizeof(name), "stats.arenas.%u.%s", index, what);
    if (nxr_je_mallctl(name, &v, &sz, NULL, 0) != 0)
        return 0;
    return v;
}

size_t nxr__arena_allocated(const struct nxr__arena *a)
{
    uint64_t epoch = 1;
    size_t sz = sizeof(epoch);
    /* Writing the epoch makes jemalloc merge its statistics now. */
    nxr_je_mallctl("epoch", &epoch, &sz, &epoch, sz);
    return arena_stat(a->head.index, "small.allocated") + arena_stat(a->head.index, "large.allocated");
}

bool nxr__arena_destroy(struct nxr__arena *a, size_t *live)
{
    *live = 0;
    if (a == NULL)
        return true;
    /* Kept or not, the arena leaves its runtime's registry now: the registry
     * goes with the runtime, and a kept arena's later hooks must not find it. */
    nxr__arena_detach(a);
    *live = nxr__arena_allocated(a);
    if (*live != 0)
        return false; /* kept on purpose: the hooks must outlive the memory */
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.destroy", a->head.index);
    if (nxr_je_mallctl(name, NULL, NULL, NULL, 0) != 0)
        return false; /* jemalloc refused: keep the hooks alive with it */
    free(a);
    return true;
}

void nxr__arena_purge(struct nxr__arena *a)
{
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.purge", a->head.index);
    /* Fails only for a bad index; refused madvise calls are counted by the
     * purge hooks. */
    nxr_je_mallctl(name, NULL, NULL, NULL, 0);
}

static int lg(size_t align)
{
    return __builtin_ctzll(align);
}

int nxr__arena_alloc(struct nxr__arena *a, size_t size, size_t align, void **out)
{
    *out = NULL;
    if (nxr__fault_hit(NXR_FAULT_ALLOC))
        return -ENOMEM;
    hook_error = 0;
    void *p = nxr_je_mallocx(size, MALLOCX_ARENA(a->head.index) | MALLOCX_TCACHE_NONE |
                                       MALLOCX_LG_ALIGN(lg(align)));
    if (p == NULL)
        return hook_error != 0 ? hook_error : -ENOMEM;
    *out = p;
    return 0;
}

void nxr__arena_free(void *ptr)
{
    if (ptr != NULL)
        nxr_je_dallocx(ptr, MALLOCX_TCACHE_NONE);
}

void nxr__arena_free_sized(void *ptr, size_t size, size_t align)
{
    nxr_je_sdallocx(ptr, size, MALLOCX_TCACHE_NONE | MALLOCX_LG_ALIGN(lg(align)));
}
