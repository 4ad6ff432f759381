/*
 * Test support: CPU ids from the allowed set, so that the suite runs on any
 * CPUs (under `taskset -c 1`, in a container whose cpuset is {2,5}, ...).
 *
 * A test never names CPU 0 or CPU 1. It names the k-th allowed CPU instead,
 * through a template in which "%k" (k = 0..9) stands for the k-th allowed
 * CPU's OS id, lowest first, and "%*" for the whole allowed set as a cpulist.
 * The same templates serve declared domains and synthetic topologies:
 *     nxr_test_expand("0:%0;1:%1;9:%0,%1 shared")
 *     nxr_test_expand("synthetic:pack:2 numa:1 pu:1(indexes=%0,%1)")
 * (hwloc's `indexes=` on the PU level gives the synthetic PUs those OS ids,
 * so the synthetic machine lies inside the allowed set instead of being
 * clipped away by it). A test that needs more CPUs than it has skips with a
 * reason: NXR_TEST_NEED_CPUS(n) in a Criterion test; nxr_test_cpu_count()
 * in a plain-C one.
 *
 * The allowed set is read once per process (sched_getaffinity of the
 * process when first asked), before a test narrows its own thread.
 */
#ifndef NXR_TESTS_CPUS_H
#define NXR_TESTS_CPUS_H

#include <hwloc.h>

/* How many CPUs the process may run on. */
int nxr_test_cpu_count(void);

/* The OS id of the k-th allowed CPU (k from 0, lowest id first), or -1
 * when the process has k or fewer CPUs. */
int nxr_test_cpu(int k);

/* A new bitmap of the allowed CPUs k..k+n-1; NULL when there are fewer
 * (the caller frees it with hwloc_bitmap_free). */
hwloc_bitmap_t nxr_test_cpus(int k, int n);

/* How many allowed CPUs template needs (1 + the highest %k; 1 for "%*"). */
int nxr_test_cpus_needed(const char *tmpl);

/*
 * Expands template (above) into a string that stays valid for the process's
 * lifetime (a ring of 16 static slots: the 17th call reuses the first slot;
 * not thread-safe). NULL when the process has fewer CPUs than the template
 * needs or the result does not fit 512 bytes; call NXR_TEST_NEED_CPUS first.
 */
const char *nxr_test_expand(const char *tmpl);

/* Confines the calling thread to `cpus` (a domain's set, say), so that it
 * runs that domain's small work itself. 0, or -errno of sched_setaffinity
 * (-EINVAL for an empty set or one beyond CPU_SETSIZE). */
int nxr_test_pin(hwloc_const_bitmap_t cpus);

/* In a Criterion test: skip, with the reason, unless n CPUs are allowed. */
#define NXR_TEST_NEED_CPUS(n)                                                                      \
    do {                                                                                           \
        if (nxr_test_cpu_count() < (n))                                                            \
            cr_skip_test("needs %d allowed CPUs, the process has %d", (int)(n),                   \
                         nxr_test_cpu_count());                                                    \
    } while (0)

#endif /* NXR_TESTS_CPUS_H */
