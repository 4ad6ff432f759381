/* The nxr path's requests by budget phase (see phases.h). */
#include "service/phases.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/nxr_stats.h"

void svc_phases_add(struct svc_phases *ph, long long from_ns, unsigned budget, unsigned cpu_quota,
                    const char *limited_by, uint64_t changes)
{
    struct svc_phase *p;
    if (ph->count == 0) {
        ph->serving_from_ns = from_ns;
    } else if (from_ns < ph->phase[ph->count - 1].from_ns) {
        /* Phases in order: a change read late is no earlier than the one
         * before it. */
        from_ns = ph->phase[ph->count - 1].from_ns;
    }
    if (ph->count < SVC_PHASES_MAX) {
        p = &ph->phase[ph->count++];
        *p = (struct svc_phase){.from_ns = from_ns, .changes = changes};
    } else {
        p = &ph->phase[ph->count - 1];
        p->changes += changes;
    }
    p->budget = budget;
    p->cpu_quota = cpu_quota;
    p->limited_by = limited_by;
}

/* The phase in force at t: the last one begun at or before it (the first
 * for an earlier t). */
static size_t phase_at(const struct svc_phases *ph, long long t)
{
    size_t k = 0;
    while (k + 1 < ph->count && ph->phase[k + 1].from_ns <= t)
        k++;
    return k;
}

int svc_phases_summarise(struct svc_phases *ph, const double *latency_ms, const long long *sent_ns,
                         size_t n, const long long *spans, size_t nspans)
{
    if (ph->count == 0)
        return 0;
    double *v = malloc((n > 0 ? n : 1) * sizeof(*v));
    if (v == NULL)
        return -ENOMEM;
    for (size_t k = 0; k < ph->count; k++) {
        struct svc_phase *p = &ph->phase[k];
        /* The phase's own latencies, in the order sent. */
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (phase_at(ph, sent_ns[i]) == k)
                v[m++] = latency_ms[i];
        p->requests = m;
        p->latency = svc_latency_summarise(v, m);
        /* Time served within [from, until): the spans' overlap with it. */
        const long long from = k == 0 ? LLONG_MIN : p->from_ns;
        const long long until = k + 1 < ph->count ? ph->phase[k + 1].from_ns : LLONG_MAX;
        long long served = 0;
        for (size_t s = 0; s < nspans; s++) {
            long long a = spans[2 * s] > from ? spans[2 * s] : from;
            long long b = spans[2 * s + 1] < until ? spans[2 * s + 1] : until;
            if (b > a)
                served += b - a;
        }
        p->served_s = (double)served / 1e9;
        p->requests_per_s = served > 0 ? (double)m / p->served_s : 0.0;
    }
    free(v);
    return 0;
}

/* The first n domains' budgets summed and the first one's limit, now. */
static unsigned budgets(nxr_runtime_t *rt, size_t n, const char **limited_by)
{
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += nxr_domain_budget(nxr_runtime_domain_at(rt, i));
    *limited_by = n > 0 ? nxr_domain_budget_limit(nxr_runtime_domain_at(rt, 0)) : NULL;
    return sum;
}

static int read_stats(nxr_runtime_t *rt, struct nxr_runtime_stats *s)
{
    nxr_runtime_stats_init(s, NULL, 0);
    return nxr_runtime_stats(rt, s);
}

void svc_phases_start(struct svc_phases *ph, nxr_runtime_t *rt, size_t domains, long long now_ns)
{
    *ph = (struct svc_phases){.domains = domains};
    struct nxr_runtime_stats s;
    if (read_stats(rt, &s) != 0)
        return;
    ph->changes_seen = s.budget_changes;
    const char *limit;
    unsigned b = budgets(rt, ph->domains, &limit);
    svc_phases_add(ph, now_ns, b, s.cpu_quota, limit, 0);
}

static long long clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void svc_phases_watch(struct svc_phases *ph, nxr_runtime_t *rt)
{
    struct nxr_runtime_stats s;
    if (ph->count == 0 || read_stats(rt, &s) != 0 || s.budget_changes == ph->changes_seen)
        return;
    /* budget_changed_ns is CLOCK_REALTIME; the requests' times are
     * CLOCK_MONOTONIC: moved by the clocks' offset now. */
    const long long mono = clock_ns(CLOCK_MONOTONIC);
    const long long real = clock_ns(CLOCK_REALTIME);
    long long from = (long long)s.budget_changed_ns - real + mono;
    if (from > mono)
        from = mono;
    const char *limit;
    unsigned b = budgets(rt, ph->domains, &limit);
    svc_phases_add(ph, from, b, s.cpu_quota, limit, s.budget_changes - ph->changes_seen);
    ph->changes_seen = s.budget_changes;
}
