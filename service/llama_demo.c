/* `nxr demo`'s language model run (see llama_demo.h). */
#include "service/llama_demo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hwloc.h>
#include <sched.h>

#include "runtime/nxr.h"
#include "service/llama_omp_path.h"
#include "service/plot.h"
#include "service/llama_serve.h"
#include "service/llama_shards.h"

#define MAX_DOMAINS 64

void svc_llama_demo_config_init(struct svc_llama_demo_config *c)
{
    memset(c, 0, sizeof *c);
    svc_llama_shape_named("15m", &c->shape);
    c->format = SVC_LLAMA_F32;
    c->clients = 8;
    c->sequences = 16;
    c->prompt_min = 16, c->prompt_max = 256;
    c->gen_min = 16, c->gen_max = 128;
    c->kv_mib = 256;
    c->step_tokens = 64;
    c->prefill_tokens = SVC_LLAMA_PREFILL_TOKENS;
    c->block_tokens = 16;
    c->seed = 1;
    c->compare = true;
    c->rounds = 2;
    c->time_budget_s = 40;
    c->machine_s = 1.0;
}

/* Sums samples into a path's result (the samples are sorted in place). */
static void summarise(struct svc_llama_path_result *p, double *ttft, size_t nttft, double *itl,
                      size_t nitl)
{
    p->ttft = svc_latency_summarise(ttft, nttft);
    p->itl = svc_latency_summarise(itl, nitl);
    p->tokens_per_s = p->wall_s > 0 ? (double)p->tokens / p->wall_s : 0;
}

struct samples {
    double *ttft, *itl;
    size_t nttft, nitl;
    /* The step log across rounds, on the path's own serving clock (each
     * round's steps offset by the serving time of the rounds before). */
    double *step_s, *step_rate;
    unsigned *step_domain;
    size_t nsteps;
    double served_s;
};

static int append(struct samples *s, const struct svc_llama_serve_result *r)
{
    double *t = realloc(s->ttft, (s->nttft + r->sequences) * sizeof(double));
    if (t == NULL)
        return -ENOMEM;
    s->ttft = t;
    double *i = realloc(s->itl, (s->nitl + r->itl_count + 1) * sizeof(double));
    if (i == NULL)
        return -ENOMEM;
    s->itl = i;
    const size_t ns = s->nsteps + r->step_count + 1;
    double *st = realloc(s->step_s, ns * sizeof(double));
    if (st != NULL)
        s->step_s = st;
    double *sr = realloc(s->step_rate, ns * sizeof(double));
    if (sr != NULL)
        s->step_rate = sr;
    unsigned *sd = realloc(s->step_domain, ns * sizeof(unsigned));
    if (sd != NULL)
        s->step_domain = sd;
    if (st == NULL || sr == NULL || sd == NULL)
        return -ENOMEM;
    for (size_t k = 0; k < r->step_count; k++) {
        s->step_s[s->nsteps + k] = s->served_s + r->step_s[k];
        s->step_rate[s->nsteps + k] = r->step_tokens_per_s[k];
        s->step_domain[s->nsteps + k] = r->step_domain[k];
    }
    s->nsteps += r->step_count;
    s->served_s += r->wall_s;
    memcpy(s->ttft + s->nttft, r->ttft_ms, r->sequences * sizeof(double));
    memcpy(s->itl + s->nitl, r->itl_ms, r->itl_count * sizeof(double));
    s->nttft += r->sequences;
    s->nitl += r->itl_count;
    return 0;
}

enum { PATH_NXR, PATH_UNBATCHED, PATH_FLAT, PATH_OMP, PATH_SPAN, PATHS };
static const char *const path_names[PATHS] = {"nxr", "unbatched", "flat", "OpenMP", "span"};

/* What a path serves with: a runtime and its weights (nxr's paths), or
 * the model and threads (OpenMP). */
struct path {
    nxr_runtime_t *rt;
    const struct svc_llama_weights *w;
    const struct svc_llama_shards *span; /* the span path's */
    bool batched;
    const struct svc_llama *model;
    int threads;
    int *tokens;
    struct svc_llama_path_result *res;
    struct svc_llama_domain_result *doms; /* per domain figures (nxr's only) */
    struct samples smp;
};

/* One path's round: sequences [first, first + count), tokens into tokens. */
static int serve_round(const struct svc_llama_demo_config *c, struct path *pa, size_t first,
                       size_t count, char *err, size_t errsz)
{
    const bool batched = pa->batched;
    struct svc_llama_path_result *p = pa->res;
    struct svc_llama_domain_result *doms = pa->doms;
    int *tokens = pa->tokens + first * c->gen_max;
    struct svc_llama_serve_config sc = {
        .stream = {.seed = c->seed,
                   .prompt_min = c->prompt_min,
                   .prompt_max = c->prompt_max,
                   .gen_min = c->gen_min,
                   .gen_max = c->gen_max},
        .first = first,
        .count = count,
        .clients = c->clients,
        .span = pa->span,
    };
    svc_llama_batch_opts_init(&sc.batch);
    sc.batch.step_tokens = c->step_tokens;
    sc.batch.prefill_tokens = c->prefill_tokens;
    sc.batch.max_active = batched ? (c->clients < c->step_tokens ? c->clients : c->step_tokens) : 1;
    sc.batch.kv_bytes = c->kv_mib << 20;
    sc.batch.block_tokens = c->block_tokens;
    struct svc_llama_serve_result r;
    int rc = pa->rt != NULL ? svc_llama_serve(pa->rt, pa->w, &sc, tokens, &r, err, errsz)
                            : svc_llama_omp_serve(pa->model, pa->threads, &sc, tokens, &r);
    if (rc != 0) {
        if (pa->rt == NULL)
            snprintf(err, errsz, "%s", nxr_strerror(rc));
        return rc;
    }
    p->ran = true;
    p->sequences += r.sequences;
    p->tokens += r.tokens;
    p->steps += r.steps;
    p->rows += r.rows;
    p->wall_s += r.wall_s;
    p->batch_mean += (double)r.batch_sum; /* divided by the steps at the end */
    for (size_t d = 0; doms != NULL && d < r.domains; d++) {
        doms[d].tokens += r.domain[d].tokens;
        doms[d].steps += r.domain[d].steps;
        doms[d].batch_mean += (double)r.domain[d].batch_sum;
        doms[d].kv_on_node = r.domain[d].kv_on_node;
    }
    rc = append(&pa->smp, &r);
    svc_llama_serve_result_free(&r);
    return rc;
}

/* The flat runtime: one declared domain over rt's whole allowed set. */
static int flat_runtime(nxr_runtime_t *rt, struct svc_llama_demo_result *res, nxr_runtime_t **out)
{
    hwloc_const_bitmap_t allowed = nxr_runtime_allowed_cpus(rt);
    char decl[160];
    snprintf(decl, sizeof decl, "0:");
    hwloc_bitmap_list_snprintf(decl + 2, sizeof decl - 2, allowed);
    hwloc_bitmap_list_snprintf(res->flat_cpus, sizeof res->flat_cpus, allowed);
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.domains = decl;
    return nxr_runtime_create(&o, out);
}

/* Long enough for the previous path's idle threads to stop spinning
 * (nxr's NXR_SPIN ~0.1 ms, libgomp's a few ms): no path pays for another's
 * spin (as the MLP demo, service/demo.c). */
static void settle(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static unsigned allowed_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    const int n = CPU_COUNT(&set);
    return n > 0 ? (unsigned)n : 1;
}

/* --plot: inter-token latency and time to first token of each path (CDFs),
 * and nxr's tokens/s per step over its serving time, one curve a domain. */
static int plot(const struct svc_llama_demo_config *c, const struct path *paths, size_t domains,
                struct svc_llama_demo_result *res)
{
    struct svc_plot_series itl[PATHS], ttft[PATHS], steps[SVC_LLAMA_SERVE_MAX_DOMAINS];
    size_t np = 0;
    for (size_t p = 0; p < PATHS; p++)
        if (paths[p].res != NULL && paths[p].res->ran) {
            itl[np] = (struct svc_plot_series){
                .name = path_names[p], .y = paths[p].smp.itl, .count = paths[p].smp.nitl};
            ttft[np++] = (struct svc_plot_series){
                .name = path_names[p], .y = paths[p].smp.ttft, .count = paths[p].smp.nttft};
        }
    /* Each domain's steps, gathered in the log's order (per domain, time
     * still increases). */
    const struct samples *sm = &paths[PATH_NXR].smp;
    double *x = malloc((sm->nsteps + 1) * sizeof(double)),
           *y = malloc((sm->nsteps + 1) * sizeof(double));
    char names[SVC_LLAMA_SERVE_MAX_DOMAINS][32];
    size_t used = 0;
    for (size_t d = 0; x != NULL && y != NULL && d < domains; d++) {
        const size_t begin = used;
        for (size_t k = 0; k < sm->nsteps; k++)
            if (sm->step_domain[k] == d) {
                x[used] = sm->step_s[k];
                y[used++] = sm->step_rate[k];
            }
        snprintf(names[d], sizeof names[d], "nxr, domain %d", res->domains[d].id);
        steps[d] = (struct svc_plot_series){
            .name = names[d], .x = x + begin, .y = y + begin, .count = used - begin};
    }
    int rc = -ENOMEM;
    char why[200] = "out of memory";
    if (x != NULL && y != NULL) {
        const struct svc_plot_panel panels[] = {
            {.kind = SVC_PLOT_CDF,
             .title = "inter-token latency, each path (CDF)",
             .x_label = "ms between a sequence's tokens (log scale)",
             .y_label = "fraction of tokens at or below",
             .series = itl,
             .series_count = np},
            {.kind = SVC_PLOT_CDF,
             .title = "time to first token, each path (CDF)",
             .x_label = "ms from submission to the first token (log scale)",
             .y_label = "fraction of sequences at or below",
             .series = ttft,
             .series_count = np},
            {.kind = SVC_PLOT_LINES,
             .title = "nxr: tokens/s of each step over its serving time",
             .x_label = "seconds of serving (nxr's rounds)",
             .y_label = "tokens/s in the step",
             .series = steps,
             .series_count = domains},
        };
        rc = svc_plot_write_svg(c->plot_path, "nxr demo: the language model, each path", panels, 3,
                                why, sizeof why);
    }
    if (rc != 0)
        snprintf(res->error, sizeof res->error, "--plot: %s", why);
    free(x);
    free(y);
    return rc;
}

/* --span: the model's matrices sharded over every domain of rt (a span
 * opened for the sharding only: the serving thread opens its own), and
 * each domain's shards checked on its node. */
static int span_shards(nxr_runtime_t *rt, const struct svc_llama *model,
                       struct svc_llama_shards *shards, struct svc_llama_demo_result *res)
{
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    so.every = true;
    nxr_ctx_t *span = NULL;
    int rc = nxr_span_create(rt, &so, &span);
    if (rc == 0)
        rc = svc_llama_shards_create(shards, span, model);
    if (rc != 0) {
        snprintf(res->error, sizeof res->error, "--span: sharding the weights: %s: %s",
                 nxr_strerror(rc), nxr_last_error());
        nxr_ctx_destroy(span);
        return rc;
    }
    res->span_members = nxr_span_domain_count(span);
    for (size_t i = 0; i < res->domain_count; i++)
        for (size_t m = 0; m < res->span_members; m++)
            if (nxr_domain_id(svc_llama_shards_domain(shards, m)) == res->domains[i].id)
                res->domains[i].shards_on_node = svc_llama_shards_on_node(shards, m);
    nxr_ctx_destroy(span);
    return 0;
}

int svc_llama_demo_run(const struct svc_llama_demo_config *c, struct svc_llama_demo_result *res,
                       bool *bad_input)
{
    memset(res, 0, sizeof *res);
    res->config = *c;
    res->size = c->shape.name;
    res->fraction_of_limit = -1;
    res->bound_tokens_per_s = -1;
    res->fraction_of_compute = -1;
    res->flat_weights_huge = -1;
    res->compute_bound_tokens_per_s = -1;
    *bad_input = false;
    struct svc_llama_shape shape = c->shape;
    /* The context is a serving parameter, not a weight: long enough for
     * the longest sequence of the stream. */
    if (shape.seq < c->prompt_max + c->gen_max - 1)
        shape.seq = c->prompt_max + c->gen_max - 1;
    res->config.shape = shape;
    const char *problem = svc_llama_shape_problem(&shape);
    if (problem != NULL || c->clients == 0 || c->sequences == 0 || c->rounds == 0) {
        *bad_input = true;
        snprintf(res->error, sizeof res->error, "%s",
                 problem != NULL ? problem : "--clients and --sequences must be at least 1");
        return -EINVAL;
    }
    nxr_runtime_t *rt = NULL, *flat_rt = NULL;
    struct svc_llama model = {0};
    struct svc_llama_weights w = {0}, wflat = {0};
    struct svc_llama_shards shards = {0};
    struct path paths[PATHS] = {0};
    char why[256] = "";
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.domains = c->domains;
    int rc = nxr_runtime_create(&o, &rt);
    if (rc == 0 && c->runtime_hook != NULL)
        c->runtime_hook(c->runtime_hook_arg, rt, false);
    if (rc != 0) {
        *bad_input = c->domains != NULL;
        snprintf(res->error, sizeof res->error, "%s%s: %s", c->domains ? "--domains: " : "runtime",
                 nxr_strerror(rc), nxr_last_error());
        return rc;
    }
    const size_t n = nxr_runtime_domain_count(rt);
    nxr_domain_t *domains[MAX_DOMAINS];
    if (n > MAX_DOMAINS) {
        rc = -EINVAL;
        snprintf(res->error, sizeof res->error, "%zu domains (at most %d)", n, MAX_DOMAINS);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        domains[i] = nxr_runtime_domain_at(rt, i);
    if ((rc = svc_llama_create(&shape, c->seed, &model)) != 0) {
        snprintf(res->error, sizeof res->error, "the model's weights: %s", nxr_strerror(rc));
        goto out;
    }
    if ((rc = svc_llama_weights_create(&w, rt, &model, c->format, domains, n)) != 0) {
        snprintf(res->error, sizeof res->error, "packing the weights: %s: %s", nxr_strerror(rc),
                 nxr_last_error());
        goto out;
    }
    res->weight_bytes = (double)svc_llama_weights_step_bytes(&w);
    res->domain_count = n;
    for (size_t i = 0; i < n; i++) {
        res->domains[i].id = nxr_domain_id(domains[i]);
        res->domains[i].node = nxr_domain_node(domains[i]);
        res->domains[i].weights_on_node = svc_llama_weights_on_node(&w, i);
        res->domains[i].weights_huge = svc_llama_weights_huge(&w, i);
        res->domains[i].kv_on_node = -1;
        res->domains[i].shards_on_node = -1;
    }
    if (c->span && (rc = span_shards(rt, &model, &shards, res)) != 0)
        goto out;
    if (c->compare) {
        nxr_domain_t *fd = NULL;
        if ((rc = flat_runtime(rt, res, &flat_rt)) != 0 ||
            (fd = nxr_runtime_domain_at(flat_rt, 0),
             rc = svc_llama_weights_create(&wflat, flat_rt, &model, c->format, &fd, 1)) != 0) {
            snprintf(res->error, sizeof res->error, "flat path: %s: %s", nxr_strerror(rc),
                     nxr_last_error());
            goto out;
        }
        res->flat_weights_huge = svc_llama_weights_huge(&wflat, 0);
    }
    if (c->machine_s > 0 &&
        (rc = svc_machine_measure(rt, c->machine_s, &res->machine, why, sizeof why)) != 0) {
        snprintf(res->error, sizeof res->error, "measuring the machine: %s", why);
        goto out;
    }
    /* The paths that run, in the order the first round runs them. */
    size_t order[PATHS], npaths = 0;
    order[npaths++] = PATH_NXR;
    for (size_t p = PATH_UNBATCHED; c->compare && p <= PATH_OMP; p++)
        order[npaths++] = p;
    if (c->span)
        order[npaths++] = PATH_SPAN;
    paths[PATH_NXR] =
        (struct path){.rt = rt, .w = &w, .batched = true, .res = &res->nxr, .doms = res->domains};
    paths[PATH_UNBATCHED] = (struct path){.rt = rt, .w = &w, .res = &res->unbatched};
    paths[PATH_FLAT] =
        (struct path){.rt = flat_rt, .w = &wflat, .batched = true, .res = &res->flat};
    paths[PATH_OMP] =
        (struct path){.model = &model,
                      .threads = (int)(c->omp_threads != 0 ? c->omp_threads : allowed_cpus()),
                      .res = &res->omp};
    paths[PATH_SPAN] =
        (struct path){.rt = rt, .w = &w, .span = &shards, .batched = true, .res = &res->span};
    for (size_t k = 0; k < PATHS; k++)
        if ((paths[k].tokens = calloc(c->sequences * c->gen_max, sizeof(int))) == NULL) {
            rc = -ENOMEM;
            snprintf(res->error, sizeof res->error, "out of memory for the tokens");
            goto out;
        }
    /* Rounds: each path serves the round's sequences, the order rotating. */
    const size_t rounds = c->rounds < c->sequences ? c->rounds : c->sequences;
    res->rounds_planned = rounds;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t r = 0; r < rounds && rc == 0; r++) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (r > 0 && c->time_budget_s > 0 &&
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9 >
                c->time_budget_s)
            break;
        res->rounds_run = r + 1;
        const size_t first = c->sequences * r / rounds;
        const size_t count = c->sequences * (r + 1) / rounds - first;
        for (size_t k = 0; k < npaths && rc == 0; k++) {
            const size_t p = order[(k + r) % npaths];
            settle();
            if ((rc = serve_round(c, &paths[p], first, count, why, sizeof why)) != 0) {
                *bad_input = rc == -EINVAL;
                snprintf(res->error, sizeof res->error, "%s path: %s", path_names[p], why);
            }
        }
    }
    if (rc != 0)
        goto out;
    for (size_t j = 0; j < npaths; j++) {
        const size_t k = order[j];
        struct svc_llama_path_result *p = paths[k].res;
        if (p->steps > 0)
            p->batch_mean /= (double)p->steps;
        summarise(p, paths[k].smp.ttft, paths[k].smp.nttft, paths[k].smp.itl, paths[k].smp.nitl);
    }
    for (size_t i = 0; i < n; i++)
        if (res->domains[i].steps > 0)
            res->domains[i].batch_mean /= (double)res->domains[i].steps;
    if (res->machine.read_gbs > 0 && res->nxr.wall_s > 0) {
        const double bytes_per_s = res->weight_bytes * (double)res->nxr.steps / res->nxr.wall_s;
        res->fraction_of_limit = bytes_per_s / (res->machine.read_gbs * 1e9);
        res->bound_tokens_per_s =
            res->machine.read_gbs * 1e9 / res->weight_bytes * res->nxr.batch_mean;
    }
    if (res->machine.gemm_peak_gflops > 0 && res->nxr.wall_s > 0 && res->nxr.rows > 0) {
        /* Every row runs the layers; the classifier only the rows that
         * make a token, one per token. Counting it for every row (as the
         * step's weight bytes do) put 15m's products at 0.39-0.45 of the
         * peak where they ran at about a quarter of it. */
        const double flops =
            2.0 * ((double)svc_llama_layer_macs(&shape) * (double)res->nxr.rows +
                   (double)svc_llama_classifier_macs(&shape) * (double)res->nxr.tokens);
        res->fraction_of_compute = flops / res->nxr.wall_s / (res->machine.gemm_peak_gflops * 1e9);
        res->compute_bound_tokens_per_s =
            res->machine.gemm_peak_gflops * 1e9 / (flops / (double)res->nxr.tokens);
    }
    if (npaths > 1) {
        /* The rounds run served sequences [0, served) on every path; nxr's
         * engine paths that ran must have made the same tokens. */
        const size_t served = c->sequences * res->rounds_run / rounds;
        const size_t bytes = served * c->gen_max * sizeof(int);
        res->sequences_compared = served;
        res->tokens_match = true;
        for (size_t j = 1; j < npaths; j++)
            if (order[j] != PATH_OMP)
                res->tokens_match &=
                    memcmp(paths[PATH_NXR].tokens, paths[order[j]].tokens, bytes) == 0;
    }
    if (c->compare) {
        const size_t served = res->sequences_compared;
        for (size_t j = 0; j < served; j++)
            res->omp_sequences_same +=
                memcmp(paths[PATH_NXR].tokens + j * c->gen_max,
                       paths[PATH_OMP].tokens + j * c->gen_max, c->gen_max * sizeof(int)) == 0;
    }
    if (c->plot_path != NULL)
        rc = plot(c, paths, n, res);
out:
    for (size_t k = 0; k < PATHS; k++) {
        free(paths[k].tokens);
        free(paths[k].smp.ttft), free(paths[k].smp.itl);
        free(paths[k].smp.step_s), free(paths[k].smp.step_rate), free(paths[k].smp.step_domain);
    }
    svc_llama_shards_destroy(&shards);
    svc_llama_weights_destroy(&wflat);
    svc_llama_weights_destroy(&w);
    svc_llama_destroy(&model);
    nxr_runtime_destroy(flat_rt);
    if (rt != NULL && c->runtime_hook != NULL)
        c->runtime_hook(c->runtime_hook_arg, rt, true);
    nxr_runtime_destroy(rt);
    return rc;
}
