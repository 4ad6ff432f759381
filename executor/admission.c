/*
 * Admission: who may run on a domain's executor, and when.
 *
 * MANAGED and COOPERATIVE domains take part in overlap arbitration: while
 * any operation of the domain is in flight the runtime holds one permit for
 * the domain's CPU set (the arbiter keeps overlapping sets apart). The
 * permit belongs to the domain, not to a thread: the first operation to enter
 * acquires it, later ones join, the last to leave releases it. That is what
 * lets a batch be admitted by the submitting thread and finished by a worker.
 *
 * Fairness. A join is allowed only while no request that overlaps the
 * domain's set waits in the arbiter. Once one waits, new operations do not
 * join: they wait for the permit to be released and then acquire it anew,
 * which queues them behind that request (the arbiter is FIFO among
 * overlapping requests). So a waiting request bounds how long a held permit
 * can be extended: by the operations already in flight when it queued, never
 * by ones that arrive after it. Without this, a stream of overlapping
 * submissions keeps `active` above zero and starves an overlapping domain
 * for as long as the stream lasts, whatever the arbiter's own policy.
 *
 * Deferred batches. A region's caller waits for its turn (above); a
 * submitted batch never does: nxr_submit must return whatever the domain's
 * permit is doing, because a task of the batch holding the permit may
 * itself be waiting until another thread's nxr_submit on the domain has
 * returned (a dependency the API allows). Had that submission waited for
 * the domain to go idle behind a queued overlapping request, nothing could
 * move. So a batch that can neither join (nobody overlapping waits) nor
 * take a free permit at once is queued on the domain (`deferred_*`) and
 * nxr_submit returns. The batches run on the domain's next permit: when
 * the last operation in flight leaves, the permit is released (the waiting
 * request gets its turn) and the domain's own executor is handed one item
 * that waits for the permit again (acquire_for_deferred: it queues in the
 * arbiter behind the request, FIFO), then admits every deferred batch at
 * once, in submission order, and keeps new batches from joining until all
 * are in the executor's queue (hand_over), so batches start in the order
 * their nxr_submit calls returned. The starvation bound is unchanged:
 * nothing joins a permit while an overlapping request waits or while
 * batches are deferred, so a waiting request waits for the operations in
 * flight when it queued, no more. The wait the deferred batches themselves
 * have is the arbiter's, bounded by the overlapping holders (and reported
 * as a stall, like every admission wait). Regions still wait in the
 * caller: waiting for a region of one's own domain to finish from inside a
 * task is not allowed (docs/contracts.md).
 *
 * CALLER_MANAGED domains never enter the arbiter. Their guard admits one
 * operation at a time; a second entry, from any thread (the caller pool's own
 * workers included), is NXR_EADMISSION. The guard clears on every exit path
 * because leave is paired with every successful enter.
 *
 * Lock order (ranks: base/internal/lock_rank.h): exec->lock may be held while releasing a permit or
 * trying one (the arbiter's mutex is a leaf); no lock is held while acquiring one, nor while
 * handing batches or the acquiring item to the executor (its submit takes the team's queue_lock,
 * and a synchronous pool runs items inline).
 */
#include <errno.h>
#include <time.h>

#include "base/internal/lock_rank.h"
#include "base/internal/sys.h"
#include "executor/internal/exec.h"

static atomic_ullong exec_serials;

int nxr__exec_admission_init(struct nxr__exec *exec, struct nxr__arbiter *arbiter)
{
    /* Relaxed: only uniqueness matters. */
    exec->serial = atomic_fetch_add_explicit(&exec_serials, 1, memory_order_relaxed) + 1;
    int rc = nxr__mutex_init(&exec->lock);
    if (rc != 0)
        return rc;
    if ((rc = nxr__cond_init(&exec->changed)) != 0) {
        pthread_mutex_destroy(&exec->lock);
        return rc;
    }
    atomic_init(&exec->guard, 0);
    exec->active = 0;
    exec->acquiring = false;
    exec->joins = 0;
    exec->deferrals = 0;
    exec->waits = exec->wait_ns = exec->wait_max_ns = 0;
    atomic_init(&exec->budget_now, exec->spec->budget);
    for (int c = 0; c < NXR__COUNT_N; c++)
        atomic_init(&exec->counters.v[c], 0);
    exec->deferred_head = exec->deferred_tail = NULL;
    exec->deferred = 0;
    exec->batches = 0;
    exec->waiting = 0;
    exec->arbiter = NULL;
    if (exec->spec->admission == NXR_ADMISSION_CALLER_MANAGED)
        return 0;
    rc = nxr__arbiter_request_init(&exec->request, arbiter, exec->spec->cpus);
    if (rc != 0) {
        pthread_cond_destroy(&exec->changed);
        pthread_mutex_destroy(&exec->lock);
        return rc;
    }
    exec->arbiter = arbiter;
    return 0;
}

void nxr__exec_admission_fini(struct nxr__exec *exec)
{
    if (exec->arbiter != NULL)
        nxr__arbiter_request_fini(&exec->request);
    exec->arbiter = NULL;
    pthread_cond_destroy(&exec->changed);
    pthread_mutex_destroy(&exec->lock);
}

static int enter_guarded(struct nxr__exec *exec)
{
    unsigned idle = 0;
    /* acq_rel: acquire pairs with the release in leave (the previous
     * operation's effects are visible); release publishes the claim. */
    if (!atomic_compare_exchange_strong_explicit(&exec->guard, &idle, 1, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return NXR_EADMISSION;
    nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    exec->active++;
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    return 0;
}

/* Takes the deferred batches and counts them in flight (under exec->lock,
 * with the permit held or just granted). Returns the list, oldest first. */
static struct nxr__deferred *take_deferred(struct nxr__exec *exec)
{
    struct nxr__deferred *d = exec->deferred_head;
    exec->active += exec->deferred;
    exec->batches += exec->deferred;
    exec->deferred_head = exec->deferred_tail = NULL;
    exec->deferred = 0;
    return d;
}

/* Hands batches taken by take_deferred to the executor (no lock held). A
 * batch the executor refuses leaves again and fails. */
static void submit_taken(struct nxr__exec *exec, struct nxr__deferred *d)
{
    while (d != NULL) {
        /* Read first: once submitted, the batch may finish and be freed. */
        struct nxr__deferred *next = d->link;
        nxr__executor_retain(&exec->executor);
        int rc = exec->executor.ops->submit(exec->executor.self, d->fn, d->arg, d->count, d->done,
                                            d->done_arg);
        if (rc != 0) {
            nxr__exec_leave_batch(exec);
            d->fail(d->done_arg, rc);
        }
        d = next;
    }
}

static void start_acquirer(struct nxr__exec *exec);

/*
 * Ends an operation's count in flight (exec->lock held). The last one out
 * releases the permit, or the guard; deferred batches then need the permit
 * back, behind whoever waits: returns true when the caller must start the
 * item that takes it (start_acquirer, with the lock dropped), acquiring
 * being set for it here.
 */
static bool leave_locked(struct nxr__exec *exec)
{
    if (--exec->active != 0)
        return false;
    bool start = false;
    if (exec->arbiter != NULL) {
        nxr__arbiter_release(exec->arbiter, &exec->request);
        if (exec->deferred > 0 && !exec->acquiring) {
            exec->acquiring = true;
            start = true;
        }
    } else {
        atomic_store_explicit(&exec->guard, 0, memory_order_release);
    }
    pthread_cond_broadcast(&exec->changed);
    return start;
}

/*
 * Hands the batches taken by take_deferred to the executor, then those
 * deferred while it did so. The caller keeps exec->acquiring set and
 * counts one hold of its own in exec->active (the permit stays held even
 * if every batch handed over finishes meanwhile); this clears the one and
 * drops the other. While acquiring is set nothing joins the permit: a
 * batch whose nxr_submit returned after the deferred ones' did is deferred
 * behind them, not handed to the executor before them. Without that, a
 * later batch could start first, and a task that waits (through the
 * submitting threads) for an earlier batch to finish would wait for one
 * queued behind itself. Batches deferred during the hand-over go on this
 * permit as joins would have, unless an overlapping request waits by then
 * (see Fairness): they wait for the next permit, behind it.
 */
static void hand_over(struct nxr__exec *exec, struct nxr__deferred *d)
{
    for (;;) {
        submit_taken(exec, d);
        nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
        d = exec->deferred > 0 && !nxr__arbiter_contended(exec->arbiter, &exec->request)
                ? take_deferred(exec)
                : NULL;
        if (d == NULL)
            break;
        nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    }
    exec->acquiring = false;
    bool start = leave_locked(exec); /* the hold */
    /* Region callers wait for acquiring to clear: leave_locked woke them
     * if the hold was the last operation, else they are woken here. */
    if (exec->active != 0)
        pthread_cond_broadcast(&exec->changed);
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    if (start)
        start_acquirer(exec);
}

static void report_deferred(void *p, uint64_t waited_ns)
{
    struct nxr__exec *exec = p;
    nxr__stall_report(exec->stall, exec, "admission of deferred batches", waited_ns);
}

/* A region's caller in admission: what it reports, once per call. */
struct admission_wait {
    struct nxr__exec *exec;
    uint64_t start;
    bool reported;
    bool waited; /* it slept (on exec->changed, or in the arbiter) */
};

static void report_region(void *p, uint64_t waited_ns)
{
    struct admission_wait *w = p;
    w->reported = true;
    nxr__stall_report(w->exec->stall, w->exec, "admission of a region", waited_ns);
}

/* One wait on exec->changed (exec->lock held) for a region's caller. Bounded
 * by what it waits for: the domain's operations in flight leaving, or the
 * acquiring thread's grant (itself bounded by the arbiter). Sleeps to the
 * stall threshold first, reports once with the lock dropped, then sleeps
 * untimed. */
static void wait_changed(struct admission_wait *w)
{
    struct nxr__exec *exec = w->exec;
    w->waited = true;
    uint64_t at = w->reported ? 0 : nxr__stall_deadline(exec->stall, w->start);
    if (at == 0) {
        pthread_cond_wait(&exec->changed, &exec->lock);
        return;
    }
    struct timespec ts = {.tv_sec = (time_t)(at / 1000000000u),
                          .tv_nsec = (long)(at % 1000000000u)};
    if (pthread_cond_clockwait(&exec->changed, &exec->lock, CLOCK_MONOTONIC, &ts) == ETIMEDOUT) {
        nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
        report_region(w, nxr__now_ns() - w->start);
        nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    }
}

/* The item a domain's executor runs to get the permit back for its
 * deferred batches (see Deferred batches): it waits in the arbiter, which
 * bounds the wait by the overlapping holders and the earlier waiters. */
static void acquire_for_deferred(void *p, size_t index)
{
    struct nxr__exec *exec = p;
    (void)index;
    /* Cannot fail: the request was prepared for this arbiter. Bounded by
     * the overlapping holders and earlier waiters; reported as a stall. */
    (void)nxr__arbiter_acquire_reporting(exec->arbiter, &exec->request,
                                         nxr__stall_deadline(exec->stall, nxr__now_ns()),
                                         report_deferred, exec);
    nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    struct nxr__deferred *d = take_deferred(exec);
    exec->active++; /* the hand-over's hold (hand_over drops it) */
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    hand_over(exec, d);
}

/* The acquiring item's done callback: the contract requires one (a pool
 * may free its latch there); nothing is left to do by then. */
static void acquired(void *p)
{
    (void)p;
}

/* Starts the acquiring item; the caller set exec->acquiring (no lock held
 * now). When the executor refuses it, the deferred batches fail with its
 * status: they cannot run without the permit. */
static void start_acquirer(struct nxr__exec *exec)
{
    int rc = exec->executor.ops->submit(exec->executor.self, acquire_for_deferred, exec, 1,
                                        acquired, NULL);
    if (rc == 0)
        return;
    nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    struct nxr__deferred *d = exec->deferred_head;
    exec->deferred_head = exec->deferred_tail = NULL;
    exec->deferred = 0;
    exec->acquiring = false;
    pthread_cond_broadcast(&exec->changed);
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    while (d != NULL) {
        struct nxr__deferred *next = d->link;
        d->fail(d->done_arg, rc);
        d = next;
    }
}

/* Counts w as an admission wait if it slept; exec->lock held. */
static void count_wait(struct nxr__exec *exec, const struct admission_wait *w)
{
    if (!w->waited)
        return;
    uint64_t waited = nxr__now_ns() - w->start;
    exec->waits++;
    exec->wait_ns += waited;
    if (waited > exec->wait_max_ns)
        exec->wait_max_ns = waited;
}

static int enter_arbitrated(struct nxr__exec *exec)
{
    bool deferred = false;
    struct admission_wait w = {.exec = exec, .start = 0, .reported = false, .waited = false};
    nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    exec->waiting++;
    for (;;) {
        if (w.start == 0 && (exec->acquiring || exec->active > 0))
            w.start = nxr__now_ns(); /* only a wait that may happen pays the clock */
        if (exec->acquiring) {
            wait_changed(&w);
            continue;
        }
        if (exec->active == 0)
            break; /* acquire the permit below */
        /* The domain holds its permit already: join it, unless an
         * overlapping request is waiting for it (see Fairness above) or
         * batches are deferred (they would wait behind every join). The
         * arbiter's mutex is a leaf, so asking under exec->lock is safe. */
        if (exec->deferred == 0 && !nxr__arbiter_contended(exec->arbiter, &exec->request)) {
            exec->active++;
            exec->joins++;
            exec->waiting--;
            count_wait(exec, &w);
            nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
            return 0;
        }
        if (!deferred) {
            deferred = true;
            exec->deferrals++;
        }
        /* Woken when the last operation leaves (or one enters or fails). */
        wait_changed(&w);
    }
    exec->acquiring = true;
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    if (w.start == 0)
        w.start = nxr__now_ns();
    /* Bounded by the overlapping holders and earlier waiters (the arbiter's
     * FIFO); reported once past the threshold unless already reported. */
    int rc = nxr__arbiter_try_acquire(exec->arbiter, &exec->request);
    if (rc != 0) { /* an overlapping permit is held or waited for: a wait */
        w.waited = true;
        rc = nxr__arbiter_acquire_reporting(
            exec->arbiter, &exec->request,
            w.reported ? 0 : nxr__stall_deadline(exec->stall, w.start), report_region, &w);
    }
    nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    exec->waiting--;
    count_wait(exec, &w);
    struct nxr__deferred *d = NULL;
    if (rc == 0) {
        exec->active = 1;
        d = take_deferred(exec); /* batches deferred meanwhile share the grant */
    }
    if (d != NULL) {
        exec->active++; /* the hand-over's hold; acquiring stays set */
    } else {
        exec->acquiring = false;
        pthread_cond_broadcast(&exec->changed);
    }
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    if (d != NULL)
        hand_over(exec, d);
    return rc;
}

int nxr__exec_enter_batch(struct nxr__exec *exec, struct nxr__deferred *d)
{
    if (exec->arbiter == NULL || nxr__tls.depth > 0)
        return nxr__exec_enter(exec); /* the guard, or NXR_EREENTRANT */
    bool start = false;
    nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    if (!exec->acquiring && exec->deferred == 0) {
        /* Join (see Fairness), or take the permit if it is free now. The
         * arbiter's mutex is a leaf: both are safe under exec->lock. */
        bool admitted = false;
        if (exec->active > 0 && !nxr__arbiter_contended(exec->arbiter, &exec->request)) {
            exec->joins++;
            admitted = true;
        } else if (exec->active == 0 &&
                   nxr__arbiter_try_acquire(exec->arbiter, &exec->request) == 0) {
            admitted = true;
        }
        if (admitted) {
            exec->active++;
            exec->batches++;
            nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
            nxr__executor_retain(&exec->executor);
            return 0;
        }
    }
    d->link = NULL;
    if (exec->deferred_tail != NULL)
        exec->deferred_tail->link = d;
    else
        exec->deferred_head = d;
    exec->deferred_tail = d;
    exec->deferred++;
    exec->deferrals++;
    /* Someone must take the permit for it: whoever is acquiring now, or
     * the last operation in flight when it leaves, or (neither) an item of
     * the domain's own executor started here. */
    if (exec->active == 0 && !exec->acquiring) {
        exec->acquiring = true;
        start = true;
    }
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    if (start)
        start_acquirer(exec);
    return NXR__DEFERRED;
}

int nxr__exec_enter(struct nxr__exec *exec)
{
    /* A body never waits for a permit: it could wait for one the operation
     * it belongs to keeps from being granted. The nesting rules refuse
     * every call that would admit from a body (nxr_executor.h) before it
     * gets here; this keeps that true for any future caller. */
    if (nxr__tls.depth > 0)
        return NXR_EREENTRANT;
    int rc = exec->arbiter != NULL ? enter_arbitrated(exec) : enter_guarded(exec);
    if (rc == 0)
        nxr__executor_retain(&exec->executor);
    return rc;
}

void nxr__exec_leave(struct nxr__exec *exec)
{
    /* A reader's request for the counters page, answered while this
     * operation still counts as active: once it is released below, a
     * destroy's drain may free the domain and the runtime. */
    nxr__exec_answer_readers(exec);
    nxr__executor_release(&exec->executor);
    nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    bool start = leave_locked(exec);
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    if (start)
        start_acquirer(exec);
}

void nxr__exec_leave_batch(struct nxr__exec *exec)
{
    if (exec->arbiter != NULL) {
        nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
        exec->batches--;
        nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    }
    nxr__exec_leave(exec);
}

void nxr__exec_admission_stats(struct nxr__exec *exec, struct nxr__admission_stats *out)
{
    nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    /* A hand-over's hold is no operation: acquiring with operations in
     * flight happens only during one (acquiring is set with none in flight,
     * and nothing enters until the grant), and there is one hold then. */
    const unsigned hold = exec->acquiring && exec->active > 0;
    *out = (struct nxr__admission_stats){.joins = exec->joins,
                                         .deferrals = exec->deferrals,
                                         .waits = exec->waits,
                                         .wait_ns = exec->wait_ns,
                                         .wait_max_ns = exec->wait_max_ns,
                                         .active = exec->active - hold,
                                         .deferred = exec->deferred,
                                         .batches = exec->batches,
                                         .waiting = exec->waiting,
                                         .acquiring = exec->acquiring,
                                         .handing_over = hold != 0};
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
}

bool nxr__exec_drain(struct nxr__exec *exec)
{
    bool waited = false;
    nxr__lock(&exec->lock, NXR__RANK_ADMISSION);
    while (exec->active > 0 || exec->acquiring) {
        waited = true;
        pthread_cond_wait(&exec->changed, &exec->lock);
    }
    nxr__unlock(&exec->lock, NXR__RANK_ADMISSION);
    return waited;
}
