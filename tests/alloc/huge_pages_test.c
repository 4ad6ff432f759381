/*
 * Huge pages for packed weights (alloc/internal/huge_pages.h): the THP mode
 * is the bracketed word of the sysfs line and nothing else; sizes are
 * rounded to whole huge pages only from one huge page up. The advice and
 * the kernel's account of it are tested on real copies in
 * tests/kernels/weights_placement_test.c.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "alloc/internal/huge_pages.h"

Test(alloc_huge_pages, the_mode_is_the_bracketed_word)
{
    cr_expect_eq(nxr__thp_mode_parse("always [madvise] never\n"), NXR__THP_MADVISE);
    cr_expect_eq(nxr__thp_mode_parse("[always] madvise never\n"), NXR__THP_ALWAYS);
    cr_expect_eq(nxr__thp_mode_parse("always madvise [never]\n"), NXR__THP_NEVER);
    cr_expect_eq(nxr__thp_mode_parse("always madvise never\n"), NXR__THP_UNKNOWN);
    cr_expect_eq(nxr__thp_mode_parse("always [madvi"), NXR__THP_UNKNOWN);
    cr_expect_eq(nxr__thp_mode_parse("[madvisexyz] never"), NXR__THP_UNKNOWN);
    cr_expect_eq(nxr__thp_mode_parse("[mad] never"), NXR__THP_UNKNOWN);
    cr_expect_eq(nxr__thp_mode_parse(""), NXR__THP_UNKNOWN);
    cr_expect_str_eq(nxr__thp_mode_name(NXR__THP_MADVISE), "madvise");
    cr_expect_str_eq(nxr__thp_mode_name((enum nxr__thp_mode)99), "unknown");
}

Test(alloc_huge_pages, only_a_huge_page_or_more_is_worth_it_and_rounds_to_whole_ones)
{
    const size_t h = (size_t)2 << 20;
    cr_expect(!nxr__huge_worth(h - 1));
    cr_expect(nxr__huge_worth(h));
    cr_expect(!nxr__huge_worth(SIZE_MAX));
    cr_expect_eq(nxr__huge_round(h), h);
    cr_expect_eq(nxr__huge_round(h + 1), 2 * h);
    cr_expect_eq(nxr__huge_round(3 * h - 1), 3 * h);
}
