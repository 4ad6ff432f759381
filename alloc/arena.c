/*
 * Node-bound jemalloc arenas (see internal/arena.h).
 *
 * The extent hooks are the only place where a domain's memory is obtained
 * from the kernel: mmap, then mbind to the node before jemalloc or anyone
 * touches a page, so the first fault already happens under the policy. The
 * hooks find their arena by the hooks pointer jemalloc hands back (the hooks
 * are the first member of struct nxr__arena), so there is no global table.
 *
 * jemalloc calls the alloc hook for extents it carves regions from and for
 * the arena's own metadata (so that is node-local too); it calls dalloc when
 * an extent has decayed out of its caches (we unmap it), and destroy for
 * what is left when the arena is destroyed.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/je.h"
#include "alloc/internal/registry.h"
#include "base/internal/sys.h"

#define PAGE 4096u

struct nxr__arena {
    extent_hooks_t hooks; /* first: the pointer jemalloc passes to each hook */
    unsigned index;       /* jemalloc arena index */
    int node;             /* node the hooks bind to, or -1: do not bind */
    int domain_node;      /* the domain's node (NXR_NODE_NONE: none) */
    enum nxr_mem_binding binding;
    char reason[128];
    /* Where the hooks record the extents they map, tagged `tag` (the
     * domain's id); NULL once detached. Set before jemalloc can call a hook
     * (arenas.create already does, for the arena's metadata); cleared only
     * while no other thread uses the arena, so relaxed would do: acquire and
     * release keep the rule visible to a reader of the code. */
    _Atomic(struct nxr__registry *) registry;
    int tag;
};

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
    if (alignment < PAGE)
        alignment = PAGE;
    if (size > SIZE_MAX - alignment) {
        hook_error = -ENOMEM;
        return NULL;
    }
    /* Over-map by alignment - PAGE, then cut the ends off. */
    size_t span = size + alignment - PAGE;
    void *raw;
    int rc = nxr__mmap_anon(span, &raw);
    if (rc != 0) {
        hook_error = rc;
        return NULL;
    }
    uintptr_t start = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
    size_t head = start - (uintptr_t)raw;
    size_t tail = span - head - size;
    if (head != 0)
        nxr__munmap(raw, head);
    if (tail != 0)
        nxr__munmap((void *)(start + size), tail);
    if (a->node >= 0) {
        rc = nxr__mbind_node((void *)start, size, a->node);
        if (rc != 0) {
            /* Never hand out memory that is not where the arena claims. */
            nxr__munmap((void *)start, size);
            hook_error = NXR_EPLACEMENT;
            return NULL;
        }
    }
    /* Never hand out memory whose domain a lookup could not tell. */
    struct nxr__registry *reg = atomic_load_explicit(&a->registry, memory_order_acquire);
    if (reg != NULL && nxr__registry_add(reg, start, start + size, a->tag) != 0) {
        nxr__munmap((void *)start, size);
        hook_error = -ENOMEM;
        return NULL;
    }
    *zero = true;   /* fresh anonymous pages read as zero */
    *commit = true; /* and are accessible */
    return (void *)start;
}

/* false: done (jemalloc's convention); true: jemalloc keeps the extent. */
/* The range leaves the registry before it is unmapped: once unmapped, the
 * addresses may be mapped again by anyone, and must not look like nxr's. */
static bool hook_dalloc(extent_hooks_t *hooks, void *addr, size_t size, bool committed,
                        unsigned arena_ind)
{
    (void)committed, (void)arena_ind;
    struct nxr__arena *a = (struct nxr__arena *)hooks;
    struct nxr__registry *reg = atomic_load_explicit(&a->registry, memory_order_acquire);
    uintptr_t b = (uintptr_t)addr;
    if (reg != NULL && nxr__registry_remove(reg, b, b + size) != 0)
        return true; /* no memory to cut the range: keep the extent, still registered */
    if (nxr__munmap(addr, size) != 0) {
        /* Still mapped and kept by jemalloc: register it again (best effort). */
        if (reg != NULL)
            (void)nxr__registry_add(reg, b, b + size, a->tag);
        return true;
    }
    return false;
}

/* Only called from arena.<i>.destroy, after nxr__arena_detach. */
static void hook_destroy(extent_hooks_t *hooks, void *addr, size_t size, bool committed,
                         unsigned arena_ind)
{
    (void)hooks, (void)committed, (void)arena_ind;
    nxr__munmap(addr, size);
}

/* Purged pages fault back in under the range's policy, still on the node. */
static bool hook_purge_lazy(extent_hooks_t *hooks, void *addr, size_t size, size_t offset,
                            size_t length, unsigned arena_ind)
{
    (void)hooks, (void)size, (void)arena_ind;
    return nxr__madvise((char *)addr + offset, length, MADV_FREE) != 0;
}

static bool hook_purge_forced(extent_hooks_t *hooks, void *addr, size_t size, size_t offset,
                              size_t length, unsigned arena_ind)
{
    (void)hooks, (void)size, (void)arena_ind;
    return nxr__madvise((char *)addr + offset, length, MADV_DONTNEED) != 0;
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

int nxr__arena_create(struct nxr__arena **out, int node, struct nxr__registry *registry, int tag,
                      char *err, size_t errsz)
{
    *out = NULL;
    struct nxr__arena *a = nxr__calloc(1, sizeof(*a));
    if (a == NULL) {
        snprintf(err, errsz, "out of memory for the arena of node %d", node);
        return -ENOMEM;
    }
    a->domain_node = node;
    a->tag = tag;
    atomic_init(&a->registry, registry);
    int rc = nxr__node_probe(node, &a->binding, a->reason, sizeof(a->reason));
    if (rc != 0) {
        snprintf(err, errsz, "mapping a probe page for node %d failed: %s", node, nxr_strerror(rc));
        goto out_free;
    }
    a->node = a->binding == NXR_MEM_BOUND ? node : -1;
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
    size_t sz = sizeof(a->index);
    hook_error = 0;
    rc = nxr__fault_hit(NXR_FAULT_ALLOC)
             ? ENOMEM
             : nxr_je_mallctl("arenas.create", &a->index, &sz, &hooks, sizeof(hooks));
    if (rc != 0) {
        /* jemalloc returns a positive errno (EAGAIN: out of arena slots). */
        rc = hook_error != 0 ? hook_error : -ENOMEM;
        snprintf(err, errsz, "creating a jemalloc arena for node %d failed: %s", node,
                 nxr_strerror(rc));
        nxr__arena_detach(a); /* metadata extents a failed create may have mapped */
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
    return arena_stat(a->index, "small.allocated") + arena_stat(a->index, "large.allocated");
}

void nxr__arena_detach(struct nxr__arena *a)
{
    struct nxr__registry *reg = atomic_load_explicit(&a->registry, memory_order_acquire);
    if (reg == NULL)
        return;
    nxr__registry_remove_tag(reg, a->tag);
    atomic_store_explicit(&a->registry, NULL, memory_order_release);
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
    snprintf(name, sizeof(name), "arena.%u.destroy", a->index);
    if (nxr_je_mallctl(name, NULL, NULL, NULL, 0) != 0)
        return false; /* jemalloc refused: keep the hooks alive with it */
    free(a);
    return true;
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
    void *p = nxr_je_mallocx(size, MALLOCX_ARENA(a->index) | MALLOCX_TCACHE_NONE |
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

unsigned nxr__arena_index(const struct nxr__arena *a)
{
    return a->index;
}

int nxr__arena_node(const struct nxr__arena *a)
{
    return a->domain_node;
}

enum nxr_mem_binding nxr__arena_binding(const struct nxr__arena *a)
{
    return a->binding;
}

const char *nxr__arena_binding_reason(const struct nxr__arena *a)
{
    return a->reason;
}
