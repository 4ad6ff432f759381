/*
 * The extent source: where every byte of a domain's memory comes from. It
 * maps anonymous memory, trims it to the requested alignment and binds it
 * to the domain's node (mbind MPOL_BIND) before anyone touches a page, so
 * the first fault already happens under the policy. Both arena back ends
 * use it: the jemalloc one from its extent hooks (arena.c), the one that
 * ThreadSanitizer builds use, once per allocation (arena_mmap.c).
 *
 * Giving memory back can fail too: the kernel may refuse a munmap or a
 * madvise (out of mappings, for one). The memory stays valid -- mapped, or
 * resident -- so nothing that depends on it fails; the source counts each
 * refusal in the caller's counter instead, and the pool reports the total
 * (nxr_pool_stats.release_failures, `nxr info`).
 *
 * Threads: any; the counter is atomic.
 */
#ifndef NXR_INTERNAL_EXTENT_H
#define NXR_INTERNAL_EXTENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* Whole pages: mappings, trimming and binding work in these. */
#define NXR__EXTENT_PAGE ((size_t)4096)

/*
 * size bytes (a multiple of the page) aligned to alignment (a power of two;
 * at least a page is used), bound to node unless node < 0, zero and
 * accessible. Returns 0 and *out, -ENOMEM (no mapping), or NXR_EPLACEMENT
 * (the range could not be bound: it is unmapped again, never handed out).
 */
int nxr__extent_map(atomic_ulong *release_failures, int node, size_t size, size_t alignment,
                    void **out);

/* Unmaps [addr, addr + size); false (and counted) when the kernel refused. */
bool nxr__extent_unmap(atomic_ulong *release_failures, void *addr, size_t size);

/* madvise(advice) over the range (purging: the pages fault back in, zero,
 * under the range's policy); false (and counted) when the kernel refused. */
bool nxr__extent_purge(atomic_ulong *release_failures, void *addr, size_t size, int advice);

/* ---- recorded extents ------------------------------------------------------
 * An arena's extents are also recorded in its runtime's memory registry
 * (internal/registry.h), so that any allocation's domain can be looked up
 * (nxr_mem_domain). Both back ends map and unmap their extents through the
 * two calls below, which is what keeps the registry exact: a range enters
 * it before the memory is handed out and leaves it before the addresses go
 * back to the kernel (after which anyone may map them again). */

struct nxr__registry;

struct nxr__extent_record {
    /* NULL: record nothing (detached, or no runtime). Set before the first
     * map; cleared by detach while no other thread uses the arena. */
    _Atomic(struct nxr__registry *) registry;
    int tag; /* the owning domain's id */
};

/* nxr__extent_map, then the range recorded under rec's tag; a range that
 * cannot be recorded (-ENOMEM) is unmapped again, never handed out. */
int nxr__extent_map_recorded(atomic_ulong *release_failures, struct nxr__extent_record *rec,
                             int node, size_t size, size_t alignment, void **out);

/* Forgets [addr, addr + size), then unmaps it. false when it is still
 * mapped: there was no memory to cut the range out of the registry
 * (nothing changed), or the kernel refused the munmap (counted, and the
 * range recorded again). */
bool nxr__extent_unmap_recorded(atomic_ulong *release_failures, struct nxr__extent_record *rec,
                                void *addr, size_t size);

/* Forgets every range of rec's tag and records nothing more. Idempotent. */
void nxr__extent_record_detach(struct nxr__extent_record *rec);

#endif /* NXR_INTERNAL_EXTENT_H */
