/*
 * Test support: what the kernel says about this process's threads, read
 * from /proc so tests do not take nxr's word for it.
 */
#ifndef NXR_TESTS_PROCFS_H
#define NXR_TESTS_PROCFS_H

#include <hwloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Number of threads in this process (entries of /proc/self/task). */
int nxr_test_thread_count(void);

/* The thread count to compare a test's end against: counted after one
 * thread was created and joined, because a sanitizer's runtime may start a
 * helper of its own at the process's first pthread_create (TSan's
 * background thread) and keep it; -1 when a thread cannot be made. */
int nxr_test_thread_baseline(void);

/* Thread ids whose name (comm) starts with prefix; returns how many were
 * found (at most max are stored). */
size_t nxr_test_threads_named(const char *prefix, pid_t *tids, size_t max);

/* The affinity of thread tid, read with sched_getaffinity. 0 or -errno. */
int nxr_test_thread_affinity(pid_t tid, hwloc_bitmap_t out);

/* The domain id of the nxr worker the caller runs on (its thread name is
 * "nxr-d<id>-w<i>"), or -1 when the caller is not an nxr worker. */
int nxr_test_worker_domain(void);

/* Voluntary context switches of thread tid so far (each time it blocked,
 * e.g. parked on a futex), from /proc/self/task/<tid>/status; -1 when it
 * cannot be read. */
long nxr_test_thread_voluntary_switches(pid_t tid);

/* The scheduler state of thread tid ('R' running, 'S' asleep, 'D', ...,
 * from /proc/self/task/<tid>/stat), or '?' when it cannot be read. */
char nxr_test_thread_state(pid_t tid);

/* Yields until thread tid is asleep in the kernel ('S') and pred(arg)
 * holds, giving up after ms milliseconds; returns whether both held. How a
 * test waits for "parked" or "blocked" without sleeping for a guessed time. */
bool nxr_test_wait_asleep(pid_t tid, bool (*pred)(void *arg), void *arg, int ms);

/* Yields until *flag >= want, giving up after ms milliseconds: a bounded
 * rendezvous (no sleep), so a broken test fails instead of hanging. */
void nxr_test_wait_at_least(atomic_int *flag, int want, int ms);

/* Yields until pred(arg) holds, giving up after ms milliseconds; returns
 * whether it held. The same bounded rendezvous for any state a test can
 * read (a queue length, a flag, a counter). */
bool nxr_test_wait_until(bool (*pred)(void *arg), void *arg, int ms);

/* Waits (bounded, ~2 s) until the thread count equals want; returns the
 * last count seen. Exited threads can linger briefly in /proc. */
int nxr_test_wait_thread_count(int want);

/* Runs fn in a forked child with its stderr captured: returns the child's
 * wait status, and what it printed in text (NUL-terminated, cut at size).
 * For checks that end a process (an abort with a message). */
int nxr_test_in_child(void (*fn)(void), char *text, size_t size);

#endif /* NXR_TESTS_PROCFS_H */
