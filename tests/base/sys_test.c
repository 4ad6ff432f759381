/*
 * The system seam (base/sys.c), its fault hook's own counters:
 * nxr__fault_failures(point) counts the calls the hook failed through that point, by every kind of
 * arming, and is never reset by arming (the soak reads it across arm/disarm from many threads).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "base/internal/sys.h"

/* Calls nxr__malloc n times; returns how many returned NULL. */
static long mallocs(int n)
{
    long null = 0;
    for (int i = 0; i < n; i++) {
        void *p = nxr__malloc(16);
        null += p == NULL;
        free(p);
    }
    return null;
}

Test(base_sys, failures_count_each_failed_call_per_point)
{
    long alloc0 = nxr__fault_failures(NXR_FAULT_ALLOC);
    long mmap0 = nxr__fault_failures(NXR_FAULT_MMAP);

    nxr__fault_arm(NXR_FAULT_ALLOC, 2); /* the 2nd call only */
    cr_assert_eq(mallocs(4), 1);
    nxr__fault_arm_from(NXR_FAULT_ALLOC, 2); /* the 2nd call and every later one */
    cr_assert_eq(mallocs(4), 3);
    nxr__fault_arm(0, 0);
    cr_assert_eq(mallocs(3), 0);
    cr_expect_eq(nxr__fault_failures(NXR_FAULT_ALLOC) - alloc0, 4, "re-arming reset nothing");

    nxr__fault_arm_always(NXR_FAULT_MMAP);
    void *p;
    cr_assert_eq(nxr__mmap_anon(4096, &p), -ENOMEM);
    nxr__fault_arm_always(0);
    cr_expect_eq(nxr__fault_failures(NXR_FAULT_MMAP) - mmap0, 1);
    cr_expect_eq(nxr__fault_failures(NXR_FAULT_ALLOC) - alloc0, 4, "another point's count moved");

    /* A set of points or none is not a point. */
    cr_expect_eq(nxr__fault_failures(NXR_FAULT_ALLOC | NXR_FAULT_MMAP), 0);
    cr_expect_eq(nxr__fault_failures((enum nxr__fault_point)0), 0);
}
