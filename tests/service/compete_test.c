/*
 * Noisy neighbours (service/compete.h): each busy process runs pinned to
 * the CPU it was given (read back from the kernel, not from the helper),
 * the highest CPU first, and none is left once stopped.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>

#include "service/compete.h"
#include "tests/support/cpus.h"

static hwloc_bitmap_t allowed_set(void)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    cr_assert_eq(hwloc_bitmap_list_sscanf(set, nxr_test_expand("%*")), 0);
    return set;
}

/* The one CPU pid may run on, from sched_getaffinity; -1 when not one. */
static int pinned_cpu(pid_t pid)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(pid, sizeof(set), &set) != 0 || CPU_COUNT(&set) != 1)
        return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set))
            return cpu;
    return -1;
}

Test(service_compete, pinned_highest_first_and_gone_after_stop, .timeout = 30)
{
    hwloc_bitmap_t set = allowed_set();
    const int last = hwloc_bitmap_last(set);
    const int n = hwloc_bitmap_weight(set) + 1; /* one more than CPUs: wraps */
    struct svc_compete c;
    cr_assert_eq(svc_compete_start(&c, set, (unsigned)n), 0);
    cr_assert_eq(c.count, (unsigned)n);
    cr_expect_eq(pinned_cpu(c.pids[0]), last, "the first is on the highest CPU %d", last);
    cr_expect_eq(pinned_cpu(c.pids[n - 1]), last, "the one past the CPUs wraps to the highest");
    for (int i = 0; i < n; i++) {
        cr_expect_eq(pinned_cpu(c.pids[i]), c.cpus[i], "process %d on CPU %d", i, c.cpus[i]);
        cr_expect(hwloc_bitmap_isset(set, (unsigned)c.cpus[i]), "CPU %d is allowed", c.cpus[i]);
    }
    pid_t pids[SVC_COMPETE_MAX];
    for (int i = 0; i < n; i++)
        pids[i] = c.pids[i];
    svc_compete_stop(&c);
    cr_expect_eq(c.count, 0);
    for (int i = 0; i < n; i++)
        cr_expect(kill(pids[i], 0) != 0 && errno == ESRCH, "process %d reaped", (int)pids[i]);
    svc_compete_stop(&c); /* a second stop is a no-op */
    hwloc_bitmap_free(set);
}

Test(service_compete, refuses_bad_requests)
{
    struct svc_compete c;
    hwloc_bitmap_t set = allowed_set(), empty = hwloc_bitmap_alloc();
    cr_expect_eq(svc_compete_start(&c, set, SVC_COMPETE_MAX + 1), -EINVAL);
    cr_expect_eq(c.count, 0);
    cr_expect_eq(svc_compete_start(&c, empty, 1), -EINVAL);
    cr_expect_eq(svc_compete_start(&c, set, 0), 0, "none is a valid request");
    cr_expect_eq(c.count, 0);
    /* A CPU the machine does not have cannot take a neighbour: the child's
     * pinning fails and the start reports it. */
    hwloc_bitmap_t outside = hwloc_bitmap_alloc();
    hwloc_bitmap_set(outside, CPU_SETSIZE - 1);
    cr_expect_eq(svc_compete_start(&c, outside, 1), -EINVAL);
    cr_expect_eq(c.count, 0, "nothing left after a failed start");
    hwloc_bitmap_free(outside);
    hwloc_bitmap_free(set);
    hwloc_bitmap_free(empty);
}
