/*
 * nxr_runtime_stats (runtime/nxr_stats.h): the domains' counters summed
 * from their blocks (executor/internal/counters.h), the team's region
 * count, admission's wait counts, the routing and pool counters, and the
 * process's quota and stall reports, written no further than the caller's
 * sizes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/pool.h"
#include "base/internal/last_error.h"
#include "base/internal/lock_rank.h"
#include "runtime/internal/runtime.h"
#include "runtime/nxr_stats.h"

_Static_assert(NXR_FAMILY_COUNT <= NXR_STATS_FAMILIES, "a kernel family without a stats slot");
_Static_assert(NXR__COUNT_FAMILIES == NXR_STATS_FAMILIES, "the counters' families are the ABI's");
_Static_assert(NXR_ROUTE_REASON_DEFAULT + 1 <= NXR_STATS_ROUTE_REASONS,
               "a routing reason without a stats slot");

/* The smallest sizes a caller may pass: the first version's structs. */
#define STATS_V1_SIZE  (offsetof(struct nxr_runtime_stats, throttle_status) + sizeof(int))
#define DOMAIN_V1_SIZE (offsetof(struct nxr_domain_stats, weight_bytes) + sizeof(uint64_t))

void nxr_runtime_stats_init(struct nxr_runtime_stats *out, struct nxr_domain_stats *domains,
                            size_t cap)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    out->domain_size = sizeof(struct nxr_domain_stats);
    out->domains = domains;
    out->domain_cap = cap;
}

void nxr__domain_stats(const struct nxr_domain *d, struct nxr_domain_stats *s)
{
    uint64_t c[NXR__COUNT_N];
    nxr__exec_counters(&d->exec, c);
    memset(s, 0, sizeof(*s));
    s->id = d->spec.id;
    s->node = d->spec.node;
    s->workers = d->team != NULL ? nxr__team_size(d->team) : 0;
    s->budget = d->admission_ready ? nxr__exec_budget(&d->exec) : d->spec.budget;
    s->regions = d->team != NULL ? nxr__team_regions(d->team) : 0;
    s->tasks = c[NXR__COUNT_TASKS];
    for (int f = 0; f < NXR__COUNT_FAMILIES; f++)
        s->kernel_calls[f] = c[NXR__COUNT_KERNEL_CALLS + f];
    s->busy_ns = c[NXR__COUNT_BUSY_NS];
    s->spin_ns = c[NXR__COUNT_SPIN_NS];
    s->parks = c[NXR__COUNT_PARKS];
    s->wakes = c[NXR__COUNT_WAKES];
    s->weight_bytes = c[NXR__COUNT_WEIGHT_BYTES];
    if (d->admission_ready) {
        struct nxr__admission_stats a;
        nxr__exec_admission_stats((struct nxr__exec *)&d->exec, &a);
        s->admission_waits = a.waits;
        s->admission_wait_ns = a.wait_ns;
        s->admission_wait_max_ns = a.wait_max_ns;
        s->admission_joins = a.joins;
    }
    for (int r = 0; r <= NXR_ROUTE_REASON_DEFAULT; r++) {
        /* Relaxed: a diagnostic count (runtime/route.c). */
        s->routed[r] =
            atomic_load_explicit(&((struct nxr_domain *)d)->placed[r], memory_order_relaxed);
    }
    if (d->pool != NULL) {
        struct nxr_pool_stats p;
        nxr__pool_stats(d->pool, &p);
        s->pool_hits = p.hits;
        s->pool_misses = p.misses;
        s->pool_drops = p.drops;
        s->pool_cached_bytes = p.cached_bytes;
        s->pool_outstanding = p.outstanding;
    }
}

int nxr_runtime_stats(const nxr_runtime_t *rt, struct nxr_runtime_stats *out)
{
    nxr__call_begin();
    if (rt == NULL || out == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", rt == NULL ? "rt" : "out");
    if (out->size < STATS_V1_SIZE)
        return nxr__fail(-EINVAL, __func__,
                         "out->size is %zu, below the first version's %zu (call "
                         "nxr_runtime_stats_init first)",
                         out->size, (size_t)STATS_V1_SIZE);
    if (out->domain_cap > 0 && out->domains == NULL)
        return nxr__fail(-EINVAL, __func__, "out->domains is NULL with domain_cap %zu",
                         out->domain_cap);
    if (out->domain_cap > 0 && out->domain_size < DOMAIN_V1_SIZE)
        return nxr__fail(-EINVAL, __func__,
                         "out->domain_size is %zu, below the first version's %zu", out->domain_size,
                         (size_t)DOMAIN_V1_SIZE);
    if (nxr__runtime_forked(rt)) /* its pools' and admission's locks may be a parent thread's */
        return nxr__fail(NXR_EFORKED, __func__,
                         "the runtime was created before this process forked");

    struct nxr_runtime_stats mine;
    memset(&mine, 0, sizeof(mine));
    mine.version = NXR_STATS_VERSION;
    struct nxr__cpu_quota *q = malloc(sizeof(*q)); /* 2 KiB: not on a caller's stack */
    if (q == NULL)
        return nxr__fail(-ENOMEM, __func__, "the quota's copy");
    nxr__runtime_quota_now(rt, q);
    nxr__lock(&((nxr_runtime_t *)rt)->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    mine.budget_changes = rt->budget_changes;
    mine.budget_changed_ns = rt->budget_changed_ns;
    nxr__unlock(&((nxr_runtime_t *)rt)->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    mine.cpu_quota = q->cpus;
    /* Relaxed: a count (executor/internal/stall.h). */
    mine.stalls = atomic_load_explicit(&((nxr_runtime_t *)rt)->stall.reports, memory_order_relaxed);

    mine.cpu_quota_us = q->quota_us;
    mine.cpu_period_us = q->period_us;
    struct nxr__cpu_throttle t;
    mine.throttle_status = nxr__cpu_throttle_read(q, &t);
    free(q);
    mine.nr_throttled = t.nr_throttled;
    mine.throttled_usec = t.throttled_usec;

    size_t dsize = out->domain_size < sizeof(struct nxr_domain_stats)
                       ? out->domain_size
                       : sizeof(struct nxr_domain_stats);
    nxr__lock(&((nxr_runtime_t *)rt)->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    mine.domain_count = rt->domain_count;
    for (size_t i = 0; i < rt->domain_count && i < out->domain_cap; i++) {
        struct nxr_domain_stats s;
        nxr__domain_stats(rt->domains[i], &s);
        memcpy((char *)out->domains + i * out->domain_size, &s, dsize);
    }
    nxr__unlock(&((nxr_runtime_t *)rt)->domains_lock, NXR__RANK_RUNTIME_DOMAINS);

    /* The caller's own fields (size, array) stay; the rest up to its size. */
    mine.size = out->size;
    mine.domain_size = out->domain_size;
    mine.domains = out->domains;
    mine.domain_cap = out->domain_cap;
    memcpy(out, &mine, out->size < sizeof(mine) ? out->size : sizeof(mine));
    return 0;
}
