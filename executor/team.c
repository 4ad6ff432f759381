/*
 * The built-in worker team (see internal/team.h).
 *
 * Protocol. A job is published in one 64-bit word, `job`: generation (high
 * 32 bits), "caller joins" (bit 31) and the number of workers taking part
 * (bits 0..30). One word, so that a worker can never pair a generation with
 * another job's count.
 *
 * Claimed slots. A region of n participants has n slots: slot s is the call
 * fn(arg, s, n). Slot s "belongs" to the caller (s == 0 when it joins) or to
 * worker s - offset, but nobody waits for its owner: every thread that
 * takes part (the caller, and each worker once it is awake) claims its own
 * slot first, then any slot still unclaimed, and runs what it claimed. So
 * a region costs about its serial time while its workers sleep, and the
 * dispatcher waits only for slots that some thread claimed and is running
 * (`remaining` counts all n slots down; every slot is claimed by somebody,
 * the caller included when it joins).
 *
 * Why a late worker touches nothing of a finished region. The region's
 * descriptor (fn's arg) may live on the dispatcher's stack and die when
 * nxr__team_run returns; fn/arg themselves are rewritten by the next
 * region. So a worker reads fn/arg and calls fn only after it has claimed a
 * slot, and the claim goes through team-owned memory tagged with the
 * generation: slots[s] holds the last generation that claimed slot s.
 * Before publishing generation G the dispatcher stores G - 1 ("unclaimed in
 * G") into each worker-claimable slot of G (G itself into the caller's own
 * slot); claiming slot s for G is CAS(slots[s], G - 1 -> G). A region ends
 * only when remaining is 0, i.e. after all its n slots were claimed, so from
 * then on every slot of G holds G or later, and later dispatchers store only
 * values >= G: a worker that still tries to claim for G (it read job == G
 * and then slept) expects G - 1 and fails, without having read fn or arg.
 * A successful claim of G keeps G open (remaining cannot reach 0 before the
 * claimer finishes), so fn/arg and the descriptor stay valid while it runs.
 * The one residual hazard is generation wrap-around: a worker stalled for
 * exactly 2^32 regions between reading job and its CAS.
 *
 * Which slots a thread scans: its own first (locality: a loop's static share
 * for participant s is the same range every region), then the others in
 * order. Inside a slot, loops with the dynamic schedule and OUTER tasks hand
 * out chunks from their descriptor's counter; only a slot holder reaches it.
 *
 * Parking. Workers wait for work as the rhythm says (internal/rhythm.h: park
 * until shortly before the next predicted region, spin around it), or, with
 * a fixed spin bound (NXR_SPIN), spin at most `spin` iterations and park. A
 * worker that was not a participant of the last region parks at once. When
 * the rhythm's plans find nothing, or when a worker's spins keep arriving
 * after the caller took every slot (USELESS in a row: empty regions), it
 * polls: a timed park of POLL_NS, then one more try if regions came, else it
 * parks for good. So a stopped stream costs one poll, and a worker falls
 * back in step without anyone paying a wake-up call for it. Each worker parks on its own futex word
 * (`struct worker.wake_seq`) with its own `parked` flag. A region wakes only
 * its participants, workers [0, count), so a region never has more runnable
 * threads than participants. (One shared futex woken with INT_MAX woke them
 * all: on a domain with as many CPUs as workers, the extra worker took the
 * idle CPU and the participant queued behind the caller until the
 * scheduler's load balancer moved it, milliseconds later.) The wake-ups form
 * a tree: the dispatcher wakes workers 0 and 1, worker i wakes 2i+2 and 2i+3
 * when it sees the region, so the dispatcher makes at most two futex calls
 * before it runs its own slot. A worker busy with a queued item is a node
 * that would pass the wake-up on only when its item ends, so whoever wakes
 * it wakes its children instead (wake_pair: every worker a region needs is
 * woken, busy or parked; at most one futex call per participant then). A
 * dispatcher that takes part may make none (wake_for_joining_caller: a worker about to wake by
 * itself, or regions too short for a woken worker to arrive in time, are left alone). `parked` and
 * the published work (`job`, `queued`) form a Dekker pair (all seq_cst): the
 * worker sets parked then re-reads the work; a waker publishes the work then
 * reads parked. Either the waker sees the worker parked and wakes it
 * (bumping its wake_seq first), or the worker sees the work and does not
 * sleep; FUTEX_WAIT's compare on wake_seq closes the rest. Completion is the
 * mirror image: slots count `remaining` down, and the last one wakes the
 * dispatcher if it parked (`dispatcher_parked`).
 *
 * Task boundaries. A worker runs queued items one at a time and reads the
 * job word before each (run_one_item), so a published region starts on a
 * worker after the item it is running, whatever the FIFO still holds: the
 * wait a region has on a worker that runs items is bounded by one item.
 *
 * Submitted items. Asynchronous work is a FIFO of batches under queue_lock;
 * `queued` is a hint (1: the queue may hold unclaimed items) that workers
 * poll with the job word and that the submitter sets (seq_cst) before it
 * reads the workers' parked flags, so the same Dekker pair covers it. A worker claims one item at a
 * time, runs it without any lock held, and the one that finishes a batch's
 * last item calls its done callback, then counts the batch out.
 *
 * Lock order (ranks: base/internal/lock_rank.h): no two of run_lock,
 * queue_lock and start_lock are ever held
 * together. run_lock serialises dispatchers; queue_lock guards the batch
 * FIFO and the outstanding count; start_lock is used only during creation.
 */
#include "executor/internal/team.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/internal/lock_rank.h"
#include "domains/internal/cpuset.h"
#include "executor/internal/counters.h"
#include "executor/internal/rhythm.h"
#include "base/internal/build.h"
#include "base/internal/sys.h"
#include "base/nxr_status.h"

#define JOB_CALLER_JOINS (UINT64_C(1) << 31)
#define JOB_COUNT_MASK   (JOB_CALLER_JOINS - 1)
/* The dispatcher's join wait with the adaptive policy: pause iterations
 * before it parks on `remaining` (it waits only for slots being run). */
#define JOIN_SPIN 4096u
/* Useless spins in a row before a worker disengages (see worker_main), and
 * how soon after the publish a spinning worker must have found every slot
 * taken for the spin to count as useless (the caller outpaced it: an empty
 * region). Later than that it was preempted, not outpaced. */
#define USELESS       16u
#define USELESS_AFTER 1000u

struct slot {
    /* The last generation that claimed this slot (see the file comment):
     * claimed by at most two threads at once, so alone on its line. */
    _Alignas(NXR__CACHE_LINE) atomic_uint gen;
};

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
    _Alignas(NXR__CACHE_LINE) atomic_uint wake_seq;
    atomic_uint parked;
    /* While parked: the deadline of its timed park (the rhythm's), 0 when
     * it parked for good. Written before `parked` (see wake_worker). */
    _Atomic uint64_t wake_at;
    /* The last generation it has seen (the dispatcher's re-engage rule). */
    atomic_uint seen;
    /* 1 while it runs a queued item: it sees a new region only at the item's
     * end, so a waker wakes this worker's share of the tree itself (see
     * wake_pair). Its own Dekker pair with the job word (run_one_item). */
    atomic_uint busy;
    pthread_t thread;
    struct nxr__team *team;
    unsigned index;
    pid_t tid;
    /* Its counters (executor/internal/counters.h): written by this worker
     * only, on lines of their own, summed by nxr__team_counters_add_to. */
    _Alignas(NXR__CACHE_LINE) struct nxr__counters counters;
    /* The worker's last counter_clock reading (count_time); its own. */
    uint64_t mark;
};

struct nxr__team {
    /* Dispatcher writes, every worker polls: alone on its line. */
    _Alignas(NXR__CACHE_LINE) _Atomic uint64_t job;
    /* Read only by a thread holding a slot of the current region. */
    nxr__team_fn fn;
    void *arg;
    /* Instrumentation (nxr__team_regions): regions dispatched to workers,
     * and of those, dispatches made by a thread that was itself running a
     * region body (a nested fan-out, which nxr never intends). Written by
     * dispatchers next to fn/arg, which they write anyway; relaxed, read
     * only by tests and diagnostics. */
    atomic_ullong regions;
    atomic_ullong nested_regions;
    /* Instrumentation (nxr__team_late_arrivals): a participant that saw a
     * region and found every slot claimed. Relaxed. */
    atomic_ullong late_arrivals;
    /* The dispatcher's stall report (nxr__team_set_stall): after this long
     * waiting for its slots (0: never), stalled(stall_arg, slots left). */
    uint64_t stall_after_ns;
    void (*stalled)(void *arg, unsigned left, uint64_t waited_ns);
    void *stall_arg;
    /* Test hook (nxr__team_set_claim_hook); NULL almost always. */
    _Atomic(const struct nxr__team_claim_hook *) claim_hook;
    /* Participants count down; the dispatcher parks on it. */
    _Alignas(NXR__CACHE_LINE) atomic_uint remaining;
    atomic_uint dispatcher_parked;

    /* Submitters set, workers poll: 1 while the FIFO may hold items. */
    _Alignas(NXR__CACHE_LINE) atomic_uint queued;
    pthread_mutex_t queue_lock;
    pthread_cond_t drained;
    struct batch *head, *tail;
    size_t outstanding; /* batches not finished yet; under queue_lock */

    /* Publish times (dispatcher writes, idle workers read): own lines. */
    _Alignas(NXR__CACHE_LINE) struct nxr__rhythm rhythm;

    _Alignas(NXR__CACHE_LINE) atomic_bool stop;
    unsigned size;
    struct slot *slots; /* size + 1 */
    /* Read per wait: NXR__TEAM_SPIN_ADAPTIVE (the rhythm decides), else a
     * fixed bound; lowered to 0 by the oversubscription guard. */
    atomic_uint spin;
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
    nxr__lock(&team->start_lock, NXR__RANK_TEAM_START);
    if (status != 0 && team->start_status == 0) {
        team->start_status = status;
        snprintf(team->start_err, sizeof(team->start_err), "%s", msg);
    }
    team->reported++;
    pthread_cond_signal(&team->start_cond);
    nxr__unlock(&team->start_lock, NXR__RANK_TEAM_START);
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

/* The clock behind the busy and spin counters: not read at all when the
 * counters are compiled out. */
static inline uint64_t counter_clock(void)
{
#if NXR_COUNTERS
    return nxr__now_ns();
#else
    return 0;
#endif
}

/* Charges the time since w's last mark to its counter c (busy or spin) and
 * marks now. One clock read ends one stretch and starts the next. A park
 * marks when it returns: parked time is neither. */
static inline void count_time(struct worker *w, enum nxr__counter c)
{
    uint64_t now = counter_clock();
    nxr__count_own(&w->counters, c, now - w->mark);
    w->mark = now;
}

/*
 * Ends a stretch that began with a spin which found region gen and went on
 * with its slots: one clock read, after the slots, instead of one at the
 * end of the spin too, which sat on the region's critical path (between
 * seeing the region and claiming a slot; bench/forkjoin's counter-cost
 * row). The stretch is split at the region's publish time, which the
 * dispatcher stamps anyway (nxr__rhythm_start): spin before it, busy after.
 * A publish outside the stretch (before the spin began: the region was
 * already there; or not known) makes it all busy. The stamp is read after
 * the slots, off the critical path; the ring could only have moved on by
 * then if NXR__RHYTHM_HISTORY more regions ran meanwhile, and a stamp of
 * those is later than the slots' end, so it falls outside too.
 */
static inline void count_spin_then_busy(struct worker *w, const struct nxr__rhythm *rhythm,
                                        uint32_t gen)
{
#if NXR_COUNTERS
    uint64_t now = counter_clock();
    uint64_t published = nxr__rhythm_started(rhythm, gen);
    uint64_t busy_from = published > w->mark && published <= now ? published : w->mark;
    nxr__count_own(&w->counters, NXR__COUNT_SPIN_NS, busy_from - w->mark);
    nxr__count_own(&w->counters, NXR__COUNT_BUSY_NS, now - busy_from);
    w->mark = now;
#else
    (void)w, (void)rhythm, (void)gen;
#endif
}

/* Parks w until there is work or, with deadline != 0, until the deadline
 * passed. Returns true (and the job word) when there is work. */
static bool park(struct nxr__team *team, struct worker *w, uint32_t seen, uint64_t deadline,
                 uint64_t *job)
{
    for (;;) {
        /* Acquire: pairs with wake_worker's increment (nothing is published
         * through it; the work itself is re-read below). */
        unsigned seq = atomic_load_explicit(&w->wake_seq, memory_order_acquire);
        /* Relaxed: published by the seq_cst store of parked just below. */
        atomic_store_explicit(&w->wake_at, deadline, memory_order_relaxed);
        /* seq_cst store then seq_cst loads: the Dekker pair with
         * wake_worker (see the file comment). */
        atomic_store_explicit(&w->parked, 1, memory_order_seq_cst);
        if (has_work_parking(team, seen, job)) {
            atomic_store_explicit(&w->parked, 0, memory_order_relaxed);
            return true;
        }
        bool woken = true;
        nxr__count_own(&w->counters, NXR__COUNT_PARKS, 1);
        if (deadline == 0)
            nxr__futex_wait(&w->wake_seq, seq);
        else
            woken = nxr__futex_wait_until(&w->wake_seq, seq, deadline);
        if (woken)
            nxr__count_own(&w->counters, NXR__COUNT_WAKES, 1);
        w->mark = counter_clock();
        /* Relaxed: a stale 1 only costs a waker one spurious FUTEX_WAKE. */
        atomic_store_explicit(&w->parked, 0, memory_order_relaxed);
        if (deadline != 0) {
            /* Woken or timed out after the deadline: the timer was that late
             * (a lower bound when a region woke us first). */
            nxr__rhythm_woke(&team->rhythm, deadline, nxr__now_ns());
            if (!woken)
                return has_work(team, seen, job);
        }
    }
}

/* Spins until there is work (true) or `iterations` pauses passed. */
static bool spin_for(struct nxr__team *team, uint32_t seen, unsigned iterations, uint64_t *job)
{
    for (unsigned i = 0; i < iterations; i++) {
        if (has_work(team, seen, job))
            return true;
        nxr__cpu_relax();
    }
    return false;
}

/* Spins until there is work (true) or the clock passes `until`. Past
 * `overdue` it yields the CPU at each clock check: a region that is late
 * may be late because the caller waits for this very CPU (on a machine
 * whose other CPUs are taken by other processes, a worker woken ahead can
 * land on the caller's CPU and delay the region it is waiting for). */
static bool spin_until(struct nxr__team *team, uint32_t seen, uint64_t until, uint64_t overdue,
                       uint64_t *job)
{
    for (;;) {
        /* The clock (a vDSO read, ~20 ns) only every 32 pauses. */
        if (spin_for(team, seen, 32, job))
            return true;
        uint64_t now = nxr__now_ns();
        if (now >= until)
            return false;
        if (now >= overdue)
            sched_yield();
    }
}

/* How a worker's wait ended (worker_main's usefulness streak). */
enum arrival {
    /* It was spinning when the work came. Its spin is not charged yet (no
     * clock read between finding the work and claiming a slot): w->mark is
     * still where the spin began, and worker_main closes the stretch. */
    ARRIVED_SPINNING,
    ARRIVED_PARKED,  /* from a park (woken, or its timed park ended) */
    ARRIVED_POLLING, /* from a disengaged worker's poll */
};

/* A disengaged worker polls this often while regions keep coming (and
 * parks for good at the first poll that finds none): no wake-up call is
 * needed to bring it back, and a stopped stream costs one more wake-up. */
#define POLL_NS 1000000u

/* Waits for work (see has_work) and returns the job word. A worker that was
 * not a participant of the last region it saw parks at once. A participant
 * spins the fixed bound, or follows the rhythm's plans (see the file
 * comment) unless `engaged` is false (its spins have been useless, see
 * worker_main); a participant whose plans found nothing, or that is not
 * engaged, polls once (POLL_NS) before it parks for good. */
static uint64_t await_work(struct nxr__team *team, struct worker *w, uint32_t seen,
                           bool participant, bool engaged, enum arrival *how)
{
    uint64_t job;
    *how = ARRIVED_SPINNING;
    /* Relaxed: a stale bound only changes how long this one wait spins. */
    unsigned spin = atomic_load_explicit(&team->spin, memory_order_relaxed);
    if (!participant || spin == 0) {
        /* Nothing to spin for. */
    } else if (spin != NXR__TEAM_SPIN_ADAPTIVE) {
        /* Found: the spin stays open (see ARRIVED_SPINNING). */
        if (spin_for(team, seen, spin, &job))
            return job;
        count_time(w, NXR__COUNT_SPIN_NS);
    } else {
        /* Re-plan when the plan had to guess the region's end (the caller
         * was still running its share), and once after a predicted region
         * did not come. At most four plans. */
        unsigned missed = 0;
        for (int plans = 0; engaged && plans < 4; plans++) {
            struct nxr__idle_plan plan;
            nxr__rhythm_plan(&team->rhythm, seen, nxr__now_ns(), missed, &plan);
            if (plan.sleep_until != 0) {
                if (park(team, w, seen, plan.sleep_until, &job)) {
                    *how = ARRIVED_PARKED;
                    return job;
                }
                /* Woken late: the region may be late too; spin a little. */
                uint64_t floor = nxr__now_ns() + NXR__RHYTHM_MARGIN_MIN_NS;
                if (plan.spin_until < floor)
                    plan.spin_until = floor;
            }
            /* Overdue: well past the predicted publish (not just past it: in
             * a back-to-back stream the region comes a moment after). */
            uint64_t overdue = plan.expected > UINT64_MAX - NXR__RHYTHM_SLEEP_MIN_NS
                                   ? UINT64_MAX
                                   : plan.expected + NXR__RHYTHM_SLEEP_MIN_NS;
            /* Found: the spin stays open (see ARRIVED_SPINNING). */
            if (spin_until(team, seen, plan.spin_until, overdue, &job))
                return job;
            count_time(w, NXR__COUNT_SPIN_NS);
            if (plan.end_known && (!plan.predicted || ++missed > 1))
                break;
        }
        if (park(team, w, seen, nxr__now_ns() + POLL_NS, &job)) {
            *how = ARRIVED_POLLING;
            return job;
        }
    }
    *how = ARRIVED_PARKED;
    park(team, w, seen, 0, &job);
    return job;
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

/* The wake-up tree (see the file comment): workers [first, first + 2) that
 * take part in a region of `count` workers. A parked one is woken and wakes
 * its own children when it sees the region; one that is neither parked nor
 * busy is awake and does the same. One busy with a queued item sees the
 * region only when the item ends, however long it runs, so its children
 * are woken here instead (and theirs, if they are busy too). The caller
 * published the region first (seq_cst): a worker that is not busy when read
 * here re-reads the job word after it sets busy (run_one_item), so it sees
 * the region before it starts another item. Each worker is visited at most
 * once per call: at most `count` futex calls, two when nobody is busy. */
static void wake_pair(struct nxr__team *team, unsigned first, unsigned count)
{
    for (unsigned i = first; i < first + 2 && i < count; i++) {
        struct worker *w = &team->workers[i];
        /* seq_cst: the waker's half of the busy Dekker pair. */
        if (!wake_worker(w) && atomic_load_explicit(&w->busy, memory_order_seq_cst) != 0)
            wake_pair(team, 2 * i + 2, count);
    }
}

/*
 * The wake-ups of a dispatcher that takes part in region gen (published at
 * now). It does not wait for any worker (it claims what is left), and a
 * wake-up call to an idle CPU costs it microseconds on its critical path
 * (~10 us measured on a loaded VM), so a parked participant is left alone
 *  - when its timed park (the rhythm's) ends within the lead: it comes by
 *    itself, on time or nearly;
 *  - when the last regions were short (nxr__rhythm_short): they are over
 *    before a woken worker could take part, and the caller runs them about
 *    as fast alone. A worker in a timed park comes back by itself (its plan
 *    or its poll, POLL_NS); one parked for good is woken once it has missed
 *    REENGAGE regions, so that it picks up the rhythm of a stream that
 *    started again.
 * A worker left alone is a delay at most, never a lost wake-up: the region
 * does not need it. Only with the adaptive policy: a fixed spin bound
 * (NXR_SPIN, or 0 on shared CPUs) keeps the plain rule, every parked
 * participant woken. wake_at is read after parked (acquire via seq_cst): the
 * deadline of the park that set this parked flag, or a later one.
 */
#define REENGAGE 16u

static void wake_for_joining_caller(struct nxr__team *team, unsigned count, uint32_t gen,
                                    uint64_t now)
{
    const uint64_t soon = now + nxr__rhythm_lead(&team->rhythm);
    int short_regions = -1; /* not asked yet: only when someone is parked */
    for (unsigned i = 0; i < 2 && i < count; i++) {
        struct worker *w = &team->workers[i];
        if (atomic_load_explicit(&w->parked, memory_order_seq_cst) == 0) {
            /* Busy with an item: its children would wait for the item's end
             * (see wake_pair). */
            if (atomic_load_explicit(&w->busy, memory_order_seq_cst) != 0)
                wake_pair(team, 2 * i + 2, count);
            continue;
        }
        /* Relaxed: see above; seen is a hint. */
        uint64_t at = atomic_load_explicit(&w->wake_at, memory_order_relaxed);
        if (at != 0 && at <= soon)
            continue;
        if (at != 0 || gen - atomic_load_explicit(&w->seen, memory_order_relaxed) < REENGAGE) {
            if (short_regions < 0)
                short_regions = nxr__rhythm_short(&team->rhythm, gen);
            if (short_regions)
                continue;
        }
        wake_worker(w);
    }
}

/* Claims slot s for generation gen (see the file comment). */
static bool claim(struct nxr__team *team, unsigned s, uint32_t gen)
{
    unsigned expected = gen - 1;
    /* Relaxed: exclusivity needs only the RMW's atomicity (one CAS from
     * gen - 1 succeeds); fn/arg were acquired with the job word, and the
     * region's end is ordered by the claimer's decrement of remaining. */
    return atomic_compare_exchange_strong_explicit(&team->slots[s].gen, &expected, gen,
                                                   memory_order_relaxed, memory_order_relaxed);
}

static void finish_slot(struct nxr__team *team)
{
    /* seq_cst: release so the dispatcher sees this slot's writes, and the
     * Dekker pair with dispatcher_parked. */
    if (atomic_fetch_sub_explicit(&team->remaining, 1, memory_order_seq_cst) == 1 &&
        atomic_load_explicit(&team->dispatcher_parked, memory_order_seq_cst) != 0)
        nxr__futex_wake(&team->remaining, 1);
}

/* Claims and runs slots of generation gen (n slots, [lo, n) claimable):
 * `first` first, then the others in order. Returns how many it ran. */
static unsigned run_slots(struct nxr__team *team, uint32_t gen, unsigned lo, unsigned n,
                          unsigned first)
{
    unsigned ran = 0;
    for (unsigned k = 0, s = first; k < n - lo; k++, s = s + 1 < n ? s + 1 : lo) {
        if (!claim(team, s, gen))
            continue;
        in_region++;
        team->fn(team->arg, s, n);
        in_region--;
        finish_slot(team);
        ran++;
    }
    return ran;
}

/* Claims and runs one queued item as worker w, which has seen generation
 * `seen`; false when the FIFO is empty or a newer region is published (the
 * worker takes the region first: one item is the most a published region
 * waits for on a worker that runs items). */
static bool run_one_item(struct nxr__team *team, struct worker *w, uint32_t seen)
{
    if (atomic_load_explicit(&team->queued, memory_order_relaxed) == 0)
        return false;
    /* seq_cst store then seq_cst load: the worker's half of the busy Dekker
     * pair with wake_pair (a waker that reads busy == 0 is sure this load
     * sees its region). */
    atomic_store_explicit(&w->busy, 1, memory_order_seq_cst);
    if ((uint32_t)(atomic_load_explicit(&team->job, memory_order_seq_cst) >> 32) != seen) {
        atomic_store_explicit(&w->busy, 0, memory_order_relaxed);
        return false;
    }
    nxr__lock(&team->queue_lock, NXR__RANK_TEAM_QUEUE);
    struct batch *b = team->head;
    if (b == NULL) {
        atomic_store_explicit(&team->queued, 0, memory_order_relaxed);
        nxr__unlock(&team->queue_lock, NXR__RANK_TEAM_QUEUE);
        /* Relaxed: a stale 1 only makes a waker wake this worker's children. */
        atomic_store_explicit(&w->busy, 0, memory_order_relaxed);
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
    nxr__unlock(&team->queue_lock, NXR__RANK_TEAM_QUEUE);

    b->fn(b->arg, index);
    /* acq_rel: the finisher of the last item sees every other item's writes
     * before it calls done. */
    if (atomic_fetch_sub_explicit(&b->remaining, 1, memory_order_acq_rel) == 1) {
        nxr_done_fn done = b->done;
        void *done_arg = b->done_arg;
        free(b);
        if (done != NULL)
            done(done_arg);
        nxr__lock(&team->queue_lock, NXR__RANK_TEAM_QUEUE);
        if (--team->outstanding == 0)
            pthread_cond_broadcast(&team->drained);
        nxr__unlock(&team->queue_lock, NXR__RANK_TEAM_QUEUE);
    }
    /* Relaxed: see above. The next item's busy store re-reads the job word
     * in order, and so does the parking re-check. */
    atomic_store_explicit(&w->busy, 0, memory_order_relaxed);
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
    nxr__counter_home = (struct nxr__counter_home){.block = &w->counters, .team = team};
    w->mark = counter_clock();

    int rc = pin_and_verify(w, msg, sizeof(msg));
    report_start(team, rc, msg);
    if (rc != 0)
        return NULL;

    /* Timed waits (the rhythm's parks) should end on time, not 50 us late. */
    nxr__timer_slack_self(1000);
    uint32_t seen = 0;
    bool participant = false;
    /* Regions it reached spinning and found fully claimed, in a row: past
     * USELESS the caller is faster than a spinning worker (empty regions),
     * so it stops spinning for them and polls instead. A poll that finds a
     * region, or a wake-up, lets it try one spin again. */
    unsigned useless = 0;
    for (;;) {
        enum arrival how;
        uint64_t job = await_work(team, w, seen, participant, useless < USELESS, &how);
        if (how != ARRIVED_SPINNING && useless >= USELESS)
            useless = USELESS - 1;
        bool spin_open = how == ARRIVED_SPINNING;
        if ((uint32_t)(job >> 32) != seen) {
            seen = (uint32_t)(job >> 32);
            /* Relaxed: a hint for the dispatcher's re-engage rule. */
            atomic_store_explicit(&w->seen, seen, memory_order_relaxed);
            /* Acquire pairs with the release store of stop in team_stop. */
            if (atomic_load_explicit(&team->stop, memory_order_acquire))
                return NULL;
            unsigned count = (unsigned)(job & JOB_COUNT_MASK);
            participant = w->index < count;
            if (participant) {
                unsigned offset = (job & JOB_CALLER_JOINS) ? 1u : 0u;
                /* Acquire pairs with the release store in set_claim_hook. */
                const struct nxr__team_claim_hook *hook =
                    atomic_load_explicit(&team->claim_hook, memory_order_acquire);
                if (hook != NULL)
                    hook->fn(hook->arg, w->index, seen);
                wake_pair(team, 2 * w->index + 2, count);
                if (run_slots(team, seen, offset, count + offset, w->index + offset) != 0) {
                    if (how == ARRIVED_SPINNING)
                        count_spin_then_busy(w, &team->rhythm, seen);
                    else
                        count_time(w, NXR__COUNT_BUSY_NS);
                    spin_open = false;
                    useless = 0;
                } else {
                    /* Relaxed: a counter. */
                    atomic_fetch_add_explicit(&team->late_arrivals, 1, memory_order_relaxed);
                    uint64_t start = nxr__rhythm_started(&team->rhythm, seen);
                    if (how == ARRIVED_SPINNING && start != 0 &&
                        nxr__now_ns() - start < USELESS_AFTER && useless < USELESS)
                        useless++;
                }
            }
        }
        /* A spin that found work but ran no slot (items, a region taken by
         * others or not its own) was spinning all along: charged as such
         * before any item runs, and before a park could restart the mark. */
        if (spin_open)
            count_time(w, NXR__COUNT_SPIN_NS);
        /* Items one at a time, looking at the job word between them (in
         * run_one_item): a region published meanwhile starts after the item
         * in hand, whatever the FIFO still holds. */
        bool ran = false;
        while (run_one_item(team, w, seen))
            ran = true;
        if (ran)
            count_time(w, NXR__COUNT_BUSY_NS);
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
    free(team->slots);
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
            : aligned_alloc(NXR__CACHE_LINE, (sizeof(*team) + NXR__CACHE_LINE - 1) /
                                                 NXR__CACHE_LINE * NXR__CACHE_LINE);
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
    team->workers =
        nxr__fault_hit(NXR_FAULT_ALLOC)
            ? NULL
            : aligned_alloc(NXR__CACHE_LINE, (size_t)opts->size * sizeof(*team->workers));
    if (team->workers != NULL)
        memset(team->workers, 0, (size_t)opts->size * sizeof(*team->workers));
    /* aligned_alloc: struct slot is one cache line. */
    team->slots =
        team->workers == NULL || nxr__fault_hit(NXR_FAULT_ALLOC)
            ? NULL
            : aligned_alloc(NXR__CACHE_LINE, ((size_t)opts->size + 1) * sizeof(*team->slots));
    if (team->slots != NULL) {
        for (unsigned i = 0; i <= opts->size; i++)
            atomic_init(&team->slots[i].gen, 0);
    }
    nxr__rhythm_init(&team->rhythm);
    team->cpus = team->slots == NULL ? NULL : nxr__cpuset_dup(cpus);
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
    nxr__lock(&team->start_lock, NXR__RANK_TEAM_START);
    while (team->reported < started)
        pthread_cond_wait(&team->start_cond, &team->start_lock);
    if (rc == 0 && team->start_status != 0) {
        rc = team->start_status;
        snprintf(err, errsz, "%s", team->start_err);
    }
    nxr__unlock(&team->start_lock, NXR__RANK_TEAM_START);

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
    nxr__lock(&team->queue_lock, NXR__RANK_TEAM_QUEUE);
    while (team->outstanding != 0) {
        waited = true;
        pthread_cond_wait(&team->drained, &team->queue_lock);
    }
    nxr__unlock(&team->queue_lock, NXR__RANK_TEAM_QUEUE);
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
    nxr__lock(&team->queue_lock, NXR__RANK_TEAM_QUEUE);
    if (team->tail != NULL)
        team->tail->link = b;
    else
        team->head = b;
    team->tail = b;
    team->outstanding++;
    /* seq_cst: the publish half of the parking Dekker pair (wake_worker
     * reads the parked flags after it). */
    atomic_store_explicit(&team->queued, 1, memory_order_seq_cst);
    nxr__unlock(&team->queue_lock, NXR__RANK_TEAM_QUEUE);
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

bool nxr__team_worker_parked_for_good(const struct nxr__team *team, unsigned i)
{
    /* seq_cst parked, then wake_at (written before parked): the deadline
     * of the park that set the flag. Tests only. */
    return nxr__team_worker_parked(team, i) &&
           atomic_load_explicit(&team->workers[i].wake_at, memory_order_relaxed) == 0;
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
    nxr__lock(&team->run_lock, NXR__RANK_TEAM_RUN);
    const unsigned slots = nworkers + offset;
    team->fn = fn;
    team->arg = arg;
    atomic_store_explicit(&team->remaining, slots, memory_order_relaxed);
    atomic_store_explicit(&team->dispatcher_parked, 0, memory_order_relaxed);
    uint64_t job = atomic_load_explicit(&team->job, memory_order_relaxed);
    uint32_t gen = (uint32_t)(job >> 32) + 1;
    /* Relaxed: published by the seq_cst store of job below. "Unclaimed in
     * gen" for the workers' slots, "claimed" for the caller's own (see the
     * file comment for why only these two values are ever stored). */
    for (unsigned s = offset; s < slots; s++)
        atomic_store_explicit(&team->slots[s].gen, gen - 1, memory_order_relaxed);
    if (caller_joins)
        atomic_store_explicit(&team->slots[0].gen, gen, memory_order_relaxed);
    const uint64_t now = nxr__now_ns();
    nxr__rhythm_start(&team->rhythm, gen, now);
    /* seq_cst (a release, and the publish half of the parking Dekker pair):
     * fn, arg, remaining and the slots are visible to a worker that sees
     * gen. */
    atomic_store_explicit(&team->job,
                          ((uint64_t)gen << 32) | (caller_joins ? JOB_CALLER_JOINS : 0) | nworkers,
                          memory_order_seq_cst);
    /* Wake the participants only, and of those only the first two: the
     * woken ones wake the rest (wake_pair). The others stay parked. */
    if (caller_joins &&
        atomic_load_explicit(&team->spin, memory_order_relaxed) == NXR__TEAM_SPIN_ADAPTIVE)
        wake_for_joining_caller(team, nworkers, gen, now);
    else
        wake_pair(team, 0, nworkers);

    if (caller_joins) {
        in_region++;
        fn(arg, 0, slots);
        in_region--;
        finish_slot(team);
        /* Then every slot nobody has claimed yet: the region does not wait
         * for workers that are not awake. */
        run_slots(team, gen, 1, slots, 1);
    }

    /* Wait for the slots still running: spin, then park on `remaining`. */
    unsigned left;
    unsigned spin = atomic_load_explicit(&team->spin, memory_order_relaxed);
    if (spin == NXR__TEAM_SPIN_ADAPTIVE)
        spin = JOIN_SPIN;
    for (unsigned i = 0; i < spin; i++) {
        /* Acquire pairs with the participants' decrements. */
        if (atomic_load_explicit(&team->remaining, memory_order_acquire) == 0)
            goto out_done;
        nxr__cpu_relax();
    }
    /* Parked until the last running slot ends: bounded by the slots' own
     * bodies (every slot is claimed by a thread that runs it). A region
     * body that never returns is reported once past the stall threshold. */
    atomic_store_explicit(&team->dispatcher_parked, 1, memory_order_seq_cst);
    uint64_t report_at = team->stall_after_ns == 0 ? 0 : now + team->stall_after_ns;
    while ((left = atomic_load_explicit(&team->remaining, memory_order_seq_cst)) != 0) {
        if (report_at == 0) {
            nxr__futex_wait(&team->remaining, left);
        } else if (!nxr__futex_wait_until(&team->remaining, left, report_at) &&
                   atomic_load_explicit(&team->remaining, memory_order_seq_cst) != 0) {
            report_at = 0;
            team->stalled(team->stall_arg, left, nxr__now_ns() - now);
        }
    }
out_done:
    nxr__rhythm_end(&team->rhythm, gen, nxr__now_ns());
    nxr__unlock(&team->run_lock, NXR__RANK_TEAM_RUN);
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

void nxr__team_counters_add_to(const struct nxr__team *team, uint64_t sum[NXR__COUNT_N])
{
    for (unsigned i = 0; i < team->size; i++)
        nxr__counters_add_to(&team->workers[i].counters, sum);
}

uint64_t nxr__team_late_arrivals(const struct nxr__team *team)
{
    /* Relaxed: a counter; pairs with nothing. */
    return atomic_load_explicit(&team->late_arrivals, memory_order_relaxed);
}

void nxr__team_set_stall(struct nxr__team *team, uint64_t after_ns,
                         void (*stalled)(void *arg, unsigned left, uint64_t waited_ns), void *arg)
{
    team->stalled = stalled;
    team->stall_arg = arg;
    team->stall_after_ns = stalled == NULL ? 0 : after_ns;
}

void nxr__team_set_claim_hook(struct nxr__team *team, const struct nxr__team_claim_hook *hook)
{
    /* Release pairs with the acquire load in worker_main: the hook's fields
     * are visible to a worker that sees the pointer. */
    atomic_store_explicit(&team->claim_hook, hook, memory_order_release);
}
