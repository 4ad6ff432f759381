/*
 * Continuous batching of the llama decoder on one domain. A step decodes
 * one token of every active sequence and feeds waiting prompts in chunks,
 * all as rows of one batched pass through the weights (each product one
 * nxr_sgemm_packed with m = the step's rows, against the domain's packed
 * copy), while attention reads each row's own sequence's cache. Prompt
 * chunks fill what the per-step token budget leaves after the decode rows,
 * so a long prompt never stalls the decoders. In the last layer only the
 * rows that make a token (decoders, and a chunk's row that ends its
 * prompt) go on past writing their keys and values to the cache.
 *
 * The KV cache is the domain's block pool (service/kv_blocks.h). Of the
 * waiting sequences, the one asking for the most tokens (`gen`, a
 * request's max tokens; the earliest of equals) is admitted next, so that
 * when many arrive at once the longest decoders start first and decode
 * through the others' prefill instead of running on alone at the end
 * (prompts are fed one after another, and this is the order that ends
 * such a set soonest). One that max_active later sequences have passed
 * goes next whatever it asks for, so none waits forever. It is admitted
 * only when the pool holds the blocks of its whole length (prompt + gen -
 * 1 positions) and the active count is below the cap; otherwise it, and
 * all behind it, wait: a running sequence never runs out of cache. It
 * leaves, giving its blocks back, when it has its `gen` tokens; the next
 * step may admit another.
 *
 * Decoding is greedy. Every row's arithmetic is its own (the products'
 * rows are independent, attention and the norms are per row), so a
 * sequence's tokens are the same served alone or in any batch, and with
 * any chunking of its prompt (tests/service/llama_batch_test.c).
 *
 * Not thread-safe: one serving thread (on a thread that may drive the
 * context) submits and steps; callers that submit from elsewhere lock.
 */
#ifndef NXR_SERVICE_LLAMA_BATCH_H
#define NXR_SERVICE_LLAMA_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/nxr.h"
#include "service/kv_blocks.h"
#include "service/llama_shards.h"
#include "service/llama_weights.h"

struct svc_llama_seq;

/* Called on the serving thread, in step order, for every token a sequence
 * makes (s->made already counts it); when s->made == s->gen the sequence
 * has left the engine, which holds it no longer. */
typedef void (*svc_llama_token_fn)(void *arg, struct svc_llama_seq *s, int token);

struct svc_llama_batch_opts {
    size_t step_tokens; /* rows per step at most (decode + prefill); >= 1 */
    size_t max_active;  /* sequences being served at once; 1..step_tokens */
    /* Prompt rows a step takes while any sequence decodes (0: as many as
     * step_tokens leaves). A prompt row costs a token's worth of compute
     * where a decoder's costs the same, but a big chunk makes its step
     * several times longer than a decode-only one: every decoder waits that
     * long for its next token. A small cap keeps the steps alike (the
     * inter-token latency's tail near its median) and feeds prompts over
     * more steps; with no decoder waiting, prompts take every row. */
    size_t prefill_tokens;
    size_t kv_bytes;     /* the cache budget, in the domain's memory */
    size_t block_tokens; /* positions per cache block; >= 1 */
    svc_llama_token_fn on_token;
    void *arg;
    /* `nxr demo --span`: both set, or neither. Every product then runs over
     * span's members against the matrices sharded by node (nxr_span_linear,
     * service/llama_shards.h) instead of against the domain's packed copy;
     * everything else (embedding, norms, attention, the cache, the argmax)
     * stays on the engine's context, whose domain must be span's first
     * member. The tokens are the same bits as the packed f32 path's. */
    nxr_ctx_t *span;
    const struct svc_llama_shards *shards;
};

/* step_tokens 64, max_active 16, prefill_tokens 0, kv_bytes 64 MiB,
 * block_tokens 16. */
void svc_llama_batch_opts_init(struct svc_llama_batch_opts *o);

/* A request: the caller owns it and fills prompt, prompt_len, gen and out
 * (room for gen tokens); the engine owns the rest while it holds it. */
struct svc_llama_seq {
    const int *prompt;
    size_t prompt_len, gen;
    int *out;
    void *user; /* the caller's */
    /* The engine's: */
    size_t fed;  /* prompt tokens in the cache */
    size_t made; /* tokens made */
    size_t *blocks;
    size_t nblocks;
    size_t passed; /* later sequences admitted before it (next_waiting) */
    struct svc_llama_seq *next;
};

struct svc_llama_batch;

/* An engine on ctx's domain, which must be side `side` of w (w, and w's
 * model, outlive it). Returns 0, -EINVAL (an option out of range, the
 * cache budget below one block, side out of range, a span without shards
 * or shards without a span, shards of another member count or shape, or
 * w's matrices not f32 with a span), -ENOMEM or
 * nxr_domain_malloc's error; on failure *out is NULL and nothing stays
 * allocated. */
int svc_llama_batch_create(const struct svc_llama_weights *w, size_t side, nxr_ctx_t *ctx,
                           const struct svc_llama_batch_opts *o, struct svc_llama_batch **out);

/* Frees it (and the blocks of sequences it still holds, which it drops).
 * NULL is a no-op. */
void svc_llama_batch_destroy(struct svc_llama_batch *b);

/* Queues s. Returns 0, or -EINVAL naming nothing changed: an empty prompt
 * or gen, a token outside the vocabulary, a length beyond the model's seq,
 * or a length whose blocks exceed the whole pool (it could never run). */
int svc_llama_batch_submit(struct svc_llama_batch *b, struct svc_llama_seq *s);

/* What one step did. */
struct svc_llama_step {
    size_t rows;         /* decode + prefill rows */
    size_t decode_rows;  /* active sequences that made a token from their last one */
    size_t prefill_rows; /* prompt tokens fed */
    size_t admitted;     /* sequences that joined */
    size_t left;         /* sequences that finished */
};

/* Runs one step (nothing when idle). Returns 0 or the first nxr error of
 * the pass (then the step's tokens are not delivered). */
int svc_llama_batch_step(struct svc_llama_batch *b, struct svc_llama_step *out);

/* Nothing active and nothing waiting. */
bool svc_llama_batch_idle(const struct svc_llama_batch *b);

size_t svc_llama_batch_active(const struct svc_llama_batch *b);
size_t svc_llama_batch_waiting(const struct svc_llama_batch *b);

/* The scores over the vocabulary behind the last step's i-th token (i
 * below the count returned: the tokens that step made), valid until the
 * next step: *seq the sequence it went to, *logits its vocab floats. For
 * tests, which hold them against a reference decoder's: tokens alone
 * barely notice a wrong norm or attention in a small random model. */
size_t svc_llama_batch_logits(const struct svc_llama_batch *b, size_t i,
                              const struct svc_llama_seq **seq, const float **logits);

/* The pool: free blocks, all blocks, and the pool itself (for tests and
 * the page check). */
size_t svc_llama_batch_free_blocks(const struct svc_llama_batch *b);
const struct svc_kv_blocks *svc_llama_batch_cache(const struct svc_llama_batch *b);

#endif /* NXR_SERVICE_LLAMA_BATCH_H */
