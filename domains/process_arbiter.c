/*
 * The process's arbiter: one arbiter that every runtime of the process
 * shares (see internal/arbiter.h, "One arbiter per process").
 *
 * Why process-wide and not one per runtime: a permit is a claim on CPUs, and
 * CPUs belong to the process, not to a runtime. Two runtimes in one process
 * (two libraries that each embed nxr, or a service that builds one runtime
 * per socket) must keep overlapping domains apart exactly as one runtime
 * does, and the exclusive permit -- taken around a provider whose threads
 * nxr cannot confine and whose thread count is process-global (parallel
 * OpenBLAS) -- means "nothing else of nxr runs in this process"; with one
 * arbiter per runtime, two runtimes could each hold "the" exclusive permit
 * and set the same global count at once.
 *
 * The universe is every CPU id nxr accepts (0..NXR_CPU_ID_MAX), so any
 * runtime's allowed set fits whatever the first runtime's was; requests are
 * compact (their own words only), so the wide universe costs 16 KiB once and
 * nothing per operation.
 *
 * Lifetime: reference-counted under `lock`. The first get creates the
 * arbiter, the last put destroys it (so a process that destroys its last
 * runtime leaves nothing behind, and LeakSanitizer sees no leak). The lock
 * is held only around the count and create/destroy; it is never held while
 * a permit is acquired.
 *
 * After fork: the child inherits the arbiter with the parent's permits held
 * and waiters queued (threads that do not exist in the child), and `lock`
 * possibly held by one of them. The child's runtimes must start from a clean
 * arbiter, so a pthread_atfork child handler (registered by the first get)
 * abandons the inherited one (its memory stays allocated: freeing it would
 * take its mutex) and resets `lock`, `shared` and `refs`. The inherited
 * runtimes never touch the arbiter again (every call on them answers
 * NXR_EFORKED, and their destroy does not put their reference).
 */
#include <errno.h>
#include <pthread.h>

#include "base/internal/lock_rank.h"
#include "base/internal/sys.h"
#include "domains/internal/arbiter.h"
#include "domains/nxr_domains.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nxr__arbiter *shared; /* under lock */
static unsigned long refs;          /* under lock: runtimes holding `shared` */

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* The child's only thread, before fork returns in it: nothing else runs, so
 * plain stores are enough, and re-initialising `lock` is how a mutex another
 * (now absent) thread held is released. */
static void child_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    lock = fresh;
    shared = NULL; /* abandoned: see the file comment */
    refs = 0;
}

static void watch_fork(void)
{
    (void)pthread_atfork(NULL, NULL, child_after_fork);
}

int nxr__arbiter_process_get(struct nxr__arbiter **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    pthread_once(&fork_once, watch_fork);
    int rc = 0;
    nxr__lock(&lock, NXR__RANK_PROCESS_ARBITER);
    if (shared == NULL) {
        hwloc_bitmap_t universe = hwloc_bitmap_alloc();
        if (nxr__fault_hit(NXR_FAULT_ALLOC) || universe == NULL ||
            hwloc_bitmap_set_range(universe, 0, NXR_CPU_ID_MAX) != 0)
            rc = -ENOMEM;
        else
            rc = nxr__arbiter_create(&shared, universe);
        hwloc_bitmap_free(universe);
    }
    if (rc == 0) {
        refs++;
        *out = shared;
    }
    nxr__unlock(&lock, NXR__RANK_PROCESS_ARBITER);
    return rc;
}

void nxr__arbiter_process_put(struct nxr__arbiter *a)
{
    if (a == NULL)
        return;
    nxr__lock(&lock, NXR__RANK_PROCESS_ARBITER);
    if (a != shared || refs == 0) {
        nxr__unlock(&lock, NXR__RANK_PROCESS_ARBITER);
        nxr__handle_dead("process arbiter", a); /* a put without its get: memory is at stake */
    }
    if (--refs == 0) {
        nxr__arbiter_destroy(shared);
        shared = NULL;
    }
    nxr__unlock(&lock, NXR__RANK_PROCESS_ARBITER);
}
