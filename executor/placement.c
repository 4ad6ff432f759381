/*
 * The calling thread as the executor sees it: what it is doing (the body
 * marker, nxr__tls, which the nesting rules read) and where it stands
 * relative to a domain: whether it may run the domain's work itself (its
 * whole affinity lies inside the domain's CPU set) or must hand the work to
 * one of the domain's workers.
 *
 * Why a marker and not "is this thread a worker": a body runs on workers of
 * the built-in team, on a host pool's threads and on a calling thread that
 * takes part in a region. The rules must give the same answer whichever of
 * them runs the body, so they ask what the thread is doing (running a body
 * of domain X), never who the thread is.
 *
 * The answer is cached per thread, keyed on the affinity it was computed
 * for: a call reads the thread's mask back (one sched_getaffinity system
 * call into a stack buffer, the raw one, which copies only the kernel's
 * nr_cpu_ids bits) and compares it with the cached mask; only a different
 * mask (or another domain) recomputes. The one call that skips the read: a
 * cached "outside" while the thread runs on a CPU outside the set (then its
 * mask holds an outside CPU whatever else changed; sched_getcpu is a vDSO
 * read). So the answer is right after any
 * change the thread makes to its own affinity, whoever makes it
 * (pthread_setaffinity_np, sched_setaffinity, nxr_ctx_bind), on the very
 * next call: a thread that widened its mask past the domain could migrate
 * off the domain's CPUs in the middle of a body, so it must be "outside" at
 * once, wherever it happens to be running. Another thread changing this
 * thread's mask is seen at this thread's next call too (the read is of the
 * mask, not of a notice).
 *
 * What it costs, and what was given up: the read is a system call per
 * operation on the region path (bench/forkjoin's "inside check" row
 * measures it against the region and against the sched_getcpu check this
 * replaced, which re-confirmed "inside" only by the CPU the thread was on
 * and was wrong whenever a widened thread sat on an inside CPU). The kernel
 * offers no cheaper signal of an affinity change (sched_getcpu and rseq give
 * the CPU, not the mask).
 *
 * Past MASK_WORDS * 64 CPUs the raw read into the stack buffer fails
 * (-EINVAL) and every call takes the full read and comparison instead:
 * right, slower.
 */
#include <sched.h>
#include <string.h>

#include "base/internal/sys.h"
#include "domains/internal/cpuset.h"
#include "executor/internal/exec.h"

/* The body marker (executor/internal/exec.h): the one piece of per-thread
 * state the nesting rules read. */
_Thread_local struct nxr__exec_tls nxr__tls;

#define MASK_WORDS 16 /* 1024 CPUs */

struct caller_cache {
    const struct nxr__exec *exec;
    uint64_t serial;
    bool inside;
    int bytes;                      /* valid bytes of mask; 0: nothing cached */
    unsigned long mask[MASK_WORDS]; /* the affinity `inside` was computed for */
};

static _Thread_local struct caller_cache caller_cache;

/* The full read and comparison. Any failure (out of memory, a failed read)
 * answers "outside": the work then goes to a worker, which is always on the
 * domain. */
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

/* Whether a raw kernel mask of `bytes` bytes is non-empty and inside cpus. */
static bool mask_inside(const unsigned long *mask, int bytes, hwloc_const_bitmap_t cpus)
{
    const int words = bytes / (int)sizeof(unsigned long);
    bool any = false;
    for (int w = 0; w < words; w++) {
        for (unsigned long bits = mask[w]; bits != 0; bits &= bits - 1) {
            unsigned cpu = (unsigned)w * 64u + (unsigned)__builtin_ctzl(bits);
            if (!hwloc_bitmap_isset(cpus, cpu))
                return false;
            any = true;
        }
    }
    return any;
}

bool nxr__exec_caller_inside(const struct nxr__exec *exec)
{
    if (exec->spec->cpus == NULL)
        return false; /* caller-managed: no set to be inside of */
    struct caller_cache *c = &caller_cache;
    if (c->bytes > 0 && c->exec == exec && c->serial == exec->serial && !c->inside) {
        /* Cached "outside" and running on a CPU outside the set: the mask
         * holds that CPU, so outside it still is (exact, no system call).
         * A thread that narrowed its mask into the set is necessarily on an
         * inside CPU, so it never takes this shortcut. */
        int cpu = sched_getcpu();
        if (cpu >= 0 && !hwloc_bitmap_isset(exec->spec->cpus, (unsigned)cpu))
            return false;
    }
    unsigned long now[MASK_WORDS];
    const int bytes = nxr__getaffinity_raw_self(now, sizeof now);
    if (bytes > 0 && bytes == c->bytes && c->exec == exec && c->serial == exec->serial &&
        memcmp(now, c->mask, (size_t)bytes) == 0)
        return c->inside;
    c->exec = exec;
    c->serial = exec->serial;
    if (bytes <= 0 || bytes % (int)sizeof(unsigned long) != 0) {
        c->bytes = 0; /* a mask past the buffer: the full read, every call */
        c->inside = affinity_inside(exec->spec->cpus);
        return c->inside;
    }
    c->inside = mask_inside(now, bytes, exec->spec->cpus);
    memcpy(c->mask, now, (size_t)bytes);
    c->bytes = bytes;
    return c->inside;
}

void nxr__exec_caller_forget(void)
{
    caller_cache.bytes = 0;
}
