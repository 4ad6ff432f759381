/*
 * `nxr demo` (the default model): a language model served with continuous
 * batching, one context and one engine per domain (service/llama_serve.h),
 * against, in the same run: its own engine unbatched (one sequence a step
 * per domain), flat (the same batched server on a second runtime with one
 * domain over every allowed CPU, weights on that one domain's memory: a
 * NUMA-unaware service) and OpenMP (the single-file engine,
 * service/llama_omp_path.h: one sequence at a time, prompts token by token):
 *  1. a runtime with one domain per NUMA node (or --domains); the decoder's
 *     weights packed and replicated into every domain's node memory, every
 *     page checked (service/llama_weights.h);
 *  2. the machine's streaming-read bandwidth measured on those domains
 *     (service/machine.h), the limit a decode step is set against;
 *  3. the same sequences (service/llama_serve.h's stream) served by each
 *     path in alternating rounds, the order rotating each round;
 *  4. every sequence's tokens compared between the paths. Decoding is
 *     greedy and f32: nxr's paths (one engine) must match exactly; the
 *     OpenMP engine sums in another order, so its tokens may part from
 *     nxr's where two logits nearly tie (counted, not required).
 * With --span, one more path in the same rounds: every sequence served over
 * EVERY domain at once (svc_llama_serve_config.span): one engine, batching
 * as nxr's does, whose products run on every domain against the matrices
 * sharded by output rows, each domain's rows in its node's memory
 * (service/llama_shards.h; checked, `shards_on_node`); the embedding, norms,
 * attention and the KV cache on the first domain (a sequence's cache is
 * read once a step by attention, a few percent of the weight bytes at these
 * lengths, and splitting it by heads would add a second fan-out per layer).
 * Its inter-token latency is set against nxr's one-domain engines' in the
 * same run, and its tokens must be theirs (f32 only: the shards are f32).
 */
#ifndef NXR_SERVICE_LLAMA_DEMO_H
#define NXR_SERVICE_LLAMA_DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "service/llama_model.h"
#include "service/llama_weights.h"
#include "service/machine.h"
#include "service/stats.h"

/* --prefill-tokens' default: prompt rows a step takes beside decoders. A
 * prompt row costs a decoder's compute, and on a machine where a step is
 * bound by compute, not by reading the weights, a 64-row chunk makes its
 * step several times a decode-only step. The cap also sets how fast
 * prompts enter: with 8 clients, prompts of 16-256 and gens of 16-128,
 * about 0.53 x cap sequences decode at a time (each sequence's prompt
 * takes 136 / cap steps and it then decodes for 72). At 110m, four
 * alternated pairs: 12 against 8, 1.07-1.25x tokens/s, the inter-token
 * latency's p99 1.33-1.56x its p50 (8: 1.47-1.78x); 16 gave 1.02-1.09x
 * and 1.73-1.88x. Once the small GEMM asked for W ahead (its steps
 * shorter), 16 against 12 again, three alternated pairs: 0.96-1.16x
 * tokens/s, p99 1.68-2.04x p50 (12: 1.42-1.82x); 24: p99 2.1-2.4x. Once
 * every row group of the GEMM asked for the next slice (a 16-row step
 * cheaper again), fifteen rounds of the three caps in random order, nxr
 * alone: against 12, tokens/s median 1.06x (16) and 1.07x (20), ITL p99
 * median 1.09x and 1.20x; p99 over p50 past 2 in 1, 2 and 4 runs of 15
 * (12, 16, 20). */
#define SVC_LLAMA_PREFILL_TOKENS 12

struct svc_llama_demo_config {
    struct svc_llama_shape shape;                    /* --size or the explicit dimensions */
    enum svc_llama_format format;                    /* --weights */
    size_t clients;                                  /* --clients: sequences in flight */
    size_t sequences;                                /* --sequences: per path */
    size_t prompt_min, prompt_max, gen_min, gen_max; /* --prompt, --gen */
    size_t kv_mib;                                   /* --kv-mib: each domain's cache budget */
    size_t step_tokens;    /* --step-tokens: rows per step (decode + prefill) */
    size_t prefill_tokens; /* --prefill-tokens: prompt rows a step beside decoders (0: no cap) */
    size_t block_tokens;   /* positions per cache block */
    uint64_t seed;         /* --seed: weights and the stream */
    const char *domains;   /* --domains (NXR_DOMAINS grammar); NULL: one per node */
    bool compare;          /* false with --no-compare: the batched path only */
    bool span;             /* --span: also the span path (f32 weights only) */
    unsigned omp_threads;  /* the OpenMP peer's threads; 0: every allowed CPU */
    size_t rounds;         /* rounds the sequences are cut into */
    /* Seconds of serving after which the run stops at the next round
     * boundary (every path has then served the same sequences); 0: none. */
    double time_budget_s;
    double machine_s; /* seconds measuring the read bandwidth (0: not measured) */
    /* --plot FILE.svg: each path's inter-token latency and time to first
     * token (CDFs) and nxr's tokens/s per step over time (service/plot.h);
     * NULL: none. */
    const char *plot_path;
    /* Told of the demo's runtime (the per-domain one): after it is made
     * (ending false), and just before it goes (ending true; still valid
     * then). NULL: nobody. `nxr demo --metrics-port` serves its counters. */
    void (*runtime_hook)(void *arg, nxr_runtime_t *rt, bool ending);
    void *runtime_hook_arg;
};

/* 15m, f32, 8 clients, 16 sequences, prompts 16-256, gen 16-128, 256 MiB of
 * cache, 64 tokens a step, blocks of 16, seed 1, 2 rounds, a 40 s budget,
 * 1 s of machine. */
void svc_llama_demo_config_init(struct svc_llama_demo_config *c);

struct svc_llama_path_result {
    bool ran;
    size_t sequences, tokens, steps;
    size_t rows; /* nxr's engines: the steps' rows, summed (0 for OpenMP) */
    double wall_s, tokens_per_s, batch_mean;
    struct svc_latency ttft, itl;
};

struct svc_llama_domain_result {
    int id, node;
    size_t tokens, steps;
    double batch_mean;
    double weights_on_node, kv_on_node; /* -1: the domain has no node */
    double weights_huge;                /* its packed matrices' bytes on huge pages (-1: unknown) */
    double shards_on_node; /* --span: its shards' pages on its node (-1: unknown or no span) */
};

struct svc_llama_demo_result {
    struct svc_llama_demo_config config;
    const char *size;
    double weight_bytes; /* one step's (the packed matrices) */
    struct svc_llama_path_result nxr, unbatched, flat, omp, span;
    size_t span_members; /* the span path's domains (0: no span path) */
    char flat_cpus[128];
    double flat_weights_huge; /* the flat path's packed bytes on huge pages (-1: unknown or none) */
    size_t domain_count;
    struct svc_llama_domain_result domains[64];
    struct svc_machine machine;
    double fraction_of_limit;  /* nxr's weight bytes/s over the read bandwidth (-1: unknown) */
    double bound_tokens_per_s; /* what the read bandwidth allows at nxr's batch (-1: unknown) */
    /* The compute side: nxr's products' FLOPs (2 x the matrices' weights a
     * row) per second over the GEMM peak measured in the run, and the
     * tokens/s that peak allows at nxr's rows per output token (each -1:
     * unknown). A step that carries prompt rows is bound by this, not by
     * reading the weights, on a machine with few cores. */
    double fraction_of_compute;
    double compute_bound_tokens_per_s;
    bool tokens_match; /* unbatched, flat and span: every token of every sequence */
    size_t sequences_compared;
    size_t rounds_planned, rounds_run; /* fewer run when the time budget cut the run */
    size_t omp_sequences_same;         /* sequences whose tokens OpenMP made exactly */
    char error[256];
};

/* Runs it. 0 and *res filled; -EINVAL with *bad_input and res->error
 * naming the flag; another failure with res->error saying what failed.
 * Nothing is left running or allocated either way. */
int svc_llama_demo_run(const struct svc_llama_demo_config *c, struct svc_llama_demo_result *res,
                       bool *bad_input);

void svc_llama_report_text(FILE *f, const struct svc_llama_demo_result *r);
void svc_llama_report_json(FILE *f, const struct svc_llama_demo_result *r);

#endif /* NXR_SERVICE_LLAMA_DEMO_H */
