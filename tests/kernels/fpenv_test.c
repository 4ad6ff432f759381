/*
 * The floating-point environment: snapshot, compare, restore, check; sticky
 * exception flags are not part of the comparison.
 */
#include <criterion/criterion.h>
#include <fenv.h>

#include "kernels/internal/fpenv_arch.h"
#include "kernels/nxr_kernels.h"

static void require_supported(void)
{
    struct nxr_fpenv e;
    nxr_fpenv_get(&e);
    if (!e.supported)
        cr_skip_test("no observable FP environment on this target");
}

Test(kernels_fpenv, starts_in_the_default_environment)
{
    require_supported();
    struct nxr_fpenv e;
    nxr_fpenv_get(&e);
    cr_assert(nxr_fpenv_is_default(&e), "control %#x x87 %#x", e.control, e.x87);
    cr_assert_not(nxr_fpenv_flush_to_zero(&e));
    cr_assert_not(nxr_fpenv_denormals_are_zero(&e));
    cr_assert_eq(nxr_fpenv_rounding(&e), NXR_ROUND_NEAREST);
}

Test(kernels_fpenv, set_and_restore_flush_to_zero)
{
    require_supported();
    struct nxr_fpenv saved, ftz;
    nxr_fpenv_get(&saved);
    ftz = saved;
    ftz.control |= nxr__fpenv_ftz_bit();
    nxr_fpenv_set(&ftz);
    struct nxr_fpenv now;
    nxr_fpenv_get(&now);
    cr_assert(nxr_fpenv_flush_to_zero(&now));
    cr_assert_not(nxr_fpenv_equal(&now, &saved));
    volatile float tiny = 1e-38f;
    volatile float sub = tiny * 0.01f;
    cr_assert_eq(sub, 0.0f, "flushed");
    nxr_fpenv_set(&saved);
    sub = tiny * 0.01f;
    cr_assert_neq(sub, 0.0f, "gradual underflow again");
}

Test(kernels_fpenv, check_reports_efpenv_and_restores)
{
    require_supported();
    struct nxr_fpenv saved;
    nxr_fpenv_get(&saved);
    cr_assert_eq(nxr_fpenv_check(&saved), 0);
    fesetround(FE_UPWARD);
    cr_assert_eq(nxr_fpenv_check(&saved), NXR_EFPENV);
    cr_assert_eq(fegetround(), FE_TONEAREST);
    cr_assert_eq(nxr_fpenv_check(&saved), 0, "restored: a second check is clean");
}

Test(kernels_fpenv, rounding_modes_decode)
{
    require_supported();
    struct nxr_fpenv saved, e;
    nxr_fpenv_get(&saved);
    const struct {
        int fe;
        enum nxr_rounding want;
    } modes[] = {{FE_DOWNWARD, NXR_ROUND_DOWN},
                 {FE_UPWARD, NXR_ROUND_UP},
                 {FE_TOWARDZERO, NXR_ROUND_TOWARD_ZERO},
                 {FE_TONEAREST, NXR_ROUND_NEAREST}};
    for (int i = 0; i < 4; ++i) {
        fesetround(modes[i].fe);
        nxr_fpenv_get(&e);
        cr_assert_eq(nxr_fpenv_rounding(&e), modes[i].want);
    }
    nxr_fpenv_set(&saved);
}

Test(kernels_fpenv, sticky_flags_are_not_a_change)
{
    require_supported();
    struct nxr_fpenv saved;
    nxr_fpenv_get(&saved);
    feclearexcept(FE_ALL_EXCEPT);
    volatile float big = 3e38f;
    volatile float inf = big * big; /* overflow + inexact */
    (void)inf;
    cr_assert(fetestexcept(FE_OVERFLOW));
    cr_assert_eq(nxr_fpenv_check(&saved), 0);
    cr_assert(fetestexcept(FE_OVERFLOW), "the check keeps the flags");
    feclearexcept(FE_ALL_EXCEPT);
}
