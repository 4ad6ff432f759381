/*
 * nxr system seam: every OS call that can fail and that nxr must survive goes
 * through here (thread creation, mutex and condition variable init, affinity,
 * heap allocation, topology load, mapping, binding, unmapping, purging,
 * protection, page queries, file reads), so that one test hook can make the Nth such
 * call fail. Also the futex wrappers the worker teams park on.
 *
 * Fault injection: nxr__fault_arm(points, n) makes the n-th call (1-based,
 * counted over the armed points only) fail as the OS would. The counter is
 * process-global on purpose: it is a test facility, disarmed by default, and
 * costs one relaxed load when disarmed.
 */
#ifndef NXR_INTERNAL_SYS_H
#define NXR_INTERNAL_SYS_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal/build.h"

enum nxr__fault_point {
    NXR_FAULT_ALLOC = 1u << 0,           /* nxr__malloc/nxr__calloc return NULL */
    NXR_FAULT_THREAD_CREATE = 1u << 1,   /* nxr__thread_create returns -EAGAIN */
    NXR_FAULT_SETAFFINITY = 1u << 2,     /* nxr__setaffinity_self returns -EINVAL */
    NXR_FAULT_VERIFY_AFFINITY = 1u << 3, /* nxr__getaffinity_self reports CPU set {} */
    NXR_FAULT_TOPOLOGY_LOAD = 1u << 4,   /* topology load fails */
    NXR_FAULT_MBIND = 1u << 5,           /* nxr__mbind_node returns -EINVAL */
    NXR_FAULT_MMAP = 1u << 6,            /* nxr__mmap_anon returns -ENOMEM */
    NXR_FAULT_FUTEX_WAIT = 1u << 7,      /* nxr__futex_wait returns at once (spurious) */
    NXR_FAULT_MUNMAP = 1u << 8,          /* nxr__munmap returns -EINVAL, nothing unmapped */
    NXR_FAULT_MADVISE = 1u << 9,         /* nxr__madvise returns -EAGAIN, nothing purged */
    NXR_FAULT_MPROTECT = 1u << 10,       /* nxr__mprotect returns -ENOMEM, nothing changed */
    NXR_FAULT_MOVE_PAGES = 1u << 11,     /* nxr__move_pages_query returns -ENOMEM */
    NXR_FAULT_SYNC_INIT = 1u << 12,      /* nxr__mutex_init/nxr__cond_init return -ENOMEM */
    /* nxr__move_pages_query answers that the page is not present (status
     * -ENOENT), as move_pages does for a page the kernel is moving. */
    NXR_FAULT_PAGE_ABSENT = 1u << 13,
    NXR_FAULT_ALL = (1u << 14) - 1,
};

/* Arms the hook: the nth call (n >= 1) through any point in `points` fails;
 * n == 0 disarms. Resets the call counter. Test-only; not thread-safe with
 * respect to concurrent arming. */
void nxr__fault_arm(unsigned points, long n);

/* Like nxr__fault_arm, but the nth call and every later one fail until the
 * hook is disarmed (for callers that retry, such as jemalloc after a failed
 * extent hook). */
void nxr__fault_arm_from(unsigned points, long n);

/* Like nxr__fault_arm, but calls n .. n + count - 1 fail (count 0 disarms):
 * a failure that lasts a while and then ends, as a page being moved. */
void nxr__fault_arm_calls(unsigned points, long n, long count);

/* How many calls the armed points have seen since the last arm. */
long nxr__fault_calls(void);

/* Makes every call through `points` fail until disarmed (0), apart from the
 * counted points of nxr__fault_arm: how a test reaches a path that only a
 * failure opens (jemalloc purges with madvise only after a refused munmap).
 * Resets the count of such failures. Test-only. */
void nxr__fault_arm_always(unsigned points);

/* How many calls nxr__fault_arm_always has failed since it was armed. */
long nxr__fault_always_hits(void);

/* How many calls through `point` (one bit) the hook has failed since the
 * process started, by either arming (nxr__fault_arm* and _always); never
 * reset. A test that arms and disarms while other threads call through the
 * seam takes the difference over its run: exact, unlike nxr__fault_calls,
 * which each arming resets. */
long nxr__fault_failures(enum nxr__fault_point point);

/* True when this call through `point` must fail. */
bool nxr__fault_hit(enum nxr__fault_point point);

void *nxr__malloc(size_t size);
void *nxr__calloc(size_t n, size_t size);

/* pthread_create that returns 0 or a negative errno. */
int nxr__thread_create(pthread_t *thread, void *(*fn)(void *), void *arg);

/* pthread_mutex_init / pthread_cond_init with default attributes: 0 or a
 * negative errno (-ENOMEM, -EAGAIN). On failure the object is not
 * initialised and must not be destroyed. */
int nxr__mutex_init(pthread_mutex_t *mutex);
int nxr__cond_init(pthread_cond_t *cond);

/* Sets the calling thread's affinity; 0 or a negative errno. */
int nxr__setaffinity_self(const cpu_set_t *mask, size_t size);

/* Reads the calling thread's affinity; 0 or a negative errno. */
int nxr__getaffinity_self(cpu_set_t *mask, size_t size);

/* The raw system call behind it: the kernel copies its mask (nr_cpu_ids
 * bits rounded up to a long) into buf and nothing else is touched (glibc's
 * wrapper also zeroes the rest of the buffer). Returns the bytes copied, or
 * a negative errno (-EINVAL: size is smaller than the kernel's mask). No
 * fault point: callers use it only to see whether a mask changed. */
int nxr__getaffinity_raw_self(void *buf, size_t size);

/* An anonymous, private, read-write mapping of size bytes (a multiple of the
 * page size), not yet populated. 0 and *out, or a negative errno (-ENOMEM). */
int nxr__mmap_anon(size_t size, void **out);

/* munmap; 0 or a negative errno (the range is then still mapped). */
int nxr__munmap(void *addr, size_t size);

/* Binds [addr, addr + size) (page-aligned) to NUMA node `node` with MPOL_BIND:
 * pages fault in on that node or not at all. 0 or a negative errno (-EINVAL
 * for a node the kernel does not have, -ENOSYS without NUMA support). */
int nxr__mbind_node(void *addr, size_t size, int node);

/* madvise; 0 or a negative errno (the advice was not applied). */
int nxr__madvise(void *addr, size_t size, int advice);

/* mprotect; 0 or a negative errno (the protection may have changed on part
 * of the range: the kernel gives no guarantee either way, so callers retry
 * or treat the whole range as unknown). */
int nxr__mprotect(void *addr, size_t size, int prot);

/* Where the page holding addr lives: move_pages in query mode (nothing
 * moves). 0 with *status = the node id, or a negative errno in *status for
 * that page (-ENOENT: not faulted in yet); or a negative errno when the
 * query itself failed. */
int nxr__move_pages_query(const void *addr, int *status);

/* How many bytes of [addr, addr + size) the kernel backs with huge pages
 * now (transparent huge pages mapped by a PMD): the PAGEMAP_SCAN ioctl of
 * /proc/self/pagemap, which needs no privilege (Linux 6.7 and later). 0 with
 * *huge set, -ENOSYS where the kernel cannot say (an older kernel), or
 * another negative errno. Reads page tables only: nothing faults in. */
int nxr__pagemap_huge_bytes(const void *addr, size_t size, size_t *huge);

/* The longest line nxr__read_lines hands over, and the most it reads of one
 * file: /proc and cgroup files are small; a file past the cap is a file nxr
 * did not expect (garbage, or not a procfs file), not one to read through. */
#define NXR__READ_LINE_MAX 8192
#define NXR__READ_FILE_MAX (4u << 20)

/* Reads the text file at path and calls fn(arg, line) for each line, the
 * newline removed and the line NUL-terminated (fn may modify it), in order,
 * until fn returns non-zero (which is then returned) or the file ends (0).
 * A negative errno when the file cannot be opened or read (-ENOENT, -EACCES,
 * -EISDIR, ...), -EFBIG for a line over NXR__READ_LINE_MAX or a file over
 * NXR__READ_FILE_MAX; lines handed over before such a failure stay handed
 * over. Blocks on the read (procfs and cgroupfs answer at once). Any thread. */
int nxr__read_lines(const char *path, int (*fn)(void *arg, char *line), void *arg);

/* One spin-wait step: tells the CPU this is a busy-wait loop (x86 `pause`,
 * about 30-140 cycles; arm64 `yield`), so a sibling hyperthread runs. */
static inline void nxr__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Sleeps while *word == expected (spurious wake-ups possible: the kernel's
 * EINTR and EAGAIN look the same, so every caller re-checks in a loop;
 * NXR_FAULT_FUTEX_WAIT makes a wait return at once to test those loops). */
void nxr__futex_wait(atomic_uint *word, unsigned expected);

/* Wakes up to n sleepers on word. */
void nxr__futex_wake(atomic_uint *word, int n);

/* nxr__futex_wait with a deadline on CLOCK_MONOTONIC (nxr__now_ns): returns
 * false when the deadline passed (or had passed) without a wake-up, true
 * otherwise (woken, word changed, or spurious: re-check). */
bool nxr__futex_wait_until(atomic_uint *word, unsigned expected, uint64_t deadline_ns);

/* CLOCK_MONOTONIC in nanoseconds (a vDSO read, no system call). */
uint64_t nxr__now_ns(void);

/* Asks the kernel to fire the calling thread's timers within slack_ns of
 * their deadline (the default slack is 50 us). Best effort: a failure only
 * makes timed waits less precise. */
void nxr__timer_slack_self(unsigned long slack_ns);

/*
 * Destroyed handles (checked builds). A runtime or context carries a magic
 * word: live from creation, dead from destroy. In NXR_CHECKED builds destroy
 * does not free the handle at once but keeps it in a small quarantine (the
 * last 64 retired handles), so a call with a destroyed handle still reads the
 * dead word and aborts with a message instead of touching freed memory; in
 * other builds retiring frees, and using a destroyed handle is undefined.
 */
#define NXR__HANDLE_LIVE 0x6e78726cu /* "nxrl" */
#define NXR__HANDLE_DEAD 0x64656164u /* "dead" */

/* Marks *magic dead and frees mem (checked builds: quarantines it). */
void nxr__handle_retire(unsigned *magic, void *mem);

/* Reports a call with a destroyed (or foreign) handle and aborts. */
void nxr__handle_dead(const char *what, const void *handle) __attribute__((noreturn));

#if NXR__CHECKED_BUILD
#define NXR__HANDLE_CHECK(h, what)                                                                 \
    do {                                                                                           \
        if ((h) != NULL && (h)->magic != NXR__HANDLE_LIVE)                                         \
            nxr__handle_dead(what, h);                                                             \
    } while (0)
#else
#define NXR__HANDLE_CHECK(h, what) ((void)0)
#endif

#endif /* NXR_INTERNAL_SYS_H */
