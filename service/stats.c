/* Latency summaries (see stats.h). */
#include "service/stats.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double svc_percentile(const double *sorted, size_t n, double p)
{
    /* rank = ceil(p/100 * n), 1-based; computed in integers where exact. */
    double r = ceil(p / 100.0 * (double)n - 1e-9);
    size_t rank = r < 1.0 ? 1 : (size_t)r;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

struct svc_latency svc_latency_summarise(double *v, size_t n)
{
    struct svc_latency s = {.count = n};
    if (n == 0)
        return s;
    qsort(v, n, sizeof(*v), cmp_double);
    s.p50_ms = svc_percentile(v, n, 50);
    s.p95_ms = svc_percentile(v, n, 95);
    s.p99_ms = svc_percentile(v, n, 99);
    s.max_ms = v[n - 1];
    return s;
}
