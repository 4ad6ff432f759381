/*
 * Where the calling thread stands relative to a domain: whether it may run
 * the domain's work itself (its whole affinity lies inside the domain's CPU
 * set) or must hand the work to one of the domain's workers.
 *
 * The answer is cached per thread: a sched_getaffinity per operation would
 * cost as much as a small region. A cached "inside" is re-confirmed on every
 * call by the CPU the thread is on (sched_getcpu, a vDSO read, no system
 * call): a thread seen on a CPU outside the set cannot have an affinity
 * inside it, so the cache is refreshed. A cached "outside" is refreshed
 * every RECHECK calls; being stale there costs the caller a hand-off to a
 * worker, never a placement.
 */
#include <sched.h>

#include "domains/internal/cpuset.h"
#include "executor/internal/exec.h"

#define RECHECK 1024

struct caller_cache {
    const struct nxr__exec *exec;
    uint64_t serial;
    bool inside;
    unsigned left;
};

static _Thread_local struct caller_cache caller_cache;

/* The slow path: the thread's affinity read back and compared. Any failure
 * (out of memory, a failed read) answers "outside": the work then goes to a
 * worker, which is always on the domain. */
static bool affinity_inside(hwloc_const_bitmap_t cpus)
{
    hwloc_bitmap_t mine = nxr__cpuset_alloc();
    if (mine == NULL)
        return false;
    bool inside = nxr__affinity_self(mine) == 0 && !hwloc_bitmap_iszero(mine) &&
                  hwloc_bitmap_isincluded(mine, cpus);
    hwloc_bitmap_free(mine);
    return inside;
}

bool nxr__exec_caller_inside(const struct nxr__exec *exec)
{
    if (exec->cpus == NULL)
        return false; /* caller-managed: no set to be inside of */
    struct caller_cache *c = &caller_cache;
    if (c->exec == exec && c->serial == exec->serial && c->left > 0) {
        c->left--;
        if (!c->inside)
            return false;
        int cpu = sched_getcpu();
        if (cpu >= 0 && hwloc_bitmap_isset(exec->cpus, (unsigned)cpu))
            return true;
    }
    c->exec = exec;
    c->serial = exec->serial;
    c->inside = affinity_inside(exec->cpus);
    c->left = RECHECK;
    return c->inside;
}

void nxr__exec_caller_forget(void)
{
    caller_cache.left = 0;
}
