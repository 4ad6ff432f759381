/* Test support: the failed-check counter of check.h. */
#include "tests/support/check.h"

atomic_uint nxr_test_failed_checks;
