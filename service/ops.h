/*
 * The service's operations table: the few fused steps the model's forward
 * pass is written over (service/model.h). Two implementations: nxr's
 * kernels on a context (ops_nxr.c, the nxr and flat paths) and plain
 * OpenMP loops with OpenBLAS GEMM (ops_omp.c, the OpenMP comparison path).
 * The steps are the granularity of a fused kernel (GEMM with a bias and
 * activation epilogue, GEMM accumulating into a residual), so moving a path
 * to fused kernels changes its ops file only.
 *
 * Every op returns 0 or a negative status; matrices are row-major with
 * leading dimension = columns.
 */
#ifndef NXR_SERVICE_OPS_H
#define NXR_SERVICE_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/nxr.h"

enum svc_act {
    SVC_ACT_NONE = 0,
    SVC_ACT_SILU = 1,
    SVC_ACT_GELU = 2, /* tanh approximation */
};

struct svc_ops {
    /* out[rows x cols] = x / sqrt(mean(x^2) + eps) * gamma, per row. */
    int (*rmsnorm)(void *self, size_t rows, size_t cols, const float *x, const float *gamma,
                   float eps, float *out);
    /* y[rows x out] = act(x[rows x in] w[in x out] + b), or, with
     * accumulate (act must be NONE), y += x w + b. */
    int (*linear)(void *self, size_t rows, size_t in, size_t out, const float *x, const float *w,
                  const float *b, enum svc_act act, bool accumulate, float *y);
    /* linear against a matrix packed once (nxr_weights_t, in x out as
     * op(W)): the same result, bit for bit, as linear with the original.
     * NULL in a table that has no packed weights. */
    int (*linear_packed)(void *self, size_t rows, const float *x, const nxr_weights_t *w,
                         const float *b, enum svc_act act, bool accumulate, float *y);
    /* out[rows x cols] = softmax of each row of x. */
    int (*softmax)(void *self, size_t rows, size_t cols, const float *x, float *out);
};

/* nxr's kernels on the context passed as `self` (an nxr_ctx_t *): inside a
 * task body they run in place on one thread; from a thread outside any body
 * they split over the context's domain (INNER). */
extern const struct svc_ops svc_ops_nxr;

#endif /* NXR_SERVICE_OPS_H */
