/*
 * Live counters of a runtime, for an operator watching a service: per
 * domain, cumulative since the runtime was created; per process, the CPU
 * quota and its stall reports.
 *
 * The structs grow by additions only, at their ends. The caller says which
 * size it was compiled with (`size`, `domain_size`: nxr_runtime_stats_init
 * sets both) and nxr writes no byte past them, so a program built against
 * an older header keeps working with a newer library, and `version` says
 * which fields the library filled (a newer caller's extra fields stay as
 * they were with an older library).
 *
 * Counting costs the hot path no shared cache line: each worker counts in
 * lines of its own, a thread that is not a worker adds once per operation;
 * a read sums them (a snapshot: counts keep moving while work runs, each
 * one only grows).
 */
#ifndef NXR_STATS_H
#define NXR_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "base/nxr_fwd.h"
#include "base/nxr_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The layout this header describes (struct nxr_runtime_stats.version). */
#define NXR_STATS_VERSION 1
/* Array sizes fixed in the ABI; the entries past what the library knows
 * (kernel families: NXR_FAMILY_COUNT; routing reasons: enum
 * nxr_route_reason) read 0. */
#define NXR_STATS_FAMILIES      8
#define NXR_STATS_ROUTE_REASONS 8

struct nxr_domain_stats {
    int id;
    int node;         /* NXR_NODE_NONE when the domain has none */
    unsigned workers; /* the built-in team's size (0: a host's executor) */
    unsigned budget;  /* the most participants one operation may use now */
    /* Work. regions: regions the built-in team ran on its workers (an
     * operation that ran on the calling thread alone is not one); tasks:
     * tasks of nxr_run and nxr_submit (every mode) that ran;
     * kernel_calls[f]: kernel calls of family f (enum nxr_family) run on
     * the domain. */
    uint64_t regions;
    uint64_t tasks;
    uint64_t kernel_calls[NXR_STATS_FAMILIES];
    /* The built-in team's workers: time running region slots and submitted
     * items (busy) and spinning for work (spin), in nanoseconds; futex
     * parks, and of those the ones ended by a wake-up call (not a
     * timeout). A caller's own share of a region is not busy time here. A
     * worker adds a region's busy time just after its last slot of it, so a
     * read made as the region returns may not show it yet; the worker's next
     * region or item does. */
    uint64_t busy_ns;
    uint64_t spin_ns;
    uint64_t parks;
    uint64_t wakes;
    /* Admission: operations whose caller slept for the domain's permit
     * (behind another operation of the domain, or an overlapping permit),
     * their total and longest wait (ns); joins onto a held permit. */
    uint64_t admission_waits;
    uint64_t admission_wait_ns;
    uint64_t admission_wait_max_ns;
    uint64_t admission_joins;
    /* Calls a routing context put on this domain, by enum nxr_route_reason. */
    uint64_t routed[NXR_STATS_ROUTE_REASONS];
    /* The domain's pool (alloc/nxr_alloc.h, struct nxr_pool_stats). */
    uint64_t pool_hits;
    uint64_t pool_misses;
    uint64_t pool_drops;
    uint64_t pool_cached_bytes;
    uint64_t pool_outstanding;
    /* Bytes of packed weights (nxr_sgemm_packed) the domain's GEMV/GEMM
     * calls streamed: each call counts its copy once (padding included), and
     * so does each product of a step (nxr_step_run), which also counts as a
     * GEMM kernel call. */
    uint64_t weight_bytes;
};

struct nxr_runtime_stats {
    /* In: sizeof(struct nxr_runtime_stats) and sizeof(struct
     * nxr_domain_stats) as the caller knows them; the caller's array of
     * domain_cap entries (NULL with 0: only the per-process fields). */
    size_t size;
    size_t domain_size;
    struct nxr_domain_stats *domains;
    size_t domain_cap;
    /* Out: the layout filled (NXR_STATS_VERSION of the library), the
     * runtime's domains (min(domain_count, domain_cap) entries filled, in
     * nxr_runtime_domain_at order). */
    unsigned version;
    size_t domain_count;
    /* The process: the CPU quota the budgets fit (CPUs; 0: none), and the
     * stall reports printed (executor waits past NXR_STALL_REPORT_MS). */
    unsigned cpu_quota;
    uint64_t stalls;
    /* The cgroup limit behind cpu_quota with NXR_CPU_QUOTA=auto (0: none,
     * or the quota came from a setting): its quota and period in
     * microseconds, and from that cgroup's cpu.stat the periods in which
     * it throttled the group and the time throttled (microseconds).
     * throttle_status: 0 when the two counts were read, else why not (a
     * negative errno, -ENOENT without a cgroup limit; NXR_ESYNTAX). */
    uint64_t cpu_quota_us;
    uint64_t cpu_period_us;
    uint64_t nr_throttled;
    uint64_t throttled_usec;
    int throttle_status;
    /* Budgets following the quota (nxr_runtime_refresh_budget): how many
     * refreshes moved some domain's budget, and when the last one did
     * (CLOCK_REALTIME, ns; 0: never). cpu_quota and the fields above are
     * the quota as last read. */
    uint64_t budget_changes;
    uint64_t budget_changed_ns;
};

/* Sets out's sizes to this header's and its array to domains[0..cap);
 * every other field to 0. */
NXR_API void nxr_runtime_stats_init(struct nxr_runtime_stats *out, struct nxr_domain_stats *domains,
                                    size_t cap);

/*
 * Fills *out (see above). 0; -EINVAL (rt or out NULL, a size smaller than
 * the first version's, or domains NULL with domain_cap > 0: nothing
 * written); NXR_EFORKED in a child of a fork.
 */
NXR_API int nxr_runtime_stats(const nxr_runtime_t *rt, struct nxr_runtime_stats *out);

/*
 * Moves the domains' budgets to the CPU quota as it is now: under
 * NXR_CPU_QUOTA=auto the cgroup files are read again and every budget of a
 * domain with nxr's own team is fitted into the limit by the rule used at
 * creation (each domain's share proportional to its CPUs), between 1 and
 * the budget it was created with (its workers: a quota raised past the one
 * the runtime was created under gives no more threads than that). An
 * operation reads its domain's budget once: a lowered budget takes effect
 * from the next operation. nxr_domain_budget, nxr_ctx_budget, the stats
 * (budget_changes, budget_changed_ns) and nxr_runtime_describe say the new
 * budgets and why; nxr_runtime_cpu_quota keeps the quota of creation.
 * With a quota from a setting (NXR_CPU_QUOTA=N, ignore) nothing moves.
 * A host calls it when it knows the limit changed, or periodically: it
 * costs a few small file reads. 0; -EINVAL (rt NULL); -ENOMEM (nothing
 * moved); NXR_EFORKED. Any thread, outside a body.
 */
NXR_API int nxr_runtime_refresh_budget(nxr_runtime_t *rt);

/*
 * The same counters as a Prometheus text exposition page (text format
 * 0.0.4): per process nxr_cpu_quota_cpus, the cgroup limit's
 * nxr_cpu_quota_seconds and nxr_cpu_quota_period_seconds and its
 * throttling (nxr_cgroup_throttled_periods_total,
 * nxr_cgroup_throttled_seconds_total: only where a cgroup limit's cpu.stat
 * was read), nxr_stalls_reported_total; per domain, labelled
 * {domain="ID",node="NODE"} (node "none" without one), the gauges
 * nxr_domain_workers and nxr_domain_budget and every count of struct
 * nxr_domain_stats (nxr_domain_busy_seconds_total, ...; kernel calls by
 * {family}, routed calls by {reason}); times in seconds. Each family has
 * its # HELP and # TYPE lines.
 * Writes the page and its NUL into buf when it fits (size > the page's
 * length) and sets *len to the page's length either way: -ENOSPC when it
 * does not fit (buf untouched: call again with *len + 1 bytes; buf NULL
 * with size 0 only asks). -EINVAL (rt or len NULL, buf NULL with size >
 * 0), -ENOMEM, NXR_EFORKED.
 */
NXR_API int nxr_runtime_metrics(const nxr_runtime_t *rt, char *buf, size_t size, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* NXR_STATS_H */
