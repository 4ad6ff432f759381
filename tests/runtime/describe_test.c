/*
 * nxr_runtime_describe under a refused allocation: every allocation of the
 * walk (the output and, in text, each object's member texts) refused in
 * turn fails the call with -ENOMEM, hands out nothing, leaves the runtime's
 * domain table unlocked (the next call succeeds) and, under --config=asan,
 * leaks nothing. Past the last allocation the output is the whole one. The
 * formats' contents are checked where each fact is made (quota_test,
 * place_test, peers_test, tests/tools/nxr_info_test.sh, ...).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "base/internal/sys.h"
#include "tests/support/runtime.h"

static void refuse_each_allocation(nxr_runtime_t *rt, enum nxr_describe_format format)
{
    char *whole = NULL;
    cr_assert_eq(nxr_runtime_describe(rt, format, &whole), 0);
    long failed = 0;
    for (long n = 1; n < 10000; n++) {
        char *out = (char *)1;
        nxr__fault_arm(NXR_FAULT_ALLOC, n);
        int rc = nxr_runtime_describe(rt, format, &out);
        long calls = nxr__fault_calls();
        nxr__fault_arm(NXR_FAULT_ALLOC, 0);
        if (n > calls) { /* past the walk's last allocation */
            cr_expect_eq(rc, 0);
            cr_expect_str_eq(out, whole);
            free(out);
            break;
        }
        cr_expect_eq(rc, -ENOMEM, "allocation %ld of %ld", n, calls);
        cr_expect_null(out, "allocation %ld of %ld", n, calls);
        failed++;
    }
    cr_expect_gt(failed, 0);
    free(whole);
}

Test(runtime_describe, a_refused_allocation_fails_the_call_and_leaves_nothing, .timeout = 60)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_PARK);
    refuse_each_allocation(fx.rt, NXR_DESCRIBE_TEXT);
    refuse_each_allocation(fx.rt, NXR_DESCRIBE_JSON);
    nxr_test_runtime_close(&fx);
}
