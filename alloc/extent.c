/*
 * The extent source (see internal/extent.h): mmap, trim, mbind; and the
 * recorded variants that keep the memory registry exact.
 */
#include "alloc/internal/extent.h"

#include <errno.h>
#include <stdint.h>

#include "alloc/internal/registry.h"

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

int nxr__extent_map_recorded(atomic_ulong *release_failures, struct nxr__extent_record *rec,
                             int node, size_t size, size_t alignment, void **out)
{
    int rc = nxr__extent_map(release_failures, node, size, alignment, out);
    /* Acquire pairs with nothing racing (see the struct); it documents that
     * the pointer is read after the arena published it. */
    struct nxr__registry *reg = atomic_load_explicit(&rec->registry, memory_order_acquire);
    if (rc != 0 || reg == NULL)
        return rc;
    uintptr_t b = (uintptr_t)*out;
    if (nxr__registry_add(reg, b, b + size, rec->tag) != 0) {
        /* Never hand out memory whose domain a lookup could not tell. */
        nxr__extent_unmap(release_failures, *out, size);
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

bool nxr__extent_unmap_recorded(atomic_ulong *release_failures, struct nxr__extent_record *rec,
                                void *addr, size_t size)
{
    struct nxr__registry *reg = atomic_load_explicit(&rec->registry, memory_order_acquire);
    uintptr_t b = (uintptr_t)addr;
    if (reg != NULL && nxr__registry_remove(reg, b, b + size) != 0)
        return false; /* still mapped and still recorded */
    if (nxr__extent_unmap(release_failures, addr, size))
        return true;
    /* Still mapped: record it again (best effort; the only failure is no
     * memory, and then lookups miss a range that nxr still owns). */
    if (reg != NULL)
        (void)nxr__registry_add(reg, b, b + size, rec->tag);
    return false;
}

void nxr__extent_record_detach(struct nxr__extent_record *rec)
{
    struct nxr__registry *reg = atomic_load_explicit(&rec->registry, memory_order_acquire);
    if (reg == NULL)
        return;
    nxr__registry_remove_tag(reg, rec->tag);
    atomic_store_explicit(&rec->registry, NULL, memory_order_release);
}
