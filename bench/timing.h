/*
 * The clock and the medians every benchmark uses (header-only, C): each
 * figure is the median of repeated runs, taken on CLOCK_MONOTONIC. The
 * OpenMP/TBB peers of bench/forkjoin keep their own (forkjoin_peer.h:
 * they are built apart, in C and C++, with nothing of nxr's).
 */
#ifndef NXR_BENCH_TIMING_H
#define NXR_BENCH_TIMING_H

#include <stddef.h>
#include <stdlib.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort's comparison for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (n >= 1); sorts v. */
static inline double bench_median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* NXR_BENCH_TIMING_H */
