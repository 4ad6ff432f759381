/*
 * A domain's live counters (nxr_runtime_stats, runtime/nxr_stats.h), kept
 * so that the hot path writes no cache line another thread writes:
 *
 *  - each worker of the built-in team has its own block (struct
 *    nxr__counters, its own cache lines, in team.c's struct worker) and is
 *    its only writer: a relaxed load and store, no locked instruction;
 *  - a thread that is not one of the domain's workers (a caller, a host
 *    executor's thread) adds once per operation, not per task or chunk,
 *    to the domain's shared block (in struct nxr__exec) with a relaxed
 *    fetch_add: the same lines its admission already writes.
 *
 * A reader sums the shared block and every worker's block (relaxed loads:
 * each value is a monotonic count, and a sum read while work runs is a
 * moment's snapshot, never torn per counter).
 *
 * NXR_COUNTERS=0 at compile time removes every increment and the clock
 * reads that time busy and spin (bench/forkjoin's counter-cost row builds
 * both ways); the stats then read zeroes.
 */
#ifndef NXR_EXECUTOR_INTERNAL_COUNTERS_H
#define NXR_EXECUTOR_INTERNAL_COUNTERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal/build.h"

#ifndef NXR_COUNTERS
#define NXR_COUNTERS 1
#endif

/* Room for the kernel families (kernels/nxr_kernels.h has 4 today). */
#define NXR__COUNT_FAMILIES 8

enum nxr__counter {
    /* (Regions are the team's own count, nxr__team_regions: its
     * dispatcher already writes it.) */
    NXR__COUNT_TASKS = 0,    /* tasks of nxr_run / nxr_submit run */
    NXR__COUNT_BUSY_NS,      /* workers' time in region slots and items */
    NXR__COUNT_SPIN_NS,      /* workers' time spinning for work */
    NXR__COUNT_PARKS,        /* workers' futex waits */
    NXR__COUNT_WAKES,        /* of those, ended by a wake-up call */
    NXR__COUNT_WEIGHT_BYTES, /* packed weights' bytes the GEMV/GEMM calls read */
    NXR__COUNT_KERNEL_CALLS, /* + family: kernel calls placed on the domain */
    NXR__COUNT_N = NXR__COUNT_KERNEL_CALLS + NXR__COUNT_FAMILIES,
};

/* A block of counters. Not aligned by itself (the shared one lives in a
 * calloc'd domain); a worker's block is placed on lines of its own. */
struct nxr__counters {
    atomic_uint_fast64_t v[NXR__COUNT_N];
};

struct nxr__team;

/* The calling thread's own block and the team it belongs to: set by a
 * worker for its life (team.c), NULL on every other thread. */
struct nxr__counter_home {
    struct nxr__counters *block;
    const struct nxr__team *team;
};
extern _Thread_local struct nxr__counter_home nxr__counter_home;

/* Adds n to counter c of a block only the calling thread writes. */
static inline void nxr__count_own(struct nxr__counters *own, enum nxr__counter c, uint64_t n)
{
#if NXR_COUNTERS
    /* Relaxed load and store: this thread is the block's only writer. */
    uint_fast64_t v = atomic_load_explicit(&own->v[c], memory_order_relaxed);
    atomic_store_explicit(&own->v[c], v + n, memory_order_relaxed);
#else
    (void)own, (void)c, (void)n;
#endif
}

/*
 * Adds n to counter c of a domain whose team is `team` (NULL: a host's
 * executor) and whose shared block is `shared`: into the calling thread's
 * own block when it is one of that team's workers, else into shared.
 */
static inline void nxr__count(struct nxr__counters *shared, const struct nxr__team *team,
                              enum nxr__counter c, uint64_t n)
{
#if NXR_COUNTERS
    struct nxr__counter_home home = nxr__counter_home;
    if (home.block != NULL && team != NULL && home.team == team)
        nxr__count_own(home.block, c, n);
    else /* Relaxed: a count; any number of non-worker threads add. */
        atomic_fetch_add_explicit(&shared->v[c], n, memory_order_relaxed);
#else
    (void)shared, (void)team, (void)c, (void)n;
#endif
}

/* sum[c] += block's counter c, for every c. */
void nxr__counters_add_to(const struct nxr__counters *block, uint64_t sum[NXR__COUNT_N]);

#endif /* NXR_EXECUTOR_INTERNAL_COUNTERS_H */
