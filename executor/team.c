/*
 * The built-in worker team (see internal/team.h).
 *
 * Protocol. A job is published in one 64-bit word, `job`: generation (high
 * 32 bits), "caller joins" (bit 31) and the number of workers taking part
 * (bits 0..30). One word, so that a worker can never pair a generation with
 * another job's count. fn/arg are plain fields: only participants read them,
 * and the dispatcher rewrites them only after every participant finished.
 *
 * Parking. Workers spin at most `spin` iterations on `job`, then park, each
 * on its own futex word (`struct worker.wake_seq`) with its own `parked`
 * flag. A region wakes exactly its participants, workers [0, count): a
 * worker that sits the region out (the caller took its place, or the loop
 * has fewer chunks than workers) is not woken, so a region never has more
 * runnable threads than participants. (One shared futex woken with INT_MAX
 * woke them all: on a domain with as many CPUs as workers, the extra worker
 * took the idle CPU and the participant queued behind the caller until the
 * scheduler's load balancer moved it, milliseconds later.) `parked` and the
 * published work (`job`, `queued`) form a Dekker pair (all seq_cst): the
 * worker sets parked then re-reads the work; the dispatcher publishes the
 * work then reads parked. Either the dispatcher sees the worker parked and
 * wakes it (bumping its wake_seq first), or the worker sees the work and
 * does not sleep; FUTEX_WAIT's compare on wake_seq closes the rest.
 * Completion is the mirror image: participants count `remaining` down, and
 * the last one wakes the dispatcher if it parked (`dispatcher_parked`).
 *
 * Submitted items. Asynchronous work is a FIFO of batches under queue_lock;
 * `queued` is a hint (1: the queue may hold unclaimed items) that workers
 * poll with the job word and that the submitter sets (seq_cst) before it
 * reads the workers' parked flags, so the same Dekker pair covers it. A worker claims one item at a
 * time, runs it without any lock held, and the one that finishes a batch's
 * last item calls its done callback, then counts the batch out.
 *
 * Lock order: no two of run_lock, queue_lock and start_lock are ever held
 * together. run_lock serialises dispatchers; queue_lock guards the batch
 * FIFO and the outstanding count; start_lock is used only during creation.
 */
#include "executor/internal/team.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "domains/internal/cpuset.h"
#include "base/internal/sys.h"
#include "base/nxr_status.h"

#define CACHE_LINE       64
#define JOB_CALLER_JOINS (UINT64_C(1) << 31)
#define JOB_COUNT_MASK   (JOB_CALLER_JOINS - 1)

struct batch {
    nxr_item_fn fn;
    void *arg;
    size_t count;
    size_t next; /* next unclaimed index; under queue_lock */
    _Atomic size_t remaining;
    nxr_done_fn done;
    void *done_arg;
    struct batch *link;
};

struct worker {
    /* This worker's futex word and parked flag (see the file comment): on
     * their own line, read by dispatchers on every region, written by the
     * worker only when it parks and by a waker only when it is parked. */
    _Alignas(CACHE_LINE) atomic_uint wake_seq;
    atomic_uint parked;
    pthread_t thread;
    struct nxr__team *team;
    unsigned index;
    pid_t tid;
};

struct nxr__team {
    /* Dispatcher writes, every worker polls: alone on its line. */
    _Alignas(CACHE_LINE) _Atomic uint64_t job;
    nxr__team_fn fn;
    void *arg;
    /* Instrumentation (nxr__team_regions): regions dispatched to workers,
     * and of those, dispatches made by a thread that was itself running a
     * region body (a nested fan-out, which nxr never intends). Written by
     * dispatchers next to fn/arg, which they write anyway; relaxed, read
     * only by tests and diagnostics. */
    atomic_ullong regions;
    atomic_ullong nested_regions;
    /* Participants count down; the dispatcher parks on it. */
    _Alignas(CACHE_LINE) atomic_uint remaining;
    atomic_uint dispatcher_parked;

    /* Submitters set, workers poll: 1 while the FIFO may hold items. */
    _Alignas(CACHE_LINE) atomic_uint queued;
    pthread_mutex_t queue_lock;
    pthread_cond_t drained;
    struct batch *head, *tail;
    size_t outstanding; /* batches not finished yet; under queue_lock */

    _Alignas(CACHE_LINE) atomic_bool stop;
    unsigned size;
    atomic_uint spin; /* read per wait; lowered to 0 by the oversubscription guard */
    int domain_id;
    struct nxr__cpumask mask;
    hwloc_bitmap_t cpus;
    struct worker *workers;
    pthread_mutex_t run_lock;

    /* Creation handshake only. */
    pthread_mutex_t start_lock;
    pthread_cond_t start_cond;
    unsigned reported;
    int start_status;
    char start_err[256];
};

/* > 0 while the calling thread runs a region body, as a worker or as a
 * dispatcher taking part (feeds nested_regions). */
static _Thread_local unsigned in_region;

static void report_start(struct nxr__team *team, int status, const char *msg)
{
    pthread_mutex_lock(&team->start_lock);
    if (status != 0 && team->start_status == 0) {
        team->start_status = status;
        snprintf(team->start_err, sizeof(team->start_err), "%s", msg);
    }
    team->reported++;
    pthread_cond_signal(&team->start_cond);
    pthread_mutex_unlock(&team->start_lock);
}

/* Pins the calling worker to the whole domain set and reads it back. */
static int pin_and_verify(struct worker *w, char *msg, size_t msgsz)
{
    struct nxr__team *team = w->team;
    char want[256], got[256];
    int rc = nxr__setaffinity_self(team->mask.set, team->mask.size);
    if (rc != 0) {
        snprintf(msg, msgsz, "domain %d worker %u: sched_setaffinity to CPUs '%s' failed: %s",
                 team->domain_id, w->index, nxr__cpuset_list(team->cpus, want, sizeof(want)),
                 nxr_strerror(rc));
        return NXR_EPLACEMENT;
    }
    hwloc_bitmap_t actual = nxr__cpuset_alloc();
    if (actual == NULL) {
        snprintf(msg, msgsz, "domain %d worker %u: out of memory", team->domain_id, w->index);
        return -ENOMEM;
    }
    rc = nxr__affinity_self(actual);
    if (rc == 0 && !hwloc_bitmap_isequal(actual, team->cpus)) {
        snprintf(msg, msgsz, "domain %d worker %u: affinity reads back as '%s', expected '%s'",
                 team->domain_id, w->index, nxr__cpuset_list(actual, got, sizeof(got)),
                 nxr__cpuset_list(team->cpus, want, sizeof(want)));
        rc = NXR_EPLACEMENT;
    } else if (rc != 0) {
        snprintf(msg, msgsz, "domain %d worker %u: reading its affinity back failed: %s",
                 team->domain_id, w->index, nxr_strerror(rc));
        if (rc != -ENOMEM)
            rc = NXR_EPLACEMENT; /* the mask could not be verified */
    }
    hwloc_bitmap_free(actual);
    return rc;
}

/* True when there is something for a worker to do: a job newer than `seen`
 * (stored in *job) or queued items. */
static bool has_work(struct nxr__team *team, uint32_t seen, uint64_t *job)
{
    /* Acquire pairs with the (seq_cst) publish in nxr__team_run: fn/arg
     * written before it are visible once the new generation is. */
    *job = atomic_load_explicit(&team->job, memory_order_acquire);
    if ((uint32_t)(*job >> 32) != seen)
        return true;
    /* Relaxed: only a hint; the FIFO itself is read under queue_lock. */
    return atomic_load_explicit(&team->queued, memory_order_relaxed) != 0;
}

/* has_work for the parking re-check: seq_cst loads, the worker's half of
 * the Dekker pair with a dispatcher's or submitter's seq_cst publish
 * followed by its read of `parked`. */
static bool has_work_parking(struct nxr__team *team, uint32_t seen, uint64_t *job)
{
    *job = atomic_load_explicit(&team->job, memory_order_seq_cst);
    if ((uint32_t)(*job >> 32) != seen)
        return true;
    return atomic_load_explicit(&team->queued, memory_order_seq_cst) != 0;
}

/* Waits for work (see has_work): spins at most team->spin iterations, then
 * parks on w's own futex word. Returns the job word. */
static uint64_t await_work(struct nxr__team *team, struct worker *w, uint32_t seen)
{
    uint64_t job;
    /* Relaxed: a stale bound only changes how long this one wait spins. */
    unsigned spin = atomic_load_explicit(&team->spin, memory_order_relaxed);
    for (unsigned i = 0; i < spin; i++) {
        if (has_work(team, seen, &job))
            return job;
        nxr__cpu_relax();
    }
    for (;;) {
        /* Acquire: pairs with wake_worker's increment (nothing is published
         * through it; the work itself is re-read below). */
        unsigned seq = atomic_load_explicit(&w->wake_seq, memory_order_acquire);
        /* seq_cst store then seq_cst loads: the Dekker pair with
         * wake_worker (see the file comment). */
        atomic_store_explicit(&w->parked, 1, memory_order_seq_cst);
        if (has_work_parking(team, seen, &job)) {
            atomic_store_explicit(&w->parked, 0, memory_order_relaxed);
            return job;
        }
        nxr__futex_wait(&w->wake_seq, seq);
        /* Relaxed: a stale 1 only costs a waker one spurious FUTEX_WAKE. */
        atomic_store_explicit(&w->parked, 0, memory_order_relaxed);
    }
}

/* Wakes w if it is parked. The caller published the work (job or queued)
 * with a seq_cst store first: the other half of the Dekker pair. */
static bool wake_worker(struct worker *w)
{
    if (atomic_load_explicit(&w->parked, memory_order_seq_cst) == 0)
        return false;
    /* seq_cst: ordered after the load above; makes a FUTEX_WAIT that read
     * the old value return at once. */
    atomic_fetch_add_explicit(&w->wake_seq, 1, memory_order_seq_cst);
    nxr__futex_wake(&w->wake_seq, 1);
    return true;
}

static void finish_share(struct nxr__team *team)
{
    /* seq_cst: release so the dispatcher sees this participant's writes, and
     * the Dekker pair with dispatcher_parked. */
    if (atomic_fetch_sub_explicit(&team->remaining, 1, memory_order_seq_cst) == 1 &&
        atomic_load_explicit(&team->dispatcher_parked, memory_order_seq_cst) != 0)
        nxr__futex_wake(&team->remaining, 1);
}

/* Claims and runs one queued item; false when the FIFO is empty. */
static bool run_one_item(struct nxr__team *team)
{
    if (atomic_load_explicit(&team->queued, memory_order_relaxed) == 0)
        return false;
    pthread_mutex_lock(&team->queue_lock);
    struct batch *b = team->head;
    if (b == NULL) {
        atomic_store_explicit(&team->queued, 0, memory_order_relaxed);
        pthread_mutex_unlock(&team->queue_lock);
        return false;
    }
    size_t index = b->next++;
    if (b->next == b->count) { /* fully claimed: unlink, it finishes on its own */
        team->head = b->link;
        if (team->head == NULL) {
            team->tail = NULL;
            atomic_store_explicit(&team->queued, 0, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock(&team->queue_lock);

    b->fn(b->arg, index);
    /* acq_rel: the finisher of the last item sees every other item's writes
     * before it calls done. */
    if (atomic_fetch_sub_explicit(&b->remaining, 1, memory_order_acq_rel) == 1) {
        nxr_done_fn done = b->done;
        void *done_arg = b->done_arg;
        free(b);
        if (done != NULL)
            done(done_arg);
        pthread_mutex_lock(&team->queue_lock);
        if (--team->outstanding == 0)
            pthread_cond_broadcast(&team->drained);
        pthread_mutex_unlock(&team->queue_lock);
    }
    return true;
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    struct nxr__team *team = w->team;
    char name[16], msg[256];
    snprintf(name, sizeof(name), "nxr-d%d-w%u", team->domain_id, w->index);
    pthread_setname_np(pthread_self(), name);
    w->tid = (pid_t)syscall(SYS_gettid);

    int rc = pin_and_verify(w, msg, sizeof(msg));
    report_start(team, rc, msg);
    if (rc != 0)
        return NULL;

    uint32_t seen = 0;
    for (;;) {
        uint64_t job = await_work(team, w, seen);
        if ((uint32_t)(job >> 32) != seen) {
            seen = (uint32_t)(job >> 32);
            /* Acquire pairs with the release store of stop in team_stop. */
            if (atomic_load_explicit(&team->stop, memory_order_acquire))
                return NULL;
            unsigned count = (unsigned)(job & JOB_COUNT_MASK);
            if (w->index < count) {
                unsigned offset = (job & JOB_CALLER_JOINS) ? 1u : 0u;
                in_region++;
                team->fn(team->arg, w->index + offset, count + offset);
                in_region--;
                finish_share(team);
            }
        }
        while (run_one_item(team))
            ;
    }
}

/* Tells every started worker to exit and joins it. */
static void team_stop(struct nxr__team *team, unsigned started)
{
    atomic_store_explicit(&team->stop, true, memory_order_release);
    uint64_t job = atomic_load_explicit(&team->job, memory_order_relaxed);
    /* seq_cst: the publish half of the parking Dekker pair. */
    atomic_store_explicit(&team->job, job + (UINT64_C(1) << 32), memory_order_seq_cst);
    for (unsigned i = 0; i < started; i++)
        wake_worker(&team->workers[i]);
    for (unsigned i = 0; i < started; i++)
        pthread_join(team->workers[i].thread, NULL);
}

/* The team's locks and condition variables: 0, or a negative errno with none
 * of them left initialised. */
static int team_sync_init(struct nxr__team *team)
{
    int rc = nxr__mutex_init(&team->run_lock);
    if (rc != 0)
        return rc;
    if ((rc = nxr__mutex_init(&team->queue_lock)) != 0)
        goto out_run_lock;
    if ((rc = nxr__cond_init(&team->drained)) != 0)
        goto out_queue_lock;
    if ((rc = nxr__mutex_init(&team->start_lock)) != 0)
        goto out_drained;
    if ((rc = nxr__cond_init(&team->start_cond)) != 0)
        goto out_start_lock;
    return 0;

out_start_lock:
    pthread_mutex_destroy(&team->start_lock);
out_drained:
    pthread_cond_destroy(&team->drained);
out_queue_lock:
    pthread_mutex_destroy(&team->queue_lock);
out_run_lock:
    pthread_mutex_destroy(&team->run_lock);
    return rc;
}

static void team_free(struct nxr__team *team)
{
    nxr__cpumask_free(&team->mask);
    if (team->cpus != NULL)
        hwloc_bitmap_free(team->cpus);
    pthread_mutex_destroy(&team->run_lock);
    pthread_mutex_destroy(&team->queue_lock);
    pthread_cond_destroy(&team->drained);
    pthread_mutex_destroy(&team->start_lock);
    pthread_cond_destroy(&team->start_cond);
    free(team->workers);
    free(team);
}

int nxr__team_create(struct nxr__team **out, hwloc_const_bitmap_t cpus,
                     const struct nxr__team_opts *opts, char *err, size_t errsz)
{
    *out = NULL;
    if (opts->size == 0 || hwloc_bitmap_iszero(cpus))
        return -EINVAL;
    /* aligned_alloc: the struct has cache-line-aligned members. */
    struct nxr__team *team =
        nxr__fault_hit(NXR_FAULT_ALLOC)
            ? NULL
            : aligned_alloc(CACHE_LINE, (sizeof(*team) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE);
    if (team == NULL)
        return -ENOMEM;
    memset(team, 0, sizeof(*team));
    team->size = opts->size;
    atomic_init(&team->spin, opts->spin);
    team->domain_id = opts->domain_id;
    int rc = team_sync_init(team);
    if (rc != 0) {
        snprintf(err, errsz, "domain %d: could not initialise the team's locks: %s",
                 team->domain_id, nxr_strerror(rc));
        free(team);
        return rc;
    }
    /* aligned_alloc: struct worker has a cache-line-aligned member. */
    team->workers = nxr__fault_hit(NXR_FAULT_ALLOC)
                        ? NULL
                        : aligned_alloc(CACHE_LINE, (size_t)opts->size * sizeof(*team->workers));
    if (team->workers != NULL)
        memset(team->workers, 0, (size_t)opts->size * sizeof(*team->workers));
    team->cpus = team->workers == NULL ? NULL : nxr__cpuset_dup(cpus);
    rc = team->cpus == NULL ? -ENOMEM : nxr__cpumask_from_bitmap(&team->mask, cpus);
    if (rc != 0) {
        team_free(team);
        return rc;
    }

    unsigned started = 0;
    for (; started < team->size; started++) {
        struct worker *w = &team->workers[started];
        w->team = team;
        w->index = started;
        rc = nxr__thread_create(&w->thread, worker_main, w);
        if (rc != 0) {
            snprintf(err, errsz, "domain %d: could not start worker %u: %s", team->domain_id,
                     started, nxr_strerror(rc));
            break;
        }
    }
    /* Every started worker reports exactly once, success or failure. */
    pthread_mutex_lock(&team->start_lock);
    while (team->reported < started)
        pthread_cond_wait(&team->start_cond, &team->start_lock);
    if (rc == 0 && team->start_status != 0) {
        rc = team->start_status;
        snprintf(err, errsz, "%s", team->start_err);
    }
    pthread_mutex_unlock(&team->start_lock);

    if (rc != 0) {
        team_stop(team, started);
        team_free(team);
        return rc;
    }
    *out = team;
    return 0;
}

bool nxr__team_drain(struct nxr__team *team)
{
    bool waited = false;
    pthread_mutex_lock(&team->queue_lock);
    while (team->outstanding != 0) {
        waited = true;
        pthread_cond_wait(&team->drained, &team->queue_lock);
    }
    pthread_mutex_unlock(&team->queue_lock);
    return waited;
}

void nxr__team_destroy(struct nxr__team *team)
{
    if (team == NULL)
        return;
    nxr__team_drain(team);
    team_stop(team, team->size);
    team_free(team);
}

int nxr__team_submit(struct nxr__team *team, nxr_item_fn fn, void *arg, size_t count,
                     nxr_done_fn done, void *done_arg)
{
    if (count == 0) {
        if (done != NULL)
            done(done_arg);
        return 0;
    }
    struct batch *b = nxr__malloc(sizeof(*b));
    if (b == NULL)
        return -ENOMEM;
    *b = (struct batch){.fn = fn, .arg = arg, .count = count, .done = done, .done_arg = done_arg};
    atomic_init(&b->remaining, count);
    pthread_mutex_lock(&team->queue_lock);
    if (team->tail != NULL)
        team->tail->link = b;
    else
        team->head = b;
    team->tail = b;
    team->outstanding++;
    /* seq_cst: the publish half of the parking Dekker pair (wake_worker
     * reads the parked flags after it). */
    atomic_store_explicit(&team->queued, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&team->queue_lock);
    /* Any worker may run any item: wake parked ones, at most one per item
     * (spinning workers find the items by themselves). */
    size_t woken = 0;
    for (unsigned i = 0; i < team->size && woken < count; i++)
        woken += wake_worker(&team->workers[i]);
    return 0;
}

void nxr__team_set_spin(struct nxr__team *team, unsigned spin)
{
    atomic_store_explicit(&team->spin, spin, memory_order_relaxed);
}

unsigned nxr__team_get_spin(const struct nxr__team *team)
{
    return atomic_load_explicit(&team->spin, memory_order_relaxed);
}

unsigned nxr__team_size(const struct nxr__team *team)
{
    return team->size;
}

pid_t nxr__team_worker_tid(const struct nxr__team *team, unsigned i)
{
    return i < team->size ? team->workers[i].tid : 0;
}

bool nxr__team_worker_parked(const struct nxr__team *team, unsigned i)
{
    /* seq_cst like the worker's store of the flag; read by tests only. */
    return i < team->size && atomic_load_explicit(&team->workers[i].parked, memory_order_seq_cst);
}

void nxr__team_run(struct nxr__team *team, nxr__team_fn fn, void *arg, unsigned n,
                   bool caller_joins)
{
    unsigned offset = caller_joins ? 1u : 0u;
    unsigned nworkers = n - offset;
    if (nworkers > team->size)
        nworkers = team->size;
    if (nworkers == 0) {
        in_region++;
        fn(arg, 0, 1);
        in_region--;
        return;
    }
    /* Relaxed: counters only; counted before run_lock so that a nested
     * dispatch onto this same team (which would wait on run_lock forever)
     * is still visible to whoever investigates the hang. */
    atomic_fetch_add_explicit(&team->regions, 1, memory_order_relaxed);
    if (in_region > 0)
        atomic_fetch_add_explicit(&team->nested_regions, 1, memory_order_relaxed);
    pthread_mutex_lock(&team->run_lock);
    team->fn = fn;
    team->arg = arg;
    atomic_store_explicit(&team->remaining, nworkers, memory_order_relaxed);
    atomic_store_explicit(&team->dispatcher_parked, 0, memory_order_relaxed);
    uint64_t job = atomic_load_explicit(&team->job, memory_order_relaxed);
    uint64_t gen = (job >> 32) + 1;
    /* seq_cst (a release, and the publish half of the parking Dekker pair):
     * fn, arg and remaining are visible to a worker that sees gen. */
    atomic_store_explicit(&team->job,
                          (gen << 32) | (caller_joins ? JOB_CALLER_JOINS : 0) | nworkers,
                          memory_order_seq_cst);
    /* Wake the participants only: workers [0, nworkers) take part (see
     * worker_main); the others stay parked. */
    for (unsigned i = 0; i < nworkers; i++)
        wake_worker(&team->workers[i]);

    if (caller_joins) {
        in_region++;
        fn(arg, 0, nworkers + 1);
        in_region--;
    }

    /* Wait for the participants: spin, then park on `remaining`. */
    unsigned left;
    unsigned spin = atomic_load_explicit(&team->spin, memory_order_relaxed);
    for (unsigned i = 0; i < spin; i++) {
        /* Acquire pairs with the participants' decrements. */
        if (atomic_load_explicit(&team->remaining, memory_order_acquire) == 0)
            goto out_done;
        nxr__cpu_relax();
    }
    atomic_store_explicit(&team->dispatcher_parked, 1, memory_order_seq_cst);
    while ((left = atomic_load_explicit(&team->remaining, memory_order_seq_cst)) != 0)
        nxr__futex_wait(&team->remaining, left);
out_done:
    pthread_mutex_unlock(&team->run_lock);
}

uint64_t nxr__team_regions(const struct nxr__team *team)
{
    /* Relaxed: a counter; pairs with nothing. */
    return atomic_load_explicit(&team->regions, memory_order_relaxed);
}

uint64_t nxr__team_nested_regions(const struct nxr__team *team)
{
    /* Relaxed: a counter; pairs with nothing. */
    return atomic_load_explicit(&team->nested_regions, memory_order_relaxed);
}
