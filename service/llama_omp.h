/*
 * The llama decoder (service/llama_model.h) as a hand-written single-file
 * engine writes it, the peer that bench/decode and `nxr demo` set nxr
 * against: every product a `#pragma omp parallel for` over output rows,
 * attention a parallel loop over heads, the rest plain loops on the calling
 * thread, one sequence at a time, its prompt fed token by token. Compiled
 * apart (-Ofast -march=native -fopenmp, as such engines are built:
 * service/BUILD.bazel's llama_omp), with nothing of nxr's.
 */
#ifndef NXR_SERVICE_LLAMA_OMP_H
#define NXR_SERVICE_LLAMA_OMP_H

#include <stddef.h>

#include "service/llama_model.h"

struct svc_llama_omp;

/* The activations and the KV cache for m (which must outlive it), run on
 * `threads` OpenMP threads. Returns 0 or -ENOMEM. */
int svc_llama_omp_create(const struct svc_llama *m, int threads, struct svc_llama_omp **out);
void svc_llama_omp_destroy(struct svc_llama_omp *e);

/* Feeds the prompt one token at a time from position 0, then generates n
 * tokens greedily into out[0, n): prompt_len - 1 + n decode steps, which
 * must fit the shape's seq. on_token (may be NULL) is called after each
 * token with the count made so far. */
void svc_llama_omp_generate(struct svc_llama_omp *e, const int *prompt, size_t prompt_len, size_t n,
                            int *out, void (*on_token)(void *arg, size_t made), void *arg);

#endif /* NXR_SERVICE_LLAMA_OMP_H */
