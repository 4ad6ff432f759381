/*
 * The floating-point environment check on the context path: a fake foreign
 * GEMM provider that sets flush-to-zero inside its call is caught by
 * nxr_sgemm(ctx, ...) on every way a call can be placed (inline, under the
 * domain's permit, handed the domain's workers, under the exclusive
 * permit): the call returns NXR_EFPENV, the caller's MXCSR (FPCR) is what
 * it was before, gradual underflow works again, and no permit is left held
 * (nor a global count left changed).
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "ctx_support.h"

TestSuite(kernels_ctx_fpenv, .timeout = 60);

static void expect_caught(enum nxr_count_control count, enum nxr_provider_runs_on placement,
                          int global, int policy, const char *what)
{
    struct nxr_fpenv before, after;
    nxr_fpenv_get(&before);
    if (!before.supported)
        cr_skip_test("no observable FP environment on this target");
    cr_assert_not(nxr_fpenv_flush_to_zero(&before));

    struct fake f;
    memset(&f, 0, sizeof f);
    nxr_provider_t *p = fake_create(&f, count, placement, global);
    f.act = FAKE_FLIP_FTZ;
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.policy = policy;
    o.gemm = p;
    ctx_rt_open(&r, &o);
    f.rt = r.rt;

    struct nxr_sgemm_args g = fake_args();
    int rc = nxr_sgemm(r.ctx[0], &g);
    nxr_fpenv_get(&after);
    cr_assert_eq(rc, NXR_EFPENV, "%s: got %d (%s)", what, rc, nxr_strerror(rc));
    cr_assert_eq(fake_calls(&f), 1, "%s: the provider ran", what);
    cr_assert(nxr_fpenv_equal(&before, &after), "%s: control %#x, was %#x", what, after.control,
              before.control);
    cr_assert_not(nxr_fpenv_flush_to_zero(&after), "%s", what);
    volatile float tiny = 1e-38f;
    volatile float sub = tiny * 0.01f;
    cr_assert_neq(sub, 0.0f, "%s: a subnormal result survives again", what);

    struct nxr__arbiter_stats s = ctx_arbiter(r.rt);
    cr_assert_eq(s.holders, 0u, "%s: no domain permit left held", what);
    cr_assert_not(s.exclusive_held, "%s: no exclusive permit left held", what);
    if (global > 0)
        cr_assert_eq(fake_global(&f), global, "%s: the global count is back", what);
    ctx_rt_close(&r);
    nxr_provider_destroy(p);
}

Test(kernels_ctx_fpenv, inline_call)
{
    expect_caught(NXR_COUNT_SEQUENTIAL, NXR_RUNS_ON_CALLING_THREAD, 0, NXR_PROVIDER_STRICT,
                  "calling thread");
}

Test(kernels_ctx_fpenv, call_under_the_domain_permit)
{
    /* The default domain is the whole allowed set: runs under its permit
     * (inline when the domain has one CPU; caught either way). */
    expect_caught(NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_EXTERNAL_WORKERS, 0, NXR_PROVIDER_STRICT,
                  "domain permit");
}

Test(kernels_ctx_fpenv, call_handed_the_domain_workers)
{
    expect_caught(NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_ENGINE_WORKERS, 0, NXR_PROVIDER_STRICT,
                  "engine workers");
}

Test(kernels_ctx_fpenv, call_under_the_exclusive_permit)
{
    expect_caught(NXR_COUNT_GLOBAL_OR_UNCONTROLLED, NXR_RUNS_ON_EXTERNAL_WORKERS, 3,
                  NXR_PROVIDER_PROCESS_EXCLUSIVE, "exclusive permit");
}
