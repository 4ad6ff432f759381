/*
 * Attention's scores over one key tile of the KV cache (kv_blocks.h: a
 * block's keys of a layer are transposed, a row of block_tokens floats per
 * element of the key). Header-only so that it inlines into each vector
 * width's clone of the service's attention loop (llama_batch.c) and the
 * test calls the very code the engine runs.
 */
#ifndef NXR_SERVICE_LLAMA_SCORES_H
#define NXR_SERVICE_LLAMA_SCORES_H

#include <stddef.h>

/* The scores of nt positions of a key tile (rows of bt floats, one per
 * element of q; kv_blocks.h): att[j] = scale * (q . key j). A vector of 16
 * positions at a time, each position's sum along q in four interleaved
 * chains added pairwise at the end; the same adds in the same order for a
 * position wherever it falls, so every engine path (batched, alone, span)
 * makes the same bits. Keys a row apart (the layout before) took a sum
 * across a vector's lanes per position; this way the 110m demo made
 * 1.01-1.05x the tokens/s (three alternated pairs, 8 clients). Attention
 * stays about 15 % of a batched step's samples against 1.6 % of its
 * arithmetic: they sit on the key tile's loads, the decoders' caches read
 * from memory at every step (about 50 MB a step at 8 clients). */
#define SCORE_LANES 16
static inline __attribute__((always_inline)) void svc_llama_scores_tile(const float *q,
                                                                        const float *kt, size_t bt,
                                                                        size_t hs, size_t nt,
                                                                        float scale, float *att)
{
    for (size_t j0 = 0; j0 < nt; j0 += SCORE_LANES) {
        const size_t w = nt - j0 < SCORE_LANES ? nt - j0 : SCORE_LANES;
        const float *k = kt + j0;
        /* Four accumulators, each named: indexed by a loop variable they
         * lived on the stack (a load and a store around every add). */
        float a0[SCORE_LANES] = {0}, a1[SCORE_LANES] = {0}, a2[SCORE_LANES] = {0},
              a3[SCORE_LANES] = {0};
        size_t d = 0;
        if (w == SCORE_LANES) {
            for (; d + 4 <= hs; d += 4) {
                const float *k0 = k + d * bt, *k1 = k0 + bt, *k2 = k1 + bt, *k3 = k2 + bt;
                for (size_t l = 0; l < SCORE_LANES; l++)
                    a0[l] += q[d] * k0[l];
                for (size_t l = 0; l < SCORE_LANES; l++)
                    a1[l] += q[d + 1] * k1[l];
                for (size_t l = 0; l < SCORE_LANES; l++)
                    a2[l] += q[d + 2] * k2[l];
                for (size_t l = 0; l < SCORE_LANES; l++)
                    a3[l] += q[d + 3] * k3[l];
            }
        } else {
            for (; d + 4 <= hs; d += 4) {
                const float *k0 = k + d * bt, *k1 = k0 + bt, *k2 = k1 + bt, *k3 = k2 + bt;
                for (size_t l = 0; l < w; l++) {
                    a0[l] += q[d] * k0[l];
                    a1[l] += q[d + 1] * k1[l];
                    a2[l] += q[d + 2] * k2[l];
                    a3[l] += q[d + 3] * k3[l];
                }
            }
        }
        for (; d < hs; d++)
            for (size_t l = 0; l < w; l++)
                a0[l] += q[d] * k[d * bt + l];
        for (size_t l = 0; l < w; l++)
            att[j0 + l] = ((a0[l] + a1[l]) + (a2[l] + a3[l])) * scale;
    }
}

#endif
