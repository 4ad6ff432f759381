/*
 * Latency summaries: nearest-rank percentiles over a sample (the p-th
 * percentile is the smallest sample with at least p% of the samples at or
 * below it), so every reported value is one a request actually saw.
 */
#ifndef NXR_SERVICE_STATS_H
#define NXR_SERVICE_STATS_H

#include <stddef.h>

struct svc_latency {
    size_t count;
    double p50_ms, p95_ms, p99_ms, max_ms;
};

/* Sorts v[0..n) in place and summarises it (all zero for n == 0). */
struct svc_latency svc_latency_summarise(double *v, size_t n);

/* The nearest-rank p-th percentile (0 < p <= 100) of sorted v[0..n), n > 0. */
double svc_percentile(const double *sorted, size_t n, double p);

#endif /* NXR_SERVICE_STATS_H */
