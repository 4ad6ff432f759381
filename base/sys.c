/*
 * The system seam (see internal/sys.h): thin wrappers that convert OS
 * conventions into nxr's (0 or a negative errno) and consult the fault hook.
 */
#include "base/internal/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <numaif.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/internal/lock_rank.h"

static atomic_uint fault_points; /* armed points; 0 = disarmed */
static atomic_long fault_target; /* the first call number that fails */
static atomic_long fault_last;   /* the last one (LONG_MAX: every call from the target on) */
static atomic_long fault_seen;   /* calls seen through armed points */
static atomic_uint fault_always; /* points that fail on every call */
static atomic_long fault_always_seen;
#define FAULT_POINTS 14
_Static_assert(NXR_FAULT_ALL == (1u << FAULT_POINTS) - 1, "one failure count per fault point");
static atomic_long fault_failed[FAULT_POINTS]; /* per point (bit index), never reset */

static void fault_arm(unsigned points, long n, long last)
{
    atomic_store_explicit(&fault_seen, 0, memory_order_relaxed);
    atomic_store_explicit(&fault_target, n, memory_order_relaxed);
    atomic_store_explicit(&fault_last, last, memory_order_relaxed);
    /* Release: a thread that sees the points armed also sees target/seen. */
    atomic_store_explicit(&fault_points, n > 0 ? points : 0, memory_order_release);
}

void nxr__fault_arm(unsigned points, long n)
{
    fault_arm(points, n, n);
}

void nxr__fault_arm_from(unsigned points, long n)
{
    fault_arm(points, n, LONG_MAX);
}

void nxr__fault_arm_calls(unsigned points, long n, long count)
{
    fault_arm(points, count > 0 ? n : 0, n + count - 1);
}

long nxr__fault_calls(void)
{
    return atomic_load_explicit(&fault_seen, memory_order_relaxed);
}

void nxr__fault_arm_always(unsigned points)
{
    atomic_store_explicit(&fault_always_seen, 0, memory_order_relaxed);
    /* Release: pairs with the acquire in nxr__fault_hit. */
    atomic_store_explicit(&fault_always, points, memory_order_release);
}

long nxr__fault_always_hits(void)
{
    return atomic_load_explicit(&fault_always_seen, memory_order_relaxed);
}

long nxr__fault_failures(enum nxr__fault_point point)
{
    unsigned bit = (unsigned)point;
    if (bit == 0 || (bit & (bit - 1)) != 0 || (unsigned)__builtin_ctz(bit) >= FAULT_POINTS)
        return 0;
    return atomic_load_explicit(&fault_failed[__builtin_ctz(bit)], memory_order_relaxed);
}

/* Relaxed: a statistic, read after the calls it counts were joined. */
static bool failed(enum nxr__fault_point point)
{
    atomic_fetch_add_explicit(&fault_failed[__builtin_ctz((unsigned)point)], 1,
                              memory_order_relaxed);
    return true;
}

bool nxr__fault_hit(enum nxr__fault_point point)
{
    if ((atomic_load_explicit(&fault_always, memory_order_acquire) & (unsigned)point) != 0) {
        atomic_fetch_add_explicit(&fault_always_seen, 1, memory_order_relaxed);
        return failed(point);
    }
    /* Acquire pairs with the release in nxr__fault_arm. */
    unsigned armed = atomic_load_explicit(&fault_points, memory_order_acquire);
    if ((armed & (unsigned)point) == 0)
        return false;
    long call = atomic_fetch_add_explicit(&fault_seen, 1, memory_order_relaxed) + 1;
    long target = atomic_load_explicit(&fault_target, memory_order_relaxed);
    if (call >= target && call <= atomic_load_explicit(&fault_last, memory_order_relaxed))
        return failed(point);
    return false;
}

void *nxr__malloc(size_t size)
{
    if (nxr__fault_hit(NXR_FAULT_ALLOC))
        return NULL;
    return malloc(size);
}

void *nxr__calloc(size_t n, size_t size)
{
    if (nxr__fault_hit(NXR_FAULT_ALLOC))
        return NULL;
    return calloc(n, size);
}

int nxr__thread_create(pthread_t *thread, void *(*fn)(void *), void *arg)
{
    if (nxr__fault_hit(NXR_FAULT_THREAD_CREATE))
        return -EAGAIN;
    int rc = pthread_create(thread, NULL, fn, arg);
    return -rc;
}

int nxr__mutex_init(pthread_mutex_t *mutex)
{
    if (nxr__fault_hit(NXR_FAULT_SYNC_INIT))
        return -ENOMEM;
    return -pthread_mutex_init(mutex, NULL);
}

int nxr__cond_init(pthread_cond_t *cond)
{
    if (nxr__fault_hit(NXR_FAULT_SYNC_INIT))
        return -ENOMEM;
    return -pthread_cond_init(cond, NULL);
}

int nxr__setaffinity_self(const cpu_set_t *mask, size_t size)
{
    if (nxr__fault_hit(NXR_FAULT_SETAFFINITY))
        return -EINVAL;
    if (sched_setaffinity(0, size, mask) != 0)
        return -errno;
    return 0;
}

int nxr__getaffinity_self(cpu_set_t *mask, size_t size)
{
    if (sched_getaffinity(0, size, mask) != 0)
        return -errno;
    if (nxr__fault_hit(NXR_FAULT_VERIFY_AFFINITY))
        CPU_ZERO_S(size, mask); /* simulate a mask that did not stick */
    return 0;
}

int nxr__getaffinity_raw_self(void *buf, size_t size)
{
    long bytes = syscall(SYS_sched_getaffinity, 0, size, buf);
    return bytes < 0 ? -errno : (int)bytes;
}

void nxr__futex_wait(atomic_uint *word, unsigned expected)
{
    /* atomic_uint has the size and alignment of a 32-bit futex word. */
    _Static_assert(sizeof(atomic_uint) == sizeof(uint32_t), "futex word must be 32 bits");
    if (nxr__fault_hit(NXR_FAULT_FUTEX_WAIT))
        return; /* a spurious wake-up */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void nxr__futex_wake(atomic_uint *word, int n)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

bool nxr__futex_wait_until(atomic_uint *word, unsigned expected, uint64_t deadline_ns)
{
    if (nxr__fault_hit(NXR_FAULT_FUTEX_WAIT))
        return true; /* a spurious wake-up */
    if (nxr__now_ns() >= deadline_ns)
        return false;
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline (plain
     * FUTEX_WAIT a relative one, which a preemption here would stretch). */
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                          .tv_nsec = (long)(deadline_ns % 1000000000u)};
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET_PRIVATE, expected, &ts, NULL,
                      FUTEX_BITSET_MATCH_ANY);
    return !(rc != 0 && errno == ETIMEDOUT);
}

uint64_t nxr__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void nxr__timer_slack_self(unsigned long slack_ns)
{
    (void)prctl(PR_SET_TIMERSLACK, slack_ns, 0, 0, 0);
}

int nxr__mmap_anon(size_t size, void **out)
{
    *out = NULL;
    if (nxr__fault_hit(NXR_FAULT_MMAP))
        return -ENOMEM;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    *out = p;
    return 0;
}

int nxr__munmap(void *addr, size_t size)
{
    if (nxr__fault_hit(NXR_FAULT_MUNMAP))
        return -EINVAL;
    return munmap(addr, size) == 0 ? 0 : -errno;
}

/* Node ids above this are refused rather than given an unbounded mask. */
#define MBIND_MAX_NODE 1023

int nxr__mbind_node(void *addr, size_t size, int node)
{
    if (node < 0 || node > MBIND_MAX_NODE)
        return -EINVAL;
    if (nxr__fault_hit(NXR_FAULT_MBIND))
        return -EINVAL;
    unsigned long mask[(MBIND_MAX_NODE + 1) / (8 * sizeof(unsigned long))] = {0};
    const unsigned bits = 8 * sizeof(unsigned long);
    mask[(unsigned)node / bits] |= 1ul << ((unsigned)node % bits);
    /* maxnode counts bits; the kernel reads maxnode - 1 of them, hence + 1. */
    if (mbind(addr, size, MPOL_BIND, mask, (unsigned long)node + 2, 0) != 0)
        return -errno;
    return 0;
}

#if NXR__CHECKED_BUILD
/* The quarantine of retired handles: a ring, oldest freed first. Reachable
 * from here, so LeakSanitizer does not count what it holds as leaked. */
#define QUARANTINE 64
static void *quarantine[QUARANTINE];
static size_t quarantine_next;
static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

void nxr__handle_retire(unsigned *magic, void *mem)
{
    *magic = NXR__HANDLE_DEAD;
#if NXR__CHECKED_BUILD
    nxr__lock(&quarantine_lock, NXR__RANK_QUARANTINE);
    void *oldest = quarantine[quarantine_next];
    quarantine[quarantine_next] = mem;
    quarantine_next = (quarantine_next + 1) % QUARANTINE;
    nxr__unlock(&quarantine_lock, NXR__RANK_QUARANTINE);
    free(oldest);
#else
    free(mem);
#endif
}

void nxr__handle_dead(const char *what, const void *handle)
{
    fprintf(stderr, "nxr: %s %p was destroyed (or is not an nxr %s)\n", what, handle, what);
    abort();
}

int nxr__madvise(void *addr, size_t size, int advice)
{
    if (nxr__fault_hit(NXR_FAULT_MADVISE))
        return -EAGAIN;
    return madvise(addr, size, advice) == 0 ? 0 : -errno;
}

int nxr__mprotect(void *addr, size_t size, int prot)
{
    if (nxr__fault_hit(NXR_FAULT_MPROTECT))
        return -ENOMEM;
    return mprotect(addr, size, prot) == 0 ? 0 : -errno;
}

int nxr__move_pages_query(const void *addr, int *status)
{
    void *page = (void *)addr;
    *status = -EFAULT;
    if (nxr__fault_hit(NXR_FAULT_MOVE_PAGES))
        return -ENOMEM;
    if (nxr__fault_hit(NXR_FAULT_PAGE_ABSENT)) {
        *status = -ENOENT;
        return 0;
    }
    /* nodes == NULL: query mode; status gets the node or a negative errno. */
    if (move_pages(0, 1, &page, NULL, status, 0) != 0)
        return -errno;
    return 0;
}

/* PAGEMAP_SCAN's interface (include/uapi/linux/fs.h since Linux 6.7),
 * spelled out here because the build machines' headers may predate it. The
 * kernel checks arg.size, so a kernel without the ioctl answers ENOTTY and
 * one with a different layout EINVAL: either is -ENOSYS to the caller. */
struct pagemap_region {
    uint64_t start, end, categories;
};
struct pagemap_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
        category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN_IOCTL _IOWR('f', 16, struct pagemap_scan_arg)
#define PAGEMAP_IS_HUGE    (1u << 6)

int nxr__pagemap_huge_bytes(const void *addr, size_t size, size_t *huge)
{
    *huge = 0;
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct pagemap_region regions[32];
    uint64_t at = (uintptr_t)addr;
    const uint64_t end = at + size;
    int rc = 0;
    /* Each call fills at most 32 runs of huge pages and says where its walk
     * stopped: the loop ends at `end`, one call per 32 runs. */
    while (at < end) {
        struct pagemap_scan_arg arg = {
            .size = sizeof(arg),
            .start = at & ~(uint64_t)4095,
            .end = (end + 4095) & ~(uint64_t)4095,
            .vec = (uintptr_t)regions,
            .vec_len = sizeof(regions) / sizeof(regions[0]),
            .category_mask = PAGEMAP_IS_HUGE,
            .return_mask = PAGEMAP_IS_HUGE,
        };
        long n = ioctl(fd, PAGEMAP_SCAN_IOCTL, &arg);
        if (n < 0) {
            rc = errno == ENOTTY || errno == EINVAL ? -ENOSYS : -errno;
            break;
        }
        for (long i = 0; i < n; i++) {
            uint64_t lo = regions[i].start > (uintptr_t)addr ? regions[i].start : (uintptr_t)addr;
            uint64_t hi = regions[i].end < end ? regions[i].end : end;
            if (hi > lo)
                *huge += (size_t)(hi - lo);
        }
        if (arg.walk_end <= at)
            break; /* no progress: never loop on a kernel that stops early */
        at = arg.walk_end;
    }
    close(fd);
    return rc;
}

int nxr__read_lines(const char *path, int (*fn)(void *arg, char *line), void *arg)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char *line = malloc(NXR__READ_LINE_MAX);
    if (line == NULL) {
        close(fd);
        return -ENOMEM;
    }
    char chunk[4096];
    size_t have = 0, total = 0;
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0) {
            if (have > 0) { /* a last line without its newline */
                line[have] = '\0';
                rc = fn(arg, line);
            }
            break;
        }
        total += (size_t)n;
        if (total > NXR__READ_FILE_MAX) {
            rc = -EFBIG;
            break;
        }
        for (ssize_t i = 0; i < n && rc == 0; i++) {
            if (chunk[i] == '\n') {
                line[have] = '\0';
                have = 0;
                rc = fn(arg, line);
            } else if (have + 1 < NXR__READ_LINE_MAX) {
                line[have++] = chunk[i];
            } else {
                rc = -EFBIG;
            }
        }
        if (rc != 0)
            break;
    }
    free(line);
    close(fd);
    return rc;
}
