/*
 * `nxr demo`: the whole run, as a library (tools/nxr.c parses the flags
 * and prints; the tests and the VM check read its JSON).
 *
 *  1. A runtime with one domain per NUMA node (or --domains), the weights
 *     replicated into each domain's node-local memory and their pages
 *     checked (service/weights.h), a serving thread bound to each domain
 *     (service/server.h); with --executor openmp|pool the domains run on
 *     attached executors instead of nxr's teams (service/attach.h).
 *     The server coalesces the requests waiting at a domain into one
 *     forward pass of up to --max-batch rows; with --weights packed the
 *     weight matrices are packed once per domain (nxr_weights_create).
 *  2. The peers, unless --no-compare: the baseline (nxr as it served
 *     before batching: the same runtime and domains, --max-batch 1
 *     --weights plain; not run when the configuration is that already),
 *     flat (a second runtime with one declared domain over every allowed
 *     CPU, the same server unbatched, weights of the first domain only: a
 *     NUMA-unaware service) and OpenMP (service/omp_path.h); with --span
 *     also the span path (every request across every domain, weights
 *     sharded: service/span_path.h).
 *  2b. The machine, measured on the same domains before serving
 *     (service/machine.h): the GEMM peak and the streaming-read bandwidth
 *     the report sets each path's GFLOP/s and weight GB/s against.
 *  3. The same request stream (service/stream.h) served by every path in
 *     alternating rounds, the path order rotating each round, so machine
 *     noise hits each alike; a short warm-up per path first (not counted).
 *  4. After each round the outputs are compared (service/compare.h).
 *  5. Past config.time_budget_s (default 25 s) the run stops at the next
 *     round boundary and says so: a peer that collapses on a loaded
 *     machine cannot make the demo run for minutes.
 */
#ifndef NXR_SERVICE_DEMO_H
#define NXR_SERVICE_DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/nxr.h"
#include "service/attach.h"
#include "service/machine.h"
#include "service/phases.h"
#include "service/stats.h"

/* How the demo holds its weight matrices (--weights). */
enum svc_weights_layout {
    SVC_WEIGHTS_PLAIN = 0,  /* row-major floats, packed by the GEMM on every call */
    SVC_WEIGHTS_PACKED = 1, /* packed once per domain (nxr_weights_create) */
};

const char *svc_weights_name(enum svc_weights_layout w);
/* "plain" or "packed": 0, else -EINVAL. */
int svc_weights_parse(const char *s, enum svc_weights_layout *out);

struct svc_demo_config {
    size_t requests;            /* per path (--requests) */
    unsigned clients;           /* --clients */
    size_t batch_min, batch_max; /* --batch MIN-MAX */
    size_t hidden, layers;      /* --hidden, --layers */
    size_t vocab;               /* head width (fixed: 512) */
    const char *domains;        /* --domains (NXR_DOMAINS grammar), NULL: default */
    enum svc_executor executor; /* --executor */
    uint64_t seed;              /* --seed */
    bool compare;               /* false with --no-compare */
    /* --span: also serve every request across every domain (a span,
     * weights sharded; service/span_path.h) beside the per-domain mode;
     * config.mode "span" (else "per-domain"). Needs the peers (compare). */
    bool span;
    size_t rounds;              /* rounds the stream is cut into */
    size_t split_rows;          /* a lone batch this big or bigger runs INNER */
    size_t max_batch;           /* --max-batch: rows one forward pass coalesces (1: none) */
    enum svc_weights_layout weights; /* --weights (packed needs --executor nxr) */
    double machine_s;           /* seconds for measuring the machine (0: not measured) */
    /* Seconds of serving after which the run stops at the next round
     * boundary (every path has then served the same requests); 0: none. */
    double time_budget_s;
    /* Busy processes pinned to the domains' CPUs (highest first) for the
     * whole run, killed after (--compete N; 0: none): the run beside a
     * noisy neighbour (service/compete.h). */
    unsigned compete;
    /* --plot FILE.svg: the latency distribution of each path that ran, one
     * curve each (service/plot.h), written after the run; NULL: none. */
    const char *plot_path;
    /* Told of the demo's runtime (the per-domain one): after it is made
     * (ending false), and just before it goes (ending true; still valid
     * then). NULL: nobody. `nxr demo --metrics-port` serves its counters. */
    void (*runtime_hook)(void *arg, nxr_runtime_t *rt, bool ending);
    void *runtime_hook_arg;
    /* Called after each path's round (progress bar); may be NULL. */
    void (*progress)(void *arg, size_t done, size_t total);
    void *progress_arg;
};

/* The defaults: about 1 ms per request on one core of the 2-CPU machine
 * nxr is developed on, the whole run well under 30 s. */
void svc_demo_config_init(struct svc_demo_config *c);

/* Checks sizes and ranges. 0, or -EINVAL with err naming the flag
 * ("--hidden: ..."). */
int svc_demo_config_check(const struct svc_demo_config *c, char *err, size_t errsz);

struct svc_path_result {
    bool ran;
    size_t requests, rows;
    size_t passes;            /* forward passes that served them (weights read once each) */
    double wall_s, requests_per_s;
    struct svc_latency latency;
};

struct svc_domain_result {
    int id, node;             /* the domain served (not an attached executor's id) */
    char cpus[128];           /* its CPU list */
    char ran_on[128];         /* CPUs its requests' computations started on */
    bool ran_inside;          /* ran_on is inside cpus */
    const char *placement, *admission, *binding;
    unsigned workers, budget;
    const char *budget_limit; /* nxr_domain_budget_limit: "quota", ... or NULL */
    size_t requests, split_requests;
    size_t passes, batched_requests, retried_batches;
    double requests_per_s;
    struct svc_latency latency;
    double weights_on_node;   /* -1: the domain has no node; in span mode the
                               * lowest of its replica's and its shards' */
    double shard_on_node;     /* span mode: its shards' pages on its node (-1: unknown) */
    size_t weight_pages, weight_pages_on_node;
    struct nxr_pool_stats pool;
};

struct svc_demo_result {
    struct svc_demo_config config;
    double weights_mib;       /* one replica */
    struct svc_path_result nxr, baseline, flat, omp, span;
    size_t span_members;        /* span mode: the span's domains */
    struct svc_machine machine; /* all zero when not measured */
    double flops_per_row;       /* the model's GEMM FLOPs for one row */
    double weight_bytes;        /* the model's weights, read once per forward pass */
    size_t domain_count;
    struct svc_domain_result domains[64];
    char flat_cpus[128];
    int flat_weights_node;
    /* nxr_runtime_cpu_quota of the nxr path's runtime: CPUs (0: none) and
     * where that came from (or why there is none). */
    unsigned cpu_quota;
    char cpu_quota_source[384];
    char compete_cpus[128]; /* the CPUs config.compete processes were pinned to */
    unsigned omp_threads;
    size_t rounds_planned, rounds_run;
    size_t requests_compared; /* answered by every path: the outputs compared */
    bool stopped_early;       /* the time budget cut a round short */
    /* Comparison (when config.compare). */
    bool flat_identical, baseline_identical;
    double omp_max_diff;
    double span_max_diff;     /* span mode: against nxr's per-domain outputs */
    /* The nxr path by budget phase (service/phases.h): one phase, or one
     * more per change of the budgets while it served. */
    struct svc_phases phases;
    bool outputs_match;
    char error[256];          /* why a run failed */
};

/*
 * Runs the demo. Returns 0 and fills *res; on bad input -EINVAL with
 * *bad_input set and res->error naming the flag; on any other failure a
 * negative status with res->error saying what failed. Either way nothing
 * is left running.
 */
int svc_demo_run(const struct svc_demo_config *c, struct svc_demo_result *res, bool *bad_input);

#endif /* NXR_SERVICE_DEMO_H */
