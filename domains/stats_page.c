/*
 * The counters page (internal/stats_page.h): created and published by a
 * runtime beside its registry entry, read defensively by `nxr top`'s reader.
 */
#include "domains/internal/stats_page.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/internal/number.h"
#include "domains/internal/peers.h"

_Static_assert(sizeof(struct nxr__page) % 8 == 0, "the page's size is a multiple of 8");
_Static_assert(sizeof(_Atomic uint32_t) == 4, "the futex words are 32 bits");

static void page_name(char *buf, size_t size, const char *entry_name)
{
    snprintf(buf, size, "%s" NXR__PAGE_SUFFIX, entry_name);
}

static void tmp_name(char *buf, size_t size, const char *entry_name)
{
    snprintf(buf, size, ".%s" NXR__PAGE_SUFFIX ".tmp", entry_name);
}

/* The command line, its arguments joined by spaces (cut when long). */
static void command_line(char *buf, size_t size)
{
    buf[0] = '\0';
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0) {
        buf[0] = '\0';
        return;
    }
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0' || !isprint((unsigned char)buf[i]))
            buf[i] = buf[i] == '\0' ? ' ' : '?';
    buf[n] = '\0';
}

int nxr__page_create(int dirfd, const char *entry_name, struct nxr__page **out)
{
    char tmp[96];
    tmp_name(tmp, sizeof(tmp), entry_name);
    *out = NULL;
    int fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int rc = ftruncate(fd, sizeof(struct nxr__page)) == 0 ? 0 : -errno;
    void *map = MAP_FAILED;
    if (rc == 0) {
        map = mmap(NULL, sizeof(struct nxr__page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED)
            rc = -errno;
    }
    close(fd);
    if (rc != 0) {
        (void)unlinkat(dirfd, tmp, 0);
        return rc;
    }
    struct nxr__page *page = map; /* zeroed by ftruncate */
    struct nxr__peer_self self;
    nxr__peers_self(&self);
    memcpy(page->magic, NXR__PAGE_MAGIC, sizeof(page->magic));
    page->version = NXR__PAGE_VERSION;
    page->size = sizeof(*page);
    page->pid = (int32_t)getpid();
    page->start = self.start;
    page->pidns = self.pidns;
    page->copy = self.copy;
    page->mark = self.mark;
    command_line(page->command, sizeof(page->command));
    *out = page;
    return 0;
}

int nxr__page_publish(int dirfd, const char *entry_name, struct nxr__page *page)
{
    char tmp[96], name[96];
    tmp_name(tmp, sizeof(tmp), entry_name);
    page_name(name, sizeof(name), entry_name);
    if (renameat(dirfd, tmp, dirfd, name) == 0)
        return 0;
    int rc = -errno;
    (void)unlinkat(dirfd, tmp, 0);
    munmap(page, sizeof(*page));
    return rc;
}

void nxr__page_close(int dirfd, const char *entry_name, struct nxr__page *page, bool remove)
{
    if (page == NULL)
        return;
    munmap(page, sizeof(*page));
    if (remove && dirfd >= 0) {
        char name[96];
        page_name(name, sizeof(name), entry_name);
        (void)unlinkat(dirfd, name, 0);
    }
}

void nxr__page_write_begin(struct nxr__page *page)
{
    /* Odd while writing; the fence keeps the data's stores after it. */
    atomic_fetch_add_explicit(&page->seq, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

void nxr__page_write_end(struct nxr__page *page)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    page->sampled_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    atomic_fetch_add_explicit(&page->seq, 1, memory_order_release);
}

void nxr__page_answer(struct nxr__page *page, uint32_t asked)
{
    atomic_store_explicit(&page->answered, asked, memory_order_release);
    /* Shared (not FUTEX_PRIVATE): the readers are other processes. */
    (void)syscall(SYS_futex, &page->answered, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

/* ---- the reader -------------------------------------------------------- */

/* "<pid>.<n>.page": the pid and the entry's name; anything else is no page. */
static bool parse_page_name(const char *name, pid_t *pid, unsigned *serial, char *entry,
                            size_t size)
{
    unsigned long long v, n;
    long len = nxr__parse_digits(name, 10, 0x3fffffff, &v);
    if (len <= 0 || v == 0 || name[len] != '.')
        return false;
    long len2 = nxr__parse_digits(name + len + 1, 10, 0xffffffffu, &n);
    if (len2 <= 0 || strcmp(name + len + 1 + len2, NXR__PAGE_SUFFIX) != 0)
        return false;
    if ((size_t)(len + 1 + len2) >= size)
        return false;
    memcpy(entry, name, (size_t)(len + 1 + len2));
    entry[len + 1 + len2] = '\0';
    *pid = (pid_t)v;
    *serial = (unsigned)n;
    return true;
}

struct found {
    int fd;
    pid_t pid;
    unsigned serial;
    uint32_t answered; /* when asked */
    bool asked;
};

/* Copies the page whole, again while the runtime was writing it. */
static bool copy_page(int fd, struct nxr__page *copy)
{
    for (int attempt = 0; attempt < 64; attempt++) {
        if (pread(fd, copy, sizeof(*copy), 0) != (ssize_t)sizeof(*copy))
            return false;
        uint64_t before = atomic_load_explicit(&copy->seq, memory_order_relaxed);
        uint64_t after = 0;
        if ((before & 1) == 0 &&
            pread(fd, &after, sizeof(after), offsetof(struct nxr__page, seq)) ==
                (ssize_t)sizeof(after) &&
            after == before)
            return true;
        sched_yield();
    }
    return false;
}

/* Whether the copy is this layout, written by the pid its name says. */
static bool header_ok(const struct nxr__page *c, pid_t name_pid)
{
    return memcmp(c->magic, NXR__PAGE_MAGIC, sizeof(c->magic)) == 0 &&
           c->version == NXR__PAGE_VERSION && c->size == sizeof(*c) && c->pid == name_pid &&
           c->domain_count <= NXR__PAGE_DOMAINS && c->pid > 0;
}

/* Forces the page's strings to end inside their fields. */
static void terminate_strings(struct nxr__page *c)
{
    c->command[sizeof(c->command) - 1] = '\0';
    for (uint32_t i = 0; i < c->domain_count; i++)
        c->domains[i].cpus[sizeof(c->domains[i].cpus) - 1] = '\0';
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Waits until the page's answered word moves from `was`, or the deadline. */
static bool wait_answer(int fd, uint32_t was, uint64_t deadline_ns)
{
    void *map = mmap(NULL, sizeof(struct nxr__page), PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return false;
    const struct nxr__page *page = map;
    bool moved = false;
    for (;;) {
        uint32_t v = 0;
        /* Through pread, not the mapping: a page shrunk under us by its
         * owner would fault (SIGBUS) on a load; the futex call fails
         * cleanly (EFAULT) instead. */
        if (pread(fd, &v, sizeof(v), offsetof(struct nxr__page, answered)) != (ssize_t)sizeof(v))
            break;
        if (v != was) {
            moved = true;
            break;
        }
        uint64_t now = now_ns();
        if (now >= deadline_ns)
            break;
        uint64_t left = deadline_ns - now;
        struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
                              .tv_nsec = (long)(left % 1000000000u)};
        if (syscall(SYS_futex, &page->answered, FUTEX_WAIT, was, &ts, NULL, 0) != 0 &&
            errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT)
            break;
    }
    munmap(map, sizeof(struct nxr__page));
    return moved;
}

/* Opens one page and checks the file (not its content yet): -1 when refused. */
static int open_page(int dirfd, const char *name)
{
    struct stat st;
    int fd = nxr__peers_open_own(dirfd, name, O_RDWR, &st);
    if (fd < 0)
        return -1; /* a symlink, gone, not a regular file, or not ours */
    if ((st.st_mode & 077) != 0 || st.st_size != (off_t)sizeof(struct nxr__page)) {
        close(fd);
        return -1;
    }
    return fd;
}

int nxr__pages_read(int dirfd, unsigned wait_ms,
                    void (*take)(void *arg, const struct nxr__page *copy, bool answered,
                                 unsigned serial),
                    void *arg, struct nxr__pages_seen *seen)
{
    memset(seen, 0, sizeof(*seen));
    int dfd = dup(dirfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d == NULL) {
        int rc = -errno;
        if (dfd >= 0)
            close(dfd);
        return rc;
    }
    rewinddir(d);
    struct nxr__page *copy = malloc(sizeof(*copy));
    struct found *found = NULL;
    size_t count = 0, cap = 0;
    int rc = copy == NULL ? -ENOMEM : 0;
    struct dirent *e;
    /* First pass: check every page, tidy the stale ones, ask the live. */
    while (rc == 0 && (e = readdir(d)) != NULL) {
        pid_t pid;
        unsigned serial;
        char entry[64];
        if (!parse_page_name(e->d_name, &pid, &serial, entry, sizeof(entry)))
            continue; /* entries, temporaries, strangers' files */
        int fd = open_page(dirfd, e->d_name);
        if (fd < 0 || !copy_page(fd, copy) || !header_ok(copy, pid)) {
            seen->refused++;
            if (fd >= 0)
                close(fd);
            continue;
        }
        enum nxr__peer_verdict v =
            nxr__peers_judge(pid, copy->start, copy->pidns, copy->copy, copy->mark);
        if (v == NXR__PEER_OTHER_NAMESPACE) {
            seen->other_pidns++;
            close(fd);
            continue;
        }
        if (v == NXR__PEER_STALE) {
            seen->stale++;
            close(fd);
            (void)unlinkat(dirfd, e->d_name, 0);
            (void)unlinkat(dirfd, entry, 0);
            continue;
        }
        if (count == cap) {
            size_t ncap = cap == 0 ? 8 : cap * 2;
            struct found *n = realloc(found, ncap * sizeof(*found));
            if (n == NULL) {
                close(fd);
                rc = -ENOMEM;
                break;
            }
            found = n;
            cap = ncap;
        }
        struct found *f = &found[count++];
        *f = (struct found){.fd = fd, .pid = pid, .serial = serial};
        if (wait_ms > 0) {
            uint32_t was = atomic_load_explicit(&copy->answered, memory_order_relaxed);
            uint32_t ask = was + 1;
            f->asked = pwrite(fd, &ask, sizeof(ask), offsetof(struct nxr__page, asked)) ==
                       (ssize_t)sizeof(ask);
            f->answered = was;
        }
    }
    closedir(d);
    /* Second pass: wait for the answers (one deadline for all), copy. */
    const uint64_t deadline = now_ns() + (uint64_t)wait_ms * 1000000u;
    for (size_t i = 0; i < count; i++) {
        struct found *f = &found[i];
        bool answered = f->asked && wait_answer(f->fd, f->answered, deadline);
        if (rc == 0 && copy_page(f->fd, copy) && header_ok(copy, f->pid)) {
            terminate_strings(copy);
            take(arg, copy, answered, f->serial);
        } else if (rc == 0) {
            seen->refused++;
        }
        close(f->fd);
    }
    free(found);
    free(copy);
    return rc;
}
