/*
 * Test support: the CPU ids this process may use, from sched_getaffinity,
 * so tests take their CPUs from the allowed set (taskset, cgroups) instead
 * of assuming CPUs 0 and 1.
 */
#ifndef NXR_TESTS_CPUS_H
#define NXR_TESTS_CPUS_H

/* The allowed CPUs in ascending order: returns how many there are and
 * stores the first `max` of them. */
int nxr_test_allowed_cpus(int *cpus, int max);

#endif /* NXR_TESTS_CPUS_H */
