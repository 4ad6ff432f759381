/*
 * The demo's report (see report.h): one walk over the result (report())
 * writes the JSON for scripts and the table for people through the
 * diagnostics' emitter (base/emit.h), so the two cannot disagree.
 *
 * How the text is laid out: each scalar's text is its value formatted for
 * its column (svc_emit_num, svc_emit_count), and each object's template places its
 * members with the words around them. What the table shows beside a value
 * that has no JSON member of its own (a path's name, a ratio on a goal's
 * line) is written into the template by the caller, so every member is
 * still named once.
 */
#include "service/report.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "service/compare.h"
#include "service/report_emit.h"

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

static const char *met(bool ok)
{
    return ok ? "met" : "missed";
}

/* A CPU list "0-2,5": a JSON array [0,1,2,5], shown as text (the list as
 * the table shows it). */
static void cpus(struct nxr__emit *e, const char *key, const char *list, const char *text)
{
    nxr__emit_list(e, key, text);
    for (const char *p = list; *p != '\0';) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p)
            break;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        for (long c = lo; c <= hi; c++)
            nxr__emit_int(e, NULL, c, NULL);
        p = *end == ',' ? end + 1 : end;
    }
    nxr__emit_end(e);
}

/* p50_ms, p95_ms, p99_ms: the three quantiles every row of the table shows. */
static void quantiles(struct nxr__emit *e, const struct svc_latency *l)
{
    svc_emit_num(e, "p50_ms", l->p50_ms, "%8.3f");
    svc_emit_num(e, "p95_ms", l->p95_ms, "%8.3f");
    svc_emit_num(e, "p99_ms", l->p99_ms, "%8.3f");
}

/* A path's figures, as members of the object open now (the nxr path's are
 * the report's own); the table's row template names them. */
static void path_members(struct nxr__emit *e, const struct svc_path_result *p)
{
    svc_emit_count(e, "requests", p->requests, "%zu");
    svc_emit_num(e, "requests_per_s", p->requests_per_s, "%9.0f");
    quantiles(e, &p->latency);
    svc_emit_num(e, "max_ms", p->latency.max_ms, "%.3f");
    svc_emit_num(e, "wall_s", p->wall_s, "%.3f");
    svc_emit_count(e, "rows", p->rows, "%zu");
    svc_emit_count(e, "passes", p->passes, "%zu");
}

/* The row template of a path named name (the columns of "path" below). */
static const char *row(char *buf, size_t size, const char *name)
{
    return svc_tmpl(buf, size, "  %-40s {requests_per_s} {p50_ms} {p95_ms} {p99_ms}\n", name);
}

/* ---- how close a path is to the machine --------------------------------- */

struct efficiency {
    double gflops, fraction_of_peak;     /* GEMM FLOPs of the rows it served */
    double weight_gbs, fraction_of_read; /* the weights, once per forward pass */
    double requests_per_pass;
    double bandwidth_bound; /* req/s if every pass streamed at read_gbs */
};

static struct efficiency efficiency(const struct svc_demo_result *r,
                                    const struct svc_path_result *p)
{
    struct efficiency e = {0};
    if (p->wall_s <= 0)
        return e;
    e.gflops = (double)p->rows * r->flops_per_row / p->wall_s / 1e9;
    e.weight_gbs = (double)p->passes * r->weight_bytes / p->wall_s / 1e9;
    e.fraction_of_peak = ratio(e.gflops, r->machine.gemm_peak_gflops);
    e.fraction_of_read = ratio(e.weight_gbs, r->machine.read_gbs);
    e.requests_per_pass = ratio((double)p->requests, (double)p->passes);
    e.bandwidth_bound = ratio(r->machine.read_gbs * 1e9, r->weight_bytes) * e.requests_per_pass;
    return e;
}

/* FLOPs of the average request of this mix (nxr's requests: the stream's
 * prefix every path served alike) and the request rate the GEMM peak
 * allows at that size. */
static double flops_per_request(const struct svc_demo_result *r)
{
    return r->flops_per_row * ratio((double)r->nxr.rows, (double)r->nxr.requests);
}

static double limit_requests_per_s(const struct svc_demo_result *r)
{
    return ratio(r->machine.gemm_peak_gflops * 1e9, flops_per_request(r));
}

static void path_efficiency(struct nxr__emit *e, const char *key, const char *label,
                            const struct svc_demo_result *r, const struct svc_path_result *p)
{
    if (!p->ran)
        return;
    const struct efficiency f = efficiency(r, p);
    char t[320];
    nxr__emit_object(e, key,
                     svc_tmpl(t, sizeof(t),
                              "  %-9s {gflops} GFLOP/s = {fraction_of_peak} of peak; weights "
                              "{weight_gbs} GB/s = {fraction_of_read} of read ({requests_per_pass} "
                              "requests per pass: bandwidth bound {bandwidth_bound_requests_per_s} "
                              "req/s); %.2f of the limit\n",
                              label, ratio(p->requests_per_s, limit_requests_per_s(r))));
    svc_emit_num(e, "gflops", f.gflops, "%7.1f");
    svc_emit_num(e, "fraction_of_peak", f.fraction_of_peak, "%.2f");
    svc_emit_num(e, "weight_gbs", f.weight_gbs, "%6.1f");
    svc_emit_num(e, "fraction_of_read", f.fraction_of_read, "%.2f");
    svc_emit_num(e, "requests_per_pass", f.requests_per_pass, "%.2f");
    svc_emit_num(e, "bandwidth_bound_requests_per_s", f.bandwidth_bound, "%.0f");
    nxr__emit_end(e);
}

/* "machine" and "fraction_of_limit" (members of the report). */
static void machine(struct nxr__emit *e, const struct svc_demo_result *r)
{
    if (r->machine.domains == 0) {
        nxr__emit_null(e, "machine", "");
        nxr__emit_null(e, "fraction_of_limit", "");
        return;
    }
    const double limit = limit_requests_per_s(r);
    char t[512];
    nxr__emit_object(e, "machine",
                     svc_tmpl(t, sizeof(t),
                              "\nmachine (measured in this run, {domains} domain(s)): native SGEMM "
                              "2048 {gemm_peak_gflops} GFLOP/s, streaming read {read_gbs} GB/s\n"
                              "  limit at the GEMM peak: {limit_requests_per_s} req/s (%.1f MFLOP "
                              "per request of this mix, {weight_mib} MiB of weights per pass)\n"
                              "{paths}",
                              flops_per_request(r) / 1e6));
    svc_emit_num(e, "gemm_peak_gflops", r->machine.gemm_peak_gflops, "%.1f");
    svc_emit_num(e, "read_gbs", r->machine.read_gbs, "%.1f");
    svc_emit_num(e, "limit_requests_per_s", limit, "%.0f");
    svc_emit_num(e, "flops_per_request", flops_per_request(r), "%.0f");
    svc_emit_num(e, "weight_mib", r->weight_bytes / (1 << 20), "%.1f");
    svc_emit_count(e, "domains", r->machine.domains, "%zu");
    nxr__emit_object(e, "paths", "{nxr}{baseline}{flat}{omp}");
    path_efficiency(e, "nxr", "nxr", r, &r->nxr);
    path_efficiency(e, "baseline", "baseline", r, &r->baseline);
    path_efficiency(e, "flat", "flat", r, &r->flat);
    path_efficiency(e, "omp", "OpenMP", r, &r->omp);
    nxr__emit_end(e);
    nxr__emit_end(e);
    svc_emit_num(e, "fraction_of_limit", ratio(r->nxr.requests_per_s, limit), "%.4f");
}

/* ---- the domains ---------------------------------------------------------------- */

static void domain(struct nxr__emit *e, const struct svc_demo_config *c,
                   const struct svc_domain_result *d)
{
    char lowered[64] = "";
    if (d->budget_limit != NULL)
        snprintf(lowered, sizeof(lowered), " (budget lowered by %s)", d->budget_limit);
    char t[512];
    nxr__emit_object(
        e, NULL,
        svc_tmpl(t, sizeof(t),
                 "  {id} {node} {cpus} {requests} {requests_per_s} {p50_ms} {p95_ms} "
                 "{p99_ms}  {weights_on_node} {placement}, {workers} workers%s, ran on "
                 "{ran_on}{ran_inside}\n"
                 "  %-6s pool: {pool}; {split_requests} requests split; {passes} "
                 "passes, {batched_requests} requests batched, {retried_batches} "
                 "batches retried alone\n",
                 lowered, ""));
    char text[64];
    snprintf(text, sizeof(text), "%-6d", d->id);
    nxr__emit_int(e, "id", d->id, text);
    snprintf(text, sizeof(text), "%-5d", d->node);
    nxr__emit_int(e, "node", d->node, text);
    snprintf(text, sizeof(text), "%-10s", d->cpus);
    cpus(e, "cpus", d->cpus, text);
    svc_emit_count(e, "requests", d->requests, "%8zu");
    svc_emit_count(e, "split_requests", d->split_requests, "%zu");
    svc_emit_count(e, "passes", d->passes, "%zu");
    svc_emit_count(e, "batched_requests", d->batched_requests, "%zu");
    svc_emit_count(e, "retried_batches", d->retried_batches, "%zu");
    svc_emit_num(e, "requests_per_s", d->requests_per_s, "%9.0f");
    quantiles(e, &d->latency);
    if (d->weights_on_node < 0) {
        nxr__emit_null(e, "weights_on_node", "(no node)      ");
    } else {
        char on[48];
        snprintf(on, sizeof(on), "%.1f%% of %zu pg", 100.0 * d->weights_on_node, d->weight_pages);
        snprintf(text, sizeof(text), "%-15s", on);
        nxr__emit_double(e, "weights_on_node", d->weights_on_node, text);
    }
    if (c->span && d->shard_on_node >= 0)
        svc_emit_num(e, "shard_on_node", d->shard_on_node, "%.4f");
    else if (c->span)
        nxr__emit_null(e, "shard_on_node", NULL);
    svc_emit_count(e, "weight_pages", d->weight_pages, "%zu");
    svc_emit_count(e, "weight_pages_on_node", d->weight_pages_on_node, "%zu");
    nxr__emit_str(e, "memory_binding", d->binding, NULL);
    nxr__emit_str(e, "placement", d->placement, NULL);
    nxr__emit_str(e, "admission", d->admission, NULL);
    nxr__emit_uint(e, "workers", d->workers, NULL);
    nxr__emit_uint(e, "budget", d->budget, NULL);
    cpus(e, "ran_on", d->ran_on, d->ran_on[0] != '\0' ? d->ran_on : "-");
    nxr__emit_str(e, "budget_limited_by", d->budget_limit, NULL);
    nxr__emit_bool(e, "ran_inside", d->ran_inside, d->ran_inside ? "" : " (OUTSIDE the domain)");
    nxr__emit_object(e, "pool", "{hits} hits, {misses} misses, {outstanding} outstanding");
    svc_emit_count(e, "cached_bytes", d->pool.cached_bytes, "%zu");
    svc_emit_count(e, "outstanding", d->pool.outstanding, "%zu");
    nxr__emit_uint(e, "hits", d->pool.hits, NULL);
    nxr__emit_uint(e, "misses", d->pool.misses, NULL);
    nxr__emit_uint(e, "drops", d->pool.drops, NULL);
    nxr__emit_end(e);
    nxr__emit_end(e);
}

/* ---- the budget phases ---------------------------------------------------------- */

/* "phases": the nxr path by budget phase (service/phases.h). JSON always
 * (one phase when nothing changed); the table only when the budget
 * changed while it served, one row per phase. */
static void phases(struct nxr__emit *e, const struct svc_phases *ph)
{
    const bool shown = ph->count > 1;
    char head[512] = "";
    if (shown)
        snprintf(head, sizeof(head),
                 "\nnxr path by budget phase (the budgets changed while it served; a request "
                 "counts in the phase it was sent in):\n  %-5s %7s %6s  %-32s %8s %9s %8s %8s "
                 "%8s\n{items}",
                 "phase", "from s", "budget", "why", "requests", "req/s", "p50 ms", "p95 ms",
                 "p99 ms");
    nxr__emit_list(e, "phases", head);
    for (size_t k = 0; k < ph->count; k++) {
        const struct svc_phase *p = &ph->phase[k];
        char why[64], lim[40] = "", t[256];
        if (p->limited_by != NULL)
            snprintf(lim, sizeof(lim), ", lowered by %s", p->limited_by);
        /* A later phase began when the budgets followed the quota. */
        if (k == 0)
            snprintf(why, sizeof(why), "at start%s", lim);
        else if (p->cpu_quota > 0)
            snprintf(why, sizeof(why), "followed the quota: %u CPU%s", p->cpu_quota,
                     p->cpu_quota == 1 ? "" : "s");
        else
            snprintf(why, sizeof(why), "followed the quota: none");
        nxr__emit_object(e, NULL,
                         shown ? svc_tmpl(t, sizeof(t),
                                          "  %-5zu {from_s} {budget}  %-32s {requests} "
                                          "{requests_per_s} {p50_ms} {p95_ms} {p99_ms}\n",
                                          k + 1, why)
                               : NULL);
        svc_emit_num(e, "from_s", (double)(p->from_ns - ph->serving_from_ns) / 1e9, "%7.2f");
        char text[16];
        snprintf(text, sizeof(text), "%6u", p->budget);
        nxr__emit_uint(e, "budget", p->budget, text);
        nxr__emit_str(e, "why", k == 0 ? "start" : "cpu quota", NULL);
        nxr__emit_uint(e, "cpu_quota", p->cpu_quota, NULL);
        nxr__emit_str(e, "budget_limited_by", p->limited_by, NULL);
        nxr__emit_uint(e, "budget_changes", p->changes, NULL);
        svc_emit_count(e, "requests", p->requests, "%8zu");
        svc_emit_num(e, "served_s", p->served_s, "%.3f");
        svc_emit_num(e, "requests_per_s", p->requests_per_s, "%9.0f");
        quantiles(e, &p->latency);
        svc_emit_num(e, "max_ms", p->latency.max_ms, "%.3f");
        nxr__emit_end(e);
    }
    nxr__emit_end(e);
}

/* ---- the peers and the comparison ------------------------------------------------ */

/* A peer path: null when it did not run, else its figures and what the
 * caller adds (extra); the table's row is named name. */
static void peer(struct nxr__emit *e, const char *key, const struct svc_path_result *p,
                 const char *name,
                 void (*extra)(struct nxr__emit *, const struct svc_demo_result *),
                 const struct svc_demo_result *r)
{
    if (!p->ran) {
        nxr__emit_null(e, key, "");
        return;
    }
    char t[256];
    nxr__emit_object(e, key, row(t, sizeof(t), name));
    path_members(e, p);
    if (extra != NULL)
        extra(e, r);
    nxr__emit_end(e);
}

static void baseline_extra(struct nxr__emit *e, const struct svc_demo_result *r)
{
    (void)r;
    nxr__emit_int(e, "max_batch", 1, NULL);
    nxr__emit_str(e, "weights", "plain", NULL);
}

static void flat_extra(struct nxr__emit *e, const struct svc_demo_result *r)
{
    cpus(e, "cpus", r->flat_cpus, r->flat_cpus);
    nxr__emit_int(e, "weights_node", r->flat_weights_node, NULL);
}

static void omp_extra(struct nxr__emit *e, const struct svc_demo_result *r)
{
    nxr__emit_uint(e, "threads", r->omp_threads, NULL);
}

/* The span path: its row, then its line on the outputs and the latency. */
static void span(struct nxr__emit *e, const struct svc_demo_result *r)
{
    const struct svc_path_result *p = &r->span;
    if (!p->ran) {
        nxr__emit_null(e, "span", "");
        return;
    }
    const double p50 = ratio(p->latency.p50_ms, r->nxr.latency.p50_ms);
    const bool within = r->span_max_diff <= SVC_OMP_TOLERANCE;
    char name[96], t[512];
    snprintf(name, sizeof(name), "span: each request over %zu domain(s)", r->span_members);
    svc_tmpl(t, sizeof(t),
             "  %-40s {requests_per_s} {p50_ms} {p95_ms} {p99_ms}\n"
             "span: weights sharded by input rows, %s the per-domain mode (max |diff| "
             "{max_abs_diff}, tolerance {tolerance}); p50 span / per-domain {p50_span_over_nxr} "
             "(one node: {p50_goal} expected)\n",
             name, within ? "within tolerance of" : "OUT of tolerance of");
    nxr__emit_object(e, "span", t);
    path_members(e, p);
    svc_emit_count(e, "members", r->span_members, "%zu");
    svc_emit_num(e, "max_abs_diff", r->span_max_diff, "%.2g");
    svc_emit_num(e, "tolerance", SVC_OMP_TOLERANCE, "%g");
    svc_emit_num(e, "p50_span_over_nxr", p50, "%.2f");
    nxr__emit_str(e, "p50_goal", "<= 1.05 on one node", "<= 1.05");
    nxr__emit_end(e);
}

/* "outputs_match" and "outputs": what each peer computed against nxr. */
static void outputs(struct nxr__emit *e, const struct svc_demo_result *r)
{
    nxr__emit_bool(e, "outputs_match", r->outputs_match,
                   r->outputs_match ? "match\n" : "MISMATCH\n");
    nxr__emit_object(e, "outputs",
                     "\noutputs:{baseline} flat {flat} nxr; OpenMP {omp} (max |diff| "
                     "{omp_max_abs_diff}, tolerance {omp_tolerance}): ");
    if (!r->baseline.ran)
        nxr__emit_null(e, "baseline", "");
    else if (r->baseline_identical)
        nxr__emit_str(e, "baseline", "bit-identical", " baseline bit-identical to nxr;");
    else
        nxr__emit_str(e, "baseline", "differs", " baseline DIFFERS from nxr;");
    nxr__emit_str(e, "flat", r->flat_identical ? "bit-identical" : "differs",
                  r->flat_identical ? "bit-identical to" : "DIFFERS from");
    const bool omp_within = r->omp_max_diff <= SVC_OMP_TOLERANCE;
    nxr__emit_str(e, "omp", omp_within ? "within-tolerance" : "differs",
                  omp_within ? "within tolerance" : "OUT of tolerance");
    svc_emit_num(e, "omp_max_abs_diff", r->omp_max_diff, "%.2g");
    svc_emit_num(e, "omp_tolerance", SVC_OMP_TOLERANCE, "%g");
    nxr__emit_end(e);
}

/* One goal: {"goal": "<op> <bound>", "status": "met"|"missed"}; its line in
 * the table shows the ratio (a member of "ratios") beside them. */
static void goal(struct nxr__emit *e, const char *key, const char *label, double value,
                 bool at_least, double bound, const char *bound_fmt)
{
    char g[32], t[160], b[16];
    snprintf(b, sizeof(b), bound_fmt, bound);
    snprintf(g, sizeof(g), "%s %s", at_least ? ">=" : "<=", b);
    nxr__emit_object(
        e, key, svc_tmpl(t, sizeof(t), "  %-19s %6.2f   goal {goal}  {status}\n", label, value));
    nxr__emit_str(e, "goal", g, NULL);
    nxr__emit_str(e, "status", met(at_least ? value >= bound : value <= bound), NULL);
    nxr__emit_end(e);
}

/* "ratios" (JSON only: the table shows each beside its goal) and "goals". */
static void ratios_and_goals(struct nxr__emit *e, const struct svc_demo_result *r)
{
    const struct svc_path_result *n = &r->nxr;
    const double rps = ratio(n->requests_per_s, r->omp.requests_per_s);
    const double p99 = ratio(n->latency.p99_ms, r->omp.latency.p99_ms);
    const double tail = ratio(n->latency.p99_ms, n->latency.p50_ms);
    const double flat_rps = ratio(n->requests_per_s, r->flat.requests_per_s);
    const double base_rps = ratio(n->requests_per_s, r->baseline.requests_per_s);
    const double base_p99 = ratio(n->latency.p99_ms, r->baseline.latency.p99_ms);
    nxr__emit_object(e, "ratios", NULL);
    svc_emit_num(e, "rps_nxr_over_omp", rps, "%.3f");
    svc_emit_num(e, "p99_nxr_over_omp", p99, "%.3f");
    svc_emit_num(e, "p99_over_p50", tail, "%.3f");
    svc_emit_num(e, "rps_nxr_over_flat", flat_rps, "%.3f");
    svc_emit_num(e, "p99_nxr_over_flat", ratio(n->latency.p99_ms, r->flat.latency.p99_ms), "%.3f");
    if (r->baseline.ran) {
        svc_emit_num(e, "rps_nxr_over_baseline", base_rps, "%.3f");
        svc_emit_num(e, "p99_nxr_over_baseline", base_p99, "%.3f");
    }
    nxr__emit_end(e);

    const char *wait = getenv("OMP_WAIT_POLICY");
    char t[768];
    /* The goals that apply: a name without a member would stay as written. */
    svc_tmpl(t, sizeof(t),
             "OpenMP ran with OMP_WAIT_POLICY=%s%s\nratios (same run, paths interleaved):\n"
             "{rps_nxr_over_omp}{p99_nxr_over_omp}{p99_over_p50}%s%s"
             "  req/s nxr / flat    %6.2f   (one NUMA node: ~1 expected; see docs)\n",
             wait != NULL ? wait : "unset",
             wait != NULL ? ""
                          : " (libgomp's default: idle threads spin before they sleep; a shared "
                            "machine punishes that)",
             r->baseline.ran ? "{rps_nxr_over_baseline}{p99_nxr_over_baseline}" : "",
             r->machine.domains > 0 ? "{fraction_of_limit}" : "", flat_rps);
    nxr__emit_object(e, "goals", t);
    goal(e, "rps_nxr_over_omp", "req/s nxr / OpenMP", rps, true, SVC_GOAL_RPS_VS_OMP, "%.1f");
    goal(e, "p99_nxr_over_omp", "p99   nxr / OpenMP", p99, false, SVC_GOAL_P99_VS_OMP, "%.1f");
    goal(e, "p99_over_p50", "p99 / p50 (nxr)", tail, false, SVC_GOAL_P99_OVER_P50, "%.0f");
    if (r->baseline.ran) {
        goal(e, "rps_nxr_over_baseline", "req/s nxr / baseline", base_rps, true,
             SVC_GOAL_RPS_VS_BASELINE, "%.1f");
        goal(e, "p99_nxr_over_baseline", "p99   nxr / baseline", base_p99, false,
             SVC_GOAL_P99_VS_BASELINE, "%.1f");
    }
    if (r->machine.domains > 0)
        goal(e, "fraction_of_limit", "req/s nxr / limit",
             ratio(n->requests_per_s, limit_requests_per_s(r)), true, SVC_GOAL_FRACTION_OF_LIMIT,
             "%.1f");
    nxr__emit_end(e);
}

/* ---- the run's settings --------------------------------------------------------- */

static void config(struct nxr__emit *e, const struct svc_demo_result *r)
{
    const struct svc_demo_config *c = &r->config;
    nxr__emit_object(e, "config",
                     "nxr demo: {layers} MLP blocks, hidden {hidden} (ffn {ffn}), vocab {vocab}: "
                     "{weights_mib} MiB of weights per replica\n"
                     "          {requests} requests per path, batch {batch_min}-{batch_max} rows "
                     "({batch_distribution}), {clients} clients, seed {seed}, executor "
                     "{executor}\n"
                     "          up to {max_batch} rows per forward pass (--max-batch), {weights} "
                     "weights\n");
    svc_emit_count(e, "requests", c->requests, "%zu");
    nxr__emit_uint(e, "clients", c->clients, NULL);
    svc_emit_count(e, "batch_min", c->batch_min, "%zu");
    svc_emit_count(e, "batch_max", c->batch_max, "%zu");
    nxr__emit_str(e, "batch_distribution", "log-uniform", NULL);
    svc_emit_count(e, "hidden", c->hidden, "%zu");
    svc_emit_count(e, "ffn", 4 * c->hidden, "%zu");
    svc_emit_count(e, "layers", c->layers, "%zu");
    svc_emit_count(e, "vocab", c->vocab, "%zu");
    svc_emit_num(e, "weights_mib", r->weights_mib, "%.1f");
    nxr__emit_str(e, "domains", c->domains, NULL);
    const char *wait = getenv("OMP_WAIT_POLICY");
    nxr__emit_str(e, "omp_wait_policy", wait != NULL && strlen(wait) < 32 ? wait : "default", NULL);
    nxr__emit_str(e, "mode", c->span ? "span" : "per-domain", NULL);
    nxr__emit_str(e, "executor", svc_executor_name(c->executor), NULL);
    nxr__emit_uint(e, "seed", c->seed, NULL);
    nxr__emit_bool(e, "compare", c->compare, NULL);
    svc_emit_count(e, "rounds", c->rounds, "%zu");
    svc_emit_count(e, "split_rows", c->split_rows, "%zu");
    svc_emit_count(e, "max_batch", c->max_batch, "%zu");
    nxr__emit_str(e, "weights", svc_weights_name(c->weights), NULL);
    svc_emit_num(e, "time_budget_s", c->time_budget_s, "%g");
    nxr__emit_end(e);
}

/* ---- the report ------------------------------------------------------------------- */

static void report(struct nxr__emit *e, const void *result)
{
    const struct svc_demo_result *r = result;
    const struct svc_demo_config *c = &r->config;
    char t[2048], head[160], nxr_row[192];
    snprintf(head, sizeof(head), "  %-6s %-5s %-10s %8s %9s %8s %8s %8s  %-15s %s\n", "domain",
             "node", "cpus", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "weights on node",
             "placement");
    snprintf(nxr_row, sizeof(nxr_row), "\n  %-40s %9s %8s %8s %8s\n  %-40s ", "path", "req/s",
             "p50 ms", "p95 ms", "p99 ms", "nxr: one context per domain");
    svc_tmpl(t, sizeof(t),
             "{config}          cpu quota: {cpu_quota}\n{compete}\n%s{domains}{stopped_early}"
             "%s{requests_per_s} {p50_ms} {p95_ms} {p99_ms}\n{phases}%s",
             head, nxr_row,
             c->compare ? "{baseline}{flat}{omp}{span}{machine}{outputs}{outputs_match}{goals}"
                        : "{machine}\n(--no-compare: no peers ran)\n");
    nxr__emit_object(e, NULL, t);
    path_members(e, &r->nxr);
    if (r->cpu_quota == 0) {
        nxr__emit_null(e, "cpu_quota", r->cpu_quota_source);
    } else {
        nxr__emit_object(e, "cpu_quota", "{source}");
        nxr__emit_uint(e, "cpus", r->cpu_quota, NULL);
        nxr__emit_str(e, "source", r->cpu_quota_source, NULL);
        nxr__emit_end(e);
    }
    nxr__emit_list(e, "domains", NULL);
    for (size_t i = 0; i < r->domain_count; i++)
        domain(e, c, &r->domains[i]);
    nxr__emit_end(e);
    phases(e, &r->phases);
    peer(e, "baseline", &r->baseline, "baseline: nxr, max-batch 1, plain", baseline_extra, r);
    char name[192];
    snprintf(name, sizeof(name), "flat: one team on %s, weights node %d", r->flat_cpus,
             r->flat_weights_node);
    peer(e, "flat", &r->flat, name, flat_extra, r);
    char omp_name[96];
    snprintf(omp_name, sizeof(omp_name), "OpenMP: omp parallel for, %u threads", r->omp_threads);
    peer(e, "omp", &r->omp, omp_name, omp_extra, r);
    span(e, r);
    if (c->compare) {
        outputs(e, r);
        ratios_and_goals(e, r);
    } else {
        nxr__emit_null(e, "outputs_match", "");
    }
    machine(e, r);
    svc_emit_count(e, "rounds", r->rounds_run, "%zu");
    svc_emit_count(e, "rounds_planned", r->rounds_planned, "%zu");
    char stopped[256] = "";
    if (r->stopped_early)
        snprintf(stopped, sizeof(stopped),
                 "\n  the %.0f s time budget cut rounds short: each path's figures are over the "
                 "requests it answered; outputs compared over the %zu every path answered\n",
                 c->time_budget_s, r->requests_compared);
    nxr__emit_bool(e, "stopped_early", r->stopped_early, stopped);
    svc_emit_count(e, "requests_compared", r->requests_compared, "%zu");
    nxr__emit_str(e, "executor", svc_executor_name(c->executor), NULL);
    char ct[160] = "";
    if (c->compete > 0)
        svc_tmpl(ct, sizeof(ct),
                 "          beside {processes} busy process%s pinned to CPU%s {cpus} (--compete)\n",
                 c->compete == 1 ? "" : "es", c->compete == 1 ? "" : "s");
    nxr__emit_object(e, "compete", ct);
    nxr__emit_uint(e, "processes", c->compete, NULL);
    cpus(e, "cpus", r->compete_cpus, r->compete_cpus);
    nxr__emit_end(e);
    config(e, r);
    nxr__emit_end(e);
}

void svc_report_json(FILE *f, const struct svc_demo_result *r)
{
    svc_emit_report(f, NXR__EMIT_JSON, report, r);
}

void svc_report_text(FILE *f, const struct svc_demo_result *r)
{
    svc_emit_report(f, NXR__EMIT_TEXT, report, r);
}
