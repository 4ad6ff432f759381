/*
 * The peer registry's checks, on a private registry directory: entries
 * planted by hand (malformed, stale, foreign-owned, a symlink, too big, one
 * whose name and line disagree) are refused or dropped, a well-formed entry
 * of a live process is believed, an unsafe directory is not used at all,
 * and a runtime's own entry is complete and goes away when closed.
 * Two real processes seeing each other are tests/runtime/peers_test.c's.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "domains/internal/peers.h"
#include "tests/support/cpus.h"
#include "tests/support/fsfixture.h"

static char top[512], dir[600];
static hwloc_bitmap_t mine;

static void setup(void)
{
    cr_assert_eq(nxr_test_fixture_dir(top, sizeof(top)), 0);
    snprintf(dir, sizeof(dir), "%s/registry", top);
    mine = hwloc_bitmap_alloc();
    cr_assert_eq(hwloc_bitmap_list_sscanf(mine, nxr_test_expand("%*")), 0);
}

static void teardown(void)
{
    hwloc_bitmap_free(mine);
    nxr_test_fixture_remove(top);
}

TestSuite(domains_peers, .init = setup, .fini = teardown);

static void plant(const char *name, const char *content)
{
    char rel[128];
    snprintf(rel, sizeof(rel), "registry/%s", name);
    cr_assert_eq(nxr_test_fixture_write(top, rel, content), 0);
    char path[800];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    chmod(path, 0600);
}

static bool exists(const char *name)
{
    char path[800];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* A valid line for process pid with start time start over this test's CPUs. */
static void line_for(char *buf, size_t size, pid_t pid, unsigned long long start)
{
    char list[256];
    hwloc_bitmap_list_snprintf(list, sizeof(list), mine);
    snprintf(buf, size, "nxr-peer 1 %d %llu 2 %s\n", (int)pid, start, list);
}

/* A pid that named a process which is gone now. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    cr_assert_gt(pid, 0);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    return pid;
}

Test(domains_peers, a_live_entry_is_believed)
{
    cr_assert_eq(mkdir(dir, 0700), 0);
    const pid_t parent = getppid(); /* alive: it waits for this test */
    char line[256], name[32];
    line_for(line, sizeof(line), parent, nxr__peers_start_time(parent));
    snprintf(name, sizeof(name), "%d.0", (int)parent);
    plant(name, line);
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, false);
    cr_expect_eq(p.status, 0, "%s", p.detail);
    cr_assert_eq(p.overlapping, 1, "refused %zu stale %zu", p.refused, p.stale);
    cr_expect_eq(p.shown[0].pid, parent);
    cr_expect_eq(p.shown[0].budget, 2);
    char list[256];
    hwloc_bitmap_list_snprintf(list, sizeof(list), mine);
    cr_expect_str_eq(p.shown[0].overlap, list);
    cr_expect_eq(p.refused + p.stale + p.others, 0);
    nxr__peers_close(&p);
}

Test(domains_peers, bad_entries_are_refused_and_stale_ones_removed)
{
    cr_assert_eq(mkdir(dir, 0700), 0);
    const pid_t parent = getppid();
    const unsigned long long start = nxr__peers_start_time(parent);
    char line[256], name[32], big[2048];
    /* Malformed, several ways. */
    snprintf(name, sizeof(name), "%d.1", (int)parent);
    plant(name, "hello\n");
    snprintf(name, sizeof(name), "%d.2", (int)parent);
    plant(name, "nxr-peer 2 1 1 1 0\n"); /* another version */
    snprintf(name, sizeof(name), "%d.3", (int)parent);
    line_for(line, sizeof(line), parent, start);
    line[strlen(line) - 1] = '\0'; /* no newline: written half */
    plant(name, line);
    snprintf(name, sizeof(name), "%d.4", (int)parent);
    snprintf(line, sizeof(line), "nxr-peer 1 %d %llu 0 0\n", (int)parent, start); /* budget 0 */
    plant(name, line);
    snprintf(name, sizeof(name), "1.5"); /* the name's pid (1) is not the line's */
    line_for(line, sizeof(line), parent, start);
    plant(name, line);
    memset(big, '0', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    snprintf(name, sizeof(name), "%d.6", (int)parent);
    plant(name, big); /* past the size cap */
    snprintf(name, sizeof(name), "%d.7", (int)parent);
    line_for(line, sizeof(line), parent, start);
    snprintf(line + strlen(line) - 1, 32, "x\n"); /* trailing garbage in the CPU list */
    plant(name, line);
    /* A symlink to a valid entry elsewhere, and a directory with an entry's name. */
    char target[800], link[800];
    line_for(line, sizeof(line), parent, start);
    cr_assert_eq(nxr_test_fixture_write(top, "elsewhere", line), 0);
    snprintf(target, sizeof(target), "%s/elsewhere", top);
    snprintf(link, sizeof(link), "%s/%d.8", dir, (int)parent);
    cr_assert_eq(symlink(target, link), 0);
    snprintf(link, sizeof(link), "%s/%d.9", dir, (int)parent);
    cr_assert_eq(mkdir(link, 0700), 0);
    const size_t malformed = 9;
    /* Stale: a dead process, and a live pid whose start time is not the entry's. */
    pid_t gone = dead_pid();
    snprintf(name, sizeof(name), "%d.0", (int)gone);
    line_for(line, sizeof(line), gone, start);
    plant(name, line);
    char reused[32];
    snprintf(reused, sizeof(reused), "%d.10", (int)parent);
    line_for(line, sizeof(line), parent, start + 1);
    plant(reused, line);
    /* Not entries at all: ignored without a count. */
    plant(".12.0.tmp", "nxr-peer 1 12 1 1 0\n");
    plant("notes.txt", "hello\n");

    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, false);
    cr_expect_eq(p.status, 0, "%s", p.detail);
    cr_expect_eq(p.overlapping, 0, "nothing planted was believed (%zu)", p.overlapping);
    cr_expect_eq(p.refused, malformed, "refused %zu, want %zu", p.refused, malformed);
    cr_expect_eq(p.stale, 2, "stale %zu", p.stale);
    snprintf(name, sizeof(name), "%d.0", (int)gone);
    cr_expect(!exists(name), "a dead process's entry is removed");
    cr_expect(!exists(reused), "a reused pid's entry is removed");
    snprintf(name, sizeof(name), "%d.1", (int)parent);
    cr_expect(exists(name), "a malformed entry is left alone (it may be another version's)");
    cr_expect(exists("notes.txt"));
}

Test(domains_peers, a_foreign_entry_is_refused)
{
    if (geteuid() != 0)
        cr_skip_test("planting an entry owned by another user needs root");
    cr_assert_eq(mkdir(dir, 0700), 0);
    const pid_t parent = getppid();
    char line[256], name[32], path[800];
    line_for(line, sizeof(line), parent, nxr__peers_start_time(parent));
    snprintf(name, sizeof(name), "%d.0", (int)parent);
    plant(name, line);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    cr_assert_eq(chown(path, 4242, 4242), 0);
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, false);
    cr_expect_eq(p.overlapping, 0, "another user's entry is not believed");
    cr_expect_eq(p.refused, 1);
    cr_expect(exists(name), "and not removed");
}

Test(domains_peers, an_unsafe_directory_is_not_used)
{
    cr_assert_eq(mkdir(dir, 0755), 0);
    chmod(dir, 0755); /* past the umask */
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, true);
    cr_expect_eq(p.status, -EPERM);
    cr_expect_str_eq(p.dir, "");
    cr_expect_str_eq(p.entry, "", "nothing published");
    cr_expect_neq(strstr(p.detail, "mode 0700"), NULL, "%s", p.detail);
    nxr__peers_close(&p);
    /* A symlink to a good directory is refused too. */
    char real[800];
    snprintf(real, sizeof(real), "%s/real", top);
    cr_assert_eq(mkdir(real, 0700), 0);
    rmdir(dir);
    cr_assert_eq(symlink(real, dir), 0);
    nxr__peers_open(&p, dir, mine, 1, true);
    cr_expect_eq(p.status, -EPERM, "a symlinked registry: %s", p.detail);
}

Test(domains_peers, own_entry_is_whole_and_removed_on_close)
{
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 3, true); /* creates the directory */
    cr_assert_eq(p.status, 0, "%s", p.detail);
    struct stat st;
    cr_assert_eq(lstat(dir, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0700, "mode %o", st.st_mode & 0777);
    char got[256] = "";
    FILE *f = fopen(p.entry, "r");
    cr_assert_not_null(f, "%s", p.entry);
    cr_assert_not_null(fgets(got, sizeof(got), f));
    fclose(f);
    char list[256], expect[256];
    hwloc_bitmap_list_snprintf(list, sizeof(list), mine);
    snprintf(expect, sizeof(expect), "nxr-peer 1 %d %llu 3 %s\n", (int)getpid(),
             nxr__peers_start_time(getpid()), list);
    cr_expect_str_eq(got, expect);
    cr_assert_eq(lstat(p.entry, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600);
    char tmp[64];
    snprintf(tmp, sizeof(tmp), ".%d.0.tmp", (int)getpid());
    cr_expect(!exists(tmp), "no temporary left");
    char entry[320];
    snprintf(entry, sizeof(entry), "%s", p.entry);
    nxr__peers_close(&p);
    cr_expect(access(entry, F_OK) != 0, "the entry is gone after close");
    nxr__peers_close(&p); /* idempotent */
}

/* A forked child holds a copy of the entry's path: its close must not
 * remove the parent's entry. */
Test(domains_peers, a_forked_child_leaves_the_entry)
{
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, true);
    cr_assert_eq(p.status, 0, "%s", p.detail);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        nxr__peers_close(&p);
        _exit(0);
    }
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    cr_expect_eq(access(p.entry, F_OK), 0, "the parent's entry is still there");
    nxr__peers_close(&p);
    cr_expect_neq(access(dir, F_OK), -1);
}
