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
 * Lock order (ranks: base/internal/lock_rank.h): any permit (the exclusive one included) before the
 * gate. The writer holds the exclusive permit when it takes the gate; readers hold the gate only
 * around a read or a provider call and never wait for a permit meanwhile. That holds because only
 * GLOBAL_OR_UNCONTROLLED providers take the gate (nxr__provider_new refuses a count on any other),
 * and those run on threads of their own: nxr gives them no call->parallel_for, so nothing inside
 * their call asks for a permit. A PER_CALL_BOUND x ENGINE_WORKERS provider with a count would have
 * taken each region's permit under the gate, against an exclusive call holding its permit and
 * waiting for the gate (tests/runtime/gate_order_test.c).
 *
 * Fairness: the gate prefers writers, so a steady stream of strict calls
 * cannot hold an exclusive call back (at most one writer is ever waiting:
 * writers are serialised by the exclusive permit before they ask, and the
 * readers waiting when one leaves go in before the next can ask). A thread
 * already holding the gate (a provider calling back into nxr from inside its
 * call) does not take it again: `held` counts this thread's hold, so a
 * nested read neither re-locks nor queues behind a waiting writer (which
 * would deadlock on its own hold), and a nested write is refused.
 *
 * After fork: the child inherits the gate as the parent's threads held it
 * (shared by a provider call in flight, or exclusively by a set-and-restore)
 * and those threads do not exist in the child. A pthread_atfork child
 * handler, registered at the first use of the gate, re-initialises it and
 * clears this thread's `held` (the child's only thread is the copy of the
 * one that forked). A count a parent thread had set and not yet restored
 * stays set in the library's copy in the child; nxr does not guess it back.
 */
#include <errno.h>
#include <pthread.h>

#include "base/internal/lock_rank.h"
#include "kernels/internal/provider.h"

static pthread_rwlock_t gate = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

/* How deeply the calling thread is inside the gate (shared or exclusive). */
static _Thread_local unsigned held;

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* In the child's only thread, before fork returns there (see above). */
static void child_after_fork(void)
{
    pthread_rwlock_t fresh = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
    gate = fresh;
    held = 0;
}

static void watch_fork(void)
{
    (void)pthread_atfork(NULL, NULL, child_after_fork);
}

static void gate_enter_shared(void)
{
    pthread_once(&fork_once, watch_fork);
    if (held++ == 0)
        nxr__rdlock(&gate, NXR__RANK_COUNT_GATE);
}

static void gate_leave(void)
{
    if (--held == 0)
        nxr__rwunlock(&gate, NXR__RANK_COUNT_GATE);
}

int nxr__global_threads_get(const nxr_provider_t *p)
{
    if (p == NULL || p->global_threads == NULL)
        return 0;
    gate_enter_shared();
    int count = p->global_threads->get(p->self);
    gate_leave();
    return count;
}

int nxr__global_count_read(int (*get)(void))
{
    gate_enter_shared();
    int count = get();
    gate_leave();
    return count;
}

int nxr__global_threads_hold(const nxr_provider_t *p, int (*fn)(void *arg), void *arg)
{
    if (p == NULL || fn == NULL)
        return -EINVAL;
    if (p->global_threads == NULL || p->count != NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
        return fn(arg); /* no count to hold still (and never a gate around a permit) */
    gate_enter_shared();
    int rc = fn(arg);
    gate_leave();
    return rc;
}

int nxr__global_threads_run(const nxr_provider_t *p, int count, int (*fn)(void *arg), void *arg)
{
    if (p == NULL || p->global_threads == NULL || count < 1 || fn == NULL)
        return -EINVAL;
    const struct nxr_global_threads_ops *g = p->global_threads;
    if (held > 0)
        return NXR_EREENTRANT; /* inside this thread's own hold: it cannot wait for itself */
    pthread_once(&fork_once, watch_fork);
    nxr__wrlock(&gate, NXR__RANK_COUNT_GATE);
    held = 1;
    const int previous = g->get(p->self);
    if (previous != count)
        g->set(p->self, count);
    const int rc = fn(arg);
    /* Restore unconditionally-checked: fn (or the library) may have moved
     * the count again; nxr never leaves it changed after a call. */
    if (previous >= 1 && g->get(p->self) != previous)
        g->set(p->self, previous);
    held = 0;
    nxr__rwunlock(&gate, NXR__RANK_COUNT_GATE);
    return rc;
}
