/*
 * nxr floating-point environment: snapshot, compare, restore, check. The
 * register access is in kernels/internal/fpenv_arch.h. Nothing here is on a
 * kernel's hot path: nxr calls it once before and once after each call into
 * a foreign provider.
 */
#include <stddef.h>

#include "kernels/internal/fpenv_arch.h"

void nxr_fpenv_get(nxr_fpenv_t *out)
{
    if (out == NULL)
        return;
    out->supported = nxr__fpenv_supported();
    out->control = nxr__fpenv_read_control();
    out->x87 = nxr__fpenv_read_x87();
}

void nxr_fpenv_set(const nxr_fpenv_t *env)
{
    if (env == NULL || !env->supported)
        return;
    nxr__fpenv_write_control(env->control);
    nxr__fpenv_write_x87(env->x87);
}

bool nxr_fpenv_equal(const nxr_fpenv_t *a, const nxr_fpenv_t *b)
{
    /* An unobservable environment never reports a difference. */
    if (!a->supported || !b->supported)
        return true;
    return a->control == b->control && a->x87 == b->x87;
}

bool nxr_fpenv_is_default(const nxr_fpenv_t *env)
{
    return !env->supported || nxr__fpenv_default(env->control, env->x87);
}

bool nxr_fpenv_flush_to_zero(const nxr_fpenv_t *env)
{
    return env->supported && nxr__fpenv_ftz(env->control);
}

bool nxr_fpenv_denormals_are_zero(const nxr_fpenv_t *env)
{
    return env->supported && nxr__fpenv_daz(env->control);
}

enum nxr_rounding nxr_fpenv_rounding(const nxr_fpenv_t *env)
{
    return env->supported ? nxr__fpenv_rounding(env->control) : NXR_ROUND_NEAREST;
}

int nxr_fpenv_check(const nxr_fpenv_t *expected)
{
    if (expected == NULL || !expected->supported)
        return 0;
    nxr_fpenv_t now;
    nxr_fpenv_get(&now);
    if (nxr_fpenv_equal(&now, expected))
        return 0;
    nxr_fpenv_set(expected);
    return NXR_EFPENV;
}
