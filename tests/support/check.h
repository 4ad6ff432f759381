/*
 * Test support for the plain-C tests (the stress tests and the soak, which
 * run without Criterion so that they also run under ThreadSanitizer): a
 * check that reports a failed condition with its place and a message, and
 * counts it instead of stopping, so that one run reports every failure.
 * The program reads nxr_test_check_failures() at the end for its status.
 */
#ifndef NXR_TESTS_CHECK_H
#define NXR_TESTS_CHECK_H

#include <stdatomic.h>
#include <stdio.h>

/* Failed checks so far in this process (any thread). */
extern atomic_uint nxr_test_failed_checks;

static inline unsigned nxr_test_check_failures(void)
{
    return atomic_load(&nxr_test_failed_checks);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            atomic_fetch_add(&nxr_test_failed_checks, 1);                                          \
        }                                                                                          \
    } while (0)

#endif /* NXR_TESTS_CHECK_H */
