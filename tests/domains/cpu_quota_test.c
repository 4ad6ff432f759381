/*
 * The CPU quota read from a fake cgroup root: each test writes
 * proc/self/cgroup, proc/self/mountinfo and the cgroup files of one layout
 * into a fresh directory and reads it back through nxr__cpu_quota_read.
 * Expected values are written by hand from the layout (quota / period,
 * floored, at least 1), never computed by the reader.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/nxr_status.h"
#include "domains/internal/cpu_quota.h"
#include "tests/support/fsfixture.h"

static char root[512];

static void setup(void)
{
    cr_assert_eq(nxr_test_fixture_dir(root, sizeof(root)), 0);
}

static void teardown(void)
{
    nxr_test_fixture_remove(root);
}

TestSuite(domains_cpu_quota, .init = setup, .fini = teardown);

static void put(const char *rel, const char *content)
{
    cr_assert_eq(nxr_test_fixture_write(root, rel, content), 0, "writing %s", rel);
}

/* A cgroup v2 (unified) layout: the process in `cgroup`, the hierarchy
 * mounted at /sys/fs/cgroup with its root at `mount_root`. */
static void v2_layout(const char *cgroup, const char *mount_root)
{
    char line[512];
    snprintf(line, sizeof(line), "0::%s\n", cgroup);
    put("proc/self/cgroup", line);
    snprintf(line, sizeof(line),
             "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
             "30 22 0:26 %s /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 "
             "cgroup2 rw,nsdelegate\n",
             mount_root);
    put("proc/self/mountinfo", line);
}

/* A cgroup v1 layout with cpu and cpuacct co-mounted (as systemd does). */
static void v1_layout(const char *cgroup)
{
    char line[512];
    snprintf(line, sizeof(line),
             "12:pids:/\n4:cpu,cpuacct:%s\n3:memory:/m\n1:name=systemd:/init.scope\n", cgroup);
    put("proc/self/cgroup", line);
    put("proc/self/mountinfo",
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup "
        "rw,cpu,cpuacct\n"
        "32 30 0:29 / /sys/fs/cgroup/memory rw,nosuid shared:11 - cgroup cgroup rw,memory\n");
}

static struct nxr__cpu_quota read_quota(void)
{
    struct nxr__cpu_quota q;
    memset(&q, 0x55, sizeof(q)); /* the reader must fill every field */
    int rc = nxr__cpu_quota_read(root, &q);
    cr_assert_eq(rc, q.status, "the return value is the status");
    cr_assert_neq(memchr(q.source, '\0', sizeof(q.source)), NULL, "source is terminated");
    return q;
}

static void expect_none(const struct nxr__cpu_quota *q)
{
    cr_expect_eq(q->status, 0, "status %d (%s)", q->status, q->source);
    cr_expect_eq(q->cpus, 0, "no quota expected, got %u (%s)", q->cpus, q->source);
    cr_expect_eq(strncmp(q->source, "none", 4), 0, "source '%s'", q->source);
}

/* Garbage or an unreadable file: a typed status, no quota, never a crash. */
static void expect_error(const struct nxr__cpu_quota *q, int status, const char *names)
{
    cr_expect_eq(q->status, status, "status %d, expected %d (%s)", q->status, status, q->source);
    cr_expect_eq(q->cpus, 0, "a failed read takes no quota (%s)", q->source);
    cr_expect_neq(strstr(q->source, names), NULL, "'%s' names %s", q->source, names);
}

Test(domains_cpu_quota, v2_one_cpu)
{
    v2_layout("/svc", "/");
    put("sys/fs/cgroup/svc/cpu.max", "100000 100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.status, 0, "%s", q.source);
    cr_expect_eq(q.cpus, 1);
    cr_expect_neq(strstr(q.source, "cgroup v2 "), NULL, "%s", q.source);
    cr_expect_neq(strstr(q.source, "/sys/fs/cgroup/svc/cpu.max: 100000 100000 -> 1 CPU"), NULL,
                  "%s", q.source);
}

Test(domains_cpu_quota, v2_floors_and_never_below_one)
{
    v2_layout("/svc", "/");
    put("sys/fs/cgroup/svc/cpu.max", "250000 100000\n"); /* 2.5 CPUs */
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 2, "2.5 CPUs floor to 2 (%s)", q.source);
    put("sys/fs/cgroup/svc/cpu.max", "20000 100000\n"); /* 0.2 CPU */
    q = read_quota();
    cr_expect_eq(q.cpus, 1, "a fifth of a CPU still runs one thread (%s)", q.source);
    cr_expect_eq(q.status, 0);
}

Test(domains_cpu_quota, v2_max_is_no_limit)
{
    v2_layout("/svc", "/");
    put("sys/fs/cgroup/svc/cpu.max", "max 100000\n");
    struct nxr__cpu_quota q = read_quota();
    expect_none(&q);
}

Test(domains_cpu_quota, v2_ancestor_limit_counts)
{
    v2_layout("/a/b/c", "/");
    put("sys/fs/cgroup/a/b/c/cpu.max", "max 100000\n");
    /* b has no cpu.max at all (controller not enabled there). */
    put("sys/fs/cgroup/a/cpu.max", "300000 100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 3, "%s", q.source);
    cr_expect_neq(strstr(q.source, "/sys/fs/cgroup/a/cpu.max"), NULL, "names the ancestor: %s",
                  q.source);
}

Test(domains_cpu_quota, v2_tightest_level_wins)
{
    v2_layout("/a/b", "/");
    put("sys/fs/cgroup/a/b/cpu.max", "400000 100000\n");
    put("sys/fs/cgroup/a/cpu.max", "200000 50000\n"); /* 4 CPUs */
    put("sys/fs/cgroup/cpu.max", "150000 100000\n");  /* 1 CPU at the top */
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 1, "%s", q.source);
    cr_expect_neq(strstr(q.source, "/sys/fs/cgroup/cpu.max: 150000 100000"), NULL, "%s", q.source);
}

/* docker without a cgroup namespace: the mount shows the container's
 * cgroup at its top, and /proc/self/cgroup names the same path. */
Test(domains_cpu_quota, v2_mount_root_is_the_container)
{
    v2_layout("/docker/abc", "/docker/abc");
    put("sys/fs/cgroup/cpu.max", "200000 100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 2, "%s", q.source);
}

/* A cgroup namespace's view the mount does not show: the mount's top is
 * the nearest level that can be read. */
Test(domains_cpu_quota, v2_cgroup_outside_the_mount)
{
    v2_layout("/elsewhere/x", "/pod");
    put("sys/fs/cgroup/cpu.max", "100000 100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 1, "%s", q.source);
}

Test(domains_cpu_quota, v1_quota_and_period)
{
    v1_layout("/batch");
    put("sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_quota_us", "150000\n");
    put("sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_period_us", "50000\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 3, "%s", q.source);
    cr_expect_neq(strstr(q.source, "cgroup v1 "), NULL, "%s", q.source);
    cr_expect_neq(strstr(q.source, "batch/cpu.cfs_quota_us: 150000, cpu.cfs_period_us: 50000 -> 3 "
                                   "CPUs"),
                  NULL, "%s", q.source);
}

Test(domains_cpu_quota, v1_minus_one_is_no_limit)
{
    v1_layout("/batch");
    put("sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_period_us", "100000\n");
    struct nxr__cpu_quota q = read_quota();
    expect_none(&q);
}

Test(domains_cpu_quota, v1_parent_limit_counts)
{
    v1_layout("/a/b");
    put("sys/fs/cgroup/cpu,cpuacct/a/b/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu,cpuacct/a/b/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_period_us", "100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 1, "%s", q.source);
}

/* cpuacct alone is not the cpu controller: its files do not limit. */
Test(domains_cpu_quota, v1_cpuacct_is_not_cpu)
{
    put("proc/self/cgroup", "2:cpuacct:/x\n");
    put("proc/self/mountinfo",
        "31 30 0:28 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n");
    put("sys/fs/cgroup/cpuacct/x/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpuacct/x/cpu.cfs_period_us", "100000\n");
    struct nxr__cpu_quota q = read_quota();
    expect_none(&q);
    cr_expect_neq(strstr(q.source, "names no cpu hierarchy"), NULL, "%s", q.source);
}

/* Hybrid (v1 cpu beside the unified hierarchy): both count. */
Test(domains_cpu_quota, hybrid_tightest_of_both)
{
    put("proc/self/cgroup", "4:cpu:/j\n0::/j\n");
    put("proc/self/mountinfo", "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
                               "40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
    put("sys/fs/cgroup/cpu/j/cpu.cfs_quota_us", "300000\n");
    put("sys/fs/cgroup/cpu/j/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/unified/j/cpu.max", "200000 100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 2, "%s", q.source);
    cr_expect_neq(strstr(q.source, "cgroup v2"), NULL, "%s", q.source);
}

/* mountinfo escapes a space in a mount point as \040. */
Test(domains_cpu_quota, escaped_mount_point)
{
    put("proc/self/cgroup", "0::/s\n");
    put("proc/self/mountinfo", "30 22 0:26 / /sys/fs/my\\040cg rw - cgroup2 cgroup2 rw\n");
    put("sys/fs/my cg/s/cpu.max", "100000 100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 1, "%s", q.source);
}

Test(domains_cpu_quota, missing_files_are_no_quota)
{
    struct nxr__cpu_quota q = read_quota(); /* an empty root: no /proc at all */
    expect_none(&q);
    v2_layout("/svc", "/"); /* no cpu.max anywhere */
    q = read_quota();
    expect_none(&q);
    put("proc/self/cgroup", "0::/svc\n");
    put("proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"); /* not mounted */
    q = read_quota();
    expect_none(&q);
}

/* An unreadable file (here a directory where cpu.max should be: as root,
 * permissions would not stop the read). */
Test(domains_cpu_quota, unreadable_file_is_an_error)
{
    v2_layout("/svc", "/");
    cr_assert_eq(nxr_test_fixture_mkdir(root, "sys/fs/cgroup/svc/cpu.max"), 0);
    struct nxr__cpu_quota q = read_quota();
    expect_error(&q, -EISDIR, "svc/cpu.max");
}

Test(domains_cpu_quota, garbage_cpu_max_is_esyntax)
{
    static const char *const bad[] = {
        "banana\n",
        "100000\n",
        "-5 100000\n",
        "100000 0\n",
        "1 2 3\n",
        "max\n",
        "\n",
        "",
        "0 100000\n",
        "99999999999999999999999 100000\n",
        "100000 100000x\n",
    };
    v2_layout("/svc", "/");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put("sys/fs/cgroup/svc/cpu.max", bad[i]);
        struct nxr__cpu_quota q = read_quota();
        expect_error(&q, NXR_ESYNTAX, "cpu.max");
    }
}

Test(domains_cpu_quota, garbage_v1_is_esyntax)
{
    v1_layout("/b");
    put("sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_quota_us", "lots\n");
    put("sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_period_us", "100000\n");
    struct nxr__cpu_quota q = read_quota();
    expect_error(&q, NXR_ESYNTAX, "cpu.cfs_quota_us");
    put("sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_quota_us", "-2\n");
    q = read_quota();
    expect_error(&q, NXR_ESYNTAX, "cpu.cfs_quota_us");
    put("sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_period_us", "0\n");
    q = read_quota();
    expect_error(&q, NXR_ESYNTAX, "cpu.cfs_period_us");
    char period[1024];
    snprintf(period, sizeof(period), "%s/sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_period_us", root);
    cr_assert_eq(remove(period), 0);
    q = read_quota();
    expect_error(&q, -ENOENT, "cpu.cfs_period_us");
}

Test(domains_cpu_quota, garbage_proc_files_are_esyntax)
{
    put("proc/self/cgroup", "hello world\n");
    struct nxr__cpu_quota q = read_quota();
    expect_error(&q, NXR_ESYNTAX, "proc/self/cgroup");
    put("proc/self/cgroup", "x:cpu:/a\n");
    q = read_quota();
    expect_error(&q, NXR_ESYNTAX, "proc/self/cgroup");
    put("proc/self/cgroup", "4:cpu:relative\n");
    q = read_quota();
    expect_error(&q, NXR_ESYNTAX, "proc/self/cgroup");
    put("proc/self/cgroup", "4:cpu:/a/../../etc\n");
    q = read_quota();
    expect_error(&q, NXR_ESYNTAX, "proc/self/cgroup");
    put("proc/self/cgroup", "0::/a\n");
    put("proc/self/mountinfo", "no dash here at all\n");
    q = read_quota();
    expect_error(&q, NXR_ESYNTAX, "mountinfo");
}

/* A binary blob with one endless line: refused by the seam's line cap. */
Test(domains_cpu_quota, endless_line_is_efbig)
{
    static char blob[3 * 8192];
    memset(blob, 'x', sizeof(blob) - 1);
    put("proc/self/cgroup", blob);
    struct nxr__cpu_quota q = read_quota();
    expect_error(&q, -EFBIG, "proc/self/cgroup");
}

/* A malformed file never throws away a valid tighter limit: the tightest
 * valid limit wins and the malformed file is reported beside it. */
Test(domains_cpu_quota, a_malformed_v2_file_keeps_the_v1_limit)
{
    put("proc/self/cgroup", "4:cpu:/j\n0::/j\n");
    put("proc/self/mountinfo", "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
                               "40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
    put("sys/fs/cgroup/cpu/j/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpu/j/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/unified/j/cpu.max", "banana\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 1, "the v1 limit stands (%s)", q.source);
    cr_expect_eq(q.status, NXR_ESYNTAX, "the malformed file is reported (%s)", q.source);
    cr_expect_neq(strstr(q.source, "cpu.cfs_quota_us"), NULL, "'%s' names the limit", q.source);
    cr_expect_neq(strstr(q.source, "unified/j/cpu.max"), NULL, "'%s' names the malformed file",
                  q.source);
}

Test(domains_cpu_quota, a_malformed_parent_keeps_the_childs_limit)
{
    v2_layout("/a/b", "/");
    put("sys/fs/cgroup/a/b/cpu.max", "100000 100000\n");
    put("sys/fs/cgroup/a/cpu.max", "1 2 3\n");
    put("sys/fs/cgroup/cpu.max", "300000 100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 1, "the child's limit stands (%s)", q.source);
    cr_expect_eq(q.status, NXR_ESYNTAX, "%s", q.source);
    cr_expect_neq(strstr(q.source, "a/b/cpu.max"), NULL, "%s", q.source);
    cr_expect_neq(strstr(q.source, "cgroup/a/cpu.max"), NULL, "%s", q.source);
    /* And a tighter level above a malformed one still counts. */
    put("sys/fs/cgroup/a/b/cpu.max", "banana\n");
    put("sys/fs/cgroup/a/cpu.max", "100000 100000\n");
    q = read_quota();
    cr_expect_eq(q.cpus, 1, "%s", q.source);
    cr_expect_eq(q.status, NXR_ESYNTAX, "%s", q.source);
}

/* Every level counts, however deep: no silent cut. */
Test(domains_cpu_quota, a_limit_above_a_deep_cgroup_counts)
{
    char cgroup[400] = "", rel[512];
    for (int i = 0; i < 100; i++)
        strcat(cgroup, "/d");
    v2_layout(cgroup, "/");
    put("sys/fs/cgroup/cpu.max", "100000 100000\n");
    snprintf(rel, sizeof(rel), "sys/fs/cgroup%s/cpu.max", cgroup);
    put(rel, "max 100000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.status, 0, "%s", q.source);
    cr_expect_eq(q.cpus, 1, "the limit 100 levels up counts (%s)", q.source);
}

/* ---- the limit's values and its throttling (nxr__cpu_throttle_read) ---- */

Test(domains_cpu_quota, v2_tightest_limit_names_its_values_and_directory)
{
    v2_layout("/a/b", "/");
    put("sys/fs/cgroup/a/b/cpu.max", "400000 100000\n");
    put("sys/fs/cgroup/a/cpu.max", "150000 100000\n"); /* the tightest: 1 CPU */
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.cpus, 1, "%s", q.source);
    cr_expect_eq(q.quota_us, 150000);
    cr_expect_eq(q.period_us, 100000);
    cr_expect_eq(q.v, 2);
    char want[1024];
    snprintf(want, sizeof(want), "%s/sys/fs/cgroup/a", root);
    cr_expect_str_eq(q.dir, want);
}

Test(domains_cpu_quota, v2_throttling_is_read_from_the_limiting_level)
{
    v2_layout("/a/b", "/");
    put("sys/fs/cgroup/a/b/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/a/b/cpu.stat", "usage_usec 5\nnr_periods 9\nnr_throttled 1\n"
                                      "throttled_usec 2\n");
    put("sys/fs/cgroup/a/cpu.max", "100000 100000\n");
    put("sys/fs/cgroup/a/cpu.stat", "usage_usec 900\nuser_usec 800\nsystem_usec 100\n"
                                    "nr_periods 40\nnr_throttled 7\nthrottled_usec 12345\n"
                                    "nr_bursts 0\nburst_usec 0\n");
    struct nxr__cpu_quota q = read_quota();
    struct nxr__cpu_throttle t;
    cr_assert_eq(nxr__cpu_throttle_read(&q, &t), 0);
    cr_expect_eq(t.nr_throttled, 7, "the limiting level's, not the leaf's");
    cr_expect_eq(t.throttled_usec, 12345);
}

Test(domains_cpu_quota, v1_throttled_time_is_nanoseconds)
{
    v1_layout("/batch");
    put("sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/batch/cpu.stat", "nr_periods 10\nnr_throttled 3\n"
                                                    "throttled_time 4000000\n");
    struct nxr__cpu_quota q = read_quota();
    cr_expect_eq(q.v, 1);
    struct nxr__cpu_throttle t;
    cr_assert_eq(nxr__cpu_throttle_read(&q, &t), 0);
    cr_expect_eq(t.nr_throttled, 3);
    cr_expect_eq(t.throttled_usec, 4000, "4 ms in nanoseconds is 4000 us");
}

Test(domains_cpu_quota, throttling_without_a_limit_or_with_a_bad_file_is_an_error)
{
    v2_layout("/svc", "/");
    put("sys/fs/cgroup/svc/cpu.max", "max 100000\n");
    struct nxr__cpu_quota q = read_quota();
    struct nxr__cpu_throttle t;
    memset(&t, 0x55, sizeof(t));
    cr_expect_eq(nxr__cpu_throttle_read(&q, &t), -ENOENT, "no limit: no directory");
    cr_expect_eq(t.nr_throttled, 0);

    put("sys/fs/cgroup/svc/cpu.max", "100000 100000\n");
    q = read_quota();
    cr_expect_eq(nxr__cpu_throttle_read(&q, &t), -ENOENT, "no cpu.stat");
    put("sys/fs/cgroup/svc/cpu.stat", "nr_throttled x1\nthrottled_usec 5\n");
    cr_expect_eq(nxr__cpu_throttle_read(&q, &t), NXR_ESYNTAX);
    put("sys/fs/cgroup/svc/cpu.stat", "nr_throttled 1\n");
    cr_expect_eq(nxr__cpu_throttle_read(&q, &t), NXR_ESYNTAX, "throttled_usec missing");
    cr_expect_eq(t.nr_throttled, 0, "a refused read leaves zeroes");
}
