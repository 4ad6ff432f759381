/* Pool size classes: the rounding documented at nxr_pool_class_size. */
#include <criterion/criterion.h>

#include "alloc/internal/size_class.h"
#include "runtime/nxr.h"

Test(alloc_size_class, small_sizes_round_to_powers_of_two_from_64)
{
    cr_assert_eq(nxr_pool_class_size(0), 64);
    cr_assert_eq(nxr_pool_class_size(1), 64);
    cr_assert_eq(nxr_pool_class_size(64), 64);
    cr_assert_eq(nxr_pool_class_size(65), 128);
    cr_assert_eq(nxr_pool_class_size(1000), 1024);
    cr_assert_eq(nxr_pool_class_size(2049), 4096);
    cr_assert_eq(nxr_pool_class_size(4096), 4096);
}

Test(alloc_size_class, mid_sizes_round_to_pages)
{
    cr_assert_eq(nxr_pool_class_size(4097), 8192);
    cr_assert_eq(nxr_pool_class_size(8193), 12288);
    cr_assert_eq(nxr_pool_class_size(16384), 16384);
}

Test(alloc_size_class, large_sizes_have_four_classes_per_doubling)
{
    cr_assert_eq(nxr_pool_class_size(16385), 20480);
    cr_assert_eq(nxr_pool_class_size(32768), 32768);
    cr_assert_eq(nxr_pool_class_size(32769), 40960);
    cr_assert_eq(nxr_pool_class_size(65536), 65536);
    cr_assert_eq(nxr_pool_class_size(3u << 20), 3u << 20);
    cr_assert_eq(nxr_pool_class_size((4u << 20) - 1), 4u << 20);
    cr_assert_eq(nxr_pool_class_size((4u << 20) + 1), 5u << 20);
    cr_assert_eq(nxr_pool_class_size(NXR_POOL_MAX_SIZE), NXR_POOL_MAX_SIZE);
    cr_assert_eq(nxr_pool_class_size(NXR_POOL_MAX_SIZE + 1), 0);
}

/* Every class is covered, increasing, within 25% (above 64 B: within 2x for
 * the power-of-two classes), and page multiples from 4 KiB. */
Test(alloc_size_class, classes_are_consistent_for_every_index)
{
    size_t prev = 0;
    for (unsigned i = 0; i < NXR__CLASS_COUNT; i++) {
        size_t cs = nxr__class_size(i), got;
        cr_assert_gt(cs, prev, "class %u", i);
        cr_assert_eq(nxr__size_class(cs, &got), i, "class %u size %zu", i, cs);
        cr_assert_eq(got, cs);
        cr_assert_eq(nxr__size_class(prev + 1, &got), i, "just above class %u", i - 1);
        cr_assert_eq(got, cs);
        if (cs >= 4096)
            cr_assert_eq(cs % 4096, 0, "class %zu is not whole pages", cs);
        if (cs > 16384)
            cr_assert_leq(cs - (prev + 1), cs / 4, "class %zu wastes more than 25%%", cs);
        prev = cs;
    }
    cr_assert_eq(prev, NXR_POOL_MAX_SIZE);
}
