/*
 * The rhythm of a team's regions: when a worker that just went idle should
 * expect the next region, and so how it waits for it (spin, park until
 * shortly before, or park for good).
 *
 * The dispatcher stamps each region's publish time into a small ring
 * (nxr__rhythm_start: one clock read and one relaxed store per region). A
 * worker going idle reads the ring and asks nxr__rhythm_plan: the median of
 * the last intervals between publishes is the period, their spread the
 * margin. With a period it parks until `lead` before the predicted publish
 * (lead: how late a timed wake-up has been returning, learnt from the
 * wake-ups themselves), spins from then until the margin after it, and
 * parks for good when nothing came: an idle team costs nothing, a steady
 * stream of regions finds its workers awake, and spinning costs about
 * (lead + margin) per period instead of the whole gap. Gaps shorter than a
 * timed park is worth are spun through. No rhythm (fewer regions than the
 * ring holds, or a period above NXR__RHYTHM_PERIOD_MAX_NS): a short fallback
 * spin, then park.
 *
 * Everything here is advisory: a stale or torn read of the ring only makes
 * one wait spin longer or shorter, never loses a wake-up (the team's parking
 * protocol does not depend on it). Pure arithmetic on the values, so the
 * plan is tested with made-up timestamps.
 */
#ifndef NXR_INTERNAL_RHYTHM_H
#define NXR_INTERNAL_RHYTHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define NXR__RHYTHM_HISTORY 8 /* publish times kept; 7 intervals */
/* Longest period predicted: past it, waking on demand costs little next to
 * the gap, and a timed wake-up every period would be the only cost left. */
#define NXR__RHYTHM_PERIOD_MAX_NS 50000000u
/* Without a rhythm: spin this long after a region, then park. */
#define NXR__RHYTHM_FALLBACK_SPIN_NS 30000u
/* Margins around the predicted publish, bounds on the learnt lead. */
#define NXR__RHYTHM_MARGIN_MIN_NS 8000u
#define NXR__RHYTHM_MARGIN_MAX_NS 100000u
#define NXR__RHYTHM_LEAD_PAD_NS   4000u
#define NXR__RHYTHM_LEAD_MAX_NS   200000u
/* A timed park shorter than this is not worth it: spin instead. */
#define NXR__RHYTHM_SLEEP_MIN_NS 20000u

struct nxr__rhythm {
    /* Publish time of generation g at [g % HISTORY]; 0 = none yet. */
    _Atomic uint64_t starts[NXR__RHYTHM_HISTORY];
    /* How late timed wake-ups returned (a running average, ns). */
    _Atomic uint64_t late_ns;
};

/* How a worker waits: park until sleep_until (0: do not), then spin until
 * spin_until (checking for work), then park until woken. */
struct nxr__idle_plan {
    uint64_t sleep_until;
    uint64_t spin_until;
};

void nxr__rhythm_init(struct nxr__rhythm *r);

/* The dispatcher of generation gen published it at now. */
static inline void nxr__rhythm_start(struct nxr__rhythm *r, uint32_t gen, uint64_t now)
{
    /* Relaxed: advisory (see the file comment). */
    atomic_store_explicit(&r->starts[gen % NXR__RHYTHM_HISTORY], now, memory_order_relaxed);
}

/* The plan for a worker that has seen generation gen and is idle at now. */
void nxr__rhythm_plan(const struct nxr__rhythm *r, uint32_t gen, uint64_t now,
                      struct nxr__idle_plan *plan);

/* A timed park asked to end at `deadline` and returned at `now`. */
void nxr__rhythm_woke(struct nxr__rhythm *r, uint64_t deadline, uint64_t now);

#endif /* NXR_INTERNAL_RHYTHM_H */
