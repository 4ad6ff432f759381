/*
 * Size classes: pure arithmetic, no state. Small classes are powers of two
 * because small buffers are many and their sizes cluster; large classes
 * follow jemalloc's spacing (four per doubling, multiples of the page) so a
 * class never wastes more than 25% and a buffer maps onto whole pages.
 */
#include "alloc/internal/size_class.h"

#include "alloc/nxr_alloc.h"

#define SMALL_CLASSES 7u /* 64 .. 4096 */
#define MID_CLASSES   3u /* 8, 12, 16 KiB */
#define PAGE          4096u
#define MID_MAX       (4u * PAGE)
#define LG_MID_MAX    14u /* log2(MID_MAX) */

_Static_assert(NXR__CLASS_COUNT == SMALL_CLASSES + MID_CLASSES + 4u * (40u - LG_MID_MAX),
               "class count must cover every size up to NXR_POOL_MAX_SIZE");

/* floor(log2(x)) for x >= 1. */
static unsigned lg_floor(size_t x)
{
    return (unsigned)(8 * sizeof(unsigned long long) - 1) - (unsigned)__builtin_clzll(x);
}

unsigned nxr__size_class(size_t size, size_t *class_size)
{
    if (size <= 64) {
        *class_size = 64;
        return 0;
    }
    if (size <= PAGE) {
        unsigned k = lg_floor(size - 1) + 1; /* 2^(k-1) < size <= 2^k */
        *class_size = (size_t)1 << k;
        return k - 6;
    }
    if (size <= MID_MAX) {
        size_t pages = (size + PAGE - 1) / PAGE; /* 2..4 */
        *class_size = pages * PAGE;
        return SMALL_CLASSES + (unsigned)(pages - 2);
    }
    unsigned k = lg_floor(size - 1); /* 2^k < size <= 2^(k+1), k >= 14 */
    size_t step = (size_t)1 << (k - 2);
    size_t q = (size + step - 1) / step; /* 5..8 */
    *class_size = q * step;
    return SMALL_CLASSES + MID_CLASSES + 4u * (k - LG_MID_MAX) + (unsigned)(q - 5);
}

size_t nxr__class_size(unsigned cls)
{
    if (cls < SMALL_CLASSES)
        return (size_t)64 << cls;
    if (cls < SMALL_CLASSES + MID_CLASSES)
        return (size_t)(cls - SMALL_CLASSES + 2) * PAGE;
    unsigned i = cls - SMALL_CLASSES - MID_CLASSES;
    unsigned k = LG_MID_MAX + i / 4;
    return (size_t)(5 + i % 4) << (k - 2);
}

size_t nxr__class_align(size_t class_size)
{
    return class_size >= PAGE ? PAGE : NXR_POOL_ALIGN;
}

size_t nxr_pool_class_size(size_t size)
{
    if (size > NXR_POOL_MAX_SIZE)
        return 0;
    size_t cs;
    nxr__size_class(size, &cs);
    return cs;
}
