/*
 * The version: nxr_version() and nxr_version_string() say what the macros
 * say, and encoded versions order as releases do.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "base/nxr_version.h"

Test(base_version, number_is_major_minor_patch_in_bytes)
{
    unsigned want = NXR_VERSION_MAJOR * 65536u + NXR_VERSION_MINOR * 256u + NXR_VERSION_PATCH;
    cr_expect_eq(nxr_version(), want);
    cr_expect_eq(NXR_VERSION, want);
}

Test(base_version, string_is_the_three_macros)
{
    unsigned major, minor, patch;
    char extra;
    cr_assert_eq(sscanf(nxr_version_string(), "%u.%u.%u%c", &major, &minor, &patch, &extra), 3,
                 "'%s'", nxr_version_string());
    cr_expect_eq(major, NXR_VERSION_MAJOR);
    cr_expect_eq(minor, NXR_VERSION_MINOR);
    cr_expect_eq(patch, NXR_VERSION_PATCH);
}

Test(base_version, encoded_versions_order_as_releases)
{
    cr_expect_gt(NXR_VERSION_ENCODE(0, 2, 0), NXR_VERSION_ENCODE(0, 1, 255));
    cr_expect_gt(NXR_VERSION_ENCODE(1, 0, 0), NXR_VERSION_ENCODE(0, 255, 255));
    cr_expect_gt(NXR_VERSION_ENCODE(0, 1, 1), NXR_VERSION_ENCODE(0, 1, 0));
}
