/*
 * nxr kernels through a context: each call runs one kernel of the runtime's
 * provider for its family (kernels/nxr_kernels.h) on the context's domain.
 *
 * Where a call runs, by the provider's classification:
 *  - nxr's native kernels split the work over the domain's workers (up to
 *    its budget). Work for one thread (small work, a budget of one) runs on
 *    the calling thread when that thread is inside the domain, else on one
 *    of the domain's workers: work never leaves the domain's CPUs, whatever
 *    its size or family;
 *  - a provider that runs on the calling thread only (SEQUENTIAL,
 *    CLAMP_TO_ONE) runs, one thread, on the calling thread when it is inside
 *    the domain, else on one of the domain's workers;
 *  - a provider whose threads nxr cannot confine (parallel OpenBLAS) runs
 *    like that only at a process-wide count of 1; with a larger count,
 *    strict policy rejects it (NXR_EPLACEMENT) unless the domain is the whole
 *    allowed set, and exclusive policy runs it under the process-wide
 *    exclusive permit with the count set to the budget and restored after
 *    (placement is then the process's, not the domain's: the one documented
 *    exception). Caller-managed domains never run it (NXR_EPLACEMENT).
 * Called from inside a loop body or task, see the nesting table in
 * executor/nxr_executor.h: on the body's own domain a kernel runs in place
 * with one thread; on another domain, or needing the exclusive permit, it is
 * NXR_EREENTRANT.
 * Foreign providers run between a floating-point environment snapshot and a
 * check: a change is restored and reported as NXR_EFPENV. No error falls back
 * to another provider. The context's thread rule applies (runtime/nxr_ctx.h):
 * one driving thread at a time.
 * Returns 0, -EINVAL, -ENOMEM, NXR_EUNSUPPORTED, NXR_EPLACEMENT, NXR_EFPENV,
 * NXR_EREENTRANT, NXR_EADMISSION or the provider's own error.
 */
#ifndef NXR_CTX_KERNELS_H
#define NXR_CTX_KERNELS_H

#include <stddef.h>

#include "kernels/nxr_kernels.h"
#include "runtime/nxr_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

NXR_API int nxr_sgemm(nxr_ctx_t *ctx, const nxr_sgemm_args_t *args);
NXR_API int nxr_sgemm_batch(nxr_ctx_t *ctx, const nxr_sgemm_batch_args_t *args);
NXR_API int nxr_binary(nxr_ctx_t *ctx, enum nxr_binary_op op, size_t n, const float *x,
                       const float *y, float *out);
NXR_API int nxr_scale(nxr_ctx_t *ctx, size_t n, float alpha, const float *x, float *out);
NXR_API int nxr_unary(nxr_ctx_t *ctx, enum nxr_unary_op op, size_t n, const float *x, float *out);
/* STREAM triad: a = b + s * c. */
NXR_API int nxr_triad(nxr_ctx_t *ctx, size_t n, float *a, const float *b, const float *c, float s);
NXR_API int nxr_sum(nxr_ctx_t *ctx, size_t n, const float *x, float *out);
NXR_API int nxr_max(nxr_ctx_t *ctx, size_t n, const float *x, float *out);
NXR_API int nxr_argmax(nxr_ctx_t *ctx, size_t n, const float *x, size_t *out);
NXR_API int nxr_softmax(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx,
                        float *out, size_t ldo);
NXR_API int nxr_rmsnorm(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx,
                        const float *gamma, float eps, float *out, size_t ldo);
NXR_API int nxr_layernorm(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx,
                          const float *gamma, const float *beta, float eps, float *out,
                          size_t ldo);

#ifdef __cplusplus
}
#endif

#endif /* NXR_CTX_KERNELS_H */
