/*
 * The CPU quota for real: a child cgroup with a one-CPU quota (cgroup v1's
 * cpu controller, else a delegated cgroup v2 subtree with the cpu
 * controller), a process started in it, and the budget that process's
 * runtime reports. Skips with the reason when no cpu controller can be
 * written here (not root, a read-only /sys/fs/cgroup, a container), or when
 * fewer than two CPUs are allowed (a one-CPU quota then lowers nothing).
 * The cgroup is removed on every path. Also: a runtime serving in a
 * two-CPU cgroup whose quota is lowered to one follows it at its next
 * nxr_runtime_refresh_budget (the steps ordered by pipes, not by time).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/nxr.h"
#include "tests/support/cpus.h"

/* What the child reports back through the pipe. */
struct report {
    int rc;
    unsigned budget, workers, quota;
    char limit[16];
    char source[384];
};

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int rc = n == (ssize_t)strlen(text) ? 0 : n < 0 ? -errno : -EIO;
    close(fd);
    return rc;
}

/* The process's own directory in the hierarchy whose mount has fstype (and,
 * for v1, the "cpu" super option): read from /proc by hand, not by nxr. */
static bool own_cgroup_dir(bool v2, char *out, size_t size)
{
    char line[4096], mount_point[1024] = "", path[1024] = "";
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL)
        return false;
    while (fgets(line, sizeof(line), f) != NULL && mount_point[0] == '\0') {
        char root[1024], point[1024], fstype[64], super[512];
        char *dash = strstr(line, " - ");
        if (dash == NULL || sscanf(line, "%*s %*s %*s %1023s %1023s", root, point) != 2 ||
            sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2)
            continue;
        bool cpu = strcmp(super, "cpu") == 0 || strncmp(super, "cpu,", 4) == 0 ||
                   strstr(super, ",cpu,") != NULL ||
                   (strlen(super) > 4 && strcmp(super + strlen(super) - 4, ",cpu") == 0);
        if ((v2 && strcmp(fstype, "cgroup2") == 0) || (!v2 && strcmp(fstype, "cgroup") == 0 && cpu))
            if (strcmp(root, "/") == 0)
                snprintf(mount_point, sizeof(mount_point), "%s", point);
    }
    fclose(f);
    if (mount_point[0] == '\0' || (f = fopen("/proc/self/cgroup", "re")) == NULL)
        return false;
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = '\0';
        const char *ctl = c1 + 1;
        bool match = v2 ? strncmp(line, "0:", 2) == 0 && ctl[0] == '\0'
                        : strcmp(ctl, "cpu") == 0 || strncmp(ctl, "cpu,", 4) == 0 ||
                              strstr(ctl, ",cpu") != NULL;
        if (match)
            snprintf(path, sizeof(path), "%s", strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1);
    }
    fclose(f);
    snprintf(out, size, "%s%s", mount_point, path);
    return true;
}

/* Appends one reason to why (vsnprintf: cut short when long). */
__attribute__((format(printf, 3, 4))) static void add_why(char *why, size_t whysz,
                                                          const char *fmt, ...)
{
    size_t used = strlen(why);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + used, whysz - used, fmt, ap);
    va_end(ap);
}

/* Sets dir's quota to cpus CPUs (period 100 ms); 0 or a negative errno,
 * the file in file. */
static int set_quota(const char *dir, bool v2, unsigned cpus, char *file, size_t filesz)
{
    char value[32];
    snprintf(value, sizeof(value), "%u", cpus * 100000u);
    if (v2) {
        char max[48];
        snprintf(max, sizeof(max), "%s 100000", value);
        snprintf(file, filesz, "%s/cpu.max", dir);
        return write_file(file, max);
    }
    snprintf(file, filesz, "%s/cpu.cfs_period_us", dir);
    int rc = write_file(file, "100000");
    snprintf(file, filesz, "%s/cpu.cfs_quota_us", dir);
    return rc != 0 ? rc : write_file(file, value);
}

/* Creates dir/name with a quota of cpus CPUs; 0, or why not in why. */
static int make_quota_cgroup(char *dir, size_t size, bool *v2, unsigned cpus, char *why,
                             size_t whysz)
{
    char parent[2048], file[2300];
    for (int pass = 0; pass < 2; pass++) {
        *v2 = pass == 1;
        if (!own_cgroup_dir(*v2, parent, sizeof(parent))) {
            add_why(why, whysz, "%sno cgroup %s cpu mount",
                     pass ? "; " : "", *v2 ? "v2" : "v1");
            continue;
        }
        snprintf(dir, size, "%s/nxr-quota-test-%d", parent, (int)getpid());
        if (mkdir(dir, 0755) != 0) {
            add_why(why, whysz, "%scannot create %s: %s",
                     pass ? "; " : "", dir, strerror(errno));
            continue;
        }
        int rc = set_quota(dir, *v2, cpus, file, sizeof(file));
        if (rc == 0)
            return 0;
        add_why(why, whysz, "%scannot write %s: %s",
                 pass ? "; " : "", file, strerror(-rc));
        rmdir(dir);
    }
    return -1;
}

static void child(int ready_fd, int out_fd)
{
    char go;
    struct report r;
    memset(&r, 0, sizeof(r));
    if (read(ready_fd, &go, 1) != 1)
        _exit(2);
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true; /* the test's own NXR_* must not decide */
    nxr_runtime_t *rt = NULL;
    r.rc = nxr_runtime_create(&o, &rt);
    if (r.rc == 0) {
        nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
        const char *source = "";
        r.budget = nxr_domain_budget(d);
        r.workers = nxr_domain_workers(d);
        r.quota = nxr_runtime_cpu_quota(rt, &source);
        snprintf(r.source, sizeof(r.source), "%s", source);
        snprintf(r.limit, sizeof(r.limit), "%s",
                 nxr_domain_budget_limit(d) ? nxr_domain_budget_limit(d) : "(null)");
        nxr_runtime_destroy(rt);
    }
    _exit(write(out_fd, &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 3);
}

Test(runtime_quota_cgroup, one_cpu_quota_gives_budget_one, .timeout = 60)
{
    NXR_TEST_NEED_CPUS(2);
    char dir[2200], why[2048] = "", procs[2300];
    bool v2;
    if (make_quota_cgroup(dir, sizeof(dir), &v2, 1, why, sizeof(why)) != 0)
        cr_skip_test("no writable cgroup cpu controller: %s", why);

    int ready[2], out[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(out), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(ready[1]);
        close(out[0]);
        child(ready[0], out[1]);
    }
    close(ready[0]);
    close(out[1]);
    char text[32];
    snprintf(text, sizeof(text), "%d", (int)pid);
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
    int moved = write_file(procs, text);
    /* The child starts only now (it blocks on the pipe: bounded by this
     * write, and by its death if the test dies). */
    cr_assert_eq(write(ready[1], "g", 1), 1);
    close(ready[1]);
    struct report r;
    ssize_t got = read(out[0], &r, sizeof(r));
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int removed = rmdir(dir) == 0 ? 0 : -errno;

    cr_assert_eq(moved, 0, "moving the child into %s: %s", dir, strerror(-moved));
    cr_assert_eq(got, (ssize_t)sizeof(r), "the child reported (status %d)", status);
    cr_assert_eq(r.rc, 0, "the child's runtime: %s", nxr_strerror(r.rc));
    cr_expect_eq(r.quota, 1, "quota %u from '%s'", r.quota, r.source);
    cr_expect_eq(r.budget, 1, "budget %u under a one-CPU quota (%s)", r.budget, r.source);
    cr_expect_eq(r.workers, 1);
    cr_expect_str_eq(r.limit, "quota");
    cr_expect_neq(strstr(r.source, v2 ? "cgroup v2 " : "cgroup v1 "), NULL, "%s", r.source);
    cr_expect_neq(strstr(r.source, strrchr(dir, '/')), NULL, "'%s' names %s", r.source, dir);
    cr_expect_eq(removed, 0, "removing %s: %s", dir, strerror(-removed));
}

/* ---- a quota lowered while the runtime serves ------------------------------ */

/* What the following child reports at each step. */
struct follow {
    int rc;
    unsigned budget, participants;
    unsigned long long changes;
};

static void record_participants(void *arg, size_t b, size_t e, unsigned participant)
{
    (void)b, (void)e;
    __atomic_fetch_or((unsigned *)arg, 1u << participant, __ATOMIC_RELAXED);
}

/* One step: (refresh first when asked), the budget, which participants a
 * two-chunk loop used, the stats' change count. */
static struct follow step(nxr_runtime_t *rt, nxr_ctx_t *ctx, bool refresh)
{
    struct follow f = {0};
    if (refresh && (f.rc = nxr_runtime_refresh_budget(rt)) != 0)
        return f;
    f.budget = nxr_domain_budget(nxr_runtime_domain_at(rt, 0));
    if ((f.rc = nxr_parallel_for(ctx, 0, 2, 1, record_participants, &f.participants)) != 0)
        return f;
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, NULL, 0);
    f.rc = nxr_runtime_stats(rt, &s);
    f.changes = s.budget_changes;
    return f;
}

/* Reports a step after each byte the parent sends: serving, then after
 * the parent lowered the quota (a refresh first). */
static void following_child(int go_fd, int out_fd)
{
    char go;
    struct follow f = {0};
    if (read(go_fd, &go, 1) != 1)
        _exit(2);
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true; /* NXR_CPU_QUOTA stays auto */
    nxr_runtime_t *rt = NULL;
    nxr_ctx_t *ctx = NULL;
    f.rc = nxr_runtime_create(&o, &rt);
    if (f.rc == 0)
        f.rc = nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, 0)), &ctx);
    if (f.rc == 0)
        f = step(rt, ctx, false);
    if (write(out_fd, &f, sizeof(f)) != (ssize_t)sizeof(f) || f.rc != 0)
        _exit(3);
    if (read(go_fd, &go, 1) != 1) /* the parent lowered the quota */
        _exit(2);
    f = step(rt, ctx, true);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    _exit(write(out_fd, &f, sizeof(f)) == (ssize_t)sizeof(f) ? 0 : 3);
}

Test(runtime_quota_cgroup, a_lowered_quota_is_followed_by_a_serving_runtime, .timeout = 60)
{
    NXR_TEST_NEED_CPUS(2);
    char dir[2200], why[2048] = "", procs[2300], file[2300];
    bool v2;
    if (make_quota_cgroup(dir, sizeof(dir), &v2, 2, why, sizeof(why)) != 0)
        cr_skip_test("no writable cgroup cpu controller: %s", why);
    int go[2], out[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(out), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(go[1]);
        close(out[0]);
        following_child(go[0], out[1]);
    }
    close(go[0]);
    close(out[1]);
    char text[32];
    snprintf(text, sizeof(text), "%d", (int)pid);
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
    int moved = write_file(procs, text);
    struct follow before = {-1, 0, 0, 0}, after = {-1, 0, 0, 0};
    int lowered = -1;
    if (write(go[1], "g", 1) == 1 && read(out[0], &before, sizeof(before)) == sizeof(before) &&
        before.rc == 0) {
        lowered = set_quota(dir, v2, 1, file, sizeof(file));
        if (write(go[1], "g", 1) == 1 && read(out[0], &after, sizeof(after)) != sizeof(after))
            after.rc = -EIO;
    }
    close(go[1]);
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int removed = rmdir(dir) == 0 ? 0 : -errno;

    cr_assert_eq(moved, 0, "moving the child into %s: %s", dir, strerror(-moved));
    cr_assert_eq(before.rc, 0, "the child before: %s (status %d)", nxr_strerror(before.rc), status);
    cr_expect_eq(before.budget, 2, "a 2-CPU quota on %d CPUs", nxr_test_cpu_count());
    cr_expect_eq(before.participants, 3u);
    cr_assert_eq(lowered, 0, "lowering the quota in %s: %s", file, strerror(-lowered));
    cr_assert_eq(after.rc, 0, "the child after: %s (status %d)", nxr_strerror(after.rc), status);
    cr_expect_eq(after.budget, 1, "the budget followed the quota down");
    cr_expect_eq(after.participants, 1u, "the next loop ran on one participant");
    cr_expect_eq(after.changes, 1);
    cr_expect_eq(removed, 0, "removing %s: %s", dir, strerror(-removed));
}
