/*
 * The rhythm of a team's regions: when a worker that just went idle should
 * expect the next region, and so how it waits for it (spin, park until
 * shortly before, or park for good).
 *
 * The dispatcher stamps each region's publish and end times into a small
 * ring (nxr__rhythm_start, nxr__rhythm_end: one clock read and one relaxed
 * store each). A worker going idle reads the ring and asks nxr__rhythm_plan.
 * The quantity predicted is the caller's serial gap, from one region's end
 * to the next one's publish: unlike the start-to-start period it does not
 * depend on how long a region took (which varies with who ran it). The
 * median of the last gaps is the prediction, the spread of the middle ones
 * widens the margin. The worker parks until `lead` before the predicted
 * publish (lead: how late timed wake-ups have been returning, learnt from
 * the wake-ups themselves; it rises at once to a late one and decays
 * slowly, so it tracks the late tail, not the mean), spins from then until
 * the margin after it, and parks for good when nothing came: an idle team
 * costs nothing, a steady stream of regions finds its workers awake, and
 * spinning costs about (lead + margin) per region instead of the whole gap.
 * A gap shorter than a timed park is worth is spun through. When the worker
 * plans before its region's end was stamped (the caller still runs its
 * share), it takes its own clock as the end and says so (end_known false):
 * it re-plans after a spin that found nothing. A predicted publish that does
 * not come (the caller was preempted, or the stream stopped) is missed once:
 * the worker aims at the one after it; at the second miss it gives up on
 * the rhythm (team.c: one poll, then park for good). No rhythm (fewer regions than the ring holds, or gaps above
 * NXR__RHYTHM_GAP_MAX_NS): a short fallback spin, then park.
 *
 * Everything here is advisory: a stale or torn read of the ring only makes
 * one wait spin longer or shorter, never loses a wake-up (the team's parking
 * protocol does not depend on it). The publish stamps also split a worker's
 * spin from its busy time in the live counters (team.c's
 * count_spin_then_busy), as statistics: a stale stamp only moves time
 * between the two. Pure arithmetic on the values, so the
 * plan is tested with made-up timestamps.
 */
#ifndef NXR_INTERNAL_RHYTHM_H
#define NXR_INTERNAL_RHYTHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define NXR__RHYTHM_HISTORY 8 /* regions kept; 7 gaps */
/* Longest gap predicted: past it, waking on demand costs little next to
 * the gap, and a timed wake-up every region would be the only cost left. */
#define NXR__RHYTHM_GAP_MAX_NS 50000000u
/* Without a rhythm: spin this long after a region, then park. */
#define NXR__RHYTHM_FALLBACK_SPIN_NS 30000u
/* Margins around the predicted publish, bounds on the learnt lead. */
#define NXR__RHYTHM_MARGIN_MIN_NS 8000u
#define NXR__RHYTHM_MARGIN_MAX_NS 100000u
#define NXR__RHYTHM_LEAD_PAD_NS   4000u
#define NXR__RHYTHM_LEAD_MAX_NS   200000u
/* A timed park shorter than this is not worth it: spin instead. */
#define NXR__RHYTHM_SLEEP_MIN_NS 20000u
/* A worker that spins through the gap (no timed park) keeps spinning at
 * least this long past the predicted publish: free while the stream runs
 * (the gap is spun anyway), paid once when it stops, and it rides out a
 * caller that was preempted for a moment. */
#define NXR__RHYTHM_THROUGH_MARGIN_NS 100000u
/* Regions shorter than this (median of the last ones) are over before a
 * worker woken for them could take part: a joining caller runs them alone
 * rather than pay a wake-up call (team.c). */
#define NXR__RHYTHM_WAKE_WORTH_NS 50000u

struct nxr__rhythm {
    /* Publish and end times of generation g at [g % HISTORY]; 0 = none. */
    _Atomic uint64_t starts[NXR__RHYTHM_HISTORY];
    _Atomic uint64_t ends[NXR__RHYTHM_HISTORY];
    /* How late timed wake-ups returned (rises at once, decays slowly; ns). */
    _Atomic uint64_t late_ns;
};

/* How a worker waits: park until sleep_until (0: do not), then spin until
 * spin_until (checking for work), then park until woken; well past
 * `expected` a spinning worker also yields its CPU now and then (team.c).
 * predicted: the
 * plan follows a rhythm (else it is the fallback spin); end_known: it used
 * the region's stamped end (else the worker's clock). */
struct nxr__idle_plan {
    uint64_t sleep_until;
    uint64_t spin_until;
    uint64_t expected; /* the predicted publish (predicted plans only) */
    bool predicted;
    bool end_known;
};

void nxr__rhythm_init(struct nxr__rhythm *r);

/* The dispatcher of generation gen published it at now. */
static inline void nxr__rhythm_start(struct nxr__rhythm *r, uint32_t gen, uint64_t now)
{
    /* Relaxed: advisory (see the file comment). */
    atomic_store_explicit(&r->starts[gen % NXR__RHYTHM_HISTORY], now, memory_order_relaxed);
}

/* Generation gen's region ended at now (all its slots ran). */
static inline void nxr__rhythm_end(struct nxr__rhythm *r, uint32_t gen, uint64_t now)
{
    /* Relaxed: advisory (see the file comment). */
    atomic_store_explicit(&r->ends[gen % NXR__RHYTHM_HISTORY], now, memory_order_relaxed);
}

/* How long before its deadline a worker in a timed park is left to wake by
 * itself rather than woken (see team.c's wake_worker). */
uint64_t nxr__rhythm_lead(const struct nxr__rhythm *r);

/* True when the regions before generation gen were short (their median
 * duration below NXR__RHYTHM_WAKE_WORTH_NS); false without history. */
bool nxr__rhythm_short(const struct nxr__rhythm *r, uint32_t gen);

/* When region gen was published (0: not known, or the ring moved on). */
static inline uint64_t nxr__rhythm_started(const struct nxr__rhythm *r, uint32_t gen)
{
    /* Relaxed: advisory. */
    return atomic_load_explicit(&r->starts[gen % NXR__RHYTHM_HISTORY], memory_order_relaxed);
}

/* The plan for a worker that has seen generation gen and is idle at now,
 * after `missed` predicted publishes passed without a region (0 at first):
 * it aims at the publish after those, one region and one gap later each. */
void nxr__rhythm_plan(const struct nxr__rhythm *r, uint32_t gen, uint64_t now, unsigned missed,
                      struct nxr__idle_plan *plan);

/* A timed park asked to end at `deadline` and returned at `now`. */
void nxr__rhythm_woke(struct nxr__rhythm *r, uint64_t deadline, uint64_t now);

#endif /* NXR_INTERNAL_RHYTHM_H */
