/* The demo's report (see report.h). */
#include "service/report.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "service/compare.h"

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

/* A CPU list "0-2,5" as a JSON array [0,1,2,5]. */
static void json_cpus(FILE *f, const char *list)
{
    fputc('[', f);
    bool first = true;
    for (const char *p = list; *p != '\0';) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p)
            break;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        for (long c = lo; c <= hi; c++) {
            fprintf(f, "%s%ld", first ? "" : ",", c);
            first = false;
        }
        p = *end == ',' ? end + 1 : end;
    }
    fputc(']', f);
}

/* A JSON string of text: quotes, backslashes and control bytes escaped. */
static void json_text(FILE *f, const char *text)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_path(FILE *f, const char *name, const struct svc_path_result *p)
{
    if (!p->ran) {
        fprintf(f, "\"%s\":null,", name);
        return;
    }
    fprintf(f,
            "\"%s\":{\"requests\":%zu,\"requests_per_s\":%.1f,\"p50_ms\":%.4f,\"p95_ms\":%.4f,"
            "\"p99_ms\":%.4f,\"max_ms\":%.4f,\"wall_s\":%.4f,\"rows\":%zu,\"passes\":%zu",
            name, p->requests, p->requests_per_s, p->latency.p50_ms, p->latency.p95_ms,
            p->latency.p99_ms, p->latency.max_ms, p->wall_s, p->rows, p->passes);
}

/* ---- how close a path is to the machine --------------------------------- */

struct efficiency {
    double gflops, fraction_of_peak;  /* GEMM FLOPs of the rows it served */
    double weight_gbs, fraction_of_read; /* the weights, once per forward pass */
    double requests_per_pass;
    double bandwidth_bound;           /* req/s if every pass streamed at read_gbs */
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

static void json_efficiency(FILE *f, const char *name, const struct svc_demo_result *r,
                            const struct svc_path_result *p, bool first)
{
    if (!p->ran)
        return;
    const struct efficiency e = efficiency(r, p);
    fprintf(f,
            "%s\"%s\":{\"gflops\":%.6g,\"fraction_of_peak\":%.6g,\"weight_gbs\":%.6g,"
            "\"fraction_of_read\":%.6g,\"requests_per_pass\":%.4f,"
            "\"bandwidth_bound_requests_per_s\":%.1f}",
            first ? "" : ",", name, e.gflops, e.fraction_of_peak, e.weight_gbs, e.fraction_of_read,
            e.requests_per_pass, e.bandwidth_bound);
}

static void json_machine(FILE *f, const struct svc_demo_result *r)
{
    if (r->machine.domains == 0) {
        fprintf(f, "\"machine\":null,\"fraction_of_limit\":null,");
        return;
    }
    const double limit = limit_requests_per_s(r);
    fprintf(f,
            "\"machine\":{\"gemm_peak_gflops\":%.2f,\"read_gbs\":%.2f,"
            "\"limit_requests_per_s\":%.1f,\"flops_per_request\":%.0f,\"weight_mib\":%.2f,"
            "\"domains\":%zu,\"paths\":{",
            r->machine.gemm_peak_gflops, r->machine.read_gbs, limit, flops_per_request(r),
            r->weight_bytes / (1 << 20), r->machine.domains);
    json_efficiency(f, "nxr", r, &r->nxr, true);
    json_efficiency(f, "baseline", r, &r->baseline, false);
    json_efficiency(f, "flat", r, &r->flat, false);
    json_efficiency(f, "omp", r, &r->omp, false);
    fprintf(f, "}},\"fraction_of_limit\":%.4f,", ratio(r->nxr.requests_per_s, limit));
}

static void text_efficiency(FILE *f, const char *name, const struct svc_demo_result *r,
                            const struct svc_path_result *p)
{
    if (!p->ran)
        return;
    const struct efficiency e = efficiency(r, p);
    fprintf(f,
            "  %-9s %7.1f GFLOP/s = %.2f of peak; weights %6.1f GB/s = %.2f of read (%.2f "
            "requests per pass: bandwidth bound %.0f req/s); %.2f of the limit\n",
            name, e.gflops, e.fraction_of_peak, e.weight_gbs, e.fraction_of_read,
            e.requests_per_pass, e.bandwidth_bound,
            ratio(p->requests_per_s, limit_requests_per_s(r)));
}

static void text_machine(FILE *f, const struct svc_demo_result *r)
{
    if (r->machine.domains == 0)
        return;
    fprintf(f,
            "\nmachine (measured in this run, %zu domain(s)): native SGEMM 2048 %.1f GFLOP/s, "
            "streaming read %.1f GB/s\n"
            "  limit at the GEMM peak: %.0f req/s (%.1f MFLOP per request of this mix, %.1f "
            "MiB of weights per pass)\n",
            r->machine.domains, r->machine.gemm_peak_gflops, r->machine.read_gbs,
            limit_requests_per_s(r), flops_per_request(r) / 1e6, r->weight_bytes / (1 << 20));
    text_efficiency(f, "nxr", r, &r->nxr);
    text_efficiency(f, "baseline", r, &r->baseline);
    text_efficiency(f, "flat", r, &r->flat);
    text_efficiency(f, "OpenMP", r, &r->omp);
}

static const char *met(bool ok)
{
    return ok ? "met" : "missed";
}

void svc_report_json(FILE *f, const struct svc_demo_result *r)
{
    const struct svc_demo_config *c = &r->config;
    const struct svc_path_result *n = &r->nxr;
    fprintf(f,
            "{\"requests\":%zu,\"requests_per_s\":%.1f,\"p50_ms\":%.4f,\"p95_ms\":%.4f,"
            "\"p99_ms\":%.4f,\"max_ms\":%.4f,\"wall_s\":%.4f,\"rows\":%zu,\"passes\":%zu,",
            n->requests, n->requests_per_s, n->latency.p50_ms, n->latency.p95_ms,
            n->latency.p99_ms, n->latency.max_ms, n->wall_s, n->rows, n->passes);
    if (r->cpu_quota == 0) {
        fprintf(f, "\"cpu_quota\":null,");
    } else {
        fprintf(f, "\"cpu_quota\":{\"cpus\":%u,\"source\":", r->cpu_quota);
        json_text(f, r->cpu_quota_source);
        fprintf(f, "},");
    }
    fprintf(f, "\"domains\":[");
    for (size_t i = 0; i < r->domain_count; i++) {
        const struct svc_domain_result *d = &r->domains[i];
        fprintf(f, "%s{\"id\":%d,\"node\":%d,\"cpus\":", i ? "," : "", d->id, d->node);
        json_cpus(f, d->cpus);
        fprintf(f,
                ",\"requests\":%zu,\"split_requests\":%zu,\"passes\":%zu,"
                "\"batched_requests\":%zu,\"retried_batches\":%zu,\"requests_per_s\":%.1f,"
                "\"p50_ms\":%.4f,\"p95_ms\":%.4f,\"p99_ms\":%.4f,",
                d->requests, d->split_requests, d->passes, d->batched_requests,
                d->retried_batches, d->requests_per_s, d->latency.p50_ms, d->latency.p95_ms,
                d->latency.p99_ms);
        if (d->weights_on_node < 0)
            fprintf(f, "\"weights_on_node\":null,");
        else
            fprintf(f, "\"weights_on_node\":%.4f,", d->weights_on_node);
        if (c->span && d->shard_on_node >= 0)
            fprintf(f, "\"shard_on_node\":%.4f,", d->shard_on_node);
        else if (c->span)
            fprintf(f, "\"shard_on_node\":null,");
        fprintf(f,
                "\"weight_pages\":%zu,\"weight_pages_on_node\":%zu,\"memory_binding\":\"%s\","
                "\"placement\":\"%s\",\"admission\":\"%s\",\"workers\":%u,\"budget\":%u,"
                "\"ran_on\":",
                d->weight_pages, d->weight_pages_on_node, d->binding, d->placement, d->admission,
                d->workers, d->budget);
        json_cpus(f, d->ran_on);
        if (d->budget_limit != NULL)
            fprintf(f, ",\"budget_limited_by\":\"%s\"", d->budget_limit);
        else
            fprintf(f, ",\"budget_limited_by\":null");
        fprintf(f,
                ",\"ran_inside\":%s,\"pool\":{\"cached_bytes\":%zu,\"outstanding\":%zu,"
                "\"hits\":%llu,\"misses\":%llu,\"drops\":%llu}}",
                d->ran_inside ? "true" : "false", d->pool.cached_bytes, d->pool.outstanding,
                (unsigned long long)d->pool.hits, (unsigned long long)d->pool.misses,
                (unsigned long long)d->pool.drops);
    }
    fprintf(f, "],");
    json_path(f, "baseline", &r->baseline);
    if (r->baseline.ran)
        fprintf(f, ",\"max_batch\":1,\"weights\":\"plain\"},");
    json_path(f, "flat", &r->flat);
    if (r->flat.ran) {
        fprintf(f, ",\"cpus\":");
        json_cpus(f, r->flat_cpus);
        fprintf(f, ",\"weights_node\":%d},", r->flat_weights_node);
    }
    json_path(f, "omp", &r->omp);
    if (r->omp.ran)
        fprintf(f, ",\"threads\":%u},", r->omp_threads);
    json_path(f, "span", &r->span);
    if (r->span.ran)
        fprintf(f,
                ",\"members\":%zu,\"max_abs_diff\":%.3g,\"tolerance\":%g,"
                "\"p50_span_over_nxr\":%.3f,\"p50_goal\":\"<= 1.05 on one node\"},",
                r->span_members, r->span_max_diff, SVC_OMP_TOLERANCE,
                ratio(r->span.latency.p50_ms, n->latency.p50_ms));
    if (c->compare) {
        const double rps = ratio(n->requests_per_s, r->omp.requests_per_s);
        const double p99 = ratio(n->latency.p99_ms, r->omp.latency.p99_ms);
        const double tail = ratio(n->latency.p99_ms, n->latency.p50_ms);
        fprintf(f,
                "\"outputs_match\":%s,\"outputs\":{\"baseline\":%s,\"flat\":\"%s\","
                "\"omp\":\"%s\",\"omp_max_abs_diff\":%.3g,\"omp_tolerance\":%g},",
                r->outputs_match ? "true" : "false",
                !r->baseline.ran ? "null"
                : r->baseline_identical ? "\"bit-identical\"" : "\"differs\"",
                r->flat_identical ? "bit-identical" : "differs",
                r->omp_max_diff <= SVC_OMP_TOLERANCE ? "within-tolerance" : "differs",
                r->omp_max_diff, SVC_OMP_TOLERANCE);
        fprintf(f,
                "\"ratios\":{\"rps_nxr_over_omp\":%.3f,\"p99_nxr_over_omp\":%.3f,"
                "\"p99_over_p50\":%.3f,\"rps_nxr_over_flat\":%.3f,\"p99_nxr_over_flat\":%.3f",
                rps, p99, tail, ratio(n->requests_per_s, r->flat.requests_per_s),
                ratio(n->latency.p99_ms, r->flat.latency.p99_ms));
        const double base_rps = ratio(n->requests_per_s, r->baseline.requests_per_s);
        const double base_p99 = ratio(n->latency.p99_ms, r->baseline.latency.p99_ms);
        if (r->baseline.ran)
            fprintf(f, ",\"rps_nxr_over_baseline\":%.3f,\"p99_nxr_over_baseline\":%.3f",
                    base_rps, base_p99);
        fprintf(f,
                "},\"goals\":{\"rps_nxr_over_omp\":{\"goal\":\">= %.1f\",\"status\":\"%s\"},"
                "\"p99_nxr_over_omp\":{\"goal\":\"<= %.1f\",\"status\":\"%s\"},"
                "\"p99_over_p50\":{\"goal\":\"<= %.0f\",\"status\":\"%s\"}",
                SVC_GOAL_RPS_VS_OMP, met(rps >= SVC_GOAL_RPS_VS_OMP), SVC_GOAL_P99_VS_OMP,
                met(p99 <= SVC_GOAL_P99_VS_OMP), SVC_GOAL_P99_OVER_P50,
                met(tail <= SVC_GOAL_P99_OVER_P50));
        if (r->baseline.ran)
            fprintf(f,
                    ",\"rps_nxr_over_baseline\":{\"goal\":\">= %.1f\",\"status\":\"%s\"},"
                    "\"p99_nxr_over_baseline\":{\"goal\":\"<= %.1f\",\"status\":\"%s\"}",
                    SVC_GOAL_RPS_VS_BASELINE, met(base_rps >= SVC_GOAL_RPS_VS_BASELINE),
                    SVC_GOAL_P99_VS_BASELINE, met(base_p99 <= SVC_GOAL_P99_VS_BASELINE));
        if (r->machine.domains > 0) {
            const double frac = ratio(n->requests_per_s, limit_requests_per_s(r));
            fprintf(f, ",\"fraction_of_limit\":{\"goal\":\">= %.1f\",\"status\":\"%s\"}",
                    SVC_GOAL_FRACTION_OF_LIMIT, met(frac >= SVC_GOAL_FRACTION_OF_LIMIT));
        }
        fprintf(f, "},");
    } else {
        fprintf(f, "\"outputs_match\":null,");
    }
    json_machine(f, r);
    fprintf(f, "\"rounds\":%zu,\"rounds_planned\":%zu,\"stopped_early\":%s,"
               "\"requests_compared\":%zu,",
            r->rounds_run, r->rounds_planned, r->stopped_early ? "true" : "false",
            r->requests_compared);
    fprintf(f, "\"executor\":\"%s\",", svc_executor_name(c->executor));
    fprintf(f, "\"compete\":{\"processes\":%u,\"cpus\":", c->compete);
    json_cpus(f, r->compete_cpus);
    fprintf(f, "},");
    fprintf(f,
            "\"config\":{\"requests\":%zu,\"clients\":%u,\"batch_min\":%zu,\"batch_max\":%zu,"
            "\"batch_distribution\":\"log-uniform\",\"hidden\":%zu,\"ffn\":%zu,\"layers\":%zu,"
            "\"vocab\":%zu,\"weights_mib\":%.2f,\"domains\":",
            c->requests, c->clients, c->batch_min, c->batch_max, c->hidden, 4 * c->hidden,
            c->layers, c->vocab, r->weights_mib);
    if (c->domains != NULL) {
        fputc('"', f);
        for (const char *p = c->domains; *p; p++) {
            if (*p == '"' || *p == '\\')
                fputc('\\', f);
            if ((unsigned char)*p >= 0x20)
                fputc(*p, f);
        }
        fputc('"', f);
    } else {
        fputs("null", f);
    }
    const char *wait = getenv("OMP_WAIT_POLICY");
    fprintf(f, ",\"omp_wait_policy\":\"%s\"", wait != NULL && strlen(wait) < 32 && !strchr(wait, '"')
                                                 ? wait : "default");
    fprintf(f,
            ",\"mode\":\"%s\",\"executor\":\"%s\",\"seed\":%llu,\"compare\":%s,\"rounds\":%zu,"
            "\"split_rows\":%zu,\"max_batch\":%zu,\"weights\":\"%s\",\"time_budget_s\":%g}}\n",
            c->span ? "span" : "per-domain", svc_executor_name(c->executor),
            (unsigned long long)c->seed, c->compare ? "true" : "false", c->rounds, c->split_rows,
            c->max_batch, svc_weights_name(c->weights), c->time_budget_s);
}

static void text_path(FILE *f, const char *name, const struct svc_path_result *p)
{
    fprintf(f, "  %-40s %9.0f %8.3f %8.3f %8.3f\n", name, p->requests_per_s, p->latency.p50_ms,
            p->latency.p95_ms, p->latency.p99_ms);
}

void svc_report_text(FILE *f, const struct svc_demo_result *r)
{
    const struct svc_demo_config *c = &r->config;
    const struct svc_path_result *n = &r->nxr;
    fprintf(f,
            "nxr demo: %zu MLP blocks, hidden %zu (ffn %zu), vocab %zu: %.1f MiB of weights per "
            "replica\n"
            "          %zu requests per path, batch %zu-%zu rows (log-uniform), %u clients, seed "
            "%llu, executor %s\n"
            "          up to %zu rows per forward pass (--max-batch), %s weights\n",
            c->layers, c->hidden, 4 * c->hidden, c->vocab, r->weights_mib, c->requests,
            c->batch_min, c->batch_max, c->clients, (unsigned long long)c->seed,
            svc_executor_name(c->executor), c->max_batch, svc_weights_name(c->weights));
    fprintf(f, "          cpu quota: %s\n", r->cpu_quota_source);
    if (c->compete > 0)
        fprintf(f, "          beside %u busy process%s pinned to CPU%s %s (--compete)\n",
                c->compete, c->compete == 1 ? "" : "es", c->compete == 1 ? "" : "s",
                r->compete_cpus);
    fputc('\n', f);
    fprintf(f, "  %-6s %-5s %-10s %8s %9s %8s %8s %8s  %-15s %s\n", "domain", "node", "cpus",
            "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "weights on node", "placement");
    for (size_t i = 0; i < r->domain_count; i++) {
        const struct svc_domain_result *d = &r->domains[i];
        char on[32];
        if (d->weights_on_node < 0)
            snprintf(on, sizeof(on), "(no node)");
        else
            snprintf(on, sizeof(on), "%.1f%% of %zu pg", 100.0 * d->weights_on_node,
                     d->weight_pages);
        char lowered[48] = "";
        if (d->budget_limit != NULL)
            snprintf(lowered, sizeof(lowered), " (budget lowered by %s)", d->budget_limit);
        fprintf(f, "  %-6d %-5d %-10s %8zu %9.0f %8.3f %8.3f %8.3f  %-15s %s, %u workers%s, ran on %s%s\n",
                d->id, d->node, d->cpus, d->requests, d->requests_per_s, d->latency.p50_ms,
                d->latency.p95_ms, d->latency.p99_ms, on, d->placement, d->workers, lowered,
                d->ran_on[0] ? d->ran_on : "-",
                d->ran_inside ? "" : " (OUTSIDE the domain)");
        fprintf(f, "  %-6s pool: %llu hits, %llu misses, %zu outstanding; %zu requests split; "
                   "%zu passes, %zu requests batched, %zu batches retried alone\n", "",
                (unsigned long long)d->pool.hits, (unsigned long long)d->pool.misses,
                d->pool.outstanding, d->split_requests, d->passes, d->batched_requests,
                d->retried_batches);
    }
    if (r->stopped_early)
        fprintf(f, "\n  the %.0f s time budget cut rounds short: each path's figures are over the "
                   "requests it answered; outputs compared over the %zu every path answered\n",
                c->time_budget_s, r->requests_compared);
    fprintf(f, "\n  %-40s %9s %8s %8s %8s\n", "path", "req/s", "p50 ms", "p95 ms", "p99 ms");
    text_path(f, "nxr: one context per domain", n);
    if (!c->compare) {
        text_machine(f, r);
        fprintf(f, "\n(--no-compare: no peers ran)\n");
        return;
    }
    char name[192];
    if (r->baseline.ran)
        text_path(f, "baseline: nxr, max-batch 1, plain", &r->baseline);
    snprintf(name, sizeof(name), "flat: one team on %s, weights node %d", r->flat_cpus,
             r->flat_weights_node);
    text_path(f, name, &r->flat);
    snprintf(name, sizeof(name), "OpenMP: omp parallel for, %u threads", r->omp_threads);
    text_path(f, name, &r->omp);
    if (r->span.ran) {
        snprintf(name, sizeof(name), "span: each request over %zu domain(s)", r->span_members);
        text_path(f, name, &r->span);
    }
    text_machine(f, r);
    const double rps = ratio(n->requests_per_s, r->omp.requests_per_s);
    const double p99 = ratio(n->latency.p99_ms, r->omp.latency.p99_ms);
    const double tail = ratio(n->latency.p99_ms, n->latency.p50_ms);
    if (r->baseline.ran)
        fprintf(f, "\noutputs: baseline %s nxr;", r->baseline_identical ? "bit-identical to"
                                                                       : "DIFFERS from");
    else
        fprintf(f, "\noutputs:");
    fprintf(f, " flat %s nxr; OpenMP %s (max |diff| %.2g, tolerance %g): %s\n",
            r->flat_identical ? "bit-identical to" : "DIFFERS from",
            r->omp_max_diff <= SVC_OMP_TOLERANCE ? "within tolerance" : "OUT of tolerance",
            r->omp_max_diff, SVC_OMP_TOLERANCE, r->outputs_match ? "match" : "MISMATCH");
    if (r->span.ran)
        fprintf(f, "span: weights sharded by input rows, %s the per-domain mode (max |diff| %.2g, "
                   "tolerance %g); p50 span / per-domain %.2f (one node: <= 1.05 expected)\n",
                r->span_max_diff <= SVC_OMP_TOLERANCE ? "within tolerance of" : "OUT of tolerance of",
                r->span_max_diff, SVC_OMP_TOLERANCE,
                ratio(r->span.latency.p50_ms, n->latency.p50_ms));
    const char *wait = getenv("OMP_WAIT_POLICY");
    fprintf(f, "OpenMP ran with OMP_WAIT_POLICY=%s%s\n", wait != NULL ? wait : "unset",
            wait != NULL ? "" : " (libgomp's default: idle threads spin before they sleep; a "
                                "shared machine punishes that)");
    fprintf(f, "ratios (same run, paths interleaved):\n");
    fprintf(f, "  req/s nxr / OpenMP  %6.2f   goal >= %.1f  %s\n", rps, SVC_GOAL_RPS_VS_OMP,
            met(rps >= SVC_GOAL_RPS_VS_OMP));
    fprintf(f, "  p99   nxr / OpenMP  %6.2f   goal <= %.1f  %s\n", p99, SVC_GOAL_P99_VS_OMP,
            met(p99 <= SVC_GOAL_P99_VS_OMP));
    fprintf(f, "  p99 / p50 (nxr)     %6.2f   goal <= %.0f    %s\n", tail, SVC_GOAL_P99_OVER_P50,
            met(tail <= SVC_GOAL_P99_OVER_P50));
    if (r->baseline.ran) {
        const double base_rps = ratio(n->requests_per_s, r->baseline.requests_per_s);
        const double base_p99 = ratio(n->latency.p99_ms, r->baseline.latency.p99_ms);
        fprintf(f, "  req/s nxr / baseline %5.2f   goal >= %.1f  %s\n", base_rps,
                SVC_GOAL_RPS_VS_BASELINE, met(base_rps >= SVC_GOAL_RPS_VS_BASELINE));
        fprintf(f, "  p99   nxr / baseline %5.2f   goal <= %.1f  %s\n", base_p99,
                SVC_GOAL_P99_VS_BASELINE, met(base_p99 <= SVC_GOAL_P99_VS_BASELINE));
    }
    if (r->machine.domains > 0) {
        const double frac = ratio(n->requests_per_s, limit_requests_per_s(r));
        fprintf(f, "  req/s nxr / limit   %6.2f   goal >= %.1f  %s\n", frac,
                SVC_GOAL_FRACTION_OF_LIMIT, met(frac >= SVC_GOAL_FRACTION_OF_LIMIT));
    }
    fprintf(f, "  req/s nxr / flat    %6.2f   (one NUMA node: ~1 expected; see docs)\n",
            ratio(n->requests_per_s, r->flat.requests_per_s));
}
