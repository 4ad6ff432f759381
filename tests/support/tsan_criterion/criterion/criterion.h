/*
 * A stand-in for the subset of <criterion/criterion.h> that nxr's tests use,
 * selected instead of libcriterion only under `--config=tsan` (see
 * //third_party:criterion). Criterion itself cannot start under
 * ThreadSanitizer: its process arena is an mmap at a fixed address that
 * collides with TSan's shadow memory (Criterion issue 274).
 *
 * Same shape as Criterion: Test(suite, name, .init, .fini, .timeout, .signal,
 * .exit_code, .disabled), TestSuite(suite, ...) defaults, the cr_assert_ and
 * cr_expect_ families (a failed assert ends the test, a failed expect marks it
 * failed and goes on), cr_skip_test. Every test runs in a forked child, as
 * in Criterion, so tests may change process state (affinity, environment);
 * .timeout arms alarm() in the child. The runner (runner.c) prints one line
 * per test and Criterion's "Synthesis:" line, and exits non-zero on a
 * failure.
 */
#ifndef NXR_TSAN_CRITERION_H
#define NXR_TSAN_CRITERION_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct nxr_cr_params {
    void (*init)(void);
    void (*fini)(void);
    double timeout; /* seconds; 0: the suite's, else none */
    int signal;     /* the test passes only if it dies of this signal */
    int exit_code;  /* the test passes only if it exits with this code */
    bool disabled;
    const char *description;
};

struct nxr_cr_test {
    const char *suite;
    const char *name;
    void (*fn)(void);
    struct nxr_cr_params params;
    struct nxr_cr_test *next;
};

struct nxr_cr_suite {
    const char *name;
    struct nxr_cr_params params;
    struct nxr_cr_suite *next;
};

void nxr_cr_register_test(struct nxr_cr_test *t);
void nxr_cr_register_suite(struct nxr_cr_suite *s);

/* Reports a failed check (message optional, printf-style); a fatal one ends
 * the test (the process exits 1), from any thread. */
void nxr_cr_fail(bool fatal, const char *file, int line, const char *expr, const char *fmt, ...);
/* Ends the test as skipped. */
void nxr_cr_skip(const char *fmt, ...) __attribute__((noreturn));

#define Test(suite, name, ...)                                                                     \
    static void suite##_##name##_impl(void);                                                       \
    static struct nxr_cr_test suite##_##name##_desc = {                                            \
        #suite, #name, suite##_##name##_impl, {__VA_ARGS__}, NULL};                                \
    __attribute__((constructor)) static void suite##_##name##_register(void)                       \
    {                                                                                              \
        nxr_cr_register_test(&suite##_##name##_desc);                                              \
    }                                                                                              \
    static void suite##_##name##_impl(void)

#define TestSuite(suite, ...)                                                                      \
    static struct nxr_cr_suite suite##_suite_desc = {#suite, {__VA_ARGS__}, NULL};                 \
    __attribute__((constructor)) static void suite##_suite_register(void)                          \
    {                                                                                              \
        nxr_cr_register_suite(&suite##_suite_desc);                                                \
    }

/* `"" __VA_ARGS__` turns "no message" into an empty format string. */
#define NXR_CR_CHECK(fatal, cond, text, ...)                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            nxr_cr_fail(fatal, __FILE__, __LINE__, text, "" __VA_ARGS__);                          \
    } while (0)

#define cr_assert(cond, ...)     NXR_CR_CHECK(true, cond, #cond, __VA_ARGS__)
#define cr_expect(cond, ...)     NXR_CR_CHECK(false, cond, #cond, __VA_ARGS__)
#define cr_assert_not(cond, ...) NXR_CR_CHECK(true, !(cond), "!(" #cond ")", __VA_ARGS__)
#define cr_expect_not(cond, ...) NXR_CR_CHECK(false, !(cond), "!(" #cond ")", __VA_ARGS__)
#define cr_assert_fail(...)      nxr_cr_fail(true, __FILE__, __LINE__, "cr_assert_fail", "" __VA_ARGS__)
#define cr_expect_fail(...)      nxr_cr_fail(false, __FILE__, __LINE__, "cr_expect_fail", "" __VA_ARGS__)
#define cr_skip_test(...)        nxr_cr_skip("" __VA_ARGS__)

#define NXR_CR_CMP(fatal, a, op, b, ...)                                                           \
    NXR_CR_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)

#define cr_assert_eq(a, b, ...)     NXR_CR_CMP(true, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...)    NXR_CR_CMP(true, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...)     NXR_CR_CMP(true, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...)    NXR_CR_CMP(true, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...)     NXR_CR_CMP(true, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...)    NXR_CR_CMP(true, a, >=, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...)     NXR_CR_CMP(false, a, ==, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...)    NXR_CR_CMP(false, a, !=, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...)     NXR_CR_CMP(false, a, <, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...)    NXR_CR_CMP(false, a, <=, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...)     NXR_CR_CMP(false, a, >, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...)    NXR_CR_CMP(false, a, >=, b, __VA_ARGS__)
#define cr_assert_null(p, ...)      NXR_CR_CHECK(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...)  NXR_CR_CHECK(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_null(p, ...)      NXR_CR_CHECK(false, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...)  NXR_CR_CHECK(false, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) NXR_CR_CHECK(true, strcmp(a, b) == 0, #a " eq " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...)                                                                \
    NXR_CR_CHECK(false, strcmp(a, b) == 0, #a " eq " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...)                                                               \
    NXR_CR_CHECK(true, strcmp(a, b) != 0, #a " neq " #b, __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...)                                                               \
    NXR_CR_CHECK(false, strcmp(a, b) != 0, #a " neq " #b, __VA_ARGS__)

#endif /* NXR_TSAN_CRITERION_H */
