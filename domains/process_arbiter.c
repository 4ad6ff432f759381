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
 */
#include <errno.h>
#include <pthread.h>

#include "base/internal/sys.h"
#include "domains/internal/arbiter.h"
#include "domains/nxr_domains.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nxr__arbiter *shared; /* under lock */
static unsigned long refs;          /* under lock: runtimes holding `shared` */

int nxr__arbiter_process_get(struct nxr__arbiter **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    int rc = 0;
    pthread_mutex_lock(&lock);
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
    pthread_mutex_unlock(&lock);
    return rc;
}

void nxr__arbiter_process_put(struct nxr__arbiter *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&lock);
    if (a != shared || refs == 0) {
        pthread_mutex_unlock(&lock);
        nxr__handle_dead("process arbiter", a); /* a put without its get: memory is at stake */
    }
    if (--refs == 0) {
        nxr__arbiter_destroy(shared);
        shared = NULL;
    }
    pthread_mutex_unlock(&lock);
}
