/*
 * The lock order: one table, checked.
 *
 * Every nxr mutex (and the count gate, a rwlock) has a rank below. A thread
 * may take a lock only if every lock it already holds has a lower rank, so
 * no two threads can each hold what the other waits for. Two locks of the
 * same rank are never held together (the stall reporter takes the domains'
 * admission locks one at a time). A permit is not a mutex, but a thread
 * that waits for one must hold no lock at all (a holder of that lock could
 * be what the permit waits for): nxr__lock_rank_assert_none says so where a
 * permit is waited for.
 *
 * Checked builds (-DNXR_CHECKED=1, which --config=asan and --config=checked
 * set) check every acquisition against the locks the thread holds and abort
 * with both locks named; other builds compile the wrappers to the plain
 * pthread calls. The order below is the one place it is written
 * (docs/architecture.md points here).
 *
 * Why each rank sits where it does (outermost first):
 *   TEAM_RUN      a region's dispatcher holds its team's run_lock while the
 *                 region runs: its own bodies (kernel calls nested in a
 *                 loop) and, when it waits, the stall reporter take the locks
 *                 below on that thread.
 *   RUNTIME_DOMAINS the runtime's domain table (attach, describe, stall
 *                 reports); open contexts, admission state and a provider's
 *                 resting thread count are read under it.
 *   RUNTIME_CTX   the runtime's list of open contexts.
 *   ADMISSION     a domain's admission state (exec->lock): held while
 *                 releasing or trying a permit, so the arbiter's mutex is
 *                 below it.
 *   COUNT_GATE    a provider with a process-global thread count is read and
 *                 called with the gate held (kernels/global_count.c): under a
 *                 region's run_lock (a kernel call in a body) or the domain
 *                 table (describe, attach). Nothing of nxr's is taken under
 *                 it but the leaves below, and never a permit: a permit is
 *                 waited for before the gate, with no lock held.
 *   PROCESS_ARBITER the process's arbiter reference count (create/destroy).
 *   ARBITER       the arbiter's own mutex (a leaf among the domains' locks).
 *   TEAM_QUEUE    a team's batch FIFO; TEAM_START its start-up hand-shake.
 *   POOL          a domain pool's free lists; it calls the arena below.
 *   ARENA         the mmap arena (the jemalloc one has jemalloc's own locks).
 *   QUARANTINE    released handles kept for use-after-release checks.
 *   MEM_REGISTRY  which domain owns an address: taken inside jemalloc's arena
 *                 locks by the extent hooks, calls nothing: the leaf.
 */
#ifndef NXR_INTERNAL_LOCK_RANK_H
#define NXR_INTERNAL_LOCK_RANK_H

#include <pthread.h>
#include <stdbool.h>

enum nxr__lock_rank {
    NXR__RANK_TEAM_RUN = 1,
    NXR__RANK_RUNTIME_DOMAINS,
    NXR__RANK_RUNTIME_CTX,
    NXR__RANK_ADMISSION,
    NXR__RANK_COUNT_GATE,
    NXR__RANK_PROCESS_ARBITER,
    NXR__RANK_ARBITER,
    NXR__RANK_TEAM_QUEUE,
    NXR__RANK_TEAM_START,
    NXR__RANK_POOL,
    NXR__RANK_ARENA,
    NXR__RANK_QUARANTINE,
    NXR__RANK_MEM_REGISTRY,
    NXR__RANK_END /* not a rank: one past the last */
};

/* "admission (exec->lock)" and the like; "?" outside the table. */
const char *nxr__lock_rank_name(enum nxr__lock_rank rank);

/* The check itself, compiled in every build (the wrappers call it only in
 * checked ones): aborts, naming both locks, if the calling thread holds a
 * lock of rank >= `rank`; otherwise records `rank` as held. */
void nxr__lock_rank_acquire(enum nxr__lock_rank rank);
/* Forgets one hold of `rank` (aborts if the thread holds none). */
void nxr__lock_rank_release(enum nxr__lock_rank rank);
/* Aborts, naming `what` and the lock, if the thread holds any ranked lock. */
void nxr__lock_rank_assert_none(const char *what);
/* How many ranked locks the calling thread holds (for tests). */
unsigned nxr__lock_rank_held(void);
/* Whether this library was built checked, i.e. whether its own locks and
 * permit waits are checked (for tests, which skip without it). */
bool nxr__lock_rank_checking(void);

#if defined(NXR_CHECKED) && NXR_CHECKED
#define NXR__LOCK_RANK_ACQUIRE(r) nxr__lock_rank_acquire(r)
#define NXR__LOCK_RANK_RELEASE(r) nxr__lock_rank_release(r)
#define NXR__LOCK_RANK_NONE(what) nxr__lock_rank_assert_none(what)
#else
#define NXR__LOCK_RANK_ACQUIRE(r) ((void)(r))
#define NXR__LOCK_RANK_RELEASE(r) ((void)(r))
#define NXR__LOCK_RANK_NONE(what) ((void)(what))
#endif

/* The check comes before the wait, so an inversion aborts instead of
 * deadlocking. */
static inline void nxr__lock(pthread_mutex_t *m, enum nxr__lock_rank rank)
{
    NXR__LOCK_RANK_ACQUIRE(rank);
    pthread_mutex_lock(m);
}

static inline void nxr__unlock(pthread_mutex_t *m, enum nxr__lock_rank rank)
{
    pthread_mutex_unlock(m);
    NXR__LOCK_RANK_RELEASE(rank);
}

static inline void nxr__rdlock(pthread_rwlock_t *l, enum nxr__lock_rank rank)
{
    NXR__LOCK_RANK_ACQUIRE(rank);
    pthread_rwlock_rdlock(l);
}

static inline void nxr__wrlock(pthread_rwlock_t *l, enum nxr__lock_rank rank)
{
    NXR__LOCK_RANK_ACQUIRE(rank);
    pthread_rwlock_wrlock(l);
}

static inline void nxr__rwunlock(pthread_rwlock_t *l, enum nxr__lock_rank rank)
{
    pthread_rwlock_unlock(l);
    NXR__LOCK_RANK_RELEASE(rank);
}

#endif /* NXR_INTERNAL_LOCK_RANK_H */
