/*
 * Process-global thread counts (parallel OpenBLAS's openblas_set_num_threads):
 * the one place nxr changes one, and the gate that keeps every other call
 * from seeing the change.
 *
 * Such a count belongs to the library, that is to the process: when one
 * runtime's exclusive policy sets it to a domain's budget for a call, every
 * runtime of the process sees it. The process-wide exclusive permit keeps
 * other *permits* out while it is set, but a strict call that runs inline
 * (count 1, on the calling thread, no permit) would still read the
 * transient count (and fail with NXR_EPLACEMENT, or call the library at a
 * count nobody admitted). So:
 *   - nxr__global_threads_run changes a count only with the gate held
 *     exclusively, and puts the previous count back before it lets go;
 *   - a call that decides from a count and then calls at it reads it
 *     (nxr__global_threads_get) and makes the call
 *     (nxr__global_threads_hold) with the gate held shared, so it only ever
 *     sees the resting count. Between the two the count may move and move
 *     back; it is the same when the call is made.
 * One gate for every provider: a process rarely has two libraries with a
 * global count, and two providers may wrap the same one.
 *
 * Lock order: any permit (the exclusive one included) before the gate.
 * The writer holds the exclusive permit when it takes the gate; readers hold
 * the gate only around a read or a provider call and never wait for a permit
 * meanwhile. glibc's default rwlock prefers readers, so a provider that calls
 * back into nxr (a nested read) does not deadlock against a waiting writer;
 * the price is that a steady stream of readers can hold a writer back.
 */
#include <errno.h>
#include <pthread.h>

#include "kernels/internal/provider.h"

static pthread_rwlock_t gate = PTHREAD_RWLOCK_INITIALIZER;

int nxr__global_threads_get(const nxr_provider_t *p)
{
    if (p == NULL || p->global_threads == NULL)
        return 0;
    pthread_rwlock_rdlock(&gate);
    int count = p->global_threads->get(p->self);
    pthread_rwlock_unlock(&gate);
    return count;
}

int nxr__global_count_read(int (*get)(void))
{
    pthread_rwlock_rdlock(&gate);
    int count = get();
    pthread_rwlock_unlock(&gate);
    return count;
}

int nxr__global_threads_hold(const nxr_provider_t *p, int (*fn)(void *arg), void *arg)
{
    if (p == NULL || fn == NULL)
        return -EINVAL;
    if (p->global_threads == NULL)
        return fn(arg);
    pthread_rwlock_rdlock(&gate);
    int rc = fn(arg);
    pthread_rwlock_unlock(&gate);
    return rc;
}

int nxr__global_threads_run(const nxr_provider_t *p, int count, int (*fn)(void *arg), void *arg)
{
    if (p == NULL || p->global_threads == NULL || count < 1 || fn == NULL)
        return -EINVAL;
    const nxr_global_threads_ops_t *g = p->global_threads;
    pthread_rwlock_wrlock(&gate);
    const int previous = g->get(p->self);
    if (previous != count)
        g->set(p->self, count);
    const int rc = fn(arg);
    /* Restore unconditionally-checked: fn (or the library) may have moved
     * the count again; nxr never leaves it changed after a call. */
    if (previous >= 1 && g->get(p->self) != previous)
        g->set(p->self, previous);
    pthread_rwlock_unlock(&gate);
    return rc;
}
