/*
 * The runtime's internal layout, shared by the runtime package's files and
 * the internal tests. Nothing outside runtime/, tests/ and white-box
 * benchmarks (bench/) includes it.
 */
#ifndef NXR_INTERNAL_RUNTIME_H
#define NXR_INTERNAL_RUNTIME_H

#include <stdatomic.h>

#include "domains/internal/cpu_quota.h"
#include "domains/internal/peers.h"
#include "domains/internal/plan.h"
#include "domains/internal/stats_page.h"
#include "domains/internal/topology.h"
#include "executor/internal/exec.h"
#include "executor/internal/team.h"
#include "base/internal/build.h"
#include "base/internal/fork.h"
#include "runtime/nxr.h"

/* The default spin policy (see docs/guide.md, "Knobs"): no fixed bound; workers
 * follow the rhythm of the regions (executor/internal/rhythm.h). NXR_SPIN
 * (a pause count, INT_MAX at most) overrides it. */
#define NXR_SPIN_DEFAULT NXR__TEAM_SPIN_ADAPTIVE


struct nxr_domain {
    struct nxr__domain_spec spec; /* id, node, cpus (NULL: caller-managed), budget, admission */
    enum nxr_placement placement;
    struct nxr__team *team; /* managed domains: the built-in team */
    struct nxr__exec exec;  /* what contexts on this domain run work through */
    bool admission_ready;   /* exec's admission state is initialised */
    struct nxr__pool *pool; /* node-local pool and arena (alloc/) */
    nxr_runtime_t *rt;
    /* Calls placed on this domain by a routing context, per reason
     * (runtime/route.c). Relaxed counters: read for diagnostics only. */
    atomic_uint_fast64_t placed[NXR_ROUTE_REASON_DEFAULT + 1];
    unsigned open_contexts; /* under rt->ctx_lock */
};

/* Settings resolved from options and environment (see options.c). */
struct nxr__settings {
    const char *topology;
    const char *domains;
    unsigned num_threads; /* 0: no cap */
    /* NXR_CPU_QUOTA_AUTO, _IGNORE or a CPU count, and which setting said
     * so ("NXR_CPU_QUOTA=ignore", for the report). */
    int cpu_quota;
    char cpu_quota_from[40];
    const char *cgroup_root; /* opts.cgroup_root (tests), NULL: "/" */
    int peers;               /* NXR_PEERS_WARN, _QUIET or _OFF */
    const char *peers_dir;   /* opts.peers_dir (tests), NULL: the default */
    unsigned spin;
    bool display_env;
    enum nxr_provider_policy policy;
    bool gemm_openblas; /* NXR_GEMM=openblas */
    size_t pool_cap;    /* each pool's cap on cached bytes */
    enum nxr_route_policy route;       /* routing contexts (runtime/nxr_route.h) */
    unsigned stall_ms;                 /* the stall reporter's threshold; 0: off */
    /* NXR_QUOTA_FOLLOW_MS: how often the budgets follow the quota on their
     * own (runtime/budget.c); 0: only nxr_runtime_refresh_budget. */
    unsigned quota_follow_ms;
    bool huge_pages; /* packed weights advised for huge pages (NXR_HUGEPAGES, default on) */
};

struct nxr_runtime {
    unsigned magic; /* NXR__HANDLE_LIVE until destroyed (base/internal/sys.h) */
    /* The fork generation it was made in (base/internal/fork.h): in a child
     * of a fork every call answers NXR_EFORKED. Immutable. */
    unsigned long fork_gen;
    struct nxr__topology topo;
    struct nxr__settings settings;
    /* The CPU quota the budgets were fitted into, and where it came from
     * (runtime/budget.c); cpus 0: none. Immutable after creation. */
    struct nxr__cpu_quota quota;
    /* The quota the budgets follow now (runtime/budget.c): quota at
     * creation, re-read by nxr_runtime_refresh_budget under
     * NXR_CPU_QUOTA=auto, with the record of the budgets' changes. Guarded
     * by quota_lock, a leaf lock (taken after domains_lock, never before). */
    pthread_mutex_t quota_lock;
    struct nxr__cpu_quota quota_now;
    uint64_t budget_changes;    /* refreshes that moved some budget */
    uint64_t budget_changed_ns; /* the last one's CLOCK_REALTIME; 0: never */
    char budget_why[1200];      /* what the last one did, for people */
    /* The quota follower (NXR_QUOTA_FOLLOW_MS under auto): a thread that
     * refreshes every quota_follow_ms until quota_stop (under quota_lock,
     * signalled on quota_wake); quota_refreshes counts its refreshes. */
    pthread_t quota_follower;
    bool quota_following;
    bool quota_stop;
    pthread_cond_t quota_wake;
    atomic_ullong quota_refreshes;
    /* Other nxr processes as seen at creation, and this runtime's entry
     * (runtime/runtime.c); unused when settings.peers is NXR_PEERS_OFF. */
    struct nxr__peers peers;
    /* The counters page beside the entry (runtime/stats_page.c); map NULL
     * when none. lock: held by the one thread refreshing it. */
    struct {
        struct nxr__page *map;
        pthread_mutex_t lock;
        int dirfd; /* the registry directory's, duplicated */
        char entry_name[40];
        pid_t owner;
        /* The domains published (room for NXR__PAGE_DOMAINS): those of
         * creation, then attached ones. Under lock after creation. */
        struct nxr_domain **domains;
        size_t domain_count;
    } page;
    struct nxr__arbiter *arbiter; /* permits over the allowed set */
    /* Every domain's waits report through it (executor/internal/stall.h);
     * immutable after creation but for its counter. */
    struct nxr__stall stall;
    nxr_provider_bundle_t *providers;
    /* Which domain each address of nxr's memory belongs to: every domain's
     * arena records its extents here (alloc/internal/registry.h). */
    struct nxr__registry *registry;
    struct nxr_fpenv fpenv;            /* the creating thread's, at creation */
    struct nxr_openblas_info openblas; /* the linked OpenBLAS, probed at creation */
    /* Domains are allocated one by one so that their addresses (held by
     * contexts) survive an attach growing the table. The table and count are
     * guarded by domains_lock; a domain itself is immutable once published. */
    pthread_mutex_t domains_lock;
    struct nxr_domain **domains;
    size_t domain_count;
    size_t domain_cap;
    /* The fallback of placement (runtime/nxr_route.h): the lowest id at
     * creation. Immutable after creation. */
    struct nxr_domain *default_domain;
    /* Calls a routing context refused (NXR_EMIXED); relaxed, diagnostics. */
    atomic_uint_fast64_t refused_mixed;
    /* Open contexts, linked through ctx->prev/next; ctx_lock guards the
     * list and every domain's open_contexts. A leaf lock. */
    pthread_mutex_t ctx_lock;
    struct nxr_ctx *contexts;
};

/* True in a child of a fork for a runtime made before it: its workers,
 * permits and locks are the parent's, so nothing may wait on them. */
static inline bool nxr__runtime_forked(const nxr_runtime_t *rt)
{
    return nxr__forked_since(rt->fork_gen);
}

/* Appends d to the runtime's table (growing it); 0 or -ENOMEM. Caller holds
 * domains_lock or owns the runtime exclusively. */
int nxr__runtime_add_domain(nxr_runtime_t *rt, struct nxr_domain *d);

/* Tears one domain down (drained already): team, admission, executor
 * reference, CPU set; frees it. */
void nxr__domain_free(struct nxr_domain *d);

/* The stall reporter's `who` (runtime/describe.c): the runtime's domains
 * that hold or wait for CPUs of exec's domain, and the arbiter's state. */
void nxr__runtime_stall_who(void *rt, const struct nxr__exec *exec, struct nxr__strbuf *sb);

/* Creates every domain's pool (runtime/memory.c); on failure the pools made
 * so far are left for nxr__runtime_pools_destroy. 0, -ENOMEM. */
int nxr__runtime_pools_create(nxr_runtime_t *rt, char *err, size_t errsz);

/* Destroys every pool: 0, or NXR_EOUTSTANDING when buffers or domain memory
 * were still out (reported on stderr; what they need is kept). */
int nxr__runtime_pools_destroy(nxr_runtime_t *rt);

/* Resolves opts + environment into settings. 0 or NXR_ESYNTAX/-EINVAL. */
int nxr__settings_resolve(struct nxr__settings *s, const struct nxr_runtime_opts *opts, char *err,
                          size_t errsz);

/* Settles the runtime's CPU quota from the settings (the cgroup's when
 * auto) into rt->quota and fits the plan's budgets into it
 * (runtime/budget.c). Never fails: an unreadable quota is none, and
 * rt->quota.source says why. */
void nxr__runtime_fit_quota(nxr_runtime_t *rt, struct nxr__plan *plan);

/* Starts the quota follower when the settings ask for it (0 otherwise, or
 * a negative errno with nothing started); stops and joins it (a no-op when
 * none runs). runtime/budget.c. */
int nxr__runtime_quota_follow_start(nxr_runtime_t *rt);
void nxr__runtime_quota_follow_stop(nxr_runtime_t *rt);

/* A copy of the quota the budgets follow now (quota_lock taken here). */
void nxr__runtime_quota_now(const nxr_runtime_t *rt, struct nxr__cpu_quota *out);

/* Publishes the runtime's counters page beside its registry entry (when it
 * has one) and hooks every domain's operation end to answer readers
 * (runtime/stats_page.c). Never fails: no page means nxr top does not see
 * this runtime. */
void nxr__runtime_page_open(nxr_runtime_t *rt);

/* Publishes a domain attached after creation in the page (when there is
 * one and it has room; the total counts it either way) and hooks its
 * operation ends to answer readers. domains_lock held, before the domain
 * can be looked up. Never fails. */
void nxr__runtime_page_add_domain(nxr_runtime_t *rt, struct nxr_domain *d);

/* Removes the page (its writer only) and unmaps it; after every team is
 * gone (no operation can end any more). */
void nxr__runtime_page_close(nxr_runtime_t *rt);

/* What lowers d's budget now (runtime/domain.c): the quota once a changed
 * quota lowered it below its budget of creation (the budgets follow only
 * the quota), else what lowered it at creation. */
enum nxr__budget_limit nxr__domain_limit_now(const struct nxr_domain *d);

/* One domain's counters (runtime/stats.c). */
void nxr__domain_stats(const struct nxr_domain *d, struct nxr_domain_stats *s);

/* The Prometheus page (runtime/metrics.c) into *out (caller frees): 0,
 * -ENOMEM. rt is checked by the caller (not NULL, not forked). */
int nxr__runtime_metrics_take(const nxr_runtime_t *rt, char **out);

/* The spin bound for a domain's team: the configured one, or 0 when the team
 * shares its CPUs with another domain or outnumbers them. */
unsigned nxr__team_spin_for(const nxr_runtime_t *rt, const struct nxr_domain *d);

#endif /* NXR_INTERNAL_RUNTIME_H */
