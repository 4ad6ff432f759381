/* `nxr demo`'s language model report: the table and the JSON (see llama_demo.h). */
#include <stdio.h>
#include <string.h>

#include "service/llama_demo.h"

static void path_line(FILE *f, const char *name, const struct svc_llama_path_result *p,
                      const struct svc_llama_path_result *ref)
{
    if (!p->ran)
        return;
    fprintf(f,
            "  %-10s %9.1f tok/s  TTFT p50 %8.2f ms p99 %8.2f ms  ITL p50 %7.2f ms p99 %7.2f ms"
            "  batch %5.2f",
            name, p->tokens_per_s, p->ttft.p50_ms, p->ttft.p99_ms, p->itl.p50_ms, p->itl.p99_ms,
            p->batch_mean);
    if (ref != NULL && ref != p && p->tokens_per_s > 0)
        fprintf(f, "  (nxr %.2fx)", ref->tokens_per_s / p->tokens_per_s);
    fputc('\n', f);
}

void svc_llama_report_text(FILE *f, const struct svc_llama_demo_result *r)
{
    const struct svc_llama_demo_config *c = &r->config;
    const struct svc_llama_shape *s = &c->shape;
    fprintf(f,
            "nxr demo: llama %s (dim %zu, hidden %zu, %zu layers, %zu heads, %zu kv heads, "
            "vocab %zu), %s weights, %.1f MiB of them per step\n",
            r->size, s->dim, s->hidden, s->layers, s->heads, s->kv_heads, s->vocab,
            svc_llama_format_name(c->format), r->weight_bytes / (1 << 20));
    fprintf(f,
            "  %zu clients, %zu sequences per path, prompts %zu-%zu, gen %zu-%zu, %zu tokens a "
            "step, %zu MiB of cache per domain\n",
            c->clients, c->sequences, c->prompt_min, c->prompt_max, c->gen_min, c->gen_max,
            c->step_tokens, c->kv_mib);
    for (size_t i = 0; i < r->domain_count; i++) {
        const struct svc_llama_domain_result *d = &r->domains[i];
        fprintf(f,
                "  domain %d (node %d): %zu tokens, batch %.2f, weights on node %.2f, KV on node "
                "%.2f\n",
                d->id, d->node, d->tokens, d->batch_mean, d->weights_on_node, d->kv_on_node);
    }
    path_line(f, "nxr", &r->nxr, NULL);
    path_line(f, "unbatched", &r->unbatched, &r->nxr);
    path_line(f, "flat", &r->flat, &r->nxr);
    path_line(f, "OpenMP", &r->omp, &r->nxr);
    path_line(f, "span", &r->span, &r->nxr);
    if (r->flat.ran)
        fprintf(f,
                "  (flat: one domain over CPUs %s, weights on its memory; OpenMP: one sequence "
                "at a time, prompts token by token)\n",
                r->flat_cpus);
    if (r->span.ran) {
        fprintf(f,
                "  span: each sequence over %zu domain%s at once, weights sharded by node; "
                "inter-token latency p50 %.2fx, p99 %.2fx one domain's (nxr)\n",
                r->span_members, r->span_members == 1 ? "" : "s",
                r->nxr.itl.p50_ms > 0 ? r->span.itl.p50_ms / r->nxr.itl.p50_ms : 0,
                r->nxr.itl.p99_ms > 0 ? r->span.itl.p99_ms / r->nxr.itl.p99_ms : 0);
        if (r->span_members == 1)
            fprintf(f, "  (span: one domain only, so the span path is the one-domain engine: "
                       "give --domains or a machine with more nodes to shard the weights)\n");
    }
    if (r->fraction_of_limit >= 0)
        fprintf(f,
                "  limit: read %.1f GB/s measured in this run; nxr's weight reads are %.2f of it "
                "(%.0f tok/s allowed at batch %.2f)\n",
                r->machine.read_gbs, r->fraction_of_limit, r->bound_tokens_per_s,
                r->nxr.batch_mean);
    if (r->sequences_compared > 0) {
        /* "nxr, unbatched and flat", "nxr, unbatched, flat and span", "nxr and span" */
        const char *ran[4] = {"nxr"};
        size_t n = 1;
        if (r->unbatched.ran)
            ran[n++] = "unbatched";
        if (r->flat.ran)
            ran[n++] = "flat";
        if (r->span.ran)
            ran[n++] = "span";
        char which[64] = "";
        for (size_t i = 0; i < n; i++)
            snprintf(which + strlen(which), sizeof which - strlen(which), "%s%s",
                     i == 0       ? ""
                     : i + 1 == n ? " and "
                                  : ", ",
                     ran[i]);
        fprintf(f, "  tokens: %s on %s (%zu sequences, greedy, %s)",
                r->tokens_match ? "identical" : "DIFFER", which, r->sequences_compared,
                svc_llama_format_name(c->format));
        if (r->omp.ran)
            fprintf(f,
                    "; OpenMP (f32) made the same tokens for %zu of them (another summation "
                    "order)",
                    r->omp_sequences_same);
        fputc('\n', f);
    }
    if (r->rounds_run < r->rounds_planned)
        fprintf(f,
                "  (the time budget stopped the run after %zu of %zu rounds: every path served "
                "the same sequences)\n",
                r->rounds_run, r->rounds_planned);
    fprintf(f, "  (ratios from alternated rounds of one run)\n");
}

static void path_json(FILE *f, const struct svc_llama_path_result *p)
{
    fprintf(f,
            "\"sequences\":%zu,\"tokens\":%zu,\"wall_s\":%.4f,\"tokens_per_s\":%.2f,"
            "\"ttft_p50_ms\":%.4f,\"ttft_p99_ms\":%.4f,\"itl_p50_ms\":%.4f,\"itl_p99_ms\":%.4f,"
            "\"batch_mean\":%.4f,\"steps\":%zu",
            p->sequences, p->tokens, p->wall_s, p->tokens_per_s, p->ttft.p50_ms, p->ttft.p99_ms,
            p->itl.p50_ms, p->itl.p99_ms, p->batch_mean, p->steps);
}

static void fraction_json(FILE *f, const char *key, double v)
{
    if (v < 0)
        fprintf(f, "\"%s\":null", key);
    else
        fprintf(f, "\"%s\":%.4f", key, v);
}

void svc_llama_report_json(FILE *f, const struct svc_llama_demo_result *r)
{
    const struct svc_llama_demo_config *c = &r->config;
    const struct svc_llama_shape *s = &c->shape;
    fprintf(f,
            "{\"model\":\"llama\",\"size\":\"%s\",\"weights\":\"%s\",\"clients\":%zu,"
            "\"shape\":{\"dim\":%zu,\"hidden\":%zu,\"layers\":%zu,\"heads\":%zu,\"kv_heads\":%zu,"
            "\"vocab\":%zu,\"seq\":%zu},\"weight_bytes_per_step\":%.0f,",
            r->size, svc_llama_format_name(c->format), c->clients, s->dim, s->hidden, s->layers,
            s->heads, s->kv_heads, s->vocab, s->seq, r->weight_bytes);
    path_json(f, &r->nxr);
    fprintf(f, ",\"domains\":[");
    for (size_t i = 0; i < r->domain_count; i++) {
        const struct svc_llama_domain_result *d = &r->domains[i];
        fprintf(f, "%s{\"id\":%d,\"node\":%d,\"tokens\":%zu,\"batch_mean\":%.4f,", i ? "," : "",
                d->id, d->node, d->tokens, d->batch_mean);
        fraction_json(f, "weights_on_node", d->weights_on_node);
        fputc(',', f);
        fraction_json(f, "kv_on_node", d->kv_on_node);
        fputc(',', f);
        fraction_json(f, "shards_on_node", d->shards_on_node);
        fputc('}', f);
    }
    fputc(']', f);
    const struct {
        const char *key;
        const struct svc_llama_path_result *p;
    } peers[] = {
        {"unbatched", &r->unbatched}, {"flat", &r->flat}, {"omp", &r->omp}, {"span", &r->span}};
    for (size_t i = 0; i < sizeof peers / sizeof peers[0]; i++) {
        fprintf(f, ",\"%s\":", peers[i].key);
        if (peers[i].p->ran) {
            fputc('{', f);
            path_json(f, peers[i].p);
            fputc('}', f);
        } else {
            fprintf(f, "null");
        }
    }
    fprintf(f, ",\"span_members\":%zu", r->span_members);
    fprintf(f, ",\"rounds_planned\":%zu,\"rounds_run\":%zu,\"read_gbs\":%.3f,", r->rounds_planned,
            r->rounds_run, r->machine.read_gbs);
    fraction_json(f, "fraction_of_limit", r->fraction_of_limit);
    fputc(',', f);
    fraction_json(f, "bound_tokens_per_s", r->bound_tokens_per_s);
    if (r->sequences_compared > 0)
        fprintf(f, ",\"tokens_match\":%s,\"sequences_compared\":%zu,\"omp_sequences_same\":%zu}\n",
                r->tokens_match ? "true" : "false", r->sequences_compared, r->omp_sequences_same);
    else
        fprintf(f, ",\"tokens_match\":null,\"sequences_compared\":0}\n");
}
