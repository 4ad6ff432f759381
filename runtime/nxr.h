/*
 * nxr: a NUMA-aware executor runtime. This is the public header; include it
 * and link libnxr (`pkg-config --cflags --libs nxr`; docs/guide.md, "Using
 * nxr from Make or CMake").
 *
 * A runtime (nxr_runtime_t) discovers the machine, forms resource domains
 * (one per NUMA node by default, see domains/nxr_domains.h) and starts, for
 * each managed domain, a worker team confined to the domain's CPU set and
 * verified. Everything is torn down by nxr_runtime_destroy.
 *
 * Threads: nxr_runtime_create/destroy are called by the owner; every const
 * accessor may be called from any thread while the runtime lives.
 * Errors: calls that can fail return a status (and check their arguments:
 * NULL handles are -EINVAL); accessors that return a value instead
 * (nxr_domain_id, nxr_ctx_budget, nxr_buffer_size, ...) have no error to
 * report and need a valid handle. Using a runtime or context after its
 * destroy is a caller bug: checked builds (-DNXR_CHECKED=1) catch it and
 * abort with a message; other builds do not check.
 * fork(): in the child, every fallible call on a runtime made before the
 * fork (its domains, contexts and jobs too) returns NXR_EFORKED at once;
 * accessors that only read what creation fixed (ids, CPU sets, counts)
 * still answer. Create a new runtime in the child. Buffers and scopes made
 * before the fork belong to the parent's pools: do not use them in the child.
 * Signal handlers: no nxr call is async-signal-safe; call none from one.
 * Environment (read at creation unless opts.ignore_env): NXR_TOPOLOGY,
 * NXR_DOMAINS, NXR_NUM_THREADS, NXR_SPIN, NXR_DISPLAY_ENV, NXR_POOL_CAP,
 * NXR_GEMM, NXR_PROVIDER_POLICY, NXR_ROUTE, NXR_CPU_QUOTA, NXR_PEERS,
 * NXR_STALL_REPORT_MS (see docs/guide.md, "Knobs"). Numbers are digits only; any
 * other NXR_* variable is warned of once per process on stderr (a typo).
 *
 * The rest of the public API is in the headers included below: contexts
 * and running work (runtime/nxr_ctx.h), kernels through a context
 * (runtime/nxr_ctx_kernels.h), memory on a domain (runtime/nxr_memory.h),
 * placement by domain (runtime/nxr_route.h), spans over several domains
 * and sharded memory (runtime/nxr_span.h), sequences of kernels and loops
 * run as one region (runtime/nxr_step.h), and the lower packages' types
 * and calls (status codes, domain
 * declarations, the executor contract, buffers and scopes, providers).
 */
#ifndef NXR_H
#define NXR_H

#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>

#include "alloc/nxr_alloc.h"
#include "base/nxr_status.h"
#include "base/nxr_version.h"
#include "domains/nxr_domains.h"
#include "executor/nxr_executor.h"
#include "kernels/nxr_kernels.h"
#include "kernels/nxr_provider.h"
#include "runtime/nxr_ctx.h"
#include "runtime/nxr_ctx_kernels.h"
#include "runtime/nxr_memory.h"
#include "runtime/nxr_route.h"
#include "runtime/nxr_weights.h"
#include "runtime/nxr_span.h"
#include "runtime/nxr_stats.h"
#include "runtime/nxr_step.h"
#include "runtime/nxr_top.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "Unset" is zero in every option field. Where a
 * field's zero would otherwise be a meaningful value, that value has a
 * name of its own: */
#define NXR_CPU_QUOTA_AUTO (-1)   /* read the cgroup limit */
#define NXR_CPU_QUOTA_IGNORE (-2) /* no quota */
#define NXR_SPIN_NONE (-1)        /* workers park at once, without spinning */
#define NXR_STALL_REPORT_OFF (-1) /* no stall reports */

/* Other nxr processes on the machine (opts.peers, NXR_PEERS). */
enum nxr_peers_mode {
    /* NXR_PEERS=warn|quiet|off, else warn; but off when ignore_env is set
     * (an embedder configuring nxr only through the options struct gets no
     * machine-wide side effects it did not ask for). */
    NXR_PEERS_DEFAULT = 0,
    /* Register in the per-user peer registry (docs/deployment.md), list
     * overlapping runtimes of other processes in nxr_runtime_describe and
     * warn on stderr at creation when there are any. */
    NXR_PEERS_WARN = 1,
    NXR_PEERS_QUIET = 2, /* the same without the warning */
    NXR_PEERS_OFF = 3,   /* neither register nor look */
};

/* Runtime options. A zeroed struct (`= {0}`, or nxr_runtime_opts_init)
 * means every default; each field says what its zero does. */
struct nxr_runtime_opts {
    /* 0/NULL: NXR_TOPOLOGY, else this system. "hwloc", "synthetic:<hwloc
     * synthetic description>" or "xml:<path>". */
    const char *topology;
    /* Declared domains; when both are unset, NXR_DOMAINS, else one domain
     * per NUMA node. Setting both is -EINVAL. At most 256 domains
     * (domains/nxr_domains.h). */
    const char *domains; /* NXR_DOMAINS grammar */
    const struct nxr_domain_decl *domain_decls;
    size_t domain_decl_count;
    /* Narrows the process's allowed set (sched_getaffinity); never widens. */
    hwloc_const_bitmap_t allowed_cpus;
    /* Caps every domain's budget (0: NXR_NUM_THREADS, else no cap). */
    int num_threads;
    /* The CPU quota the budgets fit into (docs/contracts.md, "What the
     * process can really get"). 0: NXR_CPU_QUOTA=auto|ignore|<cpus>, else
     * auto. NXR_CPU_QUOTA_AUTO: read the process's cgroup limit (v2
     * cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, every ancestor's
     * included) and use floor(quota / period), at least 1.
     * NXR_CPU_QUOTA_IGNORE: none. n > 0: n CPUs. The budgets' sum is then
     * lowered to fit it, in proportion to each domain's CPUs (never raised;
     * at least 1 each). */
    int cpu_quota;
    /* Tests: a directory standing for "/" when the quota is read (it holds
     * proc/self/cgroup, proc/self/mountinfo and the cgroup files). NULL:
     * the real file system. */
    const char *cgroup_root;
    /* Other nxr processes (enum nxr_peers_mode). Advice only: it never
     * changes a budget. */
    enum nxr_peers_mode peers;
    /* Tests: the registry directory (NULL: $XDG_RUNTIME_DIR/nxr-peers,
     * else /dev/shm/nxr-peers-<uid>). At most 255 bytes: a longer path is
     * -ENAMETOOLONG from nxr_runtime_create, never cut. */
    const char *peers_dir;
    /* Iterations a worker spins before parking. 0: NXR_SPIN, else the
     * default; NXR_SPIN_NONE: park at once; n > 0: n. */
    int spin;
    /* The provider per kernel family; NULL: nxr's native one, except GEMM,
     * which NXR_GEMM=openblas switches to OpenBLAS. The runtime takes its own
     * reference; the caller keeps (and destroys) its own. */
    nxr_provider_t *providers[NXR_FAMILY_COUNT];
    /* How providers that cannot be confined to a domain are run
     * (NXR_PROVIDER_POLICY_DEFAULT: NXR_PROVIDER_POLICY=strict|exclusive,
     * else strict). */
    enum nxr_provider_policy provider_policy;
    /* Cap on each domain pool's cached (free) bytes, used when has_pool_cap
     * is set (pool_cap 0 then caches nothing). Unset: NXR_POOL_CAP (bytes,
     * or with a K/M/G suffix), else NXR_POOL_DEFAULT_CAP (1 GiB). */
    bool has_pool_cap;
    size_t pool_cap;
    /* How calls without an explicit domain (routing contexts) are routed
     * (NXR_ROUTE_DEFAULT: NXR_ROUTE=most-bytes|single-domain, else
     * most-bytes; see runtime/nxr_route.h). */
    enum nxr_route_policy route_policy;
    /* Milliseconds after which an admission wait, a region's dispatcher or
     * nxr_job_wait still waiting prints one line to stderr naming the
     * domain, who holds its CPUs and who else waits (once per wait; counted
     * in nxr_runtime_describe). 0: NXR_STALL_REPORT_MS, else 5000;
     * NXR_STALL_REPORT_OFF: off. */
    int stall_report_ms;
    /* Ignore every NXR_* environment variable (tests, embedders that
     * configure nxr only through this struct). */
    bool ignore_env;
};

/* Zeroes opts: every field unset, the same as `= {0}`. */
NXR_API void nxr_runtime_opts_init(struct nxr_runtime_opts *opts);

/*
 * Creates a runtime. opts may be NULL (defaults). Validation (topology,
 * domains) completes before any thread starts. Returns 0 and *out, or:
 * -EINVAL (NULL out, bad option), NXR_ESYNTAX, NXR_ETOPOLOGY, NXR_ENODOMAIN,
 * NXR_EEMPTYSET, NXR_EDISALLOWED, NXR_EDUPID, NXR_EOVERLAP, NXR_EBUDGET,
 * NXR_EPLACEMENT (a worker's affinity could not be set or verified), -EAGAIN
 * (a thread could not be created), -ENOMEM. On failure *out is NULL and no
 * thread, permit or allocation of nxr's is left behind. Blocks until every
 * worker has started and verified its placement.
 */
NXR_API int nxr_runtime_create(const struct nxr_runtime_opts *opts, nxr_runtime_t **out);

/*
 * Drains submitted work (jobs' side effects are visible when it returns),
 * stops and joins every worker and frees the runtime. NULL is a no-op. Must
 * not be called while other threads use the runtime. Called inside a body
 * (a task or chunk of any runtime's operation) it would wait for the
 * operation running it: it is refused instead (NXR_EREENTRANT, reported on
 * stderr; checked builds abort), and the runtime is left as it was. In a
 * child of fork() for a runtime made before the fork, it joins nothing and
 * takes no lock: it frees what needs neither and leaves the rest (domains,
 * teams, pools, contexts still open) allocated (docs/contracts.md, "fork").
 * Destroy every context first: contexts still open are a caller bug that is
 * reported, never ignored. Checked builds (-DNXR_CHECKED=1) abort with a
 * message naming how many are open on which domains; other builds print
 * that message on stderr, free the contexts' step memory and orphan them
 * (every later call on one is NXR_EBROKEN; nxr_ctx_destroy only frees it).
 * Buffers or domain memory still out are reported the same way (their pool
 * is kept so that a late release stays safe).
 */
NXR_API void nxr_runtime_destroy(nxr_runtime_t *rt);

/* The getters of a runtime and of a domain below cannot fail and leave
 * nxr_last_error() alone; given NULL they return 0, NULL, false, -1
 * (nxr_domain_id), NXR_NODE_NONE (nxr_domain_node) or the enum's first
 * value (base/nxr_status.h). */

/* The runtime's provider bundle (one provider per family, resolved at
 * creation; owned by the runtime). */
NXR_API const nxr_provider_bundle_t *nxr_runtime_providers(const nxr_runtime_t *rt);

/* Number of domains (>= 1). */
NXR_API size_t nxr_runtime_domain_count(const nxr_runtime_t *rt);

/* The i-th domain in creation order (NULL when i is out of range). */
NXR_API nxr_domain_t *nxr_runtime_domain_at(const nxr_runtime_t *rt, size_t i);

/* Looks a domain up by id: 0, NXR_ENODOMAIN or -EINVAL (NULL argument). */
NXR_API int nxr_runtime_domain(const nxr_runtime_t *rt, int id, nxr_domain_t **out);

/*
 * The domain whose CPU set holds OS CPU `cpu`. Managed domains are preferred
 * over cooperative ones (which may overlap them), then the lowest id wins;
 * caller-managed domains have no CPUs and never match. Returns 0 and *out,
 * NXR_ENODOMAIN (the CPU is in no domain: outside the allowed set, or not
 * covered by any declared domain) or -EINVAL (NULL argument, cpu < 0). Any
 * thread.
 */
NXR_API int nxr_runtime_domain_of_cpu(const nxr_runtime_t *rt, int cpu, nxr_domain_t **out);

/*
 * The domain on OS NUMA node `node` (nxr_domain_node): managed first, then
 * the lowest id (declared domains may share a node). 0 and *out,
 * NXR_ENODOMAIN or -EINVAL (NULL argument, node < 0). Any thread.
 */
NXR_API int nxr_runtime_domain_of_node(const nxr_runtime_t *rt, int node,
                                       nxr_domain_t **out);

/*
 * The calling thread's domain: when the thread's whole affinity lies inside
 * one domain's CPU set, that domain (managed first, then the lowest id: the
 * answer does not change while the thread migrates); otherwise the domain
 * of the CPU it is running on now (sched_getcpu), which may change at its
 * next migration. This is how a thread placed by taskset, numactl or MPI
 * finds its domain. 0 and *out, NXR_ENODOMAIN (its CPU is in no domain),
 * -EINVAL or a negative errno from the kernel. Any thread; two system calls.
 */
NXR_API int nxr_runtime_domain_here(const nxr_runtime_t *rt, nxr_domain_t **out);

/* The domain calls with no explicit domain fall back to (runtime/nxr_route.h):
 * the lowest id among the domains the runtime was created with. */
NXR_API nxr_domain_t *nxr_runtime_default_domain(const nxr_runtime_t *rt);

/* The policy routing contexts use (opts.route_policy / NXR_ROUTE). */
NXR_API enum nxr_route_policy nxr_runtime_route_policy(const nxr_runtime_t *rt);

/* "hwloc", "synthetic" or "xml". */
NXR_API const char *nxr_runtime_topology_source(const nxr_runtime_t *rt);

/* False when the topology carried no NUMA information. */
NXR_API bool nxr_runtime_has_numa(const nxr_runtime_t *rt);

/* The allowed set the runtime was built from (owned by the runtime). */
NXR_API hwloc_const_bitmap_t nxr_runtime_allowed_cpus(const nxr_runtime_t *rt);

NXR_API int nxr_domain_id(const nxr_domain_t *d);
/* OS NUMA node id, or NXR_NODE_NONE. */
NXR_API int nxr_domain_node(const nxr_domain_t *d);
/* The domain's CPU set (owned by the runtime); NULL for caller-managed. */
NXR_API hwloc_const_bitmap_t nxr_domain_cpuset(const nxr_domain_t *d);
NXR_API enum nxr_admission nxr_domain_admission(const nxr_domain_t *d);
NXR_API enum nxr_placement nxr_domain_placement(const nxr_domain_t *d);
/* Threads the domain's executor has. */
NXR_API unsigned nxr_domain_workers(const nxr_domain_t *d);
/* Most threads one operation in the domain may use. */
NXR_API unsigned nxr_domain_budget(const nxr_domain_t *d);
/* What lowered the budget below the domain's CPU count: "quota" (the CPU
 * quota, see opts.cpu_quota; also once a changed quota lowered it,
 * nxr_runtime_refresh_budget), "num_threads", "declared" (the declaration's
 * own budget), or NULL when nothing did (and for attached domains). A static
 * string; any thread while the runtime lives. */
NXR_API const char *nxr_domain_budget_limit(const nxr_domain_t *d);

/* The CPU quota the runtime fitted its budgets into (opts.cpu_quota):
 * usable CPUs, or 0 when there is none (or rt is NULL: *source NULL).
 * *source (optional) is set to a description owned by the runtime: the
 * file and values it came from
 * ("cgroup v2 /sys/fs/cgroup/a/cpu.max: 100000 100000 -> 1 CPU"), the
 * setting that overrode it, or why there is none. Any thread while the
 * runtime lives; never blocks (read once at creation). */
NXR_API unsigned nxr_runtime_cpu_quota(const nxr_runtime_t *rt, const char **source);

/*
 * An external executor to attach as a domain: a pool the host already has,
 * admitted under an explicit contract.
 *  - COOPERATIVE: `cpus` is the exact set the pool's threads run on; nxr
 *    validates it (non-empty, inside the allowed set) and arbitrates it like a
 *    managed domain. nxr never creates, repins, verifies or stops those
 *    threads: placement is reported "declared".
 *  - CALLER_MANAGED: no CPU set (`cpus` must be NULL); never arbitrated; one
 *    operation at a time (a second entry, from any thread, is
 *    NXR_EADMISSION); the caller owns oversubscription.
 * Initialise with nxr_external_decl_init.
 */
struct nxr_external_decl {
    int id;                       /* >= 0, unique in the runtime */
    enum nxr_admission admission; /* COOPERATIVE or CALLER_MANAGED */
    hwloc_const_bitmap_t cpus;    /* borrowed for the call */
    int budget;                   /* 1..workers (and <= |cpus|), or NXR_BUDGET_ALL */
    struct nxr_executor executor; /* copied; ops must outlive the runtime's use */
};

/* id 0, CALLER_MANAGED, no CPUs, NXR_BUDGET_ALL, an empty executor. */
NXR_API void nxr_external_decl_init(struct nxr_external_decl *decl);

/*
 * Attaches an external executor as a new domain. Validation, first failure
 * wins: -EINVAL (NULL argument, negative id, an admission mode other than the
 * two above, a caller-managed decl with a CPU set), NXR_EEXECUTOR (no
 * install or submit, zero workers, retain without release or the reverse,
 * an owner other than NXR_EXECUTOR_OWNED_BY_CALLER, the default),
 * NXR_EEMPTYSET, NXR_EDISALLOWED (cooperative set), NXR_EBUDGET, NXR_EDUPID;
 * then -ENOMEM. On failure the runtime is unchanged and the executor was
 * never retained; nxr_last_error() names the problem.
 * On success nxr retains the executor (ops->retain) and releases it once in
 * nxr_runtime_destroy, after its last job ended: that release is how the
 * caller learns nxr no longer uses it. Any thread; serialised with lookups.
 */
NXR_API int nxr_runtime_attach(nxr_runtime_t *rt, const struct nxr_external_decl *decl);

/*
 * Runs tasks [0, count) across several domains at once: each listed domain's
 * workers claim tasks until none are left, and every task runs sequentially
 * inside (OUTER). The permits for all the domains are ONE request for the
 * union of their CPU sets: granted whole, or queued holding nothing, so
 * groups never deadlock on each other. Blocks until every task finished;
 * the first task error wins and tasks not yet started are skipped.
 * Returns 0, the task's error, -EINVAL (NULL, n == 0 or > 64, an id listed
 * twice, a caller-managed domain), NXR_ENODOMAIN, NXR_EREENTRANT (from inside
 * any task or loop body, see the nesting table in executor/nxr_executor.h),
 * -ENOMEM or an executor's error.
 */
NXR_API int nxr_run_across(nxr_runtime_t *rt, const int *ids, size_t n, size_t count,
                           nxr_task_fn fn, void *arg);

enum nxr_describe_format {
    NXR_DESCRIBE_TEXT = 0,
    NXR_DESCRIBE_JSON = 1,
    /* The live counters as a Prometheus text page: nxr_runtime_metrics's
     * (runtime/nxr_stats.h), not the description above. */
    NXR_DESCRIBE_PROMETHEUS = 2,
};

/*
 * Describes the runtime: topology (source, nodes, CPUs, allowed set) and per
 * domain id, node, CPUs, admission, placement, workers, budget, executor
 * owner, open contexts, the domain's memory ("pool": binding, arena, cap,
 * cached bytes and buffers, outstanding, hits, misses, drops; see
 * alloc/nxr_alloc.h) and the calls placed on it by reason ("placed":
 * most_bytes, tie, default; runtime/nxr_route.h); then the placement policy,
 * default domain and calls refused as mixed ("placement"), and providers.
 * JSON is one object: {"topology": {...}, "domains": [...], "placement":
 * {...}, "providers": {...}, "fpenv": {...}}.
 * NXR_DESCRIBE_PROMETHEUS is the live counters' metrics page instead, the
 * text nxr_runtime_metrics writes (runtime/nxr_stats.h).
 * Returns 0 and a NUL-terminated string in *out that the caller releases
 * with free(); -EINVAL or -ENOMEM (then *out is NULL).
 */
NXR_API int nxr_runtime_describe(const nxr_runtime_t *rt, enum nxr_describe_format format,
                                 char **out);

#ifdef __cplusplus
}
#endif

#endif /* NXR_H */
