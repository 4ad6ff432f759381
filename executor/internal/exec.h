/*
 * Per-domain execution state and the per-thread execution marker.
 *
 * struct nxr__exec is what a context reaches: the executor contract in use
 * for the domain (the built-in team's, or a caller's) and the domain's facts
 * (struct nxr__domain_spec, domains/internal/plan.h: its id, CPU set, budget
 * and admission), which it points to. It is embedded in the runtime's domain
 * and lives as long as it.
 *
 * The marker (nxr__tls) says whether the calling thread is already inside a
 * task or loop body, and as which participant; it is how one fan-out level
 * is enforced without asking any pool.
 */
#ifndef NXR_INTERNAL_EXEC_H
#define NXR_INTERNAL_EXEC_H

#include <hwloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "domains/internal/arbiter.h"
#include "domains/internal/plan.h"
#include "domains/nxr_domains.h"
#include "executor/internal/counters.h"
#include "executor/internal/stall.h"
#include "executor/internal/team.h"
#include "executor/nxr_executor.h"

struct nxr__exec {
    struct nxr_executor executor; /* the contract work goes through */
    struct nxr__team *team;       /* the built-in team, or NULL */
    /* The attach reference on a caller's executor is held (taken by
     * nxr__exec_hold_executor, given back by nxr__exec_drop_executor). */
    bool executor_held;
    /* The domain's facts (id, node, CPU set, budget, admission), owned by
     * the domain that embeds this exec and read here, never copied: set
     * before admission init, immutable while the exec is in use. Its cpus
     * is NULL for a caller-managed domain; its budget is the most
     * participants one operation may use. */
    const struct nxr__domain_spec *spec;
    /* Unique per exec over the process's life (set at admission init): the
     * per-thread caller-placement cache keys on it, since a new domain may
     * reuse a freed one's address. */
    uint64_t serial;

    /* Admission (executor/admission.c). MANAGED and COOPERATIVE domains hold
     * a permit for `cpus` while any operation of theirs is in flight
     * (`active` > 0); CALLER_MANAGED ones hold `guard` instead. */
    struct nxr__arbiter *arbiter; /* NULL: not arbitrated */
    struct nxr__arbiter_request request;
    atomic_uint guard; /* caller-managed: 1 while an operation runs */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned active; /* operations in flight; under lock */
    /* A thread is acquiring the permit, or handing the deferred batches
     * it took to the executor (admission.c, hand_over); under lock. */
    bool acquiring;
    /* Batches submitted while they could neither join nor take the permit,
     * in submission order; admitted by whoever acquires the permit next
     * (admission.c, "Deferred batches"). Under lock. */
    struct nxr__deferred *deferred_head, *deferred_tail;
    unsigned deferred;
    unsigned batches; /* of `active`, submitted batches (the rest: regions) */
    unsigned waiting; /* threads waiting in admission for this domain */
    /* The runtime's stall reporter (executor/internal/stall.h); NULL: none.
     * Set before admission init, immutable after. */
    struct nxr__stall *stall;
    /* Counters, under lock (nxr__exec_admission_stats). */
    uint64_t joins;     /* operations admitted onto a permit already held */
    uint64_t deferrals; /* operations that could not join or take the
                         * permit at once and queued for it instead (behind
                         * an overlapping request, or deferred batches) */
    /* Admission waits (a region's caller that could not be admitted at
     * once), under lock: how many, their total and the longest (ns). */
    uint64_t waits;
    uint64_t wait_ns;
    uint64_t wait_max_ns;
    /* The budget operations use now: spec->budget at admission init (the
     * workers started), lowered and raised again (never above spec->budget)
     * when the runtime's budgets follow a changed CPU quota
     * (nxr_runtime_refresh_budget). Relaxed: each operation reads it once,
     * and takes effect from the next operation. */
    _Atomic unsigned budget_now;
    /* The domain's counters added by threads that are not its workers
     * (executor/internal/counters.h); each worker keeps its own. */
    struct nxr__counters counters;
    /* A reader's request for fresh counters (the runtime's counters page,
     * domains/internal/stats_page.h): when *asked differs from *answered
     * as an operation of the domain ends, nxr__exec_leave calls
     * answer(answer_arg), which refreshes the page (before the operation
     * stops counting as active: the runtime cannot be destroyed under it).
     * Two relaxed loads per operation, of a line written only when a reader
     * asks; no clock.
     * NULL: no page. Set before the first operation, immutable after. */
    const _Atomic uint32_t *asked;
    const _Atomic uint32_t *answered;
    void (*answer)(void *arg);
    void *answer_arg;
};

/* Answers a pending request for the counters page (see asked above): at
 * the end of every operation, those that run on the caller alone without a
 * permit too (a one-thread loop, call or step on a caller inside the
 * domain: under a one-CPU budget, every operation). */
static inline void nxr__exec_answer_readers(const struct nxr__exec *exec)
{
    /* Relaxed: a stale read only answers at the next operation's end. */
    if (exec->answer != NULL && atomic_load_explicit(exec->asked, memory_order_relaxed) !=
                                    atomic_load_explicit(exec->answered, memory_order_relaxed))
        exec->answer(exec->answer_arg);
}

/*
 * The per-thread body marker. depth > 0 while the thread runs a chunk or a
 * task of some operation (as a worker, or as a caller taking part); exec is
 * the domain whose operation that is. It is how the nesting rules are
 * applied without asking any pool (see nxr__exec_nesting).
 */
struct nxr__exec_tls {
    unsigned depth;               /* > 0: inside a task or loop body */
    unsigned participant;         /* the index the enclosing body runs as */
    const struct nxr__exec *exec; /* the domain of the enclosing body */
};

extern _Thread_local struct nxr__exec_tls nxr__tls;

/* Brackets a body: nxr__body_begin marks the thread as running a body of
 * exec as `participant` and returns the previous marker, which
 * nxr__body_end puts back (bodies nest: a task inside a region). */
static inline struct nxr__exec_tls nxr__body_begin(const struct nxr__exec *exec,
                                                   unsigned participant)
{
    struct nxr__exec_tls saved = nxr__tls;
    nxr__tls =
        (struct nxr__exec_tls){.depth = saved.depth + 1, .participant = participant, .exec = exec};
    return saved;
}

static inline void nxr__body_end(struct nxr__exec_tls saved)
{
    nxr__tls = saved;
}

/* An operation the caller runs alone, inside the domain and without a
 * permit (work for one thread): a body of exec's (participant 0), then the
 * end every operation has, which nxr__exec_leave gives the others: a
 * pending counters-page request answered. Every such path (a loop, a run,
 * a step) opens and closes through these, so none can forget the answer. */
static inline struct nxr__exec_tls nxr__exec_alone_begin(const struct nxr__exec *exec)
{
    return nxr__body_begin(exec, 0);
}

static inline void nxr__exec_alone_end(const struct nxr__exec *exec, struct nxr__exec_tls saved)
{
    nxr__body_end(saved);
    nxr__exec_answer_readers(exec);
}

/*
 * The nesting rule for an operation on exec requested by the calling thread
 * (see the table in executor/nxr_executor.h):
 *   NXR__NEST_NONE   not inside any body: the operation runs normally;
 *   NXR__NEST_INLINE inside a body of exec's own domain: loops and kernels
 *                    run in place on this thread (one fan-out level);
 *   NXR__NEST_OTHER  inside a body of another domain: nothing may run here
 *                    (its CPUs are not exec's), the caller returns
 *                    NXR_EREENTRANT.
 */
enum nxr__nesting {
    NXR__NEST_NONE = 0,
    NXR__NEST_INLINE = 1,
    NXR__NEST_OTHER = 2,
};

static inline enum nxr__nesting nxr__exec_nesting(const struct nxr__exec *exec)
{
    if (nxr__tls.depth == 0)
        return NXR__NEST_NONE;
    return nxr__tls.exec == exec ? NXR__NEST_INLINE : NXR__NEST_OTHER;
}

/*
 * True when the calling thread may run exec's work itself: its whole
 * affinity lies inside the domain's CPU set (always false for a
 * caller-managed domain, which declares no set). Cached per thread for
 * the mask it was computed for; every call reads the mask back (one
 * sched_getaffinity) and recomputes when it changed (executor/placement.c),
 * so the answer follows any change the thread makes to its own affinity.
 */
bool nxr__exec_caller_inside(const struct nxr__exec *exec);

/* Forgets the calling thread's cached answer (after the thread changed its
 * own affinity, e.g. bound itself to a domain). */
void nxr__exec_caller_forget(void);

/* ---- a domain's executor (executor/domain_executor.c) ---- */

/* NULL when ex keeps the contract, else the rule it breaks, as a phrase
 * ("has no submit operation") for the caller's detail. ex is the caller's
 * (an attached executor): it must be owned by the caller. */
const char *nxr__executor_broken_rule(const struct nxr_executor *ex);

/* Take / give back one reference (no-ops for an executor without them):
 * once while a domain is attached, once per operation in flight. Every
 * retain and release of an executor goes through these. Any thread; never
 * blocks beyond what the executor's own retain/release do. */
void nxr__executor_retain(const struct nxr_executor *ex);
void nxr__executor_release(const struct nxr_executor *ex);

/* Fills exec->executor with the built-in team's implementation of the
 * contract (owned by nxr, fans out, not re-entrant). */
void nxr__exec_use_team(struct nxr__exec *exec, struct nxr__team *team);

/* Makes ex (a caller's executor, kept to the contract) exec's. No
 * reference yet: the domain takes it once it is attached for good. */
void nxr__exec_use_attached(struct nxr__exec *exec, const struct nxr_executor *ex);

/* Takes the reference held while the domain is attached, and gives it
 * back (after the domain drained; a no-op when none is held). */
void nxr__exec_hold_executor(struct nxr__exec *exec);
void nxr__exec_drop_executor(struct nxr__exec *exec);

/*
 * Prepares exec's admission state: a permit request for exec->spec->cpus on
 * `arbiter` (MANAGED, COOPERATIVE), or the guard (CALLER_MANAGED, arbiter
 * ignored). 0, -EINVAL or -ENOMEM.
 */
int nxr__exec_admission_init(struct nxr__exec *exec, struct nxr__arbiter *arbiter);
void nxr__exec_admission_fini(struct nxr__exec *exec);

/*
 * A submitted batch as admission holds it while it waits for the domain's
 * permit: what to hand to the executor's submit once admitted, and what to
 * call when it never can be. Caller storage (it lives in the job), linked
 * by admission until admitted or failed.
 */
struct nxr__deferred {
    nxr_item_fn fn;
    void *arg;
    size_t count;
    nxr_done_fn done; /* as for the executor's submit */
    void *done_arg;
    /* The batch will not run (rc: why): called once, from any thread,
     * instead of done; the batch was never admitted (nothing to leave). */
    void (*fail)(void *done_arg, int rc);
    struct nxr__deferred *link;
};

/* nxr__exec_enter_batch's answer: the batch waits for the permit and will
 * be handed to the executor by admission (never a negative status). */
#define NXR__DEFERRED 1

/*
 * Admits a submitted batch without ever waiting: 0 when it joined the
 * permit the domain holds or took a free one (the caller hands it to the
 * executor and pairs it with nxr__exec_leave); NXR__DEFERRED when the
 * permit is held by an overlapping domain or an overlapping request waits
 * for it: admission keeps d and, once the domain's permit is granted again
 * (behind that request), retains the executor and submits d to it (or
 * calls d->fail). NXR_EADMISSION for a busy caller-managed domain,
 * NXR_EREENTRANT from inside a body. Any thread.
 */
int nxr__exec_enter_batch(struct nxr__exec *exec, struct nxr__deferred *d);

/*
 * Admits one operation (a region or a submitted batch) onto exec's executor
 * and retains the executor for it. MANAGED/COOPERATIVE: the first operation
 * in flight acquires the domain's permit (blocking), later ones join it
 * while no overlapping request waits for it, and otherwise queue behind that
 * request (blocking). A thread inside an operation's body never gets here
 * (the nesting rules refuse first; it would be NXR_EREENTRANT, never a
 * wait). CALLER_MANAGED: NXR_EADMISSION when an operation is already in
 * flight, from any thread. Every success is paired with nxr__exec_leave.
 */
int nxr__exec_enter(struct nxr__exec *exec);

/* Ends one admitted operation: releases the executor and, with the last
 * operation, the permit or the guard. Any thread (a done callback too).
 * nxr__exec_leave_batch ends a batch admitted by nxr__exec_enter_batch. */
void nxr__exec_leave(struct nxr__exec *exec);
void nxr__exec_leave_batch(struct nxr__exec *exec);

/* Admission counters of an arbitrated domain (a caller-managed one never
 * joins: zeroes), and the operations in flight now. Any thread. */
struct nxr__admission_stats {
    uint64_t joins;
    uint64_t deferrals;
    uint64_t waits;       /* admissions that waited, */
    uint64_t wait_ns;     /* how long in all */
    uint64_t wait_max_ns; /* and the longest */
    unsigned active;
    unsigned deferred; /* batches waiting for the permit now */
    unsigned batches;  /* of active, submitted batches */
    unsigned waiting;  /* threads waiting in admission now */
    bool acquiring;    /* someone is acquiring the permit now (or handing deferred batches over) */
    bool handing_over; /* the permit held, deferred batches being handed to the executor */
};
void nxr__exec_admission_stats(struct nxr__exec *exec, struct nxr__admission_stats *out);

/* The most participants one operation on exec may use now (budget_now). */
static inline unsigned nxr__exec_budget(const struct nxr__exec *exec)
{
    return atomic_load_explicit(&exec->budget_now, memory_order_relaxed);
}

/* Adds n to exec's counter c (executor/internal/counters.h): the calling
 * worker's own block, or the domain's shared one. */
static inline void nxr__exec_count(const struct nxr__exec *exec, enum nxr__counter c, uint64_t n)
{
    /* The counters are the one part of a domain's exec that its users
     * write through a const view (bodies see their domain as const). */
    nxr__count((struct nxr__counters *)&exec->counters, exec->team, c, n);
}

/* sum[c] = exec's counter c: its shared block and its team's workers'. */
void nxr__exec_counters(const struct nxr__exec *exec, uint64_t sum[NXR__COUNT_N]);

/* Blocks until exec has no operation in flight; returns whether it waited. */
bool nxr__exec_drain(struct nxr__exec *exec);

/* ---- operations on a domain (the runtime's context calls wrap these) ---- */

/* The argument rules of a loop and of a reduction, in one place: why the
 * arguments are bad (the detail a context reports), or NULL when they are
 * fine. opts may be NULL (the defaults). nxr__exec_parallel_for and
 * nxr__reduce_blocks apply them too, so no caller can skip them. */
const char *nxr__for_args_bad(size_t begin, size_t end, const struct nxr_for_opts *opts,
                              nxr_for_fn fn);
const char *nxr__reduce_args_bad(size_t begin, size_t end, size_t elem_size, const void *identity,
                                 const void *map, const void *combine, const void *result);

/*
 * A loop's shape, the one rule for a domain's loops and a span's: the grain
 * (opts->grain, or for 0 an even split over the participants: one chunk
 * each, four each for the dynamic schedule), the chunks it makes of len >= 1
 * iterations, and the participants, returned: min(chunks, budget,
 * max_threads, the cost hint's cap), at least 1.
 */
unsigned nxr__for_shape(const struct nxr_for_opts *opts, size_t len, unsigned budget, size_t *grain,
                        size_t *chunks);

/*
 * A loop over [begin, end) (see nxr_parallel_for_opts in runtime/nxr_ctx.h
 * for the contract). The decision, cheapest first: an empty range returns;
 * inside a body of this domain the loop runs in place, inside another
 * domain's body it is NXR_EREENTRANT; a loop that would use one thread runs
 * on the calling thread when that thread is inside the domain (no permit,
 * no hand-off) and on one worker otherwise; anything else is a region of
 * nxr__for_shape's participants under the domain's permit.
 */
int nxr__exec_parallel_for(struct nxr__exec *exec, size_t begin, size_t end,
                           const struct nxr_for_opts *opts, nxr_for_fn fn, void *arg);

int nxr__exec_parallel_reduce(struct nxr__exec *exec, size_t begin, size_t end, size_t grain,
                              size_t elem_size, const void *identity,
                              void (*map)(void *arg, size_t b, size_t e, void *partial),
                              void (*combine)(void *arg, void *result, const void *partial),
                              void *arg, void *result);

/*
 * The reduction itself, over any loop runner: blocks that depend only on
 * (begin, end, grain), one map call per block into its own partial, the
 * partials combined in block order on the calling thread. `loop(self, ...)`
 * runs the blocks (grain = one block, so each chunk is whole blocks): a
 * domain's nxr__exec_parallel_for, or a span's loop over several domains
 * (runtime/span.c), which therefore folds to the same bits.
 */
typedef int (*nxr__loop_fn)(void *self, size_t begin, size_t end, const struct nxr_for_opts *opts,
                            nxr_for_fn fn, void *arg);
int nxr__reduce_blocks(nxr__loop_fn loop, void *self, size_t begin, size_t end, size_t grain,
                       size_t elem_size, const void *identity,
                       void (*map)(void *arg, size_t b, size_t e, void *partial),
                       void (*combine)(void *arg, void *result, const void *partial), void *arg,
                       void *result);

/* nxr_run on exec (the contract is in runtime/nxr_ctx.h). */
int nxr__exec_run(struct nxr__exec *exec, enum nxr_mode mode, size_t count, nxr_task_fn fn,
                  void *arg);

/* nxr_submit on exec (the contract is in runtime/nxr_ctx.h). */
int nxr__exec_submit(struct nxr__exec *exec, size_t count, nxr_task_fn fn, void *arg,
                     nxr_job_t **out);

/*
 * Runs fn(arg) once on the domain: on the calling thread when it is inside
 * the domain or already inside a body of it, else on one of the domain's
 * workers (a one-participant region under the domain's permit, or the
 * guard of a caller-managed domain) while the caller waits. Returns fn's
 * status, NXR_EREENTRANT (inside another domain's body), or an admission or
 * executor error (fn did not run).
 */
int nxr__exec_call(struct nxr__exec *exec, int (*fn)(void *arg), void *arg);

/*
 * A region of `participants` on exec's executor (fn(arg, index) once per
 * participant) under the domain's permit, or the guard of a caller-managed
 * domain, held for the region: every region nxr installs goes through here.
 * The caller is outside any body. 0, or an admission or executor error.
 */
int nxr__exec_region(struct nxr__exec *exec, nxr_region_fn fn, void *arg, unsigned participants);

/* nxr__exec_call for a caller that already holds a permit covering the
 * domain (the process-wide exclusive permit, or the domain's own): no
 * admission, the worker is dispatched to directly. */
int nxr__exec_call_admitted(struct nxr__exec *exec, int (*fn)(void *arg), void *arg);

#endif /* NXR_INTERNAL_EXEC_H */
