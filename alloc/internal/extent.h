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

#endif /* NXR_INTERNAL_EXTENT_H */
