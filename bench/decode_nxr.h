/*
 * bench/decode with nxr, the way the docs tell a user to write it (docs/guide.md,
 * "Kernels"; runtime/nxr_weights.h): one context on the domain; every
 * matrix packed once at load with nxr_weights_create (a layer's Wq, Wk, Wv
 * as one matrix, its W1, W3 as one); each product one nxr_sgemm_packed with
 * m = 1, the residual adds folded into the output and down projections
 * (beta = 1 onto x); nxr_rmsnorm, nxr_unary (SiLU), nxr_binary and
 * nxr_argmax for the rest; attention as an nxr_parallel_for over heads
 * whose bodies call nxr_sgemm and nxr_softmax in place (the nesting table,
 * executor/nxr_executor.h). RoPE, the embedding row and the cache writes
 * are plain code on the calling thread.
 */
#ifndef NXR_BENCH_DECODE_NXR_H
#define NXR_BENCH_DECODE_NXR_H

#include <stddef.h>

#include "bench/read_limit.h"
#include "service/llama_model.h"
#include "runtime/nxr.h"

struct decode_nxr;

/* Where a step's time went, in seconds summed over the steps of the calls
 * to decode_nxr_generate: the packed products (projections and
 * classifier), the attention loop, the rest of the calls (norms, SiLU, the
 * product, argmax, RoPE, copies), and the whole step (the gaps between
 * calls are the whole minus the three). */
struct decode_nxr_times {
    double projections, attention, rest, step;
    size_t steps;
};

/* Packs m's matrices for ctx's domain in `format` (nxr_weights_create_format) and allocates the
 * activations and the KV cache (m must outlive it, rt and ctx too). Returns 0 or the nxr error (its
 * detail in nxr_last_error()). */
int decode_nxr_create(const struct svc_llama *m, enum nxr_weights_format format, nxr_runtime_t *rt,
                      nxr_ctx_t *ctx, struct decode_nxr **out);
/* The bytes of the packed copies a step reads (the layout, padding included):
 * the format's, from nxr_weights_copy. */
size_t decode_nxr_step_bytes(const struct decode_nxr *e);
/* Adds those copies to r, in a step's order: the bytes of the step's limit
 * (bench/read_limit.h). Returns 0 or the error. */
int decode_nxr_read_limit(const struct decode_nxr *e, struct read_limit *r);
void decode_nxr_destroy(struct decode_nxr *e);

/* As svc_llama_omp_generate; adds to *times (may be NULL). Returns 0 or the
 * first nxr error. */
int decode_nxr_generate(struct decode_nxr *e, const int *prompt, size_t prompt_len, size_t n,
                        int *out, struct decode_nxr_times *times);

/* The same decode with each token one nxr_step (runtime/nxr_step.h): the
 * operations above in the same order, as one region, a barrier after each;
 * the norms, RoPE and cache writes as one-chunk loops of the step, SiLU
 * and the product as a loop over the hidden units. Same tokens. */
int decode_nxr_generate_step(struct decode_nxr *e, const int *prompt, size_t prompt_len, size_t n,
                             int *out);

#endif /* NXR_BENCH_DECODE_NXR_H */
