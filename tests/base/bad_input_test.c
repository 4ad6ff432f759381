/*
 * The bad-input rows of base/nxr_status.h: the table's rule, and where its
 * other rows live, are in tests/support/bad_input.h.
 */
#include "tests/support/bad_input.h"

TestSuite(base_bad_input, .timeout = 60);

/* ---- status and names --------------------------------------------------- */

Test(base_bad_input, strerror_of_unknown_codes)
{
    static const int unknown[] = {1, INT_MAX, INT_MIN, NXR_ERANGE_LAST - 1, NXR_ERANGE_FIRST};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        cr_assert_str_eq(nxr_strerror(unknown[i]), "unknown status", "%d", unknown[i]);
        cr_assert(!nxr_status_is_nxr(unknown[i]));
    }
    for (int c = NXR_ERANGE_FIRST - 1; c >= NXR_ERANGE_LAST; c--) {
        cr_assert(nxr_status_is_nxr(c));
        cr_assert_eq(strncmp(nxr_strerror(c), "NXR_E", 5), 0, "%d", c);
    }
}
