/*
 * The overlap arbiter (see internal/arbiter.h for the contract and policy).
 *
 * State, all guarded by `lock` (a leaf lock: nothing else is locked while it
 * is held, and no caller code runs under it):
 *   held      the union of held non-exclusive permits. Holders are pairwise
 *             disjoint, so a grant ORs its words in and a release AND-NOTs
 *             them out, exactly, without per-holder records.
 *   queue     waiters in arrival order (doubly linked; records live on the
 *             waiting threads' stacks, so queueing allocates nothing).
 *   waiting   the union of queued non-exclusive requests, and
 *   exclusive_waiters the number of queued exclusive requests. Together
 *             they let a new request apply "overlaps no earlier waiter" in
 *             O(words) instead of walking the queue.
 * Invariant between operations: every queued waiter is blocked, i.e. the
 * scan of serve() would not grant it. It holds after enqueue (a request only
 * queues when blocked) and after every serve(). A release can unblock only a
 * waiter that overlaps the released set or an exclusive waiter (a waiter
 * blocked elsewhere stays blocked: its conflicting CPU is still held, or its
 * earlier waiter is still waiting), so release() skips the scan otherwise.
 *
 * Hand-off. serve() grants a waiter by unlinking it, updating `held`, then
 * storing w->granted (release) as its LAST write to the waiter, unless the
 * waiter is asleep: then the granter also signals w->cond, which is safe
 * because a sleeping waiter cannot leave before it re-takes the lock the
 * granter holds. A spinning waiter may return (and its stack frame die) as
 * soon as it sees the flag.
 */
#include "domains/internal/arbiter.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/internal/lock_rank.h"
#include "domains/internal/cpuset.h"
#include "domains/nxr_domains.h"
#include "base/internal/build.h"
#include "base/internal/sys.h"

/* A waiter spins this many pause iterations (a few microseconds) before it
 * sleeps: permits are often held for less than a sleep/wake round trip. */
#define SPIN_ITERATIONS 256

#define WORD_BITS  64
#define ULONG_BITS ((unsigned)(sizeof(unsigned long) * CHAR_BIT))

/* Debug-tier invariant checks (NXR_CHECKED builds); they cannot block. */
#if NXR__CHECKED_BUILD
#define ARB_CHECK(cond, msg) ((cond) ? (void)0 : fail(msg))
#else
#define ARB_CHECK(cond, msg) ((void)0)
#endif

struct waiter {
    struct waiter *prev, *next;
    const struct nxr__arbiter_request *req; /* NULL: the exclusive permit */
    bool sleeping;                          /* under lock: in (or entering) cond wait */
    atomic_bool granted;                    /* set once, by the granter */
    pthread_cond_t cond;
};

struct nxr__arbiter {
    /* One lock and everything it guards: the hot fields share lines on
     * purpose, every operation touches all of them under the lock. */
    pthread_mutex_t lock;
    unsigned nwords;            /* words in held/waiting: last CPU / 64 + 1 */
    unsigned holders;           /* held non-exclusive permits */
    bool exclusive;             /* the exclusive permit is held */
    unsigned exclusive_waiters; /* queued exclusive requests */
    unsigned nwaiters;
    /* nwaiters, readable without the lock (nxr__arbiter_contended's fast
     * path); written under the lock, relaxed: see contended(). */
    atomic_uint queued;
    unsigned waiting_lo, waiting_hi; /* words of `waiting` that may be non-zero */
    struct waiter *head, *tail;
    uint64_t *held;
    uint64_t *waiting;
    uint64_t grants, exclusive_grants, waits, busy, timeouts;
    /* Written by waiters that may not hold the lock (spin hand-off). */
    _Atomic uint64_t max_wait_ns, total_wait_ns;
    hwloc_bitmap_t universe;
};

#if NXR__CHECKED_BUILD
static void fail(const char *msg)
{
    fprintf(stderr, "nxr arbiter: %s\n", msg);
    abort();
}
#endif

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline const uint64_t *req_words(const struct nxr__arbiter_request *r)
{
    return r->heap != NULL ? r->heap : r->inline_words;
}

static inline bool overlaps(const uint64_t *set, const struct nxr__arbiter_request *r)
{
    const uint64_t *w = req_words(r);
    const uint64_t *s = set + r->first;
    for (unsigned i = 0; i < r->count; i++) {
        if ((s[i] & w[i]) != 0)
            return true;
    }
    return false;
}

/* ---- Request preparation (cold) ---------------------------------------- */

/* Word `i` (CPUs 64i..64i+63) of a bitmap, whatever the width of long. */
static uint64_t bitmap_word(hwloc_const_bitmap_t set, unsigned i)
{
    uint64_t word = 0;
    unsigned per = WORD_BITS / ULONG_BITS;
    for (unsigned k = 0; k < per; k++)
        word |= (uint64_t)hwloc_bitmap_to_ith_ulong(set, i * per + k) << (k * ULONG_BITS);
    return word;
}

static void request_clear(struct nxr__arbiter_request *r)
{
    memset(r, 0, sizeof(*r));
}

int nxr__arbiter_request_init_union(struct nxr__arbiter_request *r, const struct nxr__arbiter *a,
                                    const hwloc_const_bitmap_t *sets, size_t n)
{
    if (r == NULL)
        return -EINVAL;
    request_clear(r);
    if (a == NULL || sets == NULL || n == 0)
        return -EINVAL;
    int lo = -1, hi = -1;
    for (size_t i = 0; i < n; i++) {
        /* Inclusion in the (finite) universe also rules out infinite sets. */
        if (sets[i] == NULL || !hwloc_bitmap_isincluded(sets[i], a->universe))
            return -EINVAL;
        if (hwloc_bitmap_iszero(sets[i]))
            continue;
        int first = hwloc_bitmap_first(sets[i]), last = hwloc_bitmap_last(sets[i]);
        lo = lo < 0 || first < lo ? first : lo;
        hi = last > hi ? last : hi;
    }
    if (lo < 0)
        return -EINVAL; /* the union is empty */
    unsigned first = (unsigned)lo / WORD_BITS;
    unsigned count = (unsigned)hi / WORD_BITS - first + 1;
    uint64_t *words = r->inline_words;
    if (count > NXR__ARBITER_INLINE_WORDS) {
        words = nxr__calloc(count, sizeof(*words));
        if (words == NULL)
            return -ENOMEM;
        r->heap = words;
    }
    for (size_t i = 0; i < n; i++) {
        for (unsigned k = 0; k < count; k++)
            words[k] |= bitmap_word(sets[i], first + k);
    }
    r->first = first;
    r->count = count;
    r->owner = a;
    return 0;
}

int nxr__arbiter_request_init(struct nxr__arbiter_request *r, const struct nxr__arbiter *a,
                              hwloc_const_bitmap_t cpus)
{
    if (cpus == NULL) {
        if (r != NULL)
            request_clear(r);
        return -EINVAL;
    }
    return nxr__arbiter_request_init_union(r, a, &cpus, 1);
}

void nxr__arbiter_request_fini(struct nxr__arbiter_request *r)
{
    if (r == NULL)
        return;
    free(r->heap);
    request_clear(r);
}

/* ---- Lifecycle ---------------------------------------------------------- */

int nxr__arbiter_create(struct nxr__arbiter **out, hwloc_const_bitmap_t universe)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (universe == NULL || hwloc_bitmap_iszero(universe) || hwloc_bitmap_weight(universe) < 0)
        return -EINVAL; /* weight is -1 for an infinite set */
    int last = hwloc_bitmap_last(universe);
    if (last < 0 || last > NXR_CPU_ID_MAX)
        return -EINVAL;
    unsigned nwords = (unsigned)last / WORD_BITS + 1;

    struct nxr__arbiter *a = nxr__calloc(1, sizeof(*a));
    if (a == NULL)
        return -ENOMEM;
    /* held and waiting in one allocation: 2 * nwords words. */
    a->held = nxr__calloc(2 * (size_t)nwords, sizeof(uint64_t));
    if (a->held == NULL)
        goto out_free_arbiter;
    a->waiting = a->held + nwords;
    a->universe = nxr__cpuset_dup(universe);
    if (a->universe == NULL)
        goto out_free_words;
    int rc = nxr__mutex_init(&a->lock);
    if (rc != 0) {
        hwloc_bitmap_free(a->universe);
        free(a->held);
        free(a);
        return rc;
    }
    a->nwords = nwords;
    a->waiting_lo = nwords;
    a->waiting_hi = 0;
    atomic_init(&a->queued, 0);
    atomic_init(&a->max_wait_ns, 0);
    atomic_init(&a->total_wait_ns, 0);
    *out = a;
    return 0;

out_free_words:
    free(a->held);
out_free_arbiter:
    free(a);
    return -ENOMEM;
}

void nxr__arbiter_destroy(struct nxr__arbiter *a)
{
    if (a == NULL)
        return;
    ARB_CHECK(a->holders == 0 && !a->exclusive, "destroyed while permits are held");
    ARB_CHECK(a->head == NULL, "destroyed while requests are waiting");
    pthread_mutex_destroy(&a->lock);
    hwloc_bitmap_free(a->universe);
    free(a->held);
    free(a);
}

/* ---- Queue and grants (lock held) --------------------------------------- */

static void waiting_add(struct nxr__arbiter *a, const struct nxr__arbiter_request *r)
{
    const uint64_t *w = req_words(r);
    for (unsigned i = 0; i < r->count; i++)
        a->waiting[r->first + i] |= w[i];
    if (r->first < a->waiting_lo)
        a->waiting_lo = r->first;
    if (r->first + r->count > a->waiting_hi)
        a->waiting_hi = r->first + r->count;
}

static void waiting_clear(struct nxr__arbiter *a)
{
    if (a->waiting_lo < a->waiting_hi)
        memset(a->waiting + a->waiting_lo, 0,
               (a->waiting_hi - a->waiting_lo) * sizeof(*a->waiting));
    a->waiting_lo = a->nwords;
    a->waiting_hi = 0;
}

/* Grantable when queued behind nothing it conflicts with: the test a new
 * request must pass (every queued waiter is earlier than it). */
static inline bool grantable_now(const struct nxr__arbiter *a, const struct nxr__arbiter_request *r)
{
    if (r == NULL)
        return !a->exclusive && a->holders == 0 && a->head == NULL;
    if (a->exclusive || overlaps(a->held, r))
        return false;
    return a->head == NULL || (a->exclusive_waiters == 0 && !overlaps(a->waiting, r));
}

static inline void take(struct nxr__arbiter *a, const struct nxr__arbiter_request *r)
{
    a->grants++;
    if (r == NULL) {
        a->exclusive = true;
        a->exclusive_grants++;
        return;
    }
    const uint64_t *w = req_words(r);
    uint64_t *h = a->held + r->first;
    for (unsigned i = 0; i < r->count; i++)
        h[i] |= w[i];
    a->holders++;
}

static void enqueue(struct nxr__arbiter *a, struct waiter *w)
{
    w->next = NULL;
    w->prev = a->tail;
    if (a->tail != NULL)
        a->tail->next = w;
    else
        a->head = w;
    a->tail = w;
    a->nwaiters++;
    atomic_store_explicit(&a->queued, a->nwaiters, memory_order_relaxed);
    if (w->req == NULL)
        a->exclusive_waiters++;
    else
        waiting_add(a, w->req);
}

static void unlink_waiter(struct nxr__arbiter *a, struct waiter *w)
{
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        a->head = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    else
        a->tail = w->prev;
    a->nwaiters--;
    atomic_store_explicit(&a->queued, a->nwaiters, memory_order_relaxed);
}

/*
 * Scans the queue in arrival order, granting every waiter that conflicts
 * with neither the held set nor an earlier waiter still waiting, and rebuilds
 * `waiting` / `exclusive_waiters` from those left. O(waiters x words).
 */
static void serve(struct nxr__arbiter *a)
{
    waiting_clear(a);
    a->exclusive_waiters = 0;
    bool earlier_waits = false;
    struct waiter *next;
    for (struct waiter *w = a->head; w != NULL; w = next) {
        next = w->next;
        bool grant;
        if (w->req == NULL)
            grant = !a->exclusive && a->holders == 0 && !earlier_waits;
        else
            grant = !a->exclusive && a->exclusive_waiters == 0 && !overlaps(a->held, w->req) &&
                    !overlaps(a->waiting, w->req);
        if (!grant) {
            earlier_waits = true;
            if (w->req == NULL)
                a->exclusive_waiters++;
            else
                waiting_add(a, w->req);
            continue;
        }
        unlink_waiter(a, w);
        take(a, w->req);
        /* Read everything needed from w before the flag: after the store a
         * spinning waiter may return and its frame (w) is gone. Pairs with
         * the acquire loads in wait_granted(). */
        bool sleeping = w->sleeping;
        atomic_store_explicit(&w->granted, true, memory_order_release);
        if (sleeping)
            pthread_cond_signal(&w->cond); /* w cannot leave: we hold the lock */
    }
}

static void record_wait(struct nxr__arbiter *a, uint64_t ns)
{
    /* Relaxed: statistics only, read under no ordering assumption. */
    atomic_fetch_add_explicit(&a->total_wait_ns, ns, memory_order_relaxed);
    uint64_t cur = atomic_load_explicit(&a->max_wait_ns, memory_order_relaxed);
    while (ns > cur && !atomic_compare_exchange_weak_explicit(
                           &a->max_wait_ns, &cur, ns, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/*
 * The slow path: called with the lock held and r not grantable; returns
 * with the lock released. deadline_ns == 0 means no deadline. Spins at most
 * SPIN_ITERATIONS without the lock, then sleeps on its own condition
 * variable until serve() grants it or the deadline passes.
 */
/* A waiter's stall report (nxr__arbiter_acquire_reporting): called once,
 * without the mutex, when the wait passes `at`; 0 or NULL fn: none. */
struct stall_note {
    uint64_t at;
    void (*fn)(void *arg, uint64_t waited_ns);
    void *arg;
};

static int wait_granted(struct nxr__arbiter *a, const struct nxr__arbiter_request *r,
                        uint64_t deadline_ns, struct stall_note *note)
{
    struct waiter w = {.req = r, .sleeping = false};
    atomic_init(&w.granted, false);
    uint64_t start = now_ns();
    enqueue(a, &w);
    a->waits++;
    nxr__unlock(&a->lock, NXR__RANK_ARBITER);

    int rc = 0;
    /* Acquire pairs with the release store in serve(). */
    for (unsigned i = 0; i < SPIN_ITERATIONS; i++) {
        if (atomic_load_explicit(&w.granted, memory_order_acquire))
            goto out_record;
        nxr__cpu_relax();
    }

    nxr__lock(&a->lock, NXR__RANK_ARBITER);
    if (!atomic_load_explicit(&w.granted, memory_order_acquire)) {
        /* Static initialiser: cannot fail, nothing to undo on any path. */
        w.cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
        w.sleeping = true;
        struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                              .tv_nsec = (long)(deadline_ns % 1000000000u)};
        while (!atomic_load_explicit(&w.granted, memory_order_acquire)) {
            if (note != NULL && note->fn != NULL && note->at != 0) {
                /* A timed sleep to the report's time, then the report
                 * without the mutex (it reads the arbiter's state through
                 * the stats call). The waiter stays queued meanwhile: a
                 * grant made then is seen by the loop's re-check. */
                struct timespec at = {.tv_sec = (time_t)(note->at / 1000000000u),
                                      .tv_nsec = (long)(note->at % 1000000000u)};
                if (pthread_cond_clockwait(&w.cond, &a->lock, CLOCK_MONOTONIC, &at) ==
                        ETIMEDOUT &&
                    !atomic_load_explicit(&w.granted, memory_order_acquire)) {
                    note->at = 0;
                    nxr__unlock(&a->lock, NXR__RANK_ARBITER);
                    note->fn(note->arg, now_ns() - start);
                    nxr__lock(&a->lock, NXR__RANK_ARBITER);
                }
                continue;
            }
            if (deadline_ns == 0) {
                pthread_cond_wait(&w.cond, &a->lock);
                continue;
            }
            if (pthread_cond_clockwait(&w.cond, &a->lock, CLOCK_MONOTONIC, &ts) == ETIMEDOUT &&
                !atomic_load_explicit(&w.granted, memory_order_acquire)) {
                /* Leave cleanly; those this waiter blocked may now go. */
                unlink_waiter(a, &w);
                serve(a);
                a->timeouts++;
                rc = -ETIMEDOUT;
                break;
            }
        }
        /* No granter can signal w any more: it is granted or unlinked. */
        pthread_cond_destroy(&w.cond);
    }
    nxr__unlock(&a->lock, NXR__RANK_ARBITER);

out_record:
    record_wait(a, now_ns() - start);
    return rc;
}

/* ---- Acquire / release -------------------------------------------------- */

enum mode { MODE_BLOCK, MODE_TRY, MODE_TIMED };

static inline int acquire(struct nxr__arbiter *a, const struct nxr__arbiter_request *r,
                          enum mode mode, uint64_t timeout_ns, struct stall_note *note)
{
    /* A thread that may wait for a permit holds no lock: a holder of that
     * lock could be what the permit waits for (base/internal/lock_rank.h). */
    if (mode == MODE_BLOCK || (mode == MODE_TIMED && timeout_ns > 0))
        NXR__LOCK_RANK_NONE("waiting for a permit");
    nxr__lock(&a->lock, NXR__RANK_ARBITER);
    if (grantable_now(a, r)) {
        take(a, r);
        nxr__unlock(&a->lock, NXR__RANK_ARBITER);
        return 0;
    }
    if (mode == MODE_TRY) {
        a->busy++;
        nxr__unlock(&a->lock, NXR__RANK_ARBITER);
        return -EBUSY;
    }
    uint64_t deadline = 0;
    if (mode == MODE_TIMED) {
        if (timeout_ns == 0) {
            a->timeouts++;
            nxr__unlock(&a->lock, NXR__RANK_ARBITER);
            return -ETIMEDOUT;
        }
        uint64_t now = now_ns();
        deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
    }
    return wait_granted(a, r, deadline, note);
}

static inline bool request_ok(const struct nxr__arbiter *a, const struct nxr__arbiter_request *r)
{
    return a != NULL && r != NULL && r->owner == a;
}

int nxr__arbiter_acquire(struct nxr__arbiter *a, const struct nxr__arbiter_request *r)
{
    if (!request_ok(a, r))
        return -EINVAL;
    return acquire(a, r, MODE_BLOCK, 0, NULL);
}

int nxr__arbiter_acquire_reporting(struct nxr__arbiter *a, const struct nxr__arbiter_request *r,
                                   uint64_t report_at_ns,
                                   void (*report)(void *arg, uint64_t waited_ns), void *arg)
{
    if (!request_ok(a, r))
        return -EINVAL;
    struct stall_note note = {.at = report_at_ns, .fn = report, .arg = arg};
    return acquire(a, r, MODE_BLOCK, 0, &note);
}

int nxr__arbiter_try_acquire(struct nxr__arbiter *a, const struct nxr__arbiter_request *r)
{
    if (!request_ok(a, r))
        return -EINVAL;
    return acquire(a, r, MODE_TRY, 0, NULL);
}

int nxr__arbiter_acquire_timed(struct nxr__arbiter *a, const struct nxr__arbiter_request *r,
                               uint64_t timeout_ns)
{
    if (!request_ok(a, r))
        return -EINVAL;
    return acquire(a, r, MODE_TIMED, timeout_ns, NULL);
}

void nxr__arbiter_release(struct nxr__arbiter *a, const struct nxr__arbiter_request *r)
{
    /* Always on: a foreign request's words could lie beyond `held`. */
    if (!request_ok(a, r)) {
        fprintf(stderr, "nxr arbiter: release of a request not prepared for this arbiter\n");
        abort();
    }
    const uint64_t *w = req_words(r);
    nxr__lock(&a->lock, NXR__RANK_ARBITER);
    uint64_t *h = a->held + r->first;
    for (unsigned i = 0; i < r->count; i++) {
        ARB_CHECK((h[i] & w[i]) == w[i], "release of a permit that is not held");
        h[i] &= ~w[i];
    }
    ARB_CHECK(a->holders > 0, "release with no permit held");
    a->holders--;
    /* See the file comment: only these waiters can have been unblocked. */
    if (a->head != NULL && (a->exclusive_waiters > 0 || overlaps(a->waiting, r)))
        serve(a);
    nxr__unlock(&a->lock, NXR__RANK_ARBITER);
}

bool nxr__arbiter_contended(struct nxr__arbiter *a, const struct nxr__arbiter_request *r)
{
    if (!request_ok(a, r))
        return false;
    /* Relaxed: a waiter that queued before this call in happens-before
     * order (the case fairness is about: the joiner learned of it) is seen by
     * coherence; one racing with it may be missed, and then the join simply
     * happened before it queued. */
    if (atomic_load_explicit(&a->queued, memory_order_relaxed) == 0)
        return false;
    nxr__lock(&a->lock, NXR__RANK_ARBITER);
    bool contended =
        a->head != NULL && (a->exclusive_waiters > 0 || overlaps(a->waiting, r));
    nxr__unlock(&a->lock, NXR__RANK_ARBITER);
    return contended;
}

int nxr__arbiter_acquire_exclusive(struct nxr__arbiter *a)
{
    if (a == NULL)
        return -EINVAL;
    return acquire(a, NULL, MODE_BLOCK, 0, NULL);
}

int nxr__arbiter_acquire_exclusive_reporting(struct nxr__arbiter *a, uint64_t report_at_ns,
                                             void (*report)(void *arg, uint64_t waited_ns),
                                             void *arg)
{
    if (a == NULL)
        return -EINVAL;
    struct stall_note note = {.at = report_at_ns, .fn = report, .arg = arg};
    return acquire(a, NULL, MODE_BLOCK, 0, &note);
}

int nxr__arbiter_try_acquire_exclusive(struct nxr__arbiter *a)
{
    if (a == NULL)
        return -EINVAL;
    return acquire(a, NULL, MODE_TRY, 0, NULL);
}

int nxr__arbiter_acquire_exclusive_timed(struct nxr__arbiter *a, uint64_t timeout_ns)
{
    if (a == NULL)
        return -EINVAL;
    return acquire(a, NULL, MODE_TIMED, timeout_ns, NULL);
}

void nxr__arbiter_release_exclusive(struct nxr__arbiter *a)
{
    if (a == NULL)
        return;
    nxr__lock(&a->lock, NXR__RANK_ARBITER);
    ARB_CHECK(a->exclusive, "release of the exclusive permit, which is not held");
    a->exclusive = false;
    if (a->head != NULL)
        serve(a);
    nxr__unlock(&a->lock, NXR__RANK_ARBITER);
}

/* ---- Instrumentation ---------------------------------------------------- */

void nxr__arbiter_stats(struct nxr__arbiter *a, struct nxr__arbiter_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (a == NULL)
        return;
    nxr__lock(&a->lock, NXR__RANK_ARBITER);
    out->grants = a->grants;
    out->exclusive_grants = a->exclusive_grants;
    out->waits = a->waits;
    out->busy = a->busy;
    out->timeouts = a->timeouts;
    out->holders = a->holders;
    out->waiters = a->nwaiters;
    out->exclusive_waiters = a->exclusive_waiters;
    out->exclusive_held = a->exclusive;
    nxr__unlock(&a->lock, NXR__RANK_ARBITER);
    /* Relaxed: statistics, see record_wait(). */
    out->max_wait_ns = atomic_load_explicit(&a->max_wait_ns, memory_order_relaxed);
    out->total_wait_ns = atomic_load_explicit(&a->total_wait_ns, memory_order_relaxed);
}

static int words_to_bitmap(const uint64_t *words, unsigned nwords, hwloc_bitmap_t out)
{
    hwloc_bitmap_zero(out);
    unsigned per = WORD_BITS / ULONG_BITS;
    for (unsigned i = 0; i < nwords; i++) {
        for (unsigned k = 0; k < per; k++) {
            unsigned long part = (unsigned long)(words[i] >> (k * ULONG_BITS));
            if (part != 0 && hwloc_bitmap_set_ith_ulong(out, i * per + k, part) != 0)
                return -ENOMEM;
        }
    }
    return 0;
}

int nxr__arbiter_snapshot(struct nxr__arbiter *a, hwloc_bitmap_t held, hwloc_bitmap_t waiting)
{
    if (a == NULL)
        return -EINVAL;
    int rc = 0;
    /* hwloc only allocates here; it never calls back, so the lock stays a leaf. */
    nxr__lock(&a->lock, NXR__RANK_ARBITER);
    if (held != NULL)
        rc = words_to_bitmap(a->held, a->nwords, held);
    if (rc == 0 && waiting != NULL)
        rc = words_to_bitmap(a->waiting, a->nwords, waiting);
    nxr__unlock(&a->lock, NXR__RANK_ARBITER);
    return rc;
}
