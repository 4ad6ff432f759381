/* Thread binding (see binding.h). Affinity is set and read back with the
 * kernel's calls, never hwloc's: on a synthetic topology hwloc binds
 * nothing (DESIGN.md, "Topology and domains"). */
#include "service/binding.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>

#include "runtime/nxr.h"

int svc_bind_thread(hwloc_const_bitmap_t cpus)
{
    if (cpus == NULL || hwloc_bitmap_iszero(cpus))
        return -EINVAL;
    cpu_set_t want, got;
    CPU_ZERO(&want);
    for (int cpu = hwloc_bitmap_first(cpus); cpu >= 0; cpu = hwloc_bitmap_next(cpus, cpu)) {
        if (cpu >= CPU_SETSIZE)
            return NXR_EPLACEMENT;
        CPU_SET(cpu, &want);
    }
    if (pthread_setaffinity_np(pthread_self(), sizeof(want), &want) != 0)
        return NXR_EPLACEMENT;
    if (pthread_getaffinity_np(pthread_self(), sizeof(got), &got) != 0 || !CPU_EQUAL(&want, &got))
        return NXR_EPLACEMENT;
    return 0;
}
