/*
 * bench/decode's peer: the decoder as a hand-written single-file engine
 * writes it, every product a `#pragma omp parallel for` over output rows,
 * attention a parallel loop over heads, the rest plain loops on the calling
 * thread. Compiled apart (decode_omp.c, -Ofast -march=native -fopenmp, as
 * such engines are built: bench/BUILD.bazel), with nothing of nxr's.
 */
#ifndef NXR_BENCH_DECODE_OMP_H
#define NXR_BENCH_DECODE_OMP_H

#include <stddef.h>

#include "service/llama_model.h"

struct decode_omp;

/* The activations and the KV cache for m (which must outlive it), run on
 * `threads` OpenMP threads. Returns 0 or -ENOMEM. */
int decode_omp_create(const struct svc_llama *m, int threads, struct decode_omp **out);
void decode_omp_destroy(struct decode_omp *e);

/* Feeds the prompt one token at a time from position 0, then generates n
 * tokens greedily into out[0, n): prompt_len - 1 + n decode steps, which
 * must fit the shape's seq. */
void decode_omp_generate(struct decode_omp *e, const int *prompt, size_t prompt_len, size_t n,
                         int *out);

/* The streaming read of w[0, floats) (floats a multiple of 64) on
 * `threads` OpenMP threads, one even share each (bench/kernels'
 * peer_read_sum): the limit as this engine's threads see it. Returns the
 * sum, so that the read is not optimised away. */
float decode_omp_read(const float *w, size_t floats, int threads);

#endif /* NXR_BENCH_DECODE_OMP_H */
