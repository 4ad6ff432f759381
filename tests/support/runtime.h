/*
 * Test support: the quiet runtime most tests start from, built in one place
 * instead of by hand in every file. Quiet means the test decides everything:
 *   - ignore_env, so no NXR_* of the test's environment decides (and, with
 *     peers left unset, the peers registry is off: nothing is registered
 *     under /dev/shm and no other process's runtime is reported);
 *   - the domains (or a synthetic topology) from a tests/support/cpus.h
 *     template, so the CPUs are taken from the allowed set ("%0": the first
 *     allowed CPU); NULL for the default layout (one domain per node over
 *     the allowed CPUs);
 *   - a failed create's detail (nxr_last_error) kept in the fixture, so the
 *     test's failure message names it;
 *   - optionally NXR_SPIN_NONE (workers park at once) and a context on the first
 *     domain.
 * Two steps when a test needs one more option (a provider, a stall period):
 *     struct nxr_test_runtime fx;
 *     nxr_test_runtime_opts(&fx, "0:%0;1:%0 shared", NXR_TEST_CTX);
 *     fx.opts.stall_report_ms = 50;
 *     NXR_TEST_RUNTIME_OPEN(&fx);
 * or one when it does not: NXR_TEST_RUNTIME(&fx, "0:%0", NXR_TEST_PARK).
 * Tests of the options themselves (the environment, bad values, the error
 * detail) build their options by hand.
 *
 * Not thread-safe
 * (nxr_test_expand's ring); call it from the test's main thread.
 */
#ifndef NXR_TESTS_RUNTIME_H
#define NXR_TESTS_RUNTIME_H

#include "runtime/nxr.h"
#include "tests/support/cpus.h"

/* Flags of nxr_test_runtime_opts. */
#define NXR_TEST_PARK 0x1u     /* spin 0: a worker parks at once */
#define NXR_TEST_TOPOLOGY 0x2u /* the template is a topology (opts.topology), not domains */
#define NXR_TEST_CTX 0x4u      /* open a context on the first domain too */

struct nxr_test_runtime {
    struct nxr_runtime_opts opts; /* the quiet options; a test may change them before the open */
    unsigned flags;
    nxr_runtime_t *rt; /* after the open; the test owns it (nxr_test_runtime_close or its own) */
    nxr_ctx_t *ctx;    /* with NXR_TEST_CTX: on nxr_runtime_domain_at(rt, 0) */
    char err[512];     /* the failed call's detail */
};

/* How many allowed CPUs a template needs (0 for NULL: the default layout). */
int nxr_test_runtime_cpus_needed(const char *tmpl);

/* Fills t with the quiet options for tmpl (above; NULL: the default layout)
 * and flags; rt and ctx NULL. The template is expanded now: call
 * NXR_TEST_NEED_CPUS(nxr_test_runtime_cpus_needed(tmpl)) first, or the
 * open fails with -EINVAL naming the template. */
void nxr_test_runtime_opts(struct nxr_test_runtime *t, const char *tmpl, unsigned flags);

/* Creates t->rt from t->opts (and t->ctx with NXR_TEST_CTX). 0, or the
 * failing call's status with its detail in t->err; nothing is left open
 * after a failure. Blocks while the workers start (bounded: the runtime's
 * create returns once each has started or failed to). */
int nxr_test_runtime_open(struct nxr_test_runtime *t);

/* Destroys t->ctx and t->rt (either may be NULL) and clears them. */
void nxr_test_runtime_close(struct nxr_test_runtime *t);

/* In a Criterion test: open t or fail the test with the detail. */
#define NXR_TEST_RUNTIME_OPEN(t)                                                                   \
    do {                                                                                           \
        int rc_ = nxr_test_runtime_open(t);                                                        \
        cr_assert_eq(rc_, 0, "the test's runtime: %s: %s", nxr_strerror(rc_), (t)->err);           \
    } while (0)

/* In a Criterion test: skip unless the template's CPUs are allowed, then
 * fill and open t (above). */
#define NXR_TEST_RUNTIME(t, tmpl, flags)                                                           \
    do {                                                                                           \
        NXR_TEST_NEED_CPUS(nxr_test_runtime_cpus_needed(tmpl));                                    \
        nxr_test_runtime_opts((t), (tmpl), (flags));                                               \
        NXR_TEST_RUNTIME_OPEN(t);                                                                  \
    } while (0)

#endif /* NXR_TESTS_RUNTIME_H */
