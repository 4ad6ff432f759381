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
 * On a span (runtime/nxr_span.h), the native kernels' chunks are split
 * across its domains; other providers run on its first domain.
 * Called from inside a loop body or task, see the nesting table in
 * executor/nxr_executor.h: on the body's own domain a kernel runs in place
 * with one thread; on another domain, or needing the exclusive permit, it is
 * NXR_EREENTRANT.
 * Foreign providers run between a floating-point environment snapshot and a
 * check: a change is restored and reported as NXR_EFPENV. No error falls back
 * to another provider. The context's thread rule applies (runtime/nxr_ctx.h):
 * one driving thread at a time.
 *
 * Arguments are checked here, before any provider sees them, against the
 * rules of kernels/nxr_kernels.h (NULL operands, short leading dimensions,
 * C overlapping A or B, partial aliasing of an output and an input, items
 * of a batch sharing C, an op outside its enum, ...): a violation is -EINVAL
 * and
 * nxr_last_error() names the argument and the rule. Every other
 * failure also leaves its detail there.
 *
 * On a routing context (NXR_DOMAIN_AUTO) each call first chooses its domain
 * from its inputs (runtime/nxr_route.h: A, B and C when beta != 0 for GEMM;
 * the read vectors, matrices, rows and gamma/beta elsewhere; outputs never
 * count), then runs there as on a context of that domain; NXR_EMIXED under
 * the single-domain policy. Inputs are read where they lie, never copied.
 *
 * Returns 0, -EINVAL, -ENOMEM, NXR_EUNSUPPORTED, NXR_EPLACEMENT, NXR_EFPENV,
 * NXR_EREENTRANT, NXR_EADMISSION, NXR_EMIXED, NXR_EBROKEN or the provider's
 * own error.
 */
#ifndef NXR_CTX_KERNELS_H
#define NXR_CTX_KERNELS_H

#include <stddef.h>

#include "kernels/nxr_kernels.h"
#include "runtime/nxr_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

NXR_API int nxr_sgemm(nxr_ctx_t *ctx, const struct nxr_sgemm_args *args);
NXR_API int nxr_sgemm_batch(nxr_ctx_t *ctx, const struct nxr_sgemm_batch_args *args);

/*
 * nxr_sgemm, then C = act(C + bias) (struct nxr_sgemm_epilogue in
 * kernels/nxr_kernels.h): for a hidden layer, y = act(x W + b), in one call.
 * nxr's native GEMM applies the epilogue to each micro-tile of C as it is
 * written back (C is read once more only while it is still in L1); a
 * provider without sgemm_fused gets it applied by nxr after its sgemm, on
 * the same domain and through the same fan-out (the provider's threads as
 * granted, or the calling domain thread). The result equals the three calls
 * made one after another, bit for bit with the native kernels. epilogue
 * NULL, or with no bias and NXR_ACTIVATION_NONE, is nxr_sgemm. Errors as
 * nxr_sgemm, and -EINVAL for an activation out of range or a bias that
 * overlaps C.
 */
NXR_API int nxr_sgemm_fused(nxr_ctx_t *ctx, const struct nxr_sgemm_args *args,
                            const struct nxr_sgemm_epilogue *epilogue);
NXR_API int nxr_binary(nxr_ctx_t *ctx, enum nxr_binary_op op, size_t n, const float *x,
                       const float *y, float *out);
/*
 * A row broadcast over a rows x cols matrix: out[r][c] = x[r][c] op row[c]
 * (a bias over a batch, without repeating the bias per row). Row strides
 * ldx, ldo >= cols; out may be x with ldo == ldx (in place), any other
 * overlap of out with x or row is -EINVAL. rows or cols 0 touches nothing.
 * NXR_EUNSUPPORTED when the elementwise provider has no binary_rows.
 */
NXR_API int nxr_binary_rows(nxr_ctx_t *ctx, enum nxr_binary_op op, size_t rows, size_t cols,
                            const float *x, size_t ldx, const float *row, float *out, size_t ldo);
NXR_API int nxr_scale(nxr_ctx_t *ctx, size_t n, const float *x, float alpha, float *out);
NXR_API int nxr_unary(nxr_ctx_t *ctx, enum nxr_unary_op op, size_t n, const float *x, float *out);
/* STREAM triad: a = b + s * c. */
NXR_API int nxr_triad(nxr_ctx_t *ctx, size_t n, const float *b, const float *c, float s, float *a);
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
