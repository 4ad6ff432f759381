/*
 * The extent source (see internal/extent.h): mmap, trim, mbind.
 */
#include "alloc/internal/extent.h"

#include <errno.h>
#include <stdint.h>

#include "base/internal/sys.h"
#include "base/nxr_status.h"

bool nxr__extent_unmap(atomic_ulong *release_failures, void *addr, size_t size)
{
    if (nxr__munmap(addr, size) == 0)
        return true;
    /* Relaxed: a statistic; nothing is read on the strength of it. */
    atomic_fetch_add_explicit(release_failures, 1, memory_order_relaxed);
    return false;
}

bool nxr__extent_purge(atomic_ulong *release_failures, void *addr, size_t size, int advice)
{
    if (nxr__madvise(addr, size, advice) == 0)
        return true;
    atomic_fetch_add_explicit(release_failures, 1, memory_order_relaxed);
    return false;
}

int nxr__extent_map(atomic_ulong *release_failures, int node, size_t size, size_t alignment,
                    void **out)
{
    *out = NULL;
    if (alignment < NXR__EXTENT_PAGE)
        alignment = NXR__EXTENT_PAGE;
    if (size > SIZE_MAX - alignment)
        return -ENOMEM;
    /* Over-map by alignment - page, then cut the ends off. */
    size_t span = size + alignment - NXR__EXTENT_PAGE;
    void *raw;
    int rc = nxr__mmap_anon(span, &raw);
    if (rc != 0)
        return rc;
    uintptr_t start = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
    size_t head = start - (uintptr_t)raw;
    size_t tail = span - head - size;
    /* A refused trim leaves the slack mapped but untouched: counted, and
     * the extent itself is still good. */
    if (head != 0)
        nxr__extent_unmap(release_failures, raw, head);
    if (tail != 0)
        nxr__extent_unmap(release_failures, (void *)(start + size), tail);
    if (node >= 0 && nxr__mbind_node((void *)start, size, node) != 0) {
        /* Never hand out memory that is not where the arena claims. */
        nxr__extent_unmap(release_failures, (void *)start, size);
        return NXR_EPLACEMENT;
    }
    *out = (void *)start;
    return 0;
}
