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
#include <sched.h>
#include <stdint.h>
#include <sys/mount.h>
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
    plant(name, "nxr-peer 3 1 1 1 0\n"); /* another version */
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
    struct stat ns;
    cr_assert_eq(stat("/proc/self/ns/pid", &ns), 0);
    snprintf(expect, sizeof(expect), "nxr-peer 2 %d %llu 3 %llu ", (int)getpid(),
             nxr__peers_start_time(getpid()), (unsigned long long)ns.st_ino);
    cr_expect_eq(strncmp(got, expect, strlen(expect)), 0, "'%s' starts '%s'", got, expect);
    snprintf(expect, sizeof(expect), " %s\n", list);
    cr_expect_str_eq(got + strlen(got) - strlen(expect), expect);
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

/* The directory swapped for a symlink between its check and its use: the
 * registry keeps using the directory it checked (through a descriptor), and
 * nothing is created, renamed or removed in the symlink's target. */
static char decoy[800], moved[800];

static void swap_for_symlink(const char *path)
{
    cr_assert_eq(rename(path, moved), 0);
    cr_assert_eq(symlink(decoy, path), 0);
}

static size_t files_in(const char *path)
{
    char cmd[900];
    snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", path);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = 0;
    cr_assert_eq(fscanf(f, "%zu", &n), 1);
    pclose(f);
    return n;
}

Test(domains_peers, a_directory_swapped_after_its_check_is_not_followed)
{
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(decoy, sizeof(decoy), "%s/decoy", top);
    snprintf(moved, sizeof(moved), "%s/moved", top);
    cr_assert_eq(mkdir(decoy, 0700), 0);
    nxr__peers_dir_checked = swap_for_symlink;
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, true);
    nxr__peers_dir_checked = NULL;
    cr_expect_eq(files_in(decoy), 0, "nothing created through the symlink");
    cr_expect_eq(files_in(moved), 1, "the entry is in the directory that was checked");
    nxr__peers_close(&p);
    cr_expect_eq(files_in(moved), 0, "and removed from there");
    cr_expect_eq(files_in(decoy), 0);
}

Test(domains_peers, a_directory_of_another_user_is_refused)
{
    cr_assert_eq(mkdir(dir, 0700), 0);
    if (chown(dir, 65534, 65534) != 0)
        cr_skip_test("chown to nobody (65534) is not possible here: %s", strerror(errno));
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, true);
    cr_expect_eq(p.status, -EPERM, "%s", p.detail);
    cr_expect(p.dir_refused);
    cr_expect_str_eq(p.entry, "");
    cr_expect_eq(files_in(dir), 0, "nothing created in it");
    nxr__peers_close(&p);
}

Test(domains_peers, a_symlink_in_place_of_the_directory_creates_nothing)
{
    char real[800];
    snprintf(real, sizeof(real), "%s/real", top);
    cr_assert_eq(mkdir(real, 0700), 0);
    cr_assert_eq(symlink(real, dir), 0);
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, true);
    cr_expect_eq(p.status, -EPERM, "%s", p.detail);
    cr_expect(p.dir_refused);
    cr_expect_eq(files_in(real), 0, "nothing created through the symlink");
    nxr__peers_close(&p);
}

/* CPU ids past NXR_CPU_ID_MAX are refused before any bitmap is built
 * (a forged entry once cost every creation seconds and half a GiB). */
Test(domains_peers, cpu_ids_past_the_bound_are_refused)
{
    cr_assert_eq(mkdir(dir, 0700), 0);
    const pid_t parent = getppid();
    const unsigned long long start = nxr__peers_start_time(parent);
    const char *lists[] = {"4294967294", "0-2000000000", "12345678901234567890", "65536",
                           "0-65536"};
    char line[256], name[32];
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        snprintf(name, sizeof(name), "%d.%zu", (int)parent, 20 + i);
        snprintf(line, sizeof(line), "nxr-peer 1 %d %llu 2 %s\n", (int)parent, start, lists[i]);
        plant(name, line);
    }
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, false);
    cr_expect_eq(p.overlapping + p.others, 0, "none believed (%zu overlapping, %zu others)",
                 p.overlapping, p.others);
    cr_expect_eq(p.refused, 5, "refused %zu", p.refused);
}

/*
 * A runtime in another PID namespace that shares the directory (containers
 * sharing /dev/shm): its pid means nothing here, so its entry is never taken
 * for stale by pid. The other namespace is real: a child in a new PID and
 * mount namespace with its own /proc registers as pid 1.
 */
Test(domains_peers, an_entry_of_another_pid_namespace_is_not_judged_by_pid, .timeout = 60)
{
    cr_assert_eq(mkdir(dir, 0700), 0);
    int ready[2], done[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(done), 0);
    pid_t outer = fork();
    cr_assert_geq(outer, 0);
    if (outer == 0) {
        close(ready[0]);
        close(done[1]);
        char c = 's';
        if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) {
            if (write(ready[1], &c, 1) != 1)
                _exit(1);
            _exit(0);
        }
        pid_t inner = fork();
        if (inner == 0) {
            if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
                mount("proc", "/proc", "proc", 0, NULL) != 0) {
                if (write(ready[1], &c, 1) != 1)
                    _exit(1);
                _exit(0);
            }
            struct nxr__peers q;
            nxr__peers_open(&q, dir, mine, 1, true);
            c = q.status == 0 && getpid() == 1 ? 'r' : 'f';
            if (write(ready[1], &c, 1) != 1)
                _exit(1);
            if (read(done[0], &c, 1) < 0) /* until the parent closes the pipe */
                c = 0;
            nxr__peers_close(&q);
            _exit(0);
        }
        if (inner > 0)
            (void)waitpid(inner, NULL, 0);
        _exit(0);
    }
    close(ready[1]);
    close(done[0]);
    char c = 'f';
    cr_assert_eq(read(ready[0], &c, 1), 1);
    if (c == 's') {
        close(done[1]);
        waitpid(outer, NULL, 0);
        cr_skip_test("a new PID namespace with its own /proc is not possible here");
    }
    cr_assert_eq(c, 'r', "the other namespace's registration");
    cr_assert_eq(files_in(dir), 1);
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, false);
    cr_expect_eq(p.stale, 0, "not judged stale by its pid (1 here is another process)");
    cr_expect_eq(files_in(dir), 1, "the other namespace's entry is kept");
    cr_expect_eq(p.other_pidns, 1);
    cr_expect_eq(p.overlapping, 0, "not believed either: its liveness cannot be checked here");
    cr_assert_eq(write(done[1], "d", 1), 1);
    close(done[1]);
    cr_assert_eq(waitpid(outer, NULL, 0), outer);
    cr_expect_eq(files_in(dir), 0, "it removed its own entry");
}

/* Planted: an entry of a dead pid in another namespace id is left alone. */
Test(domains_peers, a_dead_pid_of_another_namespace_is_left_alone)
{
    cr_assert_eq(mkdir(dir, 0700), 0);
    struct stat ns;
    cr_assert_eq(stat("/proc/self/ns/pid", &ns), 0);
    pid_t gone = dead_pid();
    char line[256], list[256], name[32];
    hwloc_bitmap_list_snprintf(list, sizeof(list), mine);
    snprintf(line, sizeof(line), "nxr-peer 2 %d 12345 2 %llu 0 0 %s\n", (int)gone,
             (unsigned long long)ns.st_ino + 1, list);
    snprintf(name, sizeof(name), "%d.0", (int)gone);
    plant(name, line);
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, false);
    cr_expect_eq(p.stale, 0);
    cr_expect_eq(p.other_pidns, 1);
    cr_expect(exists(name), "kept");
    /* The same entry in this namespace: stale, removed. */
    snprintf(line, sizeof(line), "nxr-peer 2 %d 12345 2 %llu 0 0 %s\n", (int)gone,
             (unsigned long long)ns.st_ino, list);
    plant(name, line);
    nxr__peers_open(&p, dir, mine, 1, false);
    cr_expect_eq(p.stale, 1);
    cr_expect(!exists(name), "removed");
}

/*
 * A second copy of libnxr in this process (another file name, RTLD_LOCAL)
 * has an arbiter of its own: its entries carry this pid but another copy's
 * mark, and count as a peer. A copy's entry whose mark is no longer in
 * memory (the copy was unloaded, or this process exec'ed) is stale.
 */
static volatile uint64_t other_copy_mark = 0x5eedfacecafe1234ull;

Test(domains_peers, another_copy_in_this_process_is_a_peer)
{
    cr_assert_eq(mkdir(dir, 0700), 0);
    struct stat ns;
    cr_assert_eq(stat("/proc/self/ns/pid", &ns), 0);
    const pid_t self = getpid();
    char line[256], list[256], name[32];
    hwloc_bitmap_list_snprintf(list, sizeof(list), mine);
    snprintf(line, sizeof(line), "nxr-peer 2 %d %llu 2 %llu %lx %llx %s\n", (int)self,
             nxr__peers_start_time(self), (unsigned long long)ns.st_ino,
             (unsigned long)(uintptr_t)&other_copy_mark, (unsigned long long)other_copy_mark, list);
    snprintf(name, sizeof(name), "%d.900", (int)self);
    plant(name, line);
    snprintf(line, sizeof(line), "nxr-peer 2 %d %llu 2 %llu %lx %llx %s\n", (int)self,
             nxr__peers_start_time(self), (unsigned long long)ns.st_ino,
             (unsigned long)(uintptr_t)&other_copy_mark, (unsigned long long)other_copy_mark + 1,
             list);
    char gone[32];
    snprintf(gone, sizeof(gone), "%d.901", (int)self);
    plant(gone, line);
    struct nxr__peers p;
    nxr__peers_open(&p, dir, mine, 1, true);
    cr_expect_eq(p.status, 0, "%s", p.detail);
    cr_assert_eq(p.overlapping, 1, "refused %zu stale %zu", p.refused, p.stale);
    cr_expect(p.shown[0].same_process);
    cr_expect_eq(p.shown[0].pid, self);
    cr_expect_eq(p.stale, 1, "the unloaded copy's entry");
    cr_expect(exists(name));
    cr_expect(!exists(gone));
    /* This copy's own entry is skipped: it shares this copy's arbiter. */
    struct nxr__peers again;
    nxr__peers_open(&again, dir, mine, 1, false);
    cr_expect_eq(again.overlapping, 1, "only the other copy (%zu)", again.overlapping);
    cr_expect_eq(again.refused + again.stale, 0);
    nxr__peers_close(&p);
}

/* Seen from the user whose registry it is: another user's directory of
 * mode 0700 at the registry's path cannot even be opened, and is still
 * refused as someone else's (as root: the child runs as nobody). */
Test(domains_peers, another_users_closed_directory_is_refused_as_theirs)
{
    if (geteuid() != 0)
        cr_skip_test("running as another user needs root");
    char base[] = "/tmp/nxr-peers-test-XXXXXX", reg[64];
    cr_assert_not_null(mkdtemp(base));
    cr_assert_eq(chmod(base, 0755), 0);
    snprintf(reg, sizeof(reg), "%s/registry", base);
    cr_assert_eq(mkdir(reg, 0700), 0); /* root's */
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        struct nxr__peers p;
        nxr__peers_open(&p, reg, mine, 1, true);
        bool ok = p.status == -EPERM && p.dir_refused && strstr(p.detail, "uid 0") != NULL;
        if (!ok)
            fprintf(stderr, "status %d refused %d: %s\n", p.status, p.dir_refused, p.detail);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    rmdir(reg);
    rmdir(base);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
        cr_skip_test("setuid to nobody (65534) is not possible here");
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "refused as uid 0's (status %d)", st);
}
