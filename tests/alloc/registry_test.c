/*
 * The memory registry (alloc/internal/registry.h) on its own: ranges added,
 * merged when adjacent and of one tag, cut by removals (including a cut in
 * the middle that splits a range), dropped per tag, and found by any
 * address inside them and by none outside. Out of memory leaves it as it
 * was. Addresses are plain numbers: nothing is dereferenced. The last tests
 * go through the extent source's recorded map and unmap, which both arena
 * back ends use: a mapped extent is found, an unmapped or detached one is
 * not, and one that cannot be recorded is never handed out.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "alloc/internal/extent.h"
#include "alloc/internal/registry.h"
#include "base/internal/sys.h"

static struct nxr__registry *reg;

static void setup(void)
{
    cr_assert_eq(nxr__registry_create(&reg), 0);
}

static void teardown(void)
{
    nxr__fault_arm(0, 0);
    nxr__registry_destroy(reg);
    reg = NULL;
}

TestSuite(alloc_registry, .init = setup, .fini = teardown, .timeout = 30);

/* The tag of address a, or -1. */
static int tag_at(uintptr_t a)
{
    int tag;
    return nxr__registry_find(reg, (const void *)a, &tag) ? tag : -1;
}

Test(alloc_registry, finds_every_address_of_a_range_and_none_outside)
{
    cr_assert_eq(nxr__registry_add(reg, 0x10000, 0x20000, 3), 0);
    cr_assert_eq(tag_at(0x10000), 3, "the first byte");
    cr_assert_eq(tag_at(0x1ffff), 3, "the last byte");
    cr_assert_eq(tag_at(0x15555), 3);
    cr_assert_eq(tag_at(0xffff), -1, "just below");
    cr_assert_eq(tag_at(0x20000), -1, "the end is exclusive");
}

Test(alloc_registry, adjacent_ranges_of_one_tag_merge_and_of_two_tags_do_not)
{
    cr_assert_eq(nxr__registry_add(reg, 0x30000, 0x40000, 1), 0);
    cr_assert_eq(nxr__registry_add(reg, 0x10000, 0x20000, 1), 0);
    cr_assert_eq(nxr__registry_add(reg, 0x20000, 0x30000, 1), 0, "fills the gap");
    cr_assert_eq(nxr__registry_count(reg), 1, "three adjacent ranges of tag 1 are one");
    cr_assert_eq(nxr__registry_add(reg, 0x40000, 0x50000, 2), 0);
    cr_assert_eq(nxr__registry_count(reg), 2, "tag 2 next to tag 1 stays apart");
    cr_assert_eq(tag_at(0x3ffff), 1);
    cr_assert_eq(tag_at(0x40000), 2);
}

Test(alloc_registry, removing_the_middle_splits_a_range)
{
    cr_assert_eq(nxr__registry_add(reg, 0x10000, 0x40000, 5), 0);
    cr_assert_eq(nxr__registry_remove(reg, 0x20000, 0x30000), 0);
    cr_assert_eq(nxr__registry_count(reg), 2);
    cr_assert_eq(tag_at(0x1ffff), 5);
    cr_assert_eq(tag_at(0x20000), -1);
    cr_assert_eq(tag_at(0x2ffff), -1);
    cr_assert_eq(tag_at(0x30000), 5);
}

Test(alloc_registry, a_removal_across_ranges_trims_and_drops_them)
{
    cr_assert_eq(nxr__registry_add(reg, 0x10000, 0x20000, 1), 0);
    cr_assert_eq(nxr__registry_add(reg, 0x30000, 0x40000, 2), 0);
    cr_assert_eq(nxr__registry_add(reg, 0x50000, 0x60000, 3), 0);
    cr_assert_eq(nxr__registry_remove(reg, 0x18000, 0x58000), 0);
    cr_assert_eq(tag_at(0x17fff), 1, "the head of the first stays");
    cr_assert_eq(tag_at(0x18000), -1);
    cr_assert_eq(tag_at(0x35000), -1, "the one wholly inside is gone");
    cr_assert_eq(tag_at(0x57fff), -1);
    cr_assert_eq(tag_at(0x58000), 3, "the tail of the last stays");
    cr_assert_eq(nxr__registry_count(reg), 2);
}

Test(alloc_registry, a_stale_overlap_is_replaced_by_the_new_range)
{
    cr_assert_eq(nxr__registry_add(reg, 0x10000, 0x40000, 1), 0);
    cr_assert_eq(nxr__registry_add(reg, 0x20000, 0x30000, 2), 0);
    cr_assert_eq(tag_at(0x1ffff), 1);
    cr_assert_eq(tag_at(0x20000), 2);
    cr_assert_eq(tag_at(0x30000), 1);
    cr_assert_eq(nxr__registry_count(reg), 3);
}

Test(alloc_registry, removing_a_tag_keeps_the_others)
{
    for (uintptr_t i = 0; i < 40; i++)
        cr_assert_eq(nxr__registry_add(reg, 0x100000 + i * 0x2000, 0x101000 + i * 0x2000, (int)(i % 3)), 0);
    cr_assert_eq(nxr__registry_count(reg), 40, "gaps keep them apart");
    nxr__registry_remove_tag(reg, 1);
    for (uintptr_t i = 0; i < 40; i++)
        cr_assert_eq(tag_at(0x100800 + i * 0x2000), i % 3 == 1 ? -1 : (int)(i % 3), "range %zu",
                     (size_t)i);
}

Test(alloc_registry, out_of_memory_changes_nothing)
{
    /* 15 ranges fill the first array (16 slots, an add keeps room for two). */
    cr_assert_eq(nxr__registry_add(reg, 0x200000, 0x210000, 1), 0);
    for (uintptr_t i = 0; i < 14; i++)
        cr_assert_eq(nxr__registry_add(reg, 0x100000 + i * 0x2000, 0x101000 + i * 0x2000, 0), 0);
    nxr__fault_arm(NXR_FAULT_ALLOC, 1);
    cr_assert_eq(nxr__registry_add(reg, 0x900000, 0x901000, 7), -ENOMEM);
    nxr__fault_arm(0, 0);
    cr_assert_eq(tag_at(0x900000), -1, "the failed add left nothing");
    cr_assert_eq(nxr__registry_count(reg), 15);
    /* One split takes the last slot; the next one needs a bigger array. */
    cr_assert_eq(nxr__registry_remove(reg, 0x202000, 0x203000), 0);
    cr_assert_eq(nxr__registry_count(reg), 16);
    nxr__fault_arm(NXR_FAULT_ALLOC, 1);
    cr_assert_eq(nxr__registry_remove(reg, 0x204000, 0x205000), -ENOMEM);
    nxr__fault_arm(0, 0);
    cr_assert_eq(tag_at(0x204000), 1, "the failed cut left the range whole");
    cr_assert_eq(nxr__registry_count(reg), 16);
    cr_assert_eq(nxr__registry_remove(reg, 0x204000, 0x205000), 0);
    cr_assert_eq(tag_at(0x204000), -1);
    cr_assert_eq(tag_at(0x205000), 1);
}

/* ---- through the extent source ------------------------------------------------ */

Test(alloc_registry, a_recorded_extent_is_found_until_it_is_unmapped)
{
    atomic_ulong failures;
    atomic_init(&failures, 0);
    struct nxr__extent_record rec = {.tag = 4};
    atomic_init(&rec.registry, reg);
    void *p;
    cr_assert_eq(nxr__extent_map_recorded(&failures, &rec, -1, 8 * 4096, 4096, &p), 0);
    cr_assert_eq(tag_at((uintptr_t)p), 4);
    cr_assert_eq(tag_at((uintptr_t)p + 8 * 4096 - 1), 4);
    cr_assert(nxr__extent_unmap_recorded(&failures, &rec, p, 8 * 4096));
    cr_assert_eq(tag_at((uintptr_t)p), -1, "unmapped addresses are nobody's");
    cr_assert_eq(nxr__registry_count(reg), 0);
}

Test(alloc_registry, a_detached_record_forgets_and_records_nothing_more)
{
    atomic_ulong failures;
    atomic_init(&failures, 0);
    struct nxr__extent_record rec = {.tag = 2};
    atomic_init(&rec.registry, reg);
    void *p, *q;
    cr_assert_eq(nxr__extent_map_recorded(&failures, &rec, -1, 4096, 4096, &p), 0);
    nxr__extent_record_detach(&rec);
    cr_assert_eq(tag_at((uintptr_t)p), -1);
    cr_assert_eq(nxr__extent_map_recorded(&failures, &rec, -1, 4096, 4096, &q), 0);
    cr_assert_eq(tag_at((uintptr_t)q), -1, "after detach, maps are not recorded");
    nxr__extent_record_detach(&rec); /* idempotent */
    cr_assert(nxr__extent_unmap_recorded(&failures, &rec, p, 4096));
    cr_assert(nxr__extent_unmap_recorded(&failures, &rec, q, 4096));
}

Test(alloc_registry, an_extent_that_cannot_be_recorded_is_never_handed_out)
{
    atomic_ulong failures;
    atomic_init(&failures, 0);
    struct nxr__extent_record rec = {.tag = 1};
    atomic_init(&rec.registry, reg);
    /* Fill the first array so that recording one more range must grow it. */
    for (uintptr_t i = 0; i < 15; i++)
        cr_assert_eq(nxr__registry_add(reg, 0x100000 + i * 0x2000, 0x101000 + i * 0x2000, 0), 0);
    nxr__fault_arm(NXR_FAULT_ALLOC, 1); /* the registry's growth; mmap is another point */
    void *p = (void *)0x1;
    cr_assert_eq(nxr__extent_map_recorded(&failures, &rec, -1, 4096, 4096, &p), -ENOMEM);
    nxr__fault_arm(0, 0);
    cr_assert_null(p);
    cr_assert_eq(nxr__registry_count(reg), 15, "nothing recorded");
}
