/*
 * The runner of the Criterion stand-in (see criterion/criterion.h): main()
 * for a test binary built under --config=tsan. Runs the registered tests in
 * suite/name order, each in a forked child, and prints one line per test and
 * Criterion's "Synthesis:" line. Options: --filter=GLOB (or --filter GLOB)
 * over "suite/name"; --verbose[=N], -j N and anything else Criterion accepts
 * are ignored.
 */
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "criterion/criterion.h"
#include "criterion/redirect.h"

/* A child that skips exits with this code. */
#define SKIP_EXIT 77

static struct nxr_cr_test *tests;
static struct nxr_cr_suite *suites;
static atomic_int expect_failures; /* failed cr_expect_* in this child */
static FILE *redirected;

void nxr_cr_register_test(struct nxr_cr_test *t)
{
    t->next = tests;
    tests = t;
}

void nxr_cr_register_suite(struct nxr_cr_suite *s)
{
    s->next = suites;
    suites = s;
}

void nxr_cr_fail(bool fatal, const char *file, int line, const char *expr, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s:%d: %s failed: %s%s%s\n", file, line, fatal ? "assertion" : "expectation",
            expr, msg[0] != '\0' ? ": " : "", msg);
    fflush(stderr);
    if (fatal)
        exit(1); /* from any thread: the test is over */
    atomic_fetch_add_explicit(&expect_failures, 1, memory_order_relaxed);
}

void nxr_cr_skip(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "skipped: %s\n", msg);
    fflush(stderr);
    exit(SKIP_EXIT);
}

void cr_redirect_stderr(void)
{
    fflush(stderr);
    redirected = tmpfile();
    if (redirected == NULL || dup2(fileno(redirected), STDERR_FILENO) < 0) {
        perror("cr_redirect_stderr");
        exit(1);
    }
}

FILE *cr_get_redirected_stderr(void)
{
    if (redirected != NULL)
        rewind(redirected);
    return redirected;
}

static const struct nxr_cr_suite *suite_of(const struct nxr_cr_test *t)
{
    for (const struct nxr_cr_suite *s = suites; s != NULL; s = s->next) {
        if (strcmp(s->name, t->suite) == 0)
            return s;
    }
    return NULL;
}

static int by_name(const void *pa, const void *pb)
{
    const struct nxr_cr_test *a = *(struct nxr_cr_test *const *)pa;
    const struct nxr_cr_test *b = *(struct nxr_cr_test *const *)pb;
    int c = strcmp(a->suite, b->suite);
    return c != 0 ? c : strcmp(a->name, b->name);
}

/* In the child: suite init, test init, body, test fini, suite fini. */
static void run_child(const struct nxr_cr_test *t, const struct nxr_cr_suite *s)
{
    double timeout = t->params.timeout > 0 ? t->params.timeout : s ? s->params.timeout : 0;
    if (timeout > 0)
        alarm((unsigned)timeout + (timeout > (unsigned)timeout ? 1u : 0u));
    if (s != NULL && s->params.init != NULL)
        s->params.init();
    if (t->params.init != NULL)
        t->params.init();
    t->fn();
    if (t->params.fini != NULL)
        t->params.fini();
    if (s != NULL && s->params.fini != NULL)
        s->params.fini();
    fflush(NULL);
    exit(atomic_load_explicit(&expect_failures, memory_order_relaxed) != 0 ? 1 : 0);
}

enum outcome { PASS, FAIL, CRASH, SKIP };

static enum outcome run_one(const struct nxr_cr_test *t, char *why, size_t whysz)
{
    const struct nxr_cr_suite *s = suite_of(t);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whysz, "fork failed");
        return CRASH;
    }
    if (pid == 0)
        run_child(t, s);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    int want_signal = t->params.signal != 0 ? t->params.signal : s ? s->params.signal : 0;
    int want_exit = t->params.exit_code != 0 ? t->params.exit_code : s ? s->params.exit_code : 0;
    why[0] = '\0';
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (want_signal == sig)
            return PASS;
        snprintf(why, whysz, sig == SIGALRM ? "timed out" : "killed by signal %d", sig);
        return sig == SIGALRM ? FAIL : CRASH;
    }
    int code = WEXITSTATUS(status);
    if (code == SKIP_EXIT)
        return SKIP;
    if (want_signal != 0) {
        snprintf(why, whysz, "exited %d, expected signal %d", code, want_signal);
        return FAIL;
    }
    if (code == want_exit)
        return PASS;
    snprintf(why, whysz, "exit code %d", code);
    return FAIL;
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--filter=", 9) == 0)
            filter = argv[i] + 9;
        else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
            filter = argv[++i];
    }
    size_t n = 0;
    for (struct nxr_cr_test *t = tests; t != NULL; t = t->next)
        n++;
    struct nxr_cr_test **order = calloc(n > 0 ? n : 1, sizeof(*order));
    if (order == NULL)
        return 2;
    n = 0;
    for (struct nxr_cr_test *t = tests; t != NULL; t = t->next)
        order[n++] = t;
    qsort(order, n, sizeof(*order), by_name);

    unsigned tested = 0, passing = 0, failing = 0, crashing = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        const struct nxr_cr_test *t = order[i];
        char full[256], why[128];
        snprintf(full, sizeof(full), "%s/%s", t->suite, t->name);
        if (filter != NULL && fnmatch(filter, full, 0) != 0)
            continue;
        const struct nxr_cr_suite *s = suite_of(t);
        if (t->params.disabled || (s != NULL && s->params.disabled)) {
            skipped++;
            continue;
        }
        tested++;
        /* Before the case runs, as Criterion's verbose mode does: a test
         * that Bazel's timeout ends names the case it was in. */
        printf("[RUN ] %s::%s\n", t->suite, t->name);
        fflush(stdout);
        switch (run_one(t, why, sizeof(why))) {
        case PASS:
            passing++;
            printf("[PASS] %s::%s\n", t->suite, t->name);
            break;
        case SKIP:
            skipped++;
            tested--;
            printf("[SKIP] %s::%s\n", t->suite, t->name);
            break;
        case FAIL:
            failing++;
            printf("[FAIL] %s::%s: %s\n", t->suite, t->name, why);
            break;
        case CRASH:
            crashing++;
            failing++;
            printf("[CRASH] %s::%s: %s\n", t->suite, t->name, why);
            break;
        }
        fflush(stdout);
    }
    free(order);
    printf("[====] Synthesis: Tested: %u | Passing: %u | Failing: %u | Crashing: %u "
           "(criterion stand-in; %u skipped)\n",
           tested, passing, failing, crashing, skipped);
    return failing != 0 ? 1 : 0;
}
