/*
 * nxr floating-point environment: snapshot, compare, restore, check. The
 * register access is in kernels/internal/fpenv_arch.h. Nothing here is on a
 * kernel's hot path: nxr calls it once before and once after each call into
 * a foreign provider.
 */
#include <errno.h>
#include <stddef.h>

#include "base/internal/last_error.h"
#include "kernels/internal/fpenv_arch.h"

void nxr_fpenv_get(struct nxr_fpenv *out)
{
    if (out == NULL)
        return;
    out->supported = nxr__fpenv_supported();
    out->control = nxr__fpenv_read_control();
    out->x87 = nxr__fpenv_read_x87();
}

void nxr_fpenv_set(const struct nxr_fpenv *env)
{
    if (env == NULL || !env->supported)
        return;
    nxr__fpenv_write_control(env->control);
    nxr__fpenv_write_x87(env->x87);
}

bool nxr_fpenv_equal(const struct nxr_fpenv *a, const struct nxr_fpenv *b)
{
    /* An unobservable environment never reports a difference. */
    if (!a->supported || !b->supported)
        return true;
    return a->control == b->control && a->x87 == b->x87;
}

bool nxr_fpenv_is_default(const struct nxr_fpenv *env)
{
    return !env->supported || nxr__fpenv_default(env->control, env->x87);
}

bool nxr_fpenv_flush_to_zero(const struct nxr_fpenv *env)
{
    return env->supported && nxr__fpenv_ftz(env->control);
}

bool nxr_fpenv_denormals_are_zero(const struct nxr_fpenv *env)
{
    return env->supported && nxr__fpenv_daz(env->control);
}

enum nxr_rounding nxr_fpenv_rounding(const struct nxr_fpenv *env)
{
    return env->supported ? nxr__fpenv_rounding(env->control) : NXR_ROUND_NEAREST;
}

int nxr_fpenv_check(const struct nxr_fpenv *expected)
{
    nxr__call_begin();
    if (expected == NULL)
        return nxr__fail(-EINVAL, __func__, "expected is NULL");
    if (!expected->supported)
        return 0;
    struct nxr_fpenv now;
    nxr_fpenv_get(&now);
    if (nxr_fpenv_equal(&now, expected))
        return 0;
    nxr_fpenv_set(expected);
    return nxr__fail(NXR_EFPENV, __func__,
                     "the thread's floating-point environment was changed (rounding %d, "
                     "flush-to-zero %d, denormals-are-zero %d); the expected one is restored",
                     (int)nxr_fpenv_rounding(&now), nxr_fpenv_flush_to_zero(&now),
                     nxr_fpenv_denormals_are_zero(&now));
}
