/*
 * bench/kernels, the per-call cost (kernels_percall.c): nxr_sgemm_packed
 * with m = 1 at decode's small shapes (k = 288; n = 288 and 768) against
 * the same product written as an nxr_parallel_for row loop, on the same
 * context, alternated, in one run (issue 28 part 2: a kernel call should
 * cost no more than the row loop).
 */
#ifndef NXR_BENCH_KERNELS_PERCALL_H
#define NXR_BENCH_KERNELS_PERCALL_H

#include <stddef.h>

struct percall_row {
    size_t n, k;
    double packed_us, loop_us; /* per call, medians over rounds */
    double packed_vs_loop;     /* time ratio, median over round pairs */
    double region_us;          /* the row loop with an empty body: the region alone */
};

struct percall_report {
    unsigned threads;
    struct percall_row rows[2];
};

/* `reps` rounds (>= 2) of a burst of calls per contender. */
void percall_section(struct percall_report *rep, int reps);

void percall_print_text(const struct percall_report *rep);

/* ,"percall":[...] (inside the caller's object). */
void percall_print_json(const struct percall_report *rep);

#endif /* NXR_BENCH_KERNELS_PERCALL_H */
