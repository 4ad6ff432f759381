/*
 * Serving the llama decoder: closed-loop clients, one serving thread and
 * one continuous-batching engine (service/llama_batch.h) per domain.
 *
 * The request stream is a function of the seed: sequence i has a prompt
 * of a length uniform in [prompt_min, prompt_max] and asks for a number of
 * tokens uniform in [gen_min, gen_max] (svc_llama_request), so every path
 * serves the same sequences and their tokens can be compared. `clients`
 * clients each keep one sequence in flight: when one finishes, its client
 * submits the next of the stream at once.
 *
 * A new sequence goes to the domain with the most free cache (the pool's
 * blocks less those of every sequence already sent there and not finished),
 * ties to the one with the fewest such sequences, then the lowest index.
 *
 * Measured per run: output tokens/s; time to first token (from the
 * submission to the step that made it) and inter-token latency (between a
 * sequence's consecutive tokens), as samples; steps, and the sequences
 * each step served (the batch); per domain, where its KV pool's pages are.
 */
#ifndef NXR_SERVICE_LLAMA_SERVE_H
#define NXR_SERVICE_LLAMA_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/nxr.h"
#include "service/llama_batch.h"
#include "service/llama_weights.h"

#define SVC_LLAMA_SERVE_MAX_DOMAINS 64

struct svc_llama_stream {
    uint64_t seed;
    size_t prompt_min, prompt_max, gen_min, gen_max;
};

/* Sequence i of the stream: its prompt length, its gen and (when prompt is
 * not NULL) its prompt tokens, below vocab. */
void svc_llama_request(const struct svc_llama_stream *st, size_t i, size_t vocab,
                       size_t *prompt_len, size_t *gen, int *prompt);

struct svc_llama_serve_config {
    struct svc_llama_stream stream;
    size_t first, count; /* serve sequences [first, first + count) of the stream */
    size_t clients;
    struct svc_llama_batch_opts batch; /* per domain; on_token, arg, span and shards are the
                                        * server's */
    /* `nxr demo --span`: NULL, or the model's matrices sharded over every
     * domain of the runtime (in the runtime's order). Then ONE engine serves
     * every sequence (result: one domain entry, index 0): its serving thread
     * opens a span over every domain and a context on the first (w's side
     * 0, which holds its embedding, norms and KV cache), and each of its
     * products runs on every domain at once, each on its own node's rows. */
    const struct svc_llama_shards *span;
};

struct svc_llama_serve_domain {
    size_t sequences, tokens, steps, batch_sum; /* batch_sum: sequences per step, summed */
    size_t rows;       /* the steps' rows (prompt and decode), summed: what the products computed */
    double kv_on_node; /* the KV pool's pages on the domain's node (-1: no node) */
};

struct svc_llama_serve_result {
    size_t sequences, tokens, steps, batch_sum, rows;
    double wall_s;
    /* Samples (owned; free()): ttft_ms[sequences], itl_ms[itl_count]. */
    double *ttft_ms, *itl_ms;
    size_t itl_count;
    /* The steps that made tokens, in the order they ended (owned; free()):
     * when (seconds of serving), on which domain, and its tokens over the
     * time since that domain's previous step ended (tokens/s). */
    double *step_s, *step_tokens_per_s;
    unsigned *step_domain, *step_tokens;
    size_t step_count;
    struct svc_llama_serve_domain domain[SVC_LLAMA_SERVE_MAX_DOMAINS];
    size_t domains;
};

/* Serves the configuration on the first w->domains domains of rt (w's
 * sides), writing sequence first + j's tokens to tokens[j * gen_max ...].
 * Blocks until every sequence is served. Returns 0, or -EINVAL (a bad
 * configuration), -ENOMEM, or the first error of a serving thread (an
 * engine's create or step) with err saying which; every thread is joined
 * and nothing stays allocated but the result's samples (freed on failure). */
/* Frees a result's samples and step log (a zeroed result is a no-op). */
void svc_llama_serve_result_free(struct svc_llama_serve_result *r);

int svc_llama_serve(nxr_runtime_t *rt, const struct svc_llama_weights *w,
                    const struct svc_llama_serve_config *c, int *tokens,
                    struct svc_llama_serve_result *out, char *err, size_t errsz);

#endif /* NXR_SERVICE_LLAMA_SERVE_H */
