/*
 * The built-in worker team: a fixed set of threads confined to one domain's
 * whole CPU set, each of which verified its own affinity before the team was
 * handed out. The team runs one fork-join job at a time: the dispatcher
 * publishes a job and bumps a generation counter; workers spin a bounded
 * number of iterations on that counter, then park on a futex, so an idle
 * team uses no CPU.
 */
#ifndef NXR_INTERNAL_TEAM_H
#define NXR_INTERNAL_TEAM_H

#include <hwloc.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "executor/internal/counters.h"
#include "executor/nxr_executor.h"

struct nxr__team;

/* One fork-join job: called once per participant with its index in
 * [0, nparticipants). Index 0 is the dispatcher when it takes part. */
typedef nxr_region_fn nxr__team_fn;

/* nxr__team_opts.spin: no fixed bound, the workers follow the rhythm of
 * the regions (executor/internal/rhythm.h). */
#define NXR__TEAM_SPIN_ADAPTIVE UINT_MAX

struct nxr__team_opts {
    int domain_id; /* for thread names and messages */
    unsigned size; /* workers to start, >= 1 */
    /* Pause iterations a worker that took part in the last region spins
     * before it parks (0: park at once), or NXR__TEAM_SPIN_ADAPTIVE. */
    unsigned spin;
};

/*
 * Starts opts->size workers, each confined to `cpus` and verified. Blocks
 * until every worker has reported. Returns 0; -EAGAIN (or another negative
 * errno) when a thread cannot be created; NXR_EPLACEMENT when a worker could
 * not set its affinity or read back a different one; -ENOMEM. On failure
 * every started worker has been joined, nothing is allocated and *out is NULL;
 * err names the worker and the CPUs.
 */
int nxr__team_create(struct nxr__team **out, hwloc_const_bitmap_t cpus,
                     const struct nxr__team_opts *opts, char *err, size_t errsz);

/* Drains submitted work, stops and joins every worker, frees the team. NULL
 * is a no-op. Must not be called while a job runs or from one of the team's
 * workers. */
void nxr__team_destroy(struct nxr__team *team);

unsigned nxr__team_size(const struct nxr__team *team);

/* Changes the spin bound for the team's next waits (the oversubscription
 * guard lowers it to 0 when another domain comes to share the CPUs). */
void nxr__team_set_spin(struct nxr__team *team, unsigned spin);
unsigned nxr__team_get_spin(const struct nxr__team *team);

/* The kernel thread id of worker i (for diagnostics and tests). */
pid_t nxr__team_worker_tid(const struct nxr__team *team, unsigned i);

/* True when worker i has parked: it set its parked flag and sleeps on its
 * futex word (or is about to). Instrumentation for tests: an idle team is
 * one whose every worker is parked. */
bool nxr__team_worker_parked(const struct nxr__team *team, unsigned i);

/* True when worker i is parked for good: no timed park (the rhythm's plan
 * or a disengaged worker's poll) that would wake it by itself. Tests. */
bool nxr__team_worker_parked_for_good(const struct nxr__team *team, unsigned i);

/*
 * Runs fn once for each participant index in [0, n) (1 <= n <= size +
 * caller_joins) and returns when all have finished. The indices are slots
 * that threads claim (see team.c): when caller_joins, the calling thread
 * runs slot 0 and then every slot no awake worker has claimed yet, so the
 * call never waits for a worker that has not started; otherwise the n
 * workers claim them among themselves (an awake one runs a sleeping one's
 * slot) while the caller waits (spinning briefly, then parked). One thread
 * may thus run several indices, one after another. Jobs on one team are
 * serialised. Must not be called from the team's own workers (the caller
 * checks).
 */
void nxr__team_run(struct nxr__team *team, nxr__team_fn fn, void *arg, unsigned n,
                   bool caller_joins);

/*
 * Instrumentation for tests and diagnostics. regions: nxr__team_run calls
 * that dispatched to at least one worker (a region the caller runs alone is
 * not counted). nested_regions: of those, the ones dispatched by a thread
 * that was running a region body at the time (of any team), i.e. a nested
 * fan-out; nxr's one-fan-out-level rule keeps it at 0. Any thread; the
 * values are monotonic but not synchronised with anything else.
 */
uint64_t nxr__team_regions(const struct nxr__team *team);
uint64_t nxr__team_nested_regions(const struct nxr__team *team);

/* Participating workers that saw a region only after all its slots were
 * claimed (they ran nothing and touched nothing of it). Relaxed, as above. */
uint64_t nxr__team_late_arrivals(const struct nxr__team *team);

/* sum[c] += every worker's counter c (executor/internal/counters.h). Any
 * thread, while the team lives. */
void nxr__team_counters_add_to(const struct nxr__team *team, uint64_t sum[NXR__COUNT_N]);

/*
 * The dispatcher's stall report: a region whose dispatcher has waited
 * after_ns (0: never) for slots still running calls stalled(arg, slots
 * left, waited) once on the dispatcher, with no team lock but run_lock
 * held, then waits on. Set before the team's first region.
 */
void nxr__team_set_stall(struct nxr__team *team, uint64_t after_ns,
                         void (*stalled)(void *arg, unsigned left, uint64_t waited_ns), void *arg);

/*
 * Test hook: fn(arg, worker, gen) runs on a worker that has seen region
 * `gen` as a participant, before it claims anything (a test blocks it there
 * to play a worker that wakes late). NULL removes it. The hook must outlive
 * its installation; set it while no region runs.
 */
struct nxr__team_claim_hook {
    void (*fn)(void *arg, unsigned worker, uint32_t gen);
    void *arg;
};
void nxr__team_set_claim_hook(struct nxr__team *team, const struct nxr__team_claim_hook *hook);

/*
 * Queues items [0, count) for the workers (FIFO across submissions) and
 * returns at once; done(done_arg) runs on the worker that finishes the last
 * item (at once, on the caller, when count is 0). 0 or -ENOMEM.
 */
int nxr__team_submit(struct nxr__team *team, nxr_item_fn fn, void *arg, size_t count,
                     nxr_done_fn done, void *done_arg);

/* Blocks until every submitted batch finished. Returns whether it had to
 * wait. Submissions made meanwhile are waited for too. */
bool nxr__team_drain(struct nxr__team *team);

#endif /* NXR_INTERNAL_TEAM_H */
