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
#include <sys/stat.h>
#include <unistd.h>

#include "base/internal/sys.h"

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
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    (void)nxr__read_lines(path, take_start, &s);
    return s.start;
}

/* The directory exists (or is made) as a real directory of ours, mode 0700. */
static int use_dir(struct nxr__peers *p, const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -errno;
    if (lstat(dir, &st) != 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        say(p, "%s is not a directory of this user with mode 0700: not used", dir);
        return -EPERM;
    }
    snprintf(p->dir, sizeof(p->dir), "%s", dir);
    return 0;
}

static void default_dir(char *buf, size_t size)
{
    const char *run = getenv("XDG_RUNTIME_DIR");
    if (run != NULL && run[0] == '/' && strlen(run) < size - 16)
        snprintf(buf, size, "%s/nxr-peers", run);
    else
        snprintf(buf, size, "/dev/shm/nxr-peers-%u", (unsigned)geteuid());
}

/* Writes this runtime's entry: a temporary file, then a rename. */
static int publish_entry(struct nxr__peers *p, hwloc_const_bitmap_t cpus, unsigned budget)
{
    char list[NXR__PEER_ENTRY_MAX - 64], tmp[320], line[NXR__PEER_ENTRY_MAX];
    const pid_t self = getpid();
    unsigned long long start = nxr__peers_start_time(self);
    if (start == 0)
        return -ENOENT; /* no /proc: nobody could check the entry */
    if (hwloc_bitmap_list_snprintf(list, sizeof(list), cpus) >= (int)sizeof(list))
        return -E2BIG;
    unsigned n = atomic_fetch_add_explicit(&entry_seq, 1, memory_order_relaxed);
    int len = snprintf(line, sizeof(line), "nxr-peer 1 %d %llu %u %s\n", (int)self, start, budget,
                       list);
    snprintf(p->entry, sizeof(p->entry), "%s/%d.%u", p->dir, (int)self, n);
    snprintf(tmp, sizeof(tmp), "%s/.%d.%u.tmp", p->dir, (int)self, n);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = fd < 0 ? -errno : 0;
    if (rc == 0 && write(fd, line, (size_t)len) != len)
        rc = -EIO;
    if (fd >= 0)
        close(fd);
    if (rc == 0 && rename(tmp, p->entry) != 0)
        rc = -errno;
    if (rc != 0) {
        unlink(tmp);
        p->entry[0] = '\0';
    }
    p->owner = self;
    return rc;
}

/* "<pid>.<n>": the names entries have; anything else is not one. */
static bool entry_name(const char *name, pid_t *pid)
{
    char *end;
    if (!isdigit((unsigned char)name[0]))
        return false;
    long v = strtol(name, &end, 10);
    if (*end != '.' || v <= 0 || v > 0x3fffffff || !isdigit((unsigned char)end[1]))
        return false;
    for (const char *q = end + 1; *q != '\0'; q++)
        if (!isdigit((unsigned char)*q))
            return false;
    *pid = (pid_t)v;
    return true;
}

enum verdict { LIVE, REFUSED, STALE };

/* Reads and checks one entry; LIVE fills peer and its cpus. */
static enum verdict check_entry(int dirfd, const char *name, pid_t name_pid,
                                struct nxr__peer *peer, hwloc_bitmap_t cpus)
{
    struct stat st;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return REFUSED;
    char buf[NXR__PEER_ENTRY_MAX + 1];
    ssize_t got = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_size > 0 && st.st_size <= NXR__PEER_ENTRY_MAX)
        got = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (got <= 0 || got != st.st_size)
        return REFUSED;
    buf[got] = '\0';
    int pid, used = 0;
    unsigned long long start;
    unsigned budget;
    char list[NXR__PEER_ENTRY_MAX];
    if (buf[got - 1] != '\n' || memchr(buf, '\n', (size_t)got - 1) != NULL ||
        sscanf(buf, "nxr-peer 1 %d %llu %u %511[0-9,-]\n%n", &pid, &start, &budget, list,
               &used) != 4 ||
        used != got || pid != (int)name_pid || budget == 0 ||
        hwloc_bitmap_list_sscanf(cpus, list) != 0 || hwloc_bitmap_iszero(cpus) ||
        hwloc_bitmap_weight(cpus) < 0 || hwloc_bitmap_weight(cpus) > 65536)
        return REFUSED;
    unsigned long long now = nxr__peers_start_time((pid_t)pid);
    if (now == 0 || now != start)
        return STALE; /* gone, or its pid now names another process */
    peer->pid = (pid_t)pid;
    peer->budget = budget;
    snprintf(peer->cpus, sizeof(peer->cpus), "%.127s", list);
    return LIVE;
}

static void read_entries(struct nxr__peers *p, hwloc_const_bitmap_t mine)
{
    DIR *d = opendir(p->dir);
    if (d == NULL) {
        p->status = -errno;
        return;
    }
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc(), shared = hwloc_bitmap_alloc();
    const pid_t self = getpid();
    struct dirent *e;
    while (cpus != NULL && shared != NULL && (e = readdir(d)) != NULL) {
        pid_t pid;
        if (!entry_name(e->d_name, &pid))
            continue; /* ".", "..", temporaries, strangers' files */
        if (pid == self)
            continue; /* this process's runtimes share its arbiter already */
        struct nxr__peer peer = {0};
        enum verdict v = check_entry(dirfd(d), e->d_name, pid, &peer, cpus);
        if (v == REFUSED) {
            p->refused++;
            continue;
        }
        if (v == STALE) {
            p->stale++;
            /* Ours to tidy only when we own it (check_entry refused others). */
            (void)unlinkat(dirfd(d), e->d_name, 0);
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
    char path[256];
    memset(p, 0, sizeof(*p));
    if (dir == NULL)
        default_dir(path, sizeof(path));
    else
        snprintf(path, sizeof(path), "%s", dir);
    int rc = use_dir(p, path);
    if (rc != 0) {
        p->status = rc;
        if (p->detail[0] == '\0')
            say(p, "%s: %s", path, strerror(-rc));
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
    if (p->entry[0] != '\0' && p->owner == getpid())
        (void)unlink(p->entry);
    p->entry[0] = '\0';
}
