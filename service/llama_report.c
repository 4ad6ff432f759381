/*
 * `nxr demo`'s language model report (see llama_demo.h): one walk over the
 * result (report()) writes the JSON and the table through the diagnostics'
 * emitter (base/emit.h), as the MLP demo's report does (report.c): each
 * scalar's text is its value formatted for the table, each object's
 * template places its members, and what the table says beside them that
 * has no JSON member of its own is written into the template.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/llama_demo.h"
#include "service/report_emit.h"

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

/* A fraction of pages or bytes: null (shown "-") when unknown (< 0). */
static void fraction(struct nxr__emit *e, const char *key, double v)
{
    if (v < 0)
        nxr__emit_null(e, key, "-");
    else
        svc_emit_num(e, key, v, "%.2f");
}

/* A path's row: its label, then its members' columns; extra is what the
 * table adds at the end (a ratio to nxr). */
static const char *row(char *buf, size_t size, const char *label, const char *extra)
{
    return svc_tmpl(
        buf, size,
        "  %-10s {tokens_per_s} tok/s  TTFT p50 {ttft_p50_ms} ms p99 {ttft_p99_ms} ms  ITL "
        "p50 {itl_p50_ms} ms p99 {itl_p99_ms} ms  batch {batch_mean}%s\n",
        label, extra);
}

/* A path's figures, as members of the object open now (nxr's are the
 * report's own). */
static void path_members(struct nxr__emit *e, const struct svc_llama_path_result *p)
{
    nxr__emit_uint(e, "sequences", p->sequences, NULL);
    nxr__emit_uint(e, "tokens", p->tokens, NULL);
    svc_emit_num(e, "wall_s", p->wall_s, "%.3f");
    svc_emit_num(e, "tokens_per_s", p->tokens_per_s, "%9.1f");
    svc_emit_num(e, "ttft_p50_ms", p->ttft.p50_ms, "%8.2f");
    svc_emit_num(e, "ttft_p99_ms", p->ttft.p99_ms, "%8.2f");
    svc_emit_num(e, "itl_p50_ms", p->itl.p50_ms, "%7.2f");
    svc_emit_num(e, "itl_p99_ms", p->itl.p99_ms, "%7.2f");
    svc_emit_num(e, "batch_mean", p->batch_mean, "%5.2f");
    nxr__emit_uint(e, "steps", p->steps, NULL);
    nxr__emit_uint(e, "rows", p->rows, NULL);
}

/* A peer path: null when it did not run, else its figures and its row,
 * with nxr's tokens/s over its own. */
static void peer(struct nxr__emit *e, const char *key, const char *label,
                 const struct svc_llama_path_result *p, const struct svc_llama_path_result *nxr)
{
    if (!p->ran) {
        nxr__emit_null(e, key, "");
        return;
    }
    char extra[32] = "", t[256];
    if (p->tokens_per_s > 0)
        snprintf(extra, sizeof extra, "  (nxr %.2fx)", nxr->tokens_per_s / p->tokens_per_s);
    nxr__emit_object(e, key, row(t, sizeof t, label, extra));
    path_members(e, p);
    nxr__emit_end(e);
}

static void domain(struct nxr__emit *e, const struct svc_llama_domain_result *d)
{
    nxr__emit_object(e, NULL,
                     "  domain {id} (node {node}): {tokens} tokens, batch {batch_mean}, weights on "
                     "node {weights_on_node} (on huge pages {weights_huge}), KV on node "
                     "{kv_on_node}\n");
    nxr__emit_int(e, "id", d->id, NULL);
    nxr__emit_int(e, "node", d->node, NULL);
    nxr__emit_uint(e, "tokens", d->tokens, NULL);
    svc_emit_num(e, "batch_mean", d->batch_mean, "%.2f");
    fraction(e, "weights_on_node", d->weights_on_node);
    fraction(e, "weights_huge", d->weights_huge);
    fraction(e, "kv_on_node", d->kv_on_node);
    fraction(e, "shards_on_node", d->shards_on_node);
    nxr__emit_end(e);
}

/* The span's line (the text of span_members; empty without a span path). */
static void span_members(struct nxr__emit *e, const struct svc_llama_demo_result *r)
{
    char text[512] = "";
    if (r->span.ran) {
        int n = snprintf(text, sizeof text,
                         "  span: each sequence over %zu domain%s at once, weights sharded by "
                         "node; inter-token latency p50 %.2fx, p99 %.2fx one domain's (nxr)\n",
                         r->span_members, r->span_members == 1 ? "" : "s",
                         ratio(r->span.itl.p50_ms, r->nxr.itl.p50_ms),
                         ratio(r->span.itl.p99_ms, r->nxr.itl.p99_ms));
        if (r->span_members == 1 && n > 0 && (size_t)n < sizeof text)
            snprintf(text + n, sizeof text - (size_t)n,
                     "  (span: one domain only, so the span path is the one-domain engine: give "
                     "--domains or a machine with more nodes to shard the weights)\n");
    }
    nxr__emit_uint(e, "span_members", r->span_members, text);
}

/* "tokens_match" (its text the tokens line), "sequences_compared" and
 * "omp_sequences_same". */
static void tokens(struct nxr__emit *e, const struct svc_llama_demo_result *r)
{
    if (r->sequences_compared == 0) {
        nxr__emit_null(e, "tokens_match", "");
        nxr__emit_uint(e, "sequences_compared", 0, NULL);
        return;
    }
    /* "nxr, unbatched and flat", "nxr, unbatched, flat and span", "nxr and span" */
    const char *ran[4] = {"nxr"};
    size_t n = 1;
    if (r->unbatched.ran)
        ran[n++] = "unbatched";
    if (r->flat.ran)
        ran[n++] = "flat";
    if (r->span.ran)
        ran[n++] = "span";
    char which[64] = "", omp[160] = "", text[384];
    for (size_t i = 0; i < n; i++)
        snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s",
                 i == 0       ? ""
                 : i + 1 == n ? " and "
                              : ", ",
                 ran[i]);
    if (r->omp.ran)
        snprintf(omp, sizeof omp,
                 "; OpenMP (f32) made the same tokens for %zu of them (another summation order)",
                 r->omp_sequences_same);
    snprintf(text, sizeof text, "  tokens: %s on %s (%zu sequences, greedy, %s)%s\n",
             r->tokens_match ? "identical" : "DIFFER", which, r->sequences_compared,
             svc_llama_format_name(r->config.format), omp);
    nxr__emit_bool(e, "tokens_match", r->tokens_match, text);
    nxr__emit_uint(e, "sequences_compared", r->sequences_compared, NULL);
    nxr__emit_uint(e, "omp_sequences_same", r->omp_sequences_same, NULL);
}

static void report(struct nxr__emit *e, const void *result)
{
    const struct svc_llama_demo_result *r = result;
    const struct svc_llama_demo_config *c = &r->config;
    const struct svc_llama_shape *s = &c->shape;
    char flat_note[256] = "", limit[256] = "", compute[256] = "", rounds[192] = "", nxr_row[256],
         t[2048];
    if (r->flat.ran) {
        char huge[48] = "";
        if (r->flat_weights_huge >= 0)
            snprintf(huge, sizeof huge, " (on huge pages %.2f)", r->flat_weights_huge);
        snprintf(flat_note, sizeof flat_note,
                 "  (flat: one domain over CPUs %s, weights on its memory%s; OpenMP: one sequence "
                 "at a time, prompts token by token)\n",
                 r->flat_cpus, huge);
    }
    if (r->fraction_of_limit >= 0)
        snprintf(limit, sizeof limit,
                 "  limit: read {read_gbs} GB/s measured in this run; nxr's weight reads are "
                 "{fraction_of_limit} of it ({bound_tokens_per_s} tok/s allowed at batch %.2f)\n",
                 r->nxr.batch_mean);
    if (r->fraction_of_compute >= 0)
        snprintf(compute, sizeof compute,
                 "  compute: GEMM peak {gemm_peak_gflops} GFLOP/s measured in this run; nxr's "
                 "products ran at {fraction_of_compute} of it ({compute_bound_tokens_per_s} tok/s "
                 "allowed at %.2f rows a token)\n",
                 r->nxr.tokens > 0 ? (double)r->nxr.rows / (double)r->nxr.tokens : 0.0);
    if (r->rounds_run < r->rounds_planned)
        snprintf(rounds, sizeof rounds,
                 "  (the time budget stopped the run after %zu of %zu rounds: every path served "
                 "the same sequences)\n",
                 r->rounds_run, r->rounds_planned);
    /* The rounds alternate the paths' order; one round (the time budget, or
     * one sequence) runs them one after another, nxr first, and says so. */
    char order[96] = "";
    if (r->unbatched.ran || r->flat.ran || r->omp.ran || r->span.ran) {
        if (r->rounds_run >= 2)
            snprintf(order, sizeof order, "  (ratios from %zu alternated rounds of one run)\n",
                     r->rounds_run);
        else
            snprintf(order, sizeof order,
                     "  (ratios from one round of one run, the paths in turn, nxr first: not "
                     "alternated)\n");
    }
    row(nxr_row, sizeof nxr_row, "nxr", "");
    char prefill[32] = "any";
    if (c->prefill_tokens > 0 && c->prefill_tokens < c->step_tokens)
        snprintf(prefill, sizeof prefill, "at most %zu", c->prefill_tokens);
    svc_tmpl(
        t, sizeof t,
        "nxr demo: llama {size} {shape}, {weights} weights, {weight_bytes_per_step} MiB of them "
        "per step\n"
        "  {clients} clients, %zu sequences per path, prompts %zu-%zu, gen %zu-%zu, %zu tokens "
        "a step (%s prompt rows beside decoders), %zu MiB of cache per domain\n"
        "{domains}%s{unbatched}{flat}{omp}{span}%s{span_members}%s%s{tokens_match}%s%s",
        c->sequences, c->prompt_min, c->prompt_max, c->gen_min, c->gen_max, c->step_tokens, prefill,
        c->kv_mib, nxr_row, flat_note, limit, compute, rounds, order);
    nxr__emit_object(e, NULL, t);
    nxr__emit_str(e, "model", "llama", NULL);
    nxr__emit_str(e, "size", r->size, NULL);
    nxr__emit_str(e, "weights", svc_llama_format_name(c->format), NULL);
    nxr__emit_uint(e, "clients", c->clients, NULL);
    nxr__emit_object(e, "shape",
                     "(dim {dim}, hidden {hidden}, {layers} layers, {heads} heads, {kv_heads} kv "
                     "heads, vocab {vocab})");
    nxr__emit_uint(e, "dim", s->dim, NULL);
    nxr__emit_uint(e, "hidden", s->hidden, NULL);
    nxr__emit_uint(e, "layers", s->layers, NULL);
    nxr__emit_uint(e, "heads", s->heads, NULL);
    nxr__emit_uint(e, "kv_heads", s->kv_heads, NULL);
    nxr__emit_uint(e, "vocab", s->vocab, NULL);
    nxr__emit_uint(e, "seq", s->seq, NULL);
    nxr__emit_end(e);
    char mib[32];
    snprintf(mib, sizeof mib, "%.1f", r->weight_bytes / (1 << 20));
    nxr__emit_uint(e, "weight_bytes_per_step", (uint64_t)r->weight_bytes, mib);
    path_members(e, &r->nxr);
    nxr__emit_list(e, "domains", NULL);
    for (size_t i = 0; i < r->domain_count; i++)
        domain(e, &r->domains[i]);
    nxr__emit_end(e);
    peer(e, "unbatched", "unbatched", &r->unbatched, &r->nxr);
    peer(e, "flat", "flat", &r->flat, &r->nxr);
    peer(e, "omp", "OpenMP", &r->omp, &r->nxr);
    peer(e, "span", "span", &r->span, &r->nxr);
    span_members(e, r);
    nxr__emit_uint(e, "rounds_planned", r->rounds_planned, NULL);
    nxr__emit_uint(e, "rounds_run", r->rounds_run, NULL);
    fraction(e, "flat_weights_huge", r->flat_weights_huge);
    svc_emit_num(e, "read_gbs", r->machine.read_gbs, "%.1f");
    if (r->fraction_of_limit < 0)
        nxr__emit_null(e, "fraction_of_limit", "");
    else
        svc_emit_num(e, "fraction_of_limit", r->fraction_of_limit, "%.2f");
    if (r->bound_tokens_per_s < 0)
        nxr__emit_null(e, "bound_tokens_per_s", "");
    else
        svc_emit_num(e, "bound_tokens_per_s", r->bound_tokens_per_s, "%.0f");
    svc_emit_num(e, "gemm_peak_gflops", r->machine.gemm_peak_gflops, "%.1f");
    if (r->fraction_of_compute < 0) {
        nxr__emit_null(e, "fraction_of_compute", "");
        nxr__emit_null(e, "compute_bound_tokens_per_s", "");
    } else {
        svc_emit_num(e, "fraction_of_compute", r->fraction_of_compute, "%.2f");
        svc_emit_num(e, "compute_bound_tokens_per_s", r->compute_bound_tokens_per_s, "%.0f");
    }
    tokens(e, r);
    nxr__emit_end(e);
}

void svc_llama_report_text(FILE *f, const struct svc_llama_demo_result *r)
{
    svc_emit_report(f, NXR__EMIT_TEXT, report, r);
}

void svc_llama_report_json(FILE *f, const struct svc_llama_demo_result *r)
{
    svc_emit_report(f, NXR__EMIT_JSON, report, r);
}
