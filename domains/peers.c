/*
 * The peer registry (see internal/peers.h): a per-user directory of small
 * entry files, one per live runtime. Written atomically, read defensively:
 * whatever another process left there is checked for owner, size, format
 * and liveness before it is believed, and even then it is only reported.
 */
#include "domains/internal/peers.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/internal/number.h"
#include "base/internal/sys.h"
#include "domains/internal/cpuset.h"
#include "domains/internal/stats_page.h"

void (*nxr__peers_dir_checked)(const char *dir);

static atomic_uint entry_seq; /* names this process's entries apart */

/* The report's detail, cut short when a path is long. */
__attribute__((format(printf, 2, 3))) static void say(struct nxr__peers *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->detail, sizeof(p->detail), fmt, ap);
    va_end(ap);
}

struct stat_line {
    unsigned long long start;
};

/* Field 22 of /proc/<pid>/stat, counted after the ")" that closes the
 * command name (which may hold spaces and parentheses). */
static int take_start(void *arg, char *line)
{
    struct stat_line *s = arg;
    char *p = strrchr(line, ')');
    if (p == NULL)
        return 1;
    p++;
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (field == 22) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(p, &end, 10);
            if (errno == 0 && end != p && (*end == ' ' || *end == '\0'))
                s->start = v;
            return 1;
        }
        while (*p != ' ' && *p != '\0')
            p++;
    }
    return 1;
}

unsigned long long nxr__peers_start_time(pid_t pid)
{
    char path[64];
    struct stat_line s = {0};
    if (pid == 0)
        snprintf(path, sizeof(path), "/proc/self/stat");
    else
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    (void)nxr__read_lines(path, take_start, &s);
    return s.start;
}

static void default_dir(char *buf, size_t size)
{
    const char *run = getenv("XDG_RUNTIME_DIR");
    if (run != NULL && run[0] == '/' && strlen(run) < size - 16)
        snprintf(buf, size, "%s/nxr-peers", run);
    else
        snprintf(buf, size, "/dev/shm/nxr-peers-%u", (unsigned)geteuid());
}

/* Why a directory is not used; sets dir_refused (it exists, and is not
 * safe: someone else's, a symlink, or open to others). */
static int refuse_dir(struct nxr__peers *p, const char *path, const char *why)
{
    say(p, "not used: it %s (the registry must be a directory of this user with mode 0700): %s",
        why, path);
    p->dir_refused = true;
    return -EPERM;
}

/*
 * Opens the registry directory, creating it (mode 0700) when missing, and
 * keeps it as a descriptor: everything after this check works relative to
 * that descriptor, so a directory renamed or swapped for a symlink after
 * the check is never followed (a process of root with another user's
 * XDG_RUNTIME_DIR would otherwise write where that user points it). The
 * last component is opened O_NOFOLLOW (a symlink is refused, not
 * followed) and checked with fstat: a directory of the effective uid, no
 * group or other access. The components above it are the caller's choice.
 */
static int open_dir(struct nxr__peers *p, const char *path)
{
    char parent[NXR__PEERS_DIR_MAX + 1];
    size_t len = strlen(path);
    if (len > NXR__PEERS_DIR_MAX) {
        say(p, "registry path of %zu bytes: at most %d", len, NXR__PEERS_DIR_MAX);
        return -ENAMETOOLONG;
    }
    memcpy(parent, path, len + 1);
    while (len > 1 && parent[len - 1] == '/')
        parent[--len] = '\0';
    char *slash = strrchr(parent, '/');
    const char *leaf = slash != NULL ? slash + 1 : parent;
    if (leaf[0] == '\0' || strcmp(leaf, ".") == 0 || strcmp(leaf, "..") == 0) {
        say(p, "%s: not a directory name nxr can create", path);
        return -EINVAL;
    }
    if (slash != NULL)
        *slash = '\0';
    const char *above = slash == NULL ? "." : parent[0] == '\0' ? "/" : parent;
    int pfd = open(above, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return -errno;
    int rc = 0;
    if (mkdirat(pfd, leaf, 0700) != 0 && errno != EEXIST)
        rc = -errno;
    int fd = rc == 0 ? openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (rc == 0 && fd < 0)
        rc = -errno;
    struct stat st;
    /* Another user's directory of mode 0700 cannot even be opened: say
     * whose it is, as for one that can. */
    bool foreign = rc == -EACCES && fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                   st.st_uid != geteuid();
    close(pfd);
    if (foreign) {
        char why[64];
        snprintf(why, sizeof(why), "belongs to uid %u", (unsigned)st.st_uid);
        return refuse_dir(p, path, why);
    }
    if (rc == -ELOOP || rc == -ENOTDIR)
        return refuse_dir(p, path, "is a symlink or not a directory");
    if (rc != 0)
        return rc;
    if (nxr__peers_dir_checked != NULL)
        nxr__peers_dir_checked(path);
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        close(fd);
        char why[64];
        if (st.st_uid != geteuid())
            snprintf(why, sizeof(why), "belongs to uid %u", (unsigned)st.st_uid);
        else
            snprintf(why, sizeof(why), "has mode %04o", (unsigned)(st.st_mode & 07777));
        return refuse_dir(p, path, why);
    }
    p->dirfd = fd;
    snprintf(p->dir, sizeof(p->dir), "%s", path);
    return 0;
}

/*
 * This copy of the library, told apart from other copies loaded in the same
 * process (another file name, RTLD_LOCAL: each has its own globals and so
 * its own arbiter): the address of copy_mark and the random value it holds.
 * Another copy's entry carries this pid with another address; it is alive
 * while that address still holds its value (read back with
 * process_vm_readv, which fails cleanly on an unmapped address), so an
 * entry left by a copy since unloaded, or by this process before an exec,
 * is stale.
 */
static _Atomic uint64_t copy_mark;

static uint64_t this_copy_mark(void)
{
    uint64_t mark = atomic_load_explicit(&copy_mark, memory_order_acquire);
    if (mark != 0)
        return mark;
    uint64_t fresh = 0;
    if (getrandom(&fresh, sizeof(fresh), GRND_NONBLOCK) != (ssize_t)sizeof(fresh)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        fresh = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^
                ((uint64_t)(uintptr_t)&copy_mark << 7) ^ (uint64_t)getpid();
    }
    if (fresh == 0)
        fresh = 1;
    if (!atomic_compare_exchange_strong_explicit(&copy_mark, &mark, fresh, memory_order_acq_rel,
                                                 memory_order_acquire))
        return mark; /* another thread's value won */
    return fresh;
}

/* Whether the copy whose mark lives at addr is still loaded here. */
static bool copy_alive(uint64_t addr, uint64_t mark)
{
    uint64_t got = 0;
    struct iovec local = {.iov_base = &got, .iov_len = sizeof(got)};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof(got)};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (n == (ssize_t)sizeof(got))
        return got == mark;
    /* EFAULT: nothing mapped there any more. Anything else (a sandbox
     * without the call): no way to tell, so the entry is believed. */
    return errno != EFAULT;
}

/* The inode of this process's PID namespace, 0 when unknown: entries of
 * another namespace name pids that mean nothing here. */
static unsigned long long pid_namespace(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* Writes this runtime's entry: a temporary file, then a rename, both
 * relative to the checked directory. */
static int publish_entry(struct nxr__peers *p, hwloc_const_bitmap_t cpus, unsigned budget)
{
    char list[NXR__PEER_ENTRY_MAX - 128], tmp[64], line[NXR__PEER_ENTRY_MAX];
    const pid_t self = getpid();
    /* /proc/self, not /proc/<pid>: right even when /proc is another PID
     * namespace's mount. */
    unsigned long long start = nxr__peers_start_time(0);
    if (start == 0)
        return -ENOENT; /* no /proc: nobody could check the entry */
    if (hwloc_bitmap_list_snprintf(list, sizeof(list), cpus) >= (int)sizeof(list))
        return -E2BIG;
    unsigned n = atomic_fetch_add_explicit(&entry_seq, 1, memory_order_relaxed);
    int len = snprintf(line, sizeof(line), "nxr-peer 2 %d %llu %u %llu %lx %llx %s\n", (int)self,
                       start, budget, pid_namespace(), (unsigned long)(uintptr_t)&copy_mark,
                       (unsigned long long)this_copy_mark(), list);
    snprintf(p->entry_name, sizeof(p->entry_name), "%d.%u", (int)self, n);
    snprintf(p->entry, sizeof(p->entry), "%s/%s", p->dir, p->entry_name);
    snprintf(tmp, sizeof(tmp), ".%d.%u.tmp", (int)self, n);
    int fd = openat(p->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = fd < 0 ? -errno : 0;
    if (rc == 0 && write(fd, line, (size_t)len) != len)
        rc = -EIO;
    if (fd >= 0)
        close(fd);
    if (rc == 0 && renameat(p->dirfd, tmp, p->dirfd, p->entry_name) != 0)
        rc = -errno;
    if (rc != 0) {
        (void)unlinkat(p->dirfd, tmp, 0);
        p->entry[0] = '\0';
        p->entry_name[0] = '\0';
    }
    p->owner = self;
    return rc;
}

/* "<pid>.<n>": the names entries have; anything else is not one. */
static bool entry_name(const char *name, pid_t *pid)
{
    /* Through the one bounded reader (base/internal/number.h), as every
     * other number of an entry: the name is another process's text. */
    unsigned long long v;
    long len = nxr__parse_digits(name, 10, 0x3fffffff, &v);
    if (len <= 0 || v == 0 || name[len] != '.' || !isdigit((unsigned char)name[len + 1]))
        return false;
    for (const char *q = name + len + 1; *q != '\0'; q++)
        if (!isdigit((unsigned char)*q))
            return false;
    *pid = (pid_t)v;
    return true;
}

/* One field of an entry: digits in base (10 or 16, lower case) whose value
 * is at most max (base/internal/number.h: no sign, no blanks, no
 * overflow), then exactly one space. */
static bool take_field(const char **p, unsigned base, unsigned long long max,
                       unsigned long long *out)
{
    long n = nxr__parse_digits(*p, base, max, out);
    if (n <= 0 || (*p)[n] != ' ')
        return false;
    *p += n + 1;
    return true;
}

/* An entry's fields. Version 1 entries (before nxr recorded namespaces and
 * copies) have no pidns, copy or mark: they are judged as they always were. */
struct entry {
    unsigned version;
    unsigned long long pid, start, budget, pidns, copy, mark;
    const char *cpus;
};

/* Splits a whole entry line (NUL-terminated, its newline removed). */
static bool parse_entry(char *line, struct entry *e)
{
    const char *p = line;
    memset(e, 0, sizeof(*e));
    if (strncmp(p, "nxr-peer 1 ", 11) == 0)
        e->version = 1;
    else if (strncmp(p, "nxr-peer 2 ", 11) == 0)
        e->version = 2;
    else
        return false;
    p += 11;
    if (!take_field(&p, 10, 0x3fffffff, &e->pid) || !take_field(&p, 10, ~0ull, &e->start) ||
        !take_field(&p, 10, 1u << 20, &e->budget))
        return false;
    if (e->version == 2 &&
        (!take_field(&p, 10, ~0ull, &e->pidns) || !take_field(&p, 16, UINTPTR_MAX, &e->copy) ||
         !take_field(&p, 16, ~0ull, &e->mark)))
        return false;
    e->cpus = p;
    return true;
}

int nxr__peers_open_own(int dirfd, const char *name, int flags, struct stat *st)
{
    int fd = openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_uid != geteuid()) {
        close(fd);
        return -1;
    }
    return fd;
}

enum verdict { LIVE, REFUSED, STALE, OTHER_NAMESPACE, THIS_COPY };

/* Reads and checks one entry; LIVE fills peer and its cpus. */
static enum verdict check_entry(int dirfd, const char *name, pid_t name_pid,
                                unsigned long long my_pidns, struct nxr__peer *peer,
                                hwloc_bitmap_t cpus)
{
    struct stat st;
    int fd = nxr__peers_open_own(dirfd, name, O_RDONLY, &st);
    if (fd < 0)
        return REFUSED;
    char buf[NXR__PEER_ENTRY_MAX + 1];
    ssize_t got = -1;
    if (st.st_size > 0 && st.st_size <= NXR__PEER_ENTRY_MAX)
        got = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (got <= 0 || got != st.st_size)
        return REFUSED;
    buf[got] = '\0';
    if (buf[got - 1] != '\n' || memchr(buf, '\n', (size_t)got - 1) != NULL ||
        memchr(buf, '\0', (size_t)got) != NULL)
        return REFUSED;
    buf[got - 1] = '\0';
    struct entry e;
    /* The CPU list is parsed (ids bounded) before any bitmap is built. */
    if (!parse_entry(buf, &e) || e.pid != (unsigned long long)name_pid || e.budget == 0 ||
        nxr__cpuset_parse_into(e.cpus, cpus, "peer entry", NULL, 0) != 0 ||
        hwloc_bitmap_iszero(cpus))
        return REFUSED;
    if (e.version >= 2 && e.pidns != 0 && my_pidns != 0 && e.pidns != my_pidns)
        return OTHER_NAMESPACE; /* its pid names another process here, or none */
    const bool same_pid = name_pid == getpid();
    if (same_pid && (e.version < 2 || e.copy == (uintptr_t)&copy_mark))
        return THIS_COPY; /* this copy's runtimes share its arbiter already */
    unsigned long long now = nxr__peers_start_time(same_pid ? 0 : name_pid);
    if (now == 0 || now != e.start)
        return STALE; /* gone, or its pid now names another process */
    if (same_pid && !copy_alive(e.copy, e.mark))
        return STALE; /* a copy since unloaded, or this process before an exec */
    peer->pid = name_pid;
    peer->budget = (unsigned)e.budget;
    peer->same_process = same_pid;
    snprintf(peer->cpus, sizeof(peer->cpus), "%.127s", e.cpus);
    return LIVE;
}

static void read_entries(struct nxr__peers *p, hwloc_const_bitmap_t mine)
{
    int fd = dup(p->dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        p->status = -errno;
        if (fd >= 0)
            close(fd);
        return;
    }
    rewinddir(d);
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc(), shared = hwloc_bitmap_alloc();
    const unsigned long long my_pidns = pid_namespace();
    struct dirent *e;
    while (cpus != NULL && shared != NULL && (e = readdir(d)) != NULL) {
        pid_t pid;
        if (!entry_name(e->d_name, &pid))
            continue; /* ".", "..", temporaries, strangers' files */
        struct nxr__peer peer = {0};
        enum verdict v = check_entry(p->dirfd, e->d_name, pid, my_pidns, &peer, cpus);
        if (v == THIS_COPY)
            continue;
        if (v == REFUSED) {
            p->refused++;
            continue;
        }
        if (v == OTHER_NAMESPACE) {
            p->other_pidns++;
            continue;
        }
        if (v == STALE) {
            p->stale++;
            /* Ours to tidy only when we own it (check_entry refused others);
             * its counters page goes with it (internal/stats_page.h). */
            (void)unlinkat(p->dirfd, e->d_name, 0);
            char page[300];
            snprintf(page, sizeof(page), "%s" NXR__PAGE_SUFFIX, e->d_name);
            (void)unlinkat(p->dirfd, page, 0);
            continue;
        }
        hwloc_bitmap_and(shared, cpus, mine);
        if (hwloc_bitmap_iszero(shared)) {
            p->others++;
            continue;
        }
        if (p->overlapping < NXR__PEERS_SHOWN) {
            hwloc_bitmap_list_snprintf(peer.overlap, sizeof(peer.overlap), shared);
            p->shown[p->overlapping] = peer;
        }
        p->overlapping++;
    }
    hwloc_bitmap_free(cpus);
    hwloc_bitmap_free(shared);
    closedir(d);
}

void nxr__peers_open(struct nxr__peers *p, const char *dir, hwloc_const_bitmap_t cpus,
                     unsigned budget, bool publish)
{
    int rc = nxr__peers_open_dir(p, dir);
    if (rc != 0) {
        p->status = rc;
        return;
    }
    read_entries(p, cpus);
    if (publish && (rc = publish_entry(p, cpus, budget)) != 0) {
        p->status = rc;
        say(p, "%s: entry not written: %s", p->dir, strerror(-rc));
    }
}

void nxr__peers_close(struct nxr__peers *p)
{
    if (p->dir[0] == '\0' || p->dirfd < 0)
        return;
    if (p->entry_name[0] != '\0' && p->owner == getpid())
        (void)unlinkat(p->dirfd, p->entry_name, 0);
    p->entry[0] = '\0';
    p->entry_name[0] = '\0';
    close(p->dirfd);
    p->dirfd = -1;
}

/* ---- for the counters page (internal/stats_page.h) -------------------- */

void nxr__peers_self(struct nxr__peer_self *out)
{
    out->start = nxr__peers_start_time(0);
    out->pidns = pid_namespace();
    out->copy = (uint64_t)(uintptr_t)&copy_mark;
    out->mark = this_copy_mark();
}

enum nxr__peer_verdict nxr__peers_judge(pid_t pid, unsigned long long start,
                                        unsigned long long pidns, uint64_t copy, uint64_t mark)
{
    unsigned long long my_pidns = pid_namespace();
    if (pidns != 0 && my_pidns != 0 && pidns != my_pidns)
        return NXR__PEER_OTHER_NAMESPACE;
    const bool same_pid = pid == getpid();
    unsigned long long now = nxr__peers_start_time(same_pid ? 0 : pid);
    if (now == 0 || now != start)
        return NXR__PEER_STALE;
    if (same_pid && copy != (uintptr_t)&copy_mark && !copy_alive(copy, mark))
        return NXR__PEER_STALE;
    return NXR__PEER_LIVE;
}

int nxr__peers_open_dir(struct nxr__peers *p, const char *dir)
{
    char path[NXR__PEERS_DIR_MAX + 1];
    memset(p, 0, sizeof(*p));
    p->dirfd = -1;
    if (dir == NULL)
        default_dir(path, sizeof(path));
    else if (strlen(dir) > NXR__PEERS_DIR_MAX) {
        say(p, "registry path of %zu bytes: at most %d", strlen(dir), NXR__PEERS_DIR_MAX);
        return -ENAMETOOLONG;
    } else
        snprintf(path, sizeof(path), "%s", dir);
    int rc = open_dir(p, path);
    if (rc != 0 && p->detail[0] == '\0')
        say(p, "%s: %s", path, strerror(-rc));
    return rc;
}
