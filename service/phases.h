/*
 * The nxr path's requests by budget phase. When a domain's budget changes
 * while the demo serves (the runtime followed a changed CPU quota:
 * NXR_CPU_QUOTA=auto, nxr_runtime_refresh_budget), the requests sent after
 * the change are summarised apart from those before, so that each budget's
 * latency has a table of its own instead of one table mixing both.
 *
 * A phase begins at a moment (CLOCK_MONOTONIC ns) with the budgets then in
 * force. A request belongs to the phase in force when it was sent: an
 * operation reads its domain's budget as it starts, so a request sent
 * after the change is served under the new budget (one in flight across
 * it is counted in the phase it began in). The moment of a change is the
 * runtime's own (nxr_runtime_stats: budget_changed_ns), read after each of
 * the nxr path's rounds; several changes between two reads make one phase
 * at the last of them (budget_changes says how many it holds). Beyond
 * SVC_PHASES_MAX phases the last one takes the later changes.
 *
 * svc_phases_add and svc_phases_summarise are arithmetic on the values
 * given (tested with made-up timestamps); svc_phases_start and
 * svc_phases_watch read the runtime.
 */
#ifndef NXR_SERVICE_PHASES_H
#define NXR_SERVICE_PHASES_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/nxr.h"
#include "service/stats.h"

#define SVC_PHASES_MAX 8

struct svc_phase {
    long long from_ns;      /* CLOCK_MONOTONIC: when it began */
    unsigned budget;        /* the budgets of the runtime's own domains, summed */
    unsigned cpu_quota;     /* CPUs of the quota the budgets fit then; 0: none */
    const char *limited_by; /* the first domain's nxr_domain_budget_limit, or NULL */
    uint64_t changes;       /* budget changes it began with (0: the first phase) */
    /* Filled by svc_phases_summarise: the requests sent in it, the time the
     * path served within it, and their latency. */
    size_t requests;
    double served_s, requests_per_s;
    struct svc_latency latency;
};

struct svc_phases {
    size_t count;
    struct svc_phase phase[SVC_PHASES_MAX];
    long long serving_from_ns; /* the first phase's from_ns */
    uint64_t changes_seen;     /* the runtime's budget_changes as last read */
    size_t domains;            /* the runtime's domains whose budgets are summed */
};

/* Appends a phase from from_ns (held at or after the last one's start);
 * past SVC_PHASES_MAX the last phase takes it (its budget and quota, the
 * changes added). The first phase starts the count (from_s 0). */
void svc_phases_add(struct svc_phases *ph, long long from_ns, unsigned budget, unsigned cpu_quota,
                    const char *limited_by, uint64_t changes);

/*
 * Sorts the n requests into the phases by sent_ns[i] and summarises each:
 * its requests, their latency (latency_ms[i]) and its req/s over the time
 * the path served within the phase, the overlap of the phase with the
 * serving spans [spans[2k], spans[2k + 1]) (CLOCK_MONOTONIC ns, nspans
 * of them). A request sent before the first phase counts in the first.
 * 0, or -ENOMEM (nothing summarised).
 */
int svc_phases_summarise(struct svc_phases *ph, const double *latency_ms, const long long *sent_ns,
                         size_t n, const long long *spans, size_t nspans);

/* The first phase at now_ns: the budgets now of the runtime's first
 * `domains` domains (those it was created with: their budgets follow the
 * quota; a host's executor attached after them keeps its own) and the
 * quota. */
void svc_phases_start(struct svc_phases *ph, nxr_runtime_t *rt, size_t domains, long long now_ns);

/* A phase more when the runtime counted a budget change since the last
 * read, from the moment of its last change. */
void svc_phases_watch(struct svc_phases *ph, nxr_runtime_t *rt);

#endif /* NXR_SERVICE_PHASES_H */
