/*
 * The settings read from the environment (runtime/options.c): every number
 * through one strict parser (digits only: no sign, no blanks, no base
 * prefix), the documented boolean spellings of NXR_DISPLAY_ENV and nothing
 * else, and an NXR_* variable nxr does not know (a typo) warned of once per
 * process on stderr with the closest known name. Each Criterion test runs
 * in a process of its own, so "once per process" starts afresh in each.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal/runtime.h"

static char err[512];

static int resolve(struct nxr__settings *s)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    err[0] = '\0';
    return nxr__settings_resolve(s, &o, err, sizeof(err));
}

Test(runtime_options, every_number_is_parsed_strictly)
{
    static const char *const vars[] = {"NXR_NUM_THREADS", "NXR_SPIN", "NXR_STALL_REPORT_MS",
                                       "NXR_CPU_QUOTA", "NXR_POOL_CAP"};
    static const char *const bad[] = {" 5", "+5", "5 ", "-5", "0x5", "5\n", "\t5", "٥"};
    struct nxr__settings s;
    for (size_t v = 0; v < sizeof(vars) / sizeof(vars[0]); v++) {
        for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
            setenv(vars[v], bad[b], 1);
            cr_expect_eq(resolve(&s), NXR_ESYNTAX, "%s='%s' is refused", vars[v], bad[b]);
            cr_expect_neq(strstr(err, vars[v]), NULL, "'%s' names %s", err, vars[v]);
        }
        setenv(vars[v], "5", 1);
        cr_expect_eq(resolve(&s), 0, "%s=5: %s", vars[v], err);
        unsetenv(vars[v]);
    }
    setenv("NXR_POOL_CAP", "5M", 1);
    cr_assert_eq(resolve(&s), 0, "%s", err);
    cr_expect_eq(s.pool_cap, (size_t)5 << 20);
    setenv("NXR_POOL_CAP", "+5M", 1);
    cr_expect_eq(resolve(&s), NXR_ESYNTAX);
    unsetenv("NXR_POOL_CAP");
}

Test(runtime_options, display_env_takes_the_documented_booleans)
{
    static const char *const on[] = {"1", "true", "yes", "on"};
    static const char *const off[] = {"0", "false", "no", "off"};
    static const char *const bad[] = {"2", "maybe", "TRUE ", " 1", "nope"};
    struct nxr__settings s;
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        setenv("NXR_DISPLAY_ENV", on[i], 1);
        cr_assert_eq(resolve(&s), 0, "%s", err);
        cr_expect(s.display_env, "NXR_DISPLAY_ENV=%s turns the display on", on[i]);
    }
    for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
        setenv("NXR_DISPLAY_ENV", off[i], 1);
        cr_assert_eq(resolve(&s), 0, "%s", err);
        cr_expect(!s.display_env, "NXR_DISPLAY_ENV=%s leaves the display off", off[i]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("NXR_DISPLAY_ENV", bad[i], 1);
        cr_expect_eq(resolve(&s), NXR_ESYNTAX, "NXR_DISPLAY_ENV='%s'", bad[i]);
        cr_expect_neq(strstr(err, "NXR_DISPLAY_ENV"), NULL, "%s", err);
    }
    unsetenv("NXR_DISPLAY_ENV");
}

static void redirect(void)
{
    cr_redirect_stderr();
}

Test(runtime_options, an_unknown_variable_is_warned_of_once, .init = redirect)
{
    setenv("NXR_NUMTHREADS", "2", 1);
    setenv("NXR_LIBRARY", "/x/libnxr.so.1", 1); /* the Python binding's: known */
    struct nxr__settings s;
    cr_assert_eq(resolve(&s), 0, "%s", err);
    cr_assert_eq(resolve(&s), 0, "%s", err);
    fflush(stderr);
    char text[2048] = "";
    size_t n = fread(text, 1, sizeof(text) - 1, cr_get_redirected_stderr());
    text[n] = '\0';
    const char *first = strstr(text, "NXR_NUMTHREADS");
    cr_expect_neq(first, NULL, "the typo is named: '%s'", text);
    cr_expect_neq(strstr(text, "did you mean NXR_NUM_THREADS"), NULL, "'%s'", text);
    cr_expect(first == NULL || strstr(first + 1, "NXR_NUMTHREADS") == NULL, "once: '%s'", text);
    cr_expect_eq(strstr(text, "NXR_LIBRARY"), NULL, "'%s'", text);
    unsetenv("NXR_NUMTHREADS");
    unsetenv("NXR_LIBRARY");
}

/* opts.ignore_env: the environment is not read, not even for the warning. */
Test(runtime_options, ignore_env_reads_nothing, .init = redirect)
{
    setenv("NXR_NUMTHREADS", "2", 1);
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    struct nxr__settings s;
    cr_assert_eq(nxr__settings_resolve(&s, &o, err, sizeof(err)), 0, "%s", err);
    fflush(stderr);
    char text[512] = "";
    size_t n = fread(text, 1, sizeof(text) - 1, cr_get_redirected_stderr());
    text[n] = '\0';
    cr_expect_str_eq(text, "");
    unsetenv("NXR_NUMTHREADS");
}
