/* The allowed CPU ids (see cpus.h). */
#include "tests/support/cpus.h"

#include <sched.h>

int nxr_test_allowed_cpus(int *cpus, int max)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 0;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        if (n < max)
            cpus[n] = c;
        n++;
    }
    return n;
}
