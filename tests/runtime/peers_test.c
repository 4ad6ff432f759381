/*
 * Runtimes of two processes see each other through the peer registry (a
 * private directory here), a killed process's entries are dropped, the
 * warning goes to stderr only under NXR_PEERS_WARN, and nothing about
 * peers changes a budget. The registry's own checks are
 * tests/domains/peers_test.c's.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/internal/runtime.h"
#include "tests/support/fsfixture.h"

static char top[512], dir[600];

static void setup(void)
{
    cr_assert_eq(nxr_test_fixture_dir(top, sizeof(top)), 0);
    snprintf(dir, sizeof(dir), "%s/registry", top);
}

static void teardown(void)
{
    nxr_test_fixture_remove(top);
}

TestSuite(runtime_peers, .init = setup, .fini = teardown);

static nxr_runtime_t *create(int mode)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.peers = mode;
    o.peers_dir = dir;
    nxr_runtime_t *rt = NULL;
    int rc = nxr_runtime_create(&o, &rt);
    if (rc != 0)
        return NULL;
    return rt;
}

/* What the child tells the parent. */
struct seen {
    int created;
    size_t overlapping;
    pid_t first;
};

/*
 * The child: a runtime (registered), "ready"; on "go" a second runtime,
 * which must see the parent's; reports; then waits to be killed. Each read
 * is bounded by the parent: it writes or dies (EOF).
 */
static void child(int in, int out)
{
    char go;
    struct seen s = {0};
    nxr_runtime_t *a = create(NXR_PEERS_QUIET);
    s.created = a != NULL;
    if (write(out, &s, sizeof(s)) != (ssize_t)sizeof(s) || read(in, &go, 1) != 1)
        _exit(1);
    nxr_runtime_t *b = create(NXR_PEERS_QUIET);
    s.created = b != NULL;
    if (b != NULL) {
        s.overlapping = b->peers.overlapping;
        s.first = b->peers.shown[0].pid;
    }
    if (write(out, &s, sizeof(s)) != (ssize_t)sizeof(s))
        _exit(1);
    if (read(in, &go, 1) < 0) /* until killed, or the parent closes the pipe */
        go = 0;
    _exit(0);
}

Test(runtime_peers, two_processes_see_each_other_and_a_killed_one_is_dropped, .timeout = 60)
{
    int down[2], up[2];
    cr_assert_eq(pipe(down), 0);
    cr_assert_eq(pipe(up), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        child(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    struct seen s;
    cr_assert_eq(read(up[0], &s, sizeof(s)), (ssize_t)sizeof(s));
    cr_assert(s.created, "the child's runtime");

    nxr_runtime_t *rt = create(NXR_PEERS_QUIET);
    cr_assert_not_null(rt);
    cr_expect_eq(rt->peers.status, 0, "%s", rt->peers.detail);
    cr_expect_eq(rt->peers.overlapping, 1, "the parent sees the child's runtime");
    cr_expect_eq(rt->peers.shown[0].pid, pid);
    /* An entry's budget is the sum over the runtime's domains (one per
     * node): same allowed set, so the child's sum is the parent's. */
    unsigned sum = 0;
    for (size_t i = 0; i < nxr_runtime_domain_count(rt); i++) {
        nxr_domain_t *d = nxr_runtime_domain_at(rt, i);
        sum += nxr_domain_budget(d);
        /* Advice only: the budget is what the CPUs give, peers or not. */
        cr_expect_eq(nxr_domain_budget(d), (unsigned)hwloc_bitmap_weight(nxr_domain_cpuset(d)),
                     "domain %zu", i);
    }
    cr_expect_eq(rt->peers.shown[0].budget, sum,
                 "same allowed set: the child's budget is the parent's (%u of %u)",
                 rt->peers.shown[0].budget, sum);
    char *json = NULL;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_JSON, &json), 0);
    char want[64];
    snprintf(want, sizeof(want), "\"overlapping\":[{\"pid\":%d,", (int)pid);
    cr_expect_neq(strstr(json, want), NULL, "%s", json);
    free(json);

    cr_assert_eq(write(down[1], "g", 1), 1);
    cr_assert_eq(read(up[0], &s, sizeof(s)), (ssize_t)sizeof(s));
    cr_expect(s.created);
    cr_expect_eq(s.overlapping, 1, "the child sees the parent's runtime (its own are skipped)");
    cr_expect_eq(s.first, getpid());

    /* Killed with both its entries in place: a later runtime drops them. */
    kill(pid, SIGKILL);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    nxr_runtime_t *after = create(NXR_PEERS_QUIET);
    cr_assert_not_null(after);
    cr_expect_eq(after->peers.overlapping, 0, "a killed process's entries are ignored");
    cr_expect_eq(after->peers.stale, 2, "both of its runtimes' entries");
    nxr_runtime_destroy(after);
    nxr_runtime_destroy(rt);
    close(down[1]);
    close(up[0]);
}

/* Runs create(mode) with stderr in a file and returns what it printed. */
static void stderr_of_create(int mode, char *buf, size_t size)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/stderr", top);
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    dup2(fd, 2);
    nxr_runtime_t *rt = create(mode);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cr_assert_not_null(rt);
    ssize_t n = pread(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    nxr_runtime_destroy(rt);
}

Test(runtime_peers, warning_only_when_asked, .timeout = 30)
{
    /* A peer: a well-formed entry of a live process (this test's parent)
     * over this process's CPUs. */
    nxr_runtime_t *probe = create(NXR_PEERS_QUIET); /* makes the directory */
    cr_assert_not_null(probe);
    const pid_t parent = getppid();
    char line[256], name[64], list[128];
    hwloc_bitmap_list_snprintf(list, sizeof(list), nxr_runtime_allowed_cpus(probe));
    snprintf(line, sizeof(line), "nxr-peer 1 %d %llu 1 %s\n", (int)parent,
             nxr__peers_start_time(parent), list);
    snprintf(name, sizeof(name), "registry/%d.0", (int)parent);
    cr_assert_eq(nxr_test_fixture_write(top, name, line), 0);
    char path[700];
    snprintf(path, sizeof(path), "%s/%s", top, name);
    chmod(path, 0600);
    nxr_runtime_destroy(probe);

    char out[2048];
    stderr_of_create(NXR_PEERS_WARN, out, sizeof(out));
    cr_expect_neq(strstr(out, "nxr: warning: 1 runtime(s) of other processes use this "
                              "runtime's CPUs"),
                  NULL, "'%s'", out);
    char pid_text[32];
    snprintf(pid_text, sizeof(pid_text), "(pid %d:", (int)parent);
    cr_expect_neq(strstr(out, pid_text), NULL, "'%s'", out);
    stderr_of_create(NXR_PEERS_QUIET, out, sizeof(out));
    cr_expect_str_eq(out, "", "quiet: nothing on stderr");
    stderr_of_create(NXR_PEERS_OFF, out, sizeof(out));
    cr_expect_str_eq(out, "");
}

Test(runtime_peers, off_neither_registers_nor_looks)
{
    nxr_runtime_t *rt = create(NXR_PEERS_OFF);
    cr_assert_not_null(rt);
    cr_expect(access(dir, F_OK) != 0, "no registry directory made");
    char *json = NULL;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_JSON, &json), 0);
    cr_expect_neq(strstr(json, "\"peers\":null"), NULL, "%s", json);
    free(json);
    nxr_runtime_destroy(rt);
    /* ignore_env without opts.peers: off too (tests and embedders). */
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.peers_dir = dir;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
    cr_expect(access(dir, F_OK) != 0, "ignore_env: no registry");
    nxr_runtime_destroy(rt);
    o.peers = 7;
    cr_expect_eq(nxr_runtime_create(&o, &rt), -EINVAL);
    cr_expect_null(rt);
}

/* A registry directory another user made (as anyone can under /dev/shm for
 * someone else's uid) turns this user's registry off: said on stderr under
 * NXR_PEERS=warn, not only in nxr info. */
Test(runtime_peers, a_refused_directory_is_said_under_warn, .timeout = 30)
{
    cr_assert_eq(mkdir(dir, 0700), 0);
    if (chown(dir, 65534, 65534) != 0)
        cr_skip_test("chown to nobody (65534) is not possible here: %s", strerror(errno));
    char out[2048];
    stderr_of_create(NXR_PEERS_WARN, out, sizeof(out));
    cr_expect_neq(strstr(out, "nxr: warning: the peer registry"), NULL, "'%s'", out);
    cr_expect_neq(strstr(out, "belongs to uid 65534"), NULL, "'%s'", out);
    stderr_of_create(NXR_PEERS_QUIET, out, sizeof(out));
    cr_expect_str_eq(out, "", "quiet: nothing on stderr");
}

/* opts.peers_dir longer than the limit is refused whole, never cut. */
Test(runtime_peers, a_long_peers_dir_is_refused)
{
    char long_dir[400];
    memset(long_dir, 'a', sizeof(long_dir) - 1);
    long_dir[0] = '/';
    long_dir[sizeof(long_dir) - 1] = '\0';
    snprintf(long_dir, 300, "%s/", top);
    long_dir[strlen(long_dir)] = 'a'; /* the rest of the a's: over 255 bytes in all */
    cr_assert_gt(strlen(long_dir), 255);
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.peers = NXR_PEERS_QUIET;
    o.peers_dir = long_dir;
    nxr_runtime_t *rt = NULL;
    cr_expect_eq(nxr_runtime_create(&o, &rt), -ENAMETOOLONG);
    cr_expect_null(rt);
    cr_expect_neq(strstr(nxr_last_error(), "255"), NULL, "'%s'", nxr_last_error());
    char cut[300];
    snprintf(cut, sizeof(cut), "%.255s", long_dir);
    cr_expect(access(cut, F_OK) != 0, "no directory at the cut path");
}
