/*
 * nxr_runtime_metrics (runtime/nxr_stats.h): nxr_runtime_stats in the
 * Prometheus text exposition format, for a /metrics page beside a service.
 *
 * One table names every metric once (its name, type, help and where its
 * value lies in the stats structs), so the page cannot disagree with
 * nxr_runtime_stats. The format wants each family's samples together after
 * its # HELP and # TYPE lines, so the walk is per family, then per domain
 * (the describe walk is per domain, then per fact: it would interleave the
 * families). Times are seconds (the format's base unit), counts are plain
 * integers; a counter's name ends in _total.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal/last_error.h"
#include "base/strbuf.h"
#include "runtime/internal/runtime.h"
#include "runtime/nxr_stats.h"

enum unit { COUNT, NS_AS_SECONDS };

/* A per-domain metric: a uint64_t at `offset` of struct nxr_domain_stats,
 * or an array of `n` of them with one label value each. */
struct domain_metric {
    const char *name;
    const char *type; /* "counter" or "gauge" */
    const char *help;
    size_t offset;
    enum unit unit;
    const char *label;               /* NULL: a scalar */
    const char *const *label_values; /* an array's label, per element */
    size_t n;
};

static const char *const families[] = {"gemm", "elementwise", "reduction", "norm"};
static const char *const reasons[] = {"explicit", "most_bytes", "tie", "default"};
_Static_assert(sizeof(families) / sizeof(families[0]) == NXR_FAMILY_COUNT,
               "a kernel family without a label");
_Static_assert(sizeof(reasons) / sizeof(reasons[0]) == NXR_ROUTE_REASON_DEFAULT + 1,
               "a routing reason without a label");

#define D(field) offsetof(struct nxr_domain_stats, field)

static const struct domain_metric domain_metrics[] = {
    {"nxr_domain_regions_total", "counter", "Regions the domain's team ran on its workers.",
     D(regions), COUNT, NULL, NULL, 0},
    {"nxr_domain_tasks_total", "counter", "Tasks of nxr_run and nxr_submit run on the domain.",
     D(tasks), COUNT, NULL, NULL, 0},
    {"nxr_domain_kernel_calls_total", "counter", "Kernel calls run on the domain, by family.",
     D(kernel_calls), COUNT, "family", families, NXR_FAMILY_COUNT},
    {"nxr_domain_busy_seconds_total", "counter",
     "Time the domain's workers ran region slots and submitted items.", D(busy_ns), NS_AS_SECONDS,
     NULL, NULL, 0},
    {"nxr_domain_spin_seconds_total", "counter", "Time the domain's workers spun for work.",
     D(spin_ns), NS_AS_SECONDS, NULL, NULL, 0},
    {"nxr_domain_parks_total", "counter", "Futex waits of the domain's workers.", D(parks), COUNT,
     NULL, NULL, 0},
    {"nxr_domain_wakes_total", "counter", "Worker parks ended by a wake-up call.", D(wakes), COUNT,
     NULL, NULL, 0},
    {"nxr_domain_admission_waits_total", "counter",
     "Operations whose caller slept for the domain's permit.", D(admission_waits), COUNT, NULL,
     NULL, 0},
    {"nxr_domain_admission_wait_seconds_total", "counter",
     "Time callers slept for the domain's permit.", D(admission_wait_ns), NS_AS_SECONDS, NULL, NULL,
     0},
    {"nxr_domain_admission_wait_max_seconds", "gauge",
     "The longest a caller slept for the domain's permit.", D(admission_wait_max_ns), NS_AS_SECONDS,
     NULL, NULL, 0},
    {"nxr_domain_admission_joins_total", "counter",
     "Operations admitted onto the permit the domain already held.", D(admission_joins), COUNT,
     NULL, NULL, 0},
    {"nxr_domain_routed_calls_total", "counter",
     "Calls a routing context put on the domain, by reason.", D(routed), COUNT, "reason", reasons,
     NXR_ROUTE_REASON_DEFAULT + 1},
    {"nxr_domain_pool_hits_total", "counter", "Buffer acquires served from the domain's pool.",
     D(pool_hits), COUNT, NULL, NULL, 0},
    {"nxr_domain_pool_misses_total", "counter", "Buffer acquires that needed fresh memory.",
     D(pool_misses), COUNT, NULL, NULL, 0},
    {"nxr_domain_pool_drops_total", "counter", "Buffer releases freed because of the pool's cap.",
     D(pool_drops), COUNT, NULL, NULL, 0},
    {"nxr_domain_pool_cached_bytes", "gauge", "Bytes in the pool's cached buffers.",
     D(pool_cached_bytes), COUNT, NULL, NULL, 0},
    {"nxr_domain_pool_outstanding_buffers", "gauge", "Buffers acquired and not yet released.",
     D(pool_outstanding), COUNT, NULL, NULL, 0},
    {"nxr_domain_weight_bytes_total", "counter",
     "Bytes of packed weights the domain's GEMV/GEMM calls streamed.", D(weight_bytes), COUNT, NULL,
     NULL, 0},
};

static void value(struct nxr__strbuf *sb, uint64_t v, enum unit unit)
{
    if (unit == NS_AS_SECONDS)
        nxr__strbuf_printf(sb, " %llu.%09llu\n", (unsigned long long)(v / 1000000000u),
                           (unsigned long long)(v % 1000000000u));
    else
        nxr__strbuf_printf(sb, " %llu\n", (unsigned long long)v);
}

static void family(struct nxr__strbuf *sb, const char *name, const char *type, const char *help)
{
    nxr__strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{domain="D",node="N"[,label="value"]}: a domain's labels. */
static void domain_series(struct nxr__strbuf *sb, const char *name,
                          const struct nxr_domain_stats *d, const char *label, const char *lvalue)
{
    nxr__strbuf_printf(sb, "%s{domain=\"%d\",", name, d->id);
    if (d->node == NXR_NODE_NONE)
        nxr__strbuf_printf(sb, "node=\"none\"");
    else
        nxr__strbuf_printf(sb, "node=\"%d\"", d->node);
    if (label != NULL)
        nxr__strbuf_printf(sb, ",%s=\"%s\"", label, lvalue);
    nxr__strbuf_printf(sb, "}");
}

static void render(struct nxr__strbuf *sb, const struct nxr_runtime_stats *s, size_t n)
{
    family(sb, "nxr_cpu_quota_cpus", "gauge",
           "CPUs the runtime's budgets fit (the CPU quota; 0: none).");
    nxr__strbuf_printf(sb, "nxr_cpu_quota_cpus %u\n", s->cpu_quota);
    if (s->cpu_period_us != 0) {
        family(sb, "nxr_cpu_quota_seconds", "gauge", "The cgroup limit's quota per period.");
        nxr__strbuf_printf(sb, "nxr_cpu_quota_seconds");
        value(sb, s->cpu_quota_us * 1000u, NS_AS_SECONDS);
        family(sb, "nxr_cpu_quota_period_seconds", "gauge", "The cgroup limit's period.");
        nxr__strbuf_printf(sb, "nxr_cpu_quota_period_seconds");
        value(sb, s->cpu_period_us * 1000u, NS_AS_SECONDS);
    }
    if (s->throttle_status == 0) {
        family(sb, "nxr_cgroup_throttled_periods_total", "counter",
               "Periods in which the limiting cgroup was throttled (cpu.stat nr_throttled).");
        nxr__strbuf_printf(sb, "nxr_cgroup_throttled_periods_total %llu\n",
                           (unsigned long long)s->nr_throttled);
        family(sb, "nxr_cgroup_throttled_seconds_total", "counter",
               "Time the limiting cgroup was throttled (cpu.stat throttled_usec).");
        nxr__strbuf_printf(sb, "nxr_cgroup_throttled_seconds_total");
        value(sb, s->throttled_usec * 1000u, NS_AS_SECONDS);
    }
    family(sb, "nxr_budget_changes_total", "counter",
           "Refreshes that moved a domain's budget to a changed CPU quota.");
    nxr__strbuf_printf(sb, "nxr_budget_changes_total %llu\n",
                       (unsigned long long)s->budget_changes);
    if (s->budget_changed_ns != 0) {
        family(sb, "nxr_budget_changed_timestamp_seconds", "gauge",
               "When the budgets last moved (Unix time).");
        nxr__strbuf_printf(sb, "nxr_budget_changed_timestamp_seconds");
        value(sb, s->budget_changed_ns, NS_AS_SECONDS);
    }
    family(sb, "nxr_stalls_reported_total", "counter",
           "Waits reported past the stall threshold (NXR_STALL_REPORT_MS).");
    nxr__strbuf_printf(sb, "nxr_stalls_reported_total %llu\n", (unsigned long long)s->stalls);

    family(sb, "nxr_domain_workers", "gauge", "Workers of the domain's built-in team.");
    for (size_t i = 0; i < n; i++) {
        domain_series(sb, "nxr_domain_workers", &s->domains[i], NULL, NULL);
        nxr__strbuf_printf(sb, " %u\n", s->domains[i].workers);
    }
    family(sb, "nxr_domain_budget", "gauge", "The most participants one operation may use.");
    for (size_t i = 0; i < n; i++) {
        domain_series(sb, "nxr_domain_budget", &s->domains[i], NULL, NULL);
        nxr__strbuf_printf(sb, " %u\n", s->domains[i].budget);
    }
    for (size_t m = 0; m < sizeof(domain_metrics) / sizeof(domain_metrics[0]); m++) {
        const struct domain_metric *dm = &domain_metrics[m];
        family(sb, dm->name, dm->type, dm->help);
        for (size_t i = 0; i < n; i++) {
            const char *base = (const char *)&s->domains[i] + dm->offset;
            for (size_t k = 0; k < (dm->label != NULL ? dm->n : 1); k++) {
                uint64_t v;
                memcpy(&v, base + k * sizeof(v), sizeof(v));
                domain_series(sb, dm->name, &s->domains[i], dm->label,
                              dm->label != NULL ? dm->label_values[k] : NULL);
                value(sb, v, dm->unit);
            }
        }
    }
}

int nxr__runtime_metrics_take(const nxr_runtime_t *rt, char **out)
{
    *out = NULL;
    /* The domain count may grow under an attach: read until it held. */
    struct nxr_runtime_stats s;
    struct nxr_domain_stats *domains = NULL;
    size_t cap = 0;
    int rc;
    for (;;) {
        nxr_runtime_stats_init(&s, domains, cap);
        if ((rc = nxr_runtime_stats(rt, &s)) != 0) { /* not with the callers' checks */
            free(domains);
            return rc;
        }
        if (s.domain_count <= cap)
            break;
        free(domains);
        cap = s.domain_count;
        domains = calloc(cap, sizeof(*domains));
        if (domains == NULL)
            return -ENOMEM;
    }
    struct nxr__strbuf sb = {0};
    render(&sb, &s, s.domain_count);
    free(domains);
    return nxr__strbuf_take(&sb, out);
}

int nxr_runtime_metrics(const nxr_runtime_t *rt, char *buf, size_t size, size_t *len)
{
    nxr__call_begin();
    if (rt == NULL || len == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", rt == NULL ? "rt" : "len");
    if (buf == NULL && size > 0)
        return nxr__fail(-EINVAL, __func__, "buf is NULL with size %zu", size);
    if (nxr__runtime_forked(rt))
        return nxr__fail(NXR_EFORKED, __func__,
                         "the runtime was created before this process forked");
    char *text;
    int rc = nxr__runtime_metrics_take(rt, &text);
    if (rc != 0)
        return nxr__fail(rc, __func__, "the page: %s", nxr_strerror(rc));
    size_t need = strlen(text);
    *len = need;
    if (need >= size) {
        free(text);
        return nxr__fail(-ENOSPC, __func__, "the page needs %zu bytes and a NUL, buf has %zu", need,
                         size);
    }
    memcpy(buf, text, need + 1);
    free(text);
    return 0;
}
