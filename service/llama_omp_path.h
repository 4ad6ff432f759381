/*
 * `nxr demo`'s OpenMP peer for the language model: the single-file engine
 * (service/llama_omp.h) serving the same stream (service/llama_serve.h's)
 * as such a program does: one sequence at a time, first come first served,
 * its prompt token by token, on `threads` OpenMP threads, weights where
 * the master copy lives. The clients are closed-loop as on the other
 * paths: sequence j is submitted when sequence j - clients finishes (the
 * first `clients` at the start), so its time to first token includes its
 * wait behind the others.
 */
#ifndef NXR_SERVICE_LLAMA_OMP_PATH_H
#define NXR_SERVICE_LLAMA_OMP_PATH_H

#include "service/llama_model.h"
#include "service/llama_serve.h"

/* Serves sequences [c->first, c->first + c->count) of c->stream with c->clients
 * clients (c->batch is not used) on m, tokens as svc_llama_serve's, and
 * fills *out as it does (one domain: the OpenMP team). Returns 0, -EINVAL
 * (a sequence longer than m's seq) or -ENOMEM; nothing stays allocated
 * but the result's samples. */
int svc_llama_omp_serve(const struct svc_llama *m, int threads,
                        const struct svc_llama_serve_config *c, int *tokens,
                        struct svc_llama_serve_result *out);

#endif /* NXR_SERVICE_LLAMA_OMP_PATH_H */
