/*
 * The runtime under a CPU quota: the quota read from a fake cgroup root
 * (opts.cgroup_root) or set by NXR_CPU_QUOTA / opts.cpu_quota lowers the
 * budgets before any team starts, the workers beyond the budget are never
 * started, and nxr_runtime_describe says where the quota came from and what
 * lowered each budget. Reading the cgroup files themselves is
 * tests/domains/cpu_quota_test.c's.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal/runtime.h"
#include "runtime/nxr.h"
#include "tests/support/cpus.h"
#include "tests/support/fsfixture.h"
#include "tests/support/procfs.h"

static char root[512];

static void setup(void)
{
    cr_assert_eq(nxr_test_fixture_dir(root, sizeof(root)), 0);
    unsetenv("NXR_CPU_QUOTA");
}

static void teardown(void)
{
    nxr_test_fixture_remove(root);
}

TestSuite(runtime_quota, .init = setup, .fini = teardown);

/* A cgroup v2 layout whose only level says cpu_max. */
static void fixture(const char *cpu_max)
{
    cr_assert_eq(nxr_test_fixture_write(root, "proc/self/cgroup", "0::/job\n"), 0);
    cr_assert_eq(nxr_test_fixture_write(root, "proc/self/mountinfo",
                                        "30 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
                 0);
    cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.max", cpu_max), 0);
}

/* One node of two CPUs (the first two allowed ones), or two nodes of one. */
#define ONE_NODE "synthetic:numa:1 pu:2(indexes=%0,%1)"
#define TWO_NODES "synthetic:pack:2 numa:1 pu:1(indexes=%0,%1)"

static void opts_for(struct nxr_runtime_opts *o, const char *topology)
{
    NXR_TEST_NEED_CPUS(2);
    nxr_runtime_opts_init(o);
    o->topology = nxr_test_expand(topology);
    o->cgroup_root = root;
}

static nxr_runtime_t *create(const struct nxr_runtime_opts *o)
{
    nxr_runtime_t *rt = NULL;
    int rc = nxr_runtime_create(o, &rt);
    cr_assert_eq(rc, 0, "create: %s (%s)", nxr_strerror(rc), nxr_last_error());
    return rt;
}

static char *describe(const nxr_runtime_t *rt, enum nxr_describe_format f)
{
    char *text = NULL;
    cr_assert_eq(nxr_runtime_describe(rt, f, &text), 0);
    return text;
}

Test(runtime_quota, cgroup_quota_lowers_the_budget_and_starts_fewer_workers)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("100000 100000\n");
    int before = nxr_test_thread_count();
    nxr_runtime_t *rt = create(&o);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    cr_expect_eq(nxr_domain_budget(d), 1, "a one-CPU quota on two CPUs");
    cr_expect_eq(nxr_domain_workers(d), 1);
    pid_t tids[8];
    cr_expect_eq(nxr_test_threads_named("nxr-d0-w", tids, 8), 1, "one worker thread started");
    cr_expect_eq(nxr_test_thread_count(), before + 1);
    cr_expect_str_eq(nxr_domain_budget_limit(d), "quota");
    const char *source = NULL;
    cr_expect_eq(nxr_runtime_cpu_quota(rt, &source), 1);
    cr_assert_not_null(source);
    cr_expect_neq(strstr(source, "cgroup v2 "), NULL, "%s", source);
    cr_expect_neq(strstr(source, "/sys/fs/cgroup/job/cpu.max: 100000 100000 -> 1 CPU"), NULL,
                  "%s", source);

    char *json = describe(rt, NXR_DESCRIBE_JSON);
    cr_expect_neq(strstr(json, "\"cpu_quota\":{\"cpus\":1,\"source\":\"cgroup v2 "), NULL, "%s",
                  json);
    cr_expect_neq(strstr(json, "\"budget\":1,\"executor_owner\":\"nxr\",\"budget_limited_by\":"
                               "\"quota\""),
                  NULL, "%s", json);
    free(json);
    char *text = describe(rt, NXR_DESCRIBE_TEXT);
    cr_expect_neq(strstr(text, "cpu quota: cgroup v2 "), NULL, "%s", text);
    cr_expect_neq(strstr(text, "budget 1 (lowered by the CPU quota)"), NULL, "%s", text);
    free(text);
    nxr_runtime_destroy(rt);
}

Test(runtime_quota, no_quota_is_reported_as_null)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("max 100000\n");
    nxr_runtime_t *rt = create(&o);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    cr_expect_eq(nxr_domain_budget(d), 2);
    cr_expect_null(nxr_domain_budget_limit(d));
    cr_expect_eq(nxr_runtime_cpu_quota(rt, NULL), 0);
    char *json = describe(rt, NXR_DESCRIBE_JSON);
    cr_expect_neq(strstr(json, "\"cpu_quota\":null"), NULL, "%s", json);
    cr_expect_neq(strstr(json, "\"budget_limited_by\":null"), NULL, "%s", json);
    free(json);
    nxr_runtime_destroy(rt);
}

/* Garbage in the cgroup files is no quota (the runtime still starts, in
 * full) and the report says which file was wrong. */
Test(runtime_quota, garbage_is_no_quota_and_said)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("lots of CPUs\n");
    nxr_runtime_t *rt = create(&o);
    cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 2);
    const char *source = NULL;
    cr_expect_eq(nxr_runtime_cpu_quota(rt, &source), 0);
    cr_expect_neq(strstr(source, "job/cpu.max"), NULL, "%s", source);
    nxr_runtime_destroy(rt);
}

/* Two nodes of one CPU each: a one-CPU quota cannot take a domain's last
 * thread, so nothing is lowered. */
Test(runtime_quota, every_domain_keeps_one_thread)
{
    struct nxr_runtime_opts o;
    opts_for(&o, TWO_NODES);
    fixture("100000 100000\n");
    nxr_runtime_t *rt = create(&o);
    cr_assert_eq(nxr_runtime_domain_count(rt), 2);
    for (size_t i = 0; i < 2; i++) {
        cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, i)), 1);
        cr_expect_null(nxr_domain_budget_limit(nxr_runtime_domain_at(rt, i)));
    }
    nxr_runtime_destroy(rt);
}

Test(runtime_quota, environment_overrides)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("100000 100000\n");
    const char *source = NULL;

    setenv("NXR_CPU_QUOTA", "ignore", 1);
    nxr_runtime_t *rt = create(&o);
    cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 2, "the cgroup is ignored");
    cr_expect_eq(nxr_runtime_cpu_quota(rt, &source), 0);
    cr_expect_str_eq(source, "ignored (NXR_CPU_QUOTA=ignore)");
    nxr_runtime_destroy(rt);

    setenv("NXR_CPU_QUOTA", "auto", 1);
    rt = create(&o);
    cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 1, "auto reads the cgroup");
    nxr_runtime_destroy(rt);

    fixture("max 100000\n");
    setenv("NXR_CPU_QUOTA", "1", 1);
    rt = create(&o);
    cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 1);
    cr_expect_eq(nxr_runtime_cpu_quota(rt, &source), 1);
    cr_expect_str_eq(source, "NXR_CPU_QUOTA=1 -> 1 CPU");
    cr_expect_str_eq(nxr_domain_budget_limit(nxr_runtime_domain_at(rt, 0)), "quota");
    nxr_runtime_destroy(rt);

    /* The option wins over the environment. */
    o.cpu_quota = NXR_CPU_QUOTA_IGNORE;
    rt = create(&o);
    cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 2);
    nxr_runtime_destroy(rt);
    o.cpu_quota = 1;
    setenv("NXR_CPU_QUOTA", "ignore", 1);
    rt = create(&o);
    cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 1);
    cr_expect_eq(nxr_runtime_cpu_quota(rt, &source), 1);
    cr_expect_str_eq(source, "opts.cpu_quota=1 -> 1 CPU");
    nxr_runtime_destroy(rt);
    unsetenv("NXR_CPU_QUOTA");
}

/* The quota lowers, NXR_NUM_THREADS lowers further, neither raises. */
Test(runtime_quota, num_threads_after_the_quota)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("max 100000\n");
    o.cpu_quota = 4; /* more than the domain has: nothing lowered */
    nxr_runtime_t *rt = create(&o);
    cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 2);
    cr_expect_null(nxr_domain_budget_limit(nxr_runtime_domain_at(rt, 0)));
    nxr_runtime_destroy(rt);
    o.num_threads = 1;
    rt = create(&o);
    cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 1);
    cr_expect_str_eq(nxr_domain_budget_limit(nxr_runtime_domain_at(rt, 0)), "num_threads");
    nxr_runtime_destroy(rt);
}

static void expect_refused(struct nxr_runtime_opts *o, const char *env, int want)
{
    if (env != NULL)
        setenv("NXR_CPU_QUOTA", env, 1);
    int before = nxr_test_thread_count();
    nxr_runtime_t *rt = (nxr_runtime_t *)0x1;
    int rc = nxr_runtime_create(o, &rt);
    cr_expect_eq(rc, want, "NXR_CPU_QUOTA='%s' opts.cpu_quota=%d: %d (%s), want %d", env ? env : "",
                 o->cpu_quota, rc, nxr_last_error(), want);
    cr_expect_null(rt);
    cr_expect_eq(nxr_test_wait_thread_count(before), before, "nothing left running");
    if (env != NULL)
        cr_expect_neq(strstr(nxr_last_error(), "NXR_CPU_QUOTA"), NULL, "the message names it: %s", nxr_last_error());
    unsetenv("NXR_CPU_QUOTA");
}

Test(runtime_quota, bad_settings_are_refused)
{
    struct nxr_runtime_opts o; /* any CPUs: nothing is created */
    nxr_runtime_opts_init(&o);
    o.cgroup_root = root;
    static const char *const bad[] = {"0", "-1", "two", "1.5", "auto ", "99999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_refused(&o, bad[i], NXR_ESYNTAX);
    o.cpu_quota = -3;
    expect_refused(&o, NULL, -EINVAL);
}

/* nxr_runtime_stats reports the limit's own values and reads the limiting
 * cgroup's throttling at each call (it moves while the runtime serves). */
Test(runtime_quota, stats_report_the_limit_and_its_throttling)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("150000 100000\n");
    nxr_runtime_t *rt = create(&o);
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, NULL, 0);
    cr_assert_eq(nxr_runtime_stats(rt, &s), 0, "%s", nxr_last_error());
    cr_expect_eq(s.cpu_quota, 1);
    cr_expect_eq(s.cpu_quota_us, 150000);
    cr_expect_eq(s.cpu_period_us, 100000);
    cr_expect_eq(s.throttle_status, -ENOENT, "no cpu.stat yet");
    cr_expect_eq(s.nr_throttled, 0);

    cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.stat",
                                        "nr_periods 10\nnr_throttled 4\nthrottled_usec 900\n"),
                 0);
    cr_assert_eq(nxr_runtime_stats(rt, &s), 0);
    cr_expect_eq(s.throttle_status, 0);
    cr_expect_eq(s.nr_throttled, 4);
    cr_expect_eq(s.throttled_usec, 900);
    nxr_runtime_destroy(rt);

    o.cpu_quota = 1; /* a quota from a setting names no cgroup */
    rt = create(&o);
    cr_assert_eq(nxr_runtime_stats(rt, &s), 0);
    cr_expect_eq(s.cpu_quota, 1);
    cr_expect_eq(s.cpu_quota_us, 0);
    cr_expect_eq(s.throttle_status, -ENOENT);
    nxr_runtime_destroy(rt);
}

/* ---- budgets following a changed quota (nxr_runtime_refresh_budget) ---- */

static void record_participants(void *arg, size_t b, size_t e, unsigned participant)
{
    (void)b, (void)e;
    __atomic_fetch_or((unsigned *)arg, 1u << participant, __ATOMIC_RELAXED);
}

/* Which participants a loop of two chunks used (a bit each). */
static unsigned participants_of(nxr_ctx_t *ctx)
{
    unsigned seen = 0;
    cr_assert_eq(nxr_parallel_for(ctx, 0, 2, 1, record_participants, &seen), 0);
    return seen;
}

Test(runtime_quota, budgets_follow_a_lowered_then_raised_quota)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("200000 100000\n"); /* 2 CPUs: the whole domain */
    nxr_runtime_t *rt = create(&o);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, nxr_domain_id(d), &ctx), 0);
    cr_assert_eq(nxr_domain_budget(d), 2);
    cr_expect_eq(participants_of(ctx), 3u, "two participants under a 2-CPU quota");

    /* The limit is lowered while the runtime serves. */
    cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.max", "100000 100000\n"), 0);
    cr_expect_eq(nxr_domain_budget(d), 2, "nothing moves before the refresh");
    cr_assert_eq(nxr_runtime_refresh_budget(rt), 0, "%s", nxr_last_error());
    cr_expect_eq(nxr_domain_budget(d), 1);
    cr_expect_eq(nxr_ctx_budget(ctx), 1);
    cr_expect_eq(participants_of(ctx), 1u, "the next loop runs on one participant");
    const char *why = nxr_domain_budget_limit(d);
    cr_expect(why != NULL && strcmp(why, "quota") == 0, "lowered by the quota now, said: %s",
              why != NULL ? why : "NULL");
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, NULL, 0);
    cr_assert_eq(nxr_runtime_stats(rt, &s), 0);
    cr_expect_eq(s.cpu_quota, 1);
    cr_expect_eq(s.budget_changes, 1);
    cr_expect_neq(s.budget_changed_ns, 0);
    char *text = describe(rt, NXR_DESCRIBE_TEXT);
    cr_expect_neq(strstr(text, "the budgets followed it 1 time(s), last: domain 0 2 -> 1, as the "
                               "CPU quota is now cgroup v2 "),
                  NULL, "%s", text);
    free(text);

    /* A refresh with nothing changed moves nothing. */
    cr_assert_eq(nxr_runtime_refresh_budget(rt), 0);
    cr_assert_eq(nxr_runtime_stats(rt, &s), 0);
    cr_expect_eq(s.budget_changes, 1);

    /* Raised again (past the creation quota: no limit): back to the
     * creation budget, never above it. */
    cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.max", "max 100000\n"), 0);
    cr_assert_eq(nxr_runtime_refresh_budget(rt), 0);
    cr_expect_eq(nxr_domain_budget(d), 2);
    cr_expect_eq(participants_of(ctx), 3u);
    cr_expect_null(nxr_domain_budget_limit(d), "nothing lowers it any more");
    cr_assert_eq(nxr_runtime_stats(rt, &s), 0);
    cr_expect_eq(s.budget_changes, 2);
    cr_expect_eq(s.cpu_quota, 0, "no limit now");
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}

Test(runtime_quota, a_quota_from_a_setting_does_not_move)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("max 100000\n");
    o.cpu_quota = 1;
    nxr_runtime_t *rt = create(&o);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    cr_assert_eq(nxr_domain_budget(d), 1);
    cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.max", "100000 100000\n"), 0);
    cr_expect_eq(nxr_runtime_refresh_budget(rt), 0);
    cr_expect_eq(nxr_domain_budget(d), 1);
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, NULL, 0);
    cr_assert_eq(nxr_runtime_stats(rt, &s), 0);
    cr_expect_eq(s.budget_changes, 0);
    cr_expect_eq(nxr_runtime_refresh_budget(NULL), -EINVAL);
    nxr_runtime_destroy(rt);
}

Test(runtime_quota, two_domains_share_a_lowered_quota_by_their_cpus)
{
    struct nxr_runtime_opts o;
    opts_for(&o, TWO_NODES);
    fixture("max 100000\n");
    nxr_runtime_t *rt = create(&o);
    cr_assert_eq(nxr_runtime_domain_count(rt), 2);
    /* One CPU for two one-CPU domains: each keeps one (a domain with no
     * thread could run nothing), so nothing moves; the record says none. */
    cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.max", "100000 100000\n"), 0);
    cr_assert_eq(nxr_runtime_refresh_budget(rt), 0);
    for (size_t i = 0; i < 2; i++)
        cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, i)), 1);
    nxr_runtime_destroy(rt);
}

/* NXR_QUOTA_FOLLOW_MS: a follower thread refreshes on its own. Waits on its
 * refresh count (two refreshes after the change: the second started after
 * it), not on time. */
static void await_refreshes(nxr_runtime_t *rt, unsigned long long n)
{
    unsigned long long start = atomic_load(&rt->quota_refreshes);
    while (atomic_load(&rt->quota_refreshes) < start + n)
        sched_yield();
}

Test(runtime_quota, a_follower_moves_the_budgets_without_a_call, .timeout = 60)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("200000 100000\n");
    cr_assert_eq(setenv("NXR_QUOTA_FOLLOW_MS", "2", 1), 0);
    nxr_runtime_t *rt = create(&o);
    unsetenv("NXR_QUOTA_FOLLOW_MS");
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    cr_assert_eq(nxr_domain_budget(d), 2);
    cr_assert(rt->quota_following, "the follower runs");
    cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.max", "100000 100000\n"), 0);
    await_refreshes(rt, 2);
    cr_expect_eq(nxr_domain_budget(d), 1, "followed down");
    cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.max", "200000 100000\n"), 0);
    await_refreshes(rt, 2);
    cr_expect_eq(nxr_domain_budget(d), 2, "followed up");
    nxr_runtime_destroy(rt); /* joins the follower */
}

Test(runtime_quota, no_follower_unless_asked_or_with_a_fixed_quota)
{
    struct nxr_runtime_opts o;
    opts_for(&o, ONE_NODE);
    fixture("max 100000\n");
    nxr_runtime_t *rt = create(&o);
    cr_expect(!rt->quota_following, "off by default");
    nxr_runtime_destroy(rt);
    cr_assert_eq(setenv("NXR_QUOTA_FOLLOW_MS", "5", 1), 0);
    o.cpu_quota = 1;
    rt = create(&o);
    cr_expect(!rt->quota_following, "a quota from a setting never moves");
    nxr_runtime_destroy(rt);
    cr_assert_eq(setenv("NXR_QUOTA_FOLLOW_MS", "soon", 1), 0);
    o.cpu_quota = 0;
    nxr_runtime_t *bad = NULL;
    cr_expect_eq(nxr_runtime_create(&o, &bad), NXR_ESYNTAX);
    cr_expect_null(bad);
    cr_expect_neq(strstr(nxr_last_error(), "NXR_QUOTA_FOLLOW_MS"), NULL, "%s", nxr_last_error());
    unsetenv("NXR_QUOTA_FOLLOW_MS");
}
