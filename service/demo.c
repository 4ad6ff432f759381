/* `nxr demo` as a library (see demo.h). */
#include "service/demo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/compare.h"
#include "service/compete.h"
#include "service/load.h"
#include "service/machine.h"
#include "service/model.h"
#include "service/span_path.h"
#include "service/omp_path.h"
#include "service/plot.h"
#include "service/server.h"
#include "service/stream.h"
#include "service/weights.h"

#define MAX_DOMAINS 64
#define MAX_WEIGHT_BYTES ((size_t)4 << 30)

const char *svc_weights_name(enum svc_weights_layout w)
{
    return w == SVC_WEIGHTS_PACKED ? "packed" : "plain";
}

int svc_weights_parse(const char *s, enum svc_weights_layout *out)
{
    for (int w = SVC_WEIGHTS_PLAIN; w <= SVC_WEIGHTS_PACKED; w++) {
        if (strcmp(s, svc_weights_name((enum svc_weights_layout)w)) == 0) {
            *out = (enum svc_weights_layout)w;
            return 0;
        }
    }
    return -EINVAL;
}

void svc_demo_config_init(struct svc_demo_config *c)
{
    *c = (struct svc_demo_config){
        .requests = 4000,
        .clients = 4,
        .batch_min = 1,
        .batch_max = 16,
        .hidden = 256,
        .layers = 8,
        .vocab = 512,
        .domains = NULL,
        .executor = SVC_EXECUTOR_NXR,
        .seed = 1,
        .compare = true,
        .rounds = 8,
        .split_rows = 1,
        .max_batch = 64,
        .weights = SVC_WEIGHTS_PACKED,
        .machine_s = 1.0,
        .time_budget_s = 25.0,
    };
}

int svc_demo_config_check(const struct svc_demo_config *c, char *err, size_t errsz)
{
    if (c->requests < 1 || c->requests > 10000000)
        snprintf(err, errsz, "--requests: %zu is outside 1..10000000", c->requests);
    else if (c->clients < 1 || c->clients > 256)
        snprintf(err, errsz, "--clients: %u is outside 1..256", c->clients);
    else if (c->batch_min < 1 || c->batch_min > c->batch_max || c->batch_max > 1024)
        snprintf(err, errsz, "--batch: %zu-%zu is not MIN-MAX with 1 <= MIN <= MAX <= 1024",
                 c->batch_min, c->batch_max);
    else if (c->hidden < 8 || c->hidden > 8192)
        snprintf(err, errsz, "--hidden: %zu is outside 8..8192", c->hidden);
    else if (c->layers < 1 || c->layers > 256)
        snprintf(err, errsz, "--layers: %zu is outside 1..256", c->layers);
    else if (c->max_batch < 1 || c->max_batch > 4096)
        snprintf(err, errsz, "--max-batch: %zu is outside 1..4096", c->max_batch);
    else if (c->weights == SVC_WEIGHTS_PACKED && c->executor != SVC_EXECUTOR_NXR)
        snprintf(err, errsz, "--weights: packed weights live in nxr's own domains' memory; "
                             "--executor %s serves plain weights", svc_executor_name(c->executor));
    else if (c->span && !c->compare)
        snprintf(err, errsz, "--span: serves beside the per-domain mode and the peers; drop "
                 "--no-compare");
    else if (c->span && c->executor != SVC_EXECUTOR_NXR)
        snprintf(err, errsz, "--span: spans run on nxr's own domains (--executor nxr)");
    else if (c->compete > SVC_COMPETE_MAX)
        snprintf(err, errsz, "--compete: %u is outside 0..%d", c->compete, SVC_COMPETE_MAX);
    else if (c->vocab < 1 || c->rounds < 1)
        snprintf(err, errsz, "vocab and rounds must be positive");
    else {
        struct svc_model_shape s = svc_model_shape_make(c->hidden, c->layers, c->vocab);
        size_t bytes = svc_model_floats(&s) * sizeof(float);
        if (bytes <= MAX_WEIGHT_BYTES)
            return 0;
        snprintf(err, errsz, "--hidden/--layers: %zu x %zu needs %.1f GiB of weights per domain "
                 "(at most 4 GiB)", c->hidden, c->layers, (double)bytes / (1 << 30));
    }
    return -EINVAL;
}

/* Everything a run holds, torn down in reverse by teardown(). */
struct run {
    const struct svc_demo_config *c;
    struct svc_model_shape shape;
    nxr_runtime_t *rt, *flat_rt;
    struct svc_attached attached;
    struct svc_replica replicas[MAX_DOMAINS];
    struct svc_packed packed; /* --weights packed: the matrices, one copy per domain */
    size_t domains;
    float *master;
    struct svc_server *server, *baseline, *flat;
    struct svc_omp_path *omp;
    struct svc_span_path *span; /* --span */
};

static void teardown(struct run *run)
{
    svc_server_stop(run->server);
    svc_server_stop(run->baseline);
    svc_server_stop(run->flat);
    svc_omp_path_stop(run->omp);
    svc_span_path_stop(run->span);
    for (size_t i = 0; i < run->domains; i++)
        svc_replica_destroy(&run->replicas[i]);
    svc_packed_destroy(&run->packed);
    nxr_runtime_destroy(run->flat_rt);
    if (run->rt != NULL && run->c->runtime_hook != NULL)
        run->c->runtime_hook(run->c->runtime_hook_arg, run->rt, true);
    nxr_runtime_destroy(run->rt); /* drains, then releases attached executors */
    svc_attached_release(&run->attached);
    free(run->master);
}

static void settle(void)
{
    /* Long enough for the previous path's idle threads to stop spinning
     * (nxr's NXR_SPIN ~0.1 ms, libgomp's a few ms): no path pays for
     * another's spin. */
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* The baseline runs unless the configuration is the baseline already. */
static bool has_baseline(const struct svc_demo_config *c)
{
    return c->compare && (c->max_batch != 1 || c->weights != SVC_WEIGHTS_PLAIN);
}

static int start(struct run *run, struct svc_demo_result *res, bool *bad_input)
{
    const struct svc_demo_config *c = run->c;
    char why[512] = "";
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.domains = c->domains;
    int rc = nxr_runtime_create(&o, &run->rt);
    if (rc == 0 && c->runtime_hook != NULL)
        c->runtime_hook(c->runtime_hook_arg, run->rt, false);
    if (rc != 0) {
        snprintf(why, sizeof(why), "%s", nxr_last_error());
        *bad_input = c->domains != NULL;
        snprintf(res->error, sizeof(res->error), "%s%s%s%s", c->domains ? "--domains: " : "runtime: ",
                 nxr_strerror(rc), why[0] ? ": " : "", why);
        return rc;
    }
    const char *quota_source = NULL;
    res->cpu_quota = nxr_runtime_cpu_quota(run->rt, &quota_source);
    snprintf(res->cpu_quota_source, sizeof(res->cpu_quota_source), "%s", quota_source);
    run->domains = nxr_runtime_domain_count(run->rt);
    if (run->domains > MAX_DOMAINS) {
        snprintf(res->error, sizeof(res->error), "%zu domains (the demo serves at most %d)",
                 run->domains, MAX_DOMAINS);
        return -EINVAL;
    }

    /* Weights: one master copy from the seed, one replica per domain. */
    const size_t floats = svc_model_floats(&run->shape);
    run->master = malloc(floats * sizeof(float));
    if (run->master == NULL) {
        snprintf(res->error, sizeof(res->error), "out of memory for the weights");
        return -ENOMEM;
    }
    svc_model_fill(&run->shape, c->seed, run->master);
    res->weights_mib = (double)(floats * sizeof(float)) / (1 << 20);
    for (size_t i = 0; i < run->domains; i++) {
        nxr_domain_t *d = nxr_runtime_domain_at(run->rt, i);
        rc = svc_replica_create(&run->replicas[i], d, run->master, floats * sizeof(float));
        if (rc != 0) {
            snprintf(res->error, sizeof(res->error), "weights on domain %d: %s", nxr_domain_id(d),
                     nxr_strerror(rc));
            return rc;
        }
    }

    if (c->weights == SVC_WEIGHTS_PACKED) {
        int ids[MAX_DOMAINS];
        for (size_t i = 0; i < run->domains; i++)
            ids[i] = nxr_domain_id(nxr_runtime_domain_at(run->rt, i));
        rc = svc_packed_create(&run->packed, run->rt, &run->shape, run->master, ids, run->domains);
        if (rc != 0) {
            *bad_input = rc == NXR_EUNSUPPORTED;
            snprintf(res->error, sizeof(res->error), "--weights packed: %s%s", nxr_strerror(rc),
                     rc == NXR_EUNSUPPORTED ? " (packing needs nxr's native GEMM provider; "
                                              "use --weights plain)"
                                            : "");
            return rc;
        }
        for (size_t i = 0; i < run->domains; i++) {
            run->replicas[i].packed = &run->packed;
            svc_replica_verify(&run->replicas[i]);
        }
    }

    rc = svc_attach_executors(run->rt, c->executor, &run->attached, why, sizeof(why));
    if (rc != 0) {
        *bad_input = true;
        snprintf(res->error, sizeof(res->error), "--executor %s: cannot be attached: %s",
                 svc_executor_name(c->executor), why);
        return rc;
    }

    struct svc_slot_decl slots[MAX_DOMAINS];
    for (size_t i = 0; i < run->domains; i++) {
        nxr_domain_t *d = nxr_runtime_domain_at(run->rt, i);
        slots[i] = (struct svc_slot_decl){
            .domain_id = c->executor == SVC_EXECUTOR_NXR ? nxr_domain_id(d) : run->attached.ids[i],
            .weights = run->replicas[i].w,
            .packed = c->weights == SVC_WEIGHTS_PACKED
                          ? (const nxr_weights_t *const *)run->packed.m
                          : NULL,
            .memory = d,
        };
    }
    struct svc_server_opts so = {.shape = run->shape, .split_rows = c->split_rows,
                                 .max_batch = c->max_batch};
    rc = svc_server_start(&run->server, run->rt, slots, run->domains, &so, why, sizeof(why));
    if (rc != 0) {
        snprintf(res->error, sizeof(res->error), "serving threads: %s", why);
        return rc;
    }
    if (c->machine_s > 0 &&
        (rc = svc_machine_measure(run->rt, c->machine_s, &res->machine, why, sizeof(why))) != 0) {
        snprintf(res->error, sizeof(res->error), "measuring the machine: %s", why);
        return rc;
    }
    if (!c->compare)
        return 0;

    /* The peers serve each request alone, plain weights: as before batching. */
    so.max_batch = 1;
    for (size_t i = 0; i < run->domains; i++)
        slots[i].packed = NULL;
    if (has_baseline(c) &&
        (rc = svc_server_start(&run->baseline, run->rt, slots, run->domains, &so, why,
                               sizeof(why))) != 0) {
        snprintf(res->error, sizeof(res->error), "baseline path: %s", why);
        return rc;
    }

    /* Flat: one declared domain over the whole allowed set. */
    hwloc_const_bitmap_t allowed = nxr_runtime_allowed_cpus(run->rt);
    char decl[160];
    snprintf(decl, sizeof(decl), "0:");
    hwloc_bitmap_list_snprintf(decl + 2, sizeof(decl) - 2, allowed);
    hwloc_bitmap_list_snprintf(res->flat_cpus, sizeof(res->flat_cpus), allowed);
    res->flat_weights_node = nxr_domain_node(nxr_runtime_domain_at(run->rt, 0));
    nxr_runtime_opts_init(&o);
    o.domains = decl;
    rc = nxr_runtime_create(&o, &run->flat_rt);
    if (rc != 0)
        snprintf(why, sizeof(why), "%s", nxr_last_error());
    struct svc_slot_decl flat = {.domain_id = 0, .weights = run->replicas[0].w};
    if (rc == 0)
        rc = svc_server_start(&run->flat, run->flat_rt, &flat, 1, &so, why, sizeof(why));
    if (rc != 0) {
        snprintf(res->error, sizeof(res->error), "flat path: %s: %s", nxr_strerror(rc), why);
        return rc;
    }
    res->omp_threads = (unsigned)hwloc_bitmap_weight(allowed);
    rc = svc_omp_path_start(&run->omp, &run->shape, run->replicas[0].w, res->omp_threads);
    if (rc != 0) {
        snprintf(res->error, sizeof(res->error), "OpenMP path: %s", nxr_strerror(rc));
        return rc;
    }
    if (c->span) {
        /* The model's parameters from the first replica; each matrix is
         * sharded across every domain at its first use (the warm-up). */
        rc = svc_span_path_start(&run->span, run->rt, &run->shape, run->replicas[0].w, why,
                                 sizeof(why));
        if (rc != 0)
            snprintf(res->error, sizeof(res->error), "span path: %s: %s", nxr_strerror(rc), why);
    }
    return rc;
}

enum { PATH_NXR, PATH_BASELINE, PATH_FLAT, PATH_OMP, PATH_SPAN, PATHS };

struct path {
    svc_submit_fn submit;
    void *service;   /* NULL: the path does not run */
    struct svc_server *server; /* when it is a server, for its pass counters */
    double *latency; /* per request of the stream */
    int *slot;
    /* The nxr path's only (its budget phases, service/phases.h): when
     * each request was sent, and each round's serving span. */
    long long *sent_ns;
    long long *spans;
    size_t nspans;
    double wall_s;
    size_t served;   /* requests answered in all rounds (its own throughput) */
    size_t rows;     /* their rows */
    float *out;      /* this round's outputs */
};

static int serve(struct run *run, struct path *all, struct svc_demo_result *res)
{
    const struct svc_demo_config *c = run->c;
    /* The paths that run, in a fixed order (the rounds rotate it). */
    struct path *paths[PATHS];
    size_t npaths = 0;
    for (size_t p = 0; p < PATHS; p++)
        if (all[p].service != NULL)
            paths[npaths++] = &all[p];
    struct svc_stream stream = {.shape = run->shape, .seed = c->seed, .batch_min = c->batch_min,
                                .batch_max = c->batch_max};
    int rc = 0;
    /* Warm-up: pools, lazy thread starts and caches, for every path; not counted. */
    struct svc_round warm;
    size_t warm_n = c->requests < 4 * (size_t)c->clients ? c->requests : 4 * (size_t)c->clients;
    if ((rc = svc_round_make(&warm, &stream, 0, warm_n)) != 0)
        return rc;
    double *lat = calloc(warm_n, sizeof(double));
    int *slot = calloc(warm_n, sizeof(int));
    float *out = malloc(warm.total_rows * run->shape.vocab * sizeof(float));
    if (lat == NULL || slot == NULL || out == NULL)
        rc = -ENOMEM;
    for (size_t p = 0; p < npaths && rc == 0; p++) {
        struct svc_load_result lr = {.latency_ms = lat, .slot = slot};
        rc = svc_load_run(&warm, &run->shape, c->clients, paths[p]->submit, paths[p]->service,
                          out, 0, &lr);
    }
    free(lat);
    free(slot);
    free(out);
    svc_round_free(&warm);
    if (rc != 0) {
        snprintf(res->error, sizeof(res->error), "warm-up: %s", nxr_strerror(rc));
        return rc;
    }
    for (size_t p = 0; p < npaths; p++)
        if (paths[p]->server != NULL)
            svc_server_reset_stats(paths[p]->server);
    /* The budgets the serving starts with: a change from here on begins a
     * phase of the nxr path's requests (read after each of its rounds). */
    svc_phases_start(&res->phases, run->rt, run->domains, svc_now_ns());

    const size_t rounds = c->rounds < c->requests ? c->rounds : c->requests;
    const size_t steps = rounds * npaths;
    /* Each path gets an equal slice of the time budget per round; one that
     * runs out of it (a fork-join team on a loaded machine) stops sending,
     * and the round counts the prefix of requests every path answered. */
    const long long slice_ns =
        c->time_budget_s > 0 ? (long long)(c->time_budget_s * 1e9 / (double)steps) : 0;
    size_t stream_first = 0, compared = 0, step = 0;
    size_t served[PATHS] = {0}; /* also where each path's next latency goes */
    res->rounds_planned = rounds;
    res->flat_identical = res->baseline_identical = true;
    res->omp_max_diff = 0.0;
    for (size_t r = 0; r < rounds && rc == 0; r++) {
        size_t count = c->requests / rounds + (r < c->requests % rounds ? 1 : 0);
        struct svc_round round;
        if ((rc = svc_round_make(&round, &stream, stream_first, count)) != 0)
            break;
        const size_t nout = round.total_rows * run->shape.vocab;
        for (size_t p = 0; p < npaths && rc == 0; p++)
            if ((paths[p]->out = malloc(nout * sizeof(float))) == NULL)
                rc = -ENOMEM;
        size_t common = count;
        for (size_t k = 0; k < npaths && rc == 0; k++) {
            const size_t p = (r + k) % npaths; /* the order rotates every round */
            struct path *P = paths[p];
            settle();
            struct svc_load_result lr = {.latency_ms = P->latency + served[p],
                                         .slot = P->slot + served[p],
                                         .sent_ns = P->sent_ns ? P->sent_ns + served[p] : NULL};
            const long long began = svc_now_ns();
            long long deadline = slice_ns > 0 ? began + slice_ns : 0;
            rc = svc_load_run(&round, &run->shape, c->clients, P->submit, P->service, P->out,
                              deadline, &lr);
            if (P->spans != NULL) {
                P->spans[2 * P->nspans] = began;
                P->spans[2 * P->nspans + 1] = svc_now_ns();
                P->nspans++;
                svc_phases_watch(&res->phases, run->rt);
            }
            P->wall_s += lr.wall_s;
            served[p] += lr.served;
            P->rows += lr.served < count ? round.offset[lr.served] : round.total_rows;
            if (lr.served < common)
                common = lr.served;
            if (c->progress != NULL)
                c->progress(c->progress_arg, ++step, steps);
        }
        if (common < count)
            res->stopped_early = true;
        const size_t ncommon = (common < count ? round.offset[common] : round.total_rows) *
                               run->shape.vocab;
        const float *nxr = all[PATH_NXR].out;
        if (rc == 0 && all[PATH_BASELINE].out != NULL &&
            !svc_outputs_identical(nxr, all[PATH_BASELINE].out, ncommon))
            res->baseline_identical = false;
        if (rc == 0 && all[PATH_FLAT].out != NULL &&
            !svc_outputs_identical(nxr, all[PATH_FLAT].out, ncommon))
            res->flat_identical = false;
        if (rc == 0 && all[PATH_OMP].out != NULL) {
            double d = svc_outputs_max_diff(nxr, all[PATH_OMP].out, ncommon);
            if (d > res->omp_max_diff)
                res->omp_max_diff = d;
        }
        if (rc == 0 && all[PATH_SPAN].out != NULL) {
            /* The inner-sharded products add per-domain partials: within
             * the OpenMP path's tolerance, not bit for bit. */
            double d = svc_outputs_max_diff(nxr, all[PATH_SPAN].out, ncommon);
            if (d > res->span_max_diff)
                res->span_max_diff = d;
        }
        for (size_t p = 0; p < npaths; p++) {
            free(paths[p]->out);
            paths[p]->out = NULL;
        }
        svc_round_free(&round);
        stream_first += count;
        compared += common;
        res->rounds_run = r + 1;
    }
    res->requests_compared = compared;
    for (size_t p = 0; p < npaths; p++)
        paths[p]->served = served[p];
    if (rc != 0)
        snprintf(res->error, sizeof(res->error), "serving: %s", nxr_strerror(rc));
    return rc;
}

/* Throughput and latency percentiles over everything the path answered
 * (all of the stream, unless the time budget cut its rounds short). */
static struct svc_path_result summarise(const struct path *p)
{
    const size_t n = p->served;
    struct svc_path_result r = {.ran = true, .requests = n, .rows = p->rows, .wall_s = p->wall_s};
    /* A server counts its passes; the OpenMP path computes each request
     * by itself. */
    r.passes = n;
    if (p->server != NULL) {
        r.passes = 0;
        for (size_t i = 0; i < svc_server_slots(p->server); i++) {
            struct svc_slot_stats st;
            svc_server_slot_stats(p->server, i, &st, NULL);
            r.passes += (size_t)st.passes;
        }
    }
    r.requests_per_s = p->wall_s > 0 ? (double)n / p->wall_s : 0.0;
    double *v = malloc(n * sizeof(double));
    if (v != NULL) {
        memcpy(v, p->latency, n * sizeof(double));
        r.latency = svc_latency_summarise(v, n);
        free(v);
    }
    return r;
}

static void describe_domains(struct run *run, const struct path *nxr, struct svc_demo_result *res)
{
    const size_t n = nxr->served;
    double *v = malloc(n * sizeof(double));
    hwloc_bitmap_t ran = hwloc_bitmap_alloc();
    res->domain_count = run->domains;
    for (size_t i = 0; i < run->domains; i++) {
        struct svc_domain_result *D = &res->domains[i];
        nxr_domain_t *d = nxr_runtime_domain_at(run->rt, i);
        nxr_domain_t *served = svc_server_slot_domain(run->server, i);
        D->id = nxr_domain_id(d);
        D->node = nxr_domain_node(d);
        hwloc_bitmap_list_snprintf(D->cpus, sizeof(D->cpus), nxr_domain_cpuset(d));
        D->placement = nxr_placement_name(nxr_domain_placement(served));
        D->admission = nxr_admission_name(nxr_domain_admission(served));
        D->binding = nxr_mem_binding_name(nxr_domain_mem_binding(d));
        D->workers = nxr_domain_workers(served);
        D->budget = nxr_domain_budget(served);
        D->budget_limit = nxr_domain_budget_limit(d);
        struct svc_slot_stats st;
        svc_server_slot_stats(run->server, i, &st, ran);
        D->requests = (size_t)st.served;
        D->split_requests = (size_t)st.split;
        D->passes = (size_t)st.passes;
        D->batched_requests = (size_t)st.batched;
        D->retried_batches = (size_t)st.retried;
        D->requests_per_s = nxr->wall_s > 0 ? (double)st.served / nxr->wall_s : 0.0;
        hwloc_bitmap_list_snprintf(D->ran_on, sizeof(D->ran_on), ran);
        D->ran_inside = hwloc_bitmap_isincluded(ran, nxr_domain_cpuset(d));
        size_t k = 0;
        for (size_t j = 0; v != NULL && j < n; j++)
            if (nxr->slot[j] == (int)i)
                v[k++] = nxr->latency[j];
        if (v != NULL)
            D->latency = svc_latency_summarise(v, k);
        svc_replica_verify(&run->replicas[i]); /* again, after serving: nothing moved */
        D->weights_on_node = run->replicas[i].on_node;
        D->shard_on_node = -1.0;
        for (size_t m = 0; run->span != NULL && m < svc_span_path_members(run->span); m++) {
            double on;
            if (svc_span_path_member(run->span, m, &on) != d)
                continue;
            D->shard_on_node = on;
            if (on < 0 || (D->weights_on_node >= 0 && on < D->weights_on_node))
                D->weights_on_node = on; /* the lowest of the domain's weights */
        }
        D->weight_pages = run->replicas[i].pages;
        D->weight_pages_on_node = run->replicas[i].pages_on_node;
        nxr_pool_stats(d, &D->pool);
    }
    hwloc_bitmap_free(ran);
    free(v);
}

/* --plot: one latency CDF per path that ran, in the paths' report order. */
static int plot(const struct svc_demo_config *c, const struct path *paths,
                struct svc_demo_result *res)
{
    static const char *const names[PATHS] = {[PATH_NXR] = "nxr: one context per domain",
                                             [PATH_BASELINE] = "baseline: max-batch 1",
                                             [PATH_FLAT] = "flat: one team",
                                             [PATH_OMP] = "OpenMP",
                                             [PATH_SPAN] = "span"};
    struct svc_plot_series series[PATHS];
    size_t n = 0;
    for (size_t p = 0; p < PATHS; p++)
        if (paths[p].service != NULL && paths[p].latency != NULL)
            series[n++] = (struct svc_plot_series){
                .name = names[p], .y = paths[p].latency, .count = paths[p].served};
    const struct svc_plot_panel panel = {.kind = SVC_PLOT_CDF,
                                         .title = "request latency, each path (CDF)",
                                         .x_label = "latency, ms (log scale)",
                                         .y_label = "fraction of requests at or below",
                                         .series = series,
                                         .series_count = n};
    char why[200];
    int rc = svc_plot_write_svg(c->plot_path, "nxr demo: the same requests through each path",
                                &panel, 1, why, sizeof why);
    if (rc != 0)
        snprintf(res->error, sizeof(res->error), "--plot: %s", why);
    return rc;
}

int svc_demo_run(const struct svc_demo_config *c, struct svc_demo_result *res, bool *bad_input)
{
    memset(res, 0, sizeof(*res));
    *bad_input = false;
    res->config = *c;
    if (svc_demo_config_check(c, res->error, sizeof(res->error)) != 0) {
        *bad_input = true;
        return -EINVAL;
    }
    struct run run = {.c = c, .shape = svc_model_shape_make(c->hidden, c->layers, c->vocab)};
    struct path paths[PATHS] = {0};
    int rc = start(&run, res, bad_input);
    struct svc_compete noise = {0};
    if (rc == 0 && c->compete > 0) {
        rc = svc_compete_start(&noise, nxr_runtime_allowed_cpus(run.rt), c->compete);
        if (rc != 0)
            snprintf(res->error, sizeof(res->error), "--compete %u: %s", c->compete,
                     nxr_strerror(rc));
        svc_compete_cpus(&noise, res->compete_cpus, sizeof(res->compete_cpus));
    }
    if (rc == 0) {
        struct svc_server *servers[] = {run.server, run.baseline, run.flat};
        for (size_t p = PATH_NXR; p <= PATH_FLAT; p++)
            paths[p] = (struct path){.submit = svc_server_submit, .service = servers[p],
                                     .server = servers[p]};
        paths[PATH_OMP] = (struct path){.submit = svc_omp_path_submit, .service = run.omp};
        paths[PATH_SPAN] = (struct path){.submit = svc_span_path_submit, .service = run.span};
    }
    for (size_t p = 0; p < PATHS && rc == 0; p++) {
        if (paths[p].service == NULL)
            continue;
        paths[p].latency = calloc(c->requests, sizeof(double));
        paths[p].slot = calloc(c->requests, sizeof(int));
        bool phases_ok = true;
        if (p == PATH_NXR) {
            paths[p].sent_ns = calloc(c->requests, sizeof(long long));
            paths[p].spans = calloc(2 * c->rounds, sizeof(long long));
            phases_ok = paths[p].sent_ns != NULL && paths[p].spans != NULL;
        }
        if (paths[p].latency == NULL || paths[p].slot == NULL || !phases_ok) {
            rc = -ENOMEM;
            snprintf(res->error, sizeof(res->error), "out of memory for the latencies");
        }
    }
    if (rc == 0)
        rc = serve(&run, paths, res);
    if (rc == 0) {
        res->flops_per_row = svc_model_flops_per_row(&run.shape);
        res->weight_bytes = (double)(svc_model_floats(&run.shape) * sizeof(float));
        res->nxr = summarise(&paths[PATH_NXR]);
        const struct path *n = &paths[PATH_NXR];
        rc = svc_phases_summarise(&res->phases, n->latency, n->sent_ns, n->served, n->spans,
                                  n->nspans);
        if (rc != 0)
            snprintf(res->error, sizeof(res->error), "out of memory for the budget phases");
    }
    if (rc == 0) {
        if (run.baseline != NULL)
            res->baseline = summarise(&paths[PATH_BASELINE]);
        if (c->compare) {
            res->flat = summarise(&paths[PATH_FLAT]);
            res->omp = summarise(&paths[PATH_OMP]);
            res->outputs_match = res->flat_identical && res->baseline_identical &&
                                 res->omp_max_diff <= SVC_OMP_TOLERANCE;
        }
        if (c->span) {
            res->span = summarise(&paths[PATH_SPAN]);
            res->span_members = svc_span_path_members(run.span);
            res->outputs_match = res->outputs_match && res->span_max_diff <= SVC_OMP_TOLERANCE;
        }
        describe_domains(&run, &paths[PATH_NXR], res);
    }
    if (rc == 0 && c->plot_path != NULL)
        rc = plot(c, paths, res);
    svc_compete_stop(&noise);
    for (size_t p = 0; p < PATHS; p++) {
        free(paths[p].latency);
        free(paths[p].slot);
        free(paths[p].sent_ns);
        free(paths[p].spans);
    }
    teardown(&run);
    return rc;
}
