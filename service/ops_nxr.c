/*
 * The model's steps over nxr's kernels (see ops.h). Today GEMM and bias are
 * two calls: the bias rows are written first and the GEMM accumulates onto
 * them (beta = 1), and the activation is a third call; a fused
 * bias + activation epilogue makes `linear` one call.
 *
 * Every kernel here is one of nxr's native ones, whose result does not
 * depend on how the work was split: a request computed in place on one
 * worker and the same request split over a domain give the same bits.
 */
#include <string.h>

#include "service/ops.h"

static int nxr_ops_rmsnorm(void *self, size_t rows, size_t cols, const float *x,
                           const float *gamma, float eps, float *out)
{
    return nxr_rmsnorm(self, rows, cols, x, cols, gamma, eps, out, cols);
}

static int nxr_ops_linear(void *self, size_t rows, size_t in, size_t out, const float *x,
                          const float *w, const float *b, enum svc_act act, bool accumulate,
                          float *y)
{
    nxr_ctx_t *ctx = self;
    int rc = 0;
    for (size_t r = 0; r < rows && rc == 0; r++) {
        if (accumulate)
            rc = nxr_binary(ctx, NXR_BINARY_ADD, out, y + r * out, b, y + r * out);
        else
            memcpy(y + r * out, b, out * sizeof(float));
    }
    if (rc != 0)
        return rc;
    nxr_sgemm_args_t g = {
        .m = rows, .n = out, .k = in, .alpha = 1.0f, .a = x, .lda = in,
        .b = w, .ldb = out, .beta = 1.0f, .c = y, .ldc = out,
    };
    rc = nxr_sgemm(ctx, &g);
    if (rc != 0 || act == SVC_ACT_NONE)
        return rc;
    return nxr_unary(ctx, act == SVC_ACT_SILU ? NXR_UNARY_SILU : NXR_UNARY_GELU_TANH, rows * out,
                     y, y);
}

static int nxr_ops_softmax(void *self, size_t rows, size_t cols, const float *x, float *out)
{
    return nxr_softmax(self, rows, cols, x, cols, out, cols);
}

const struct svc_ops svc_ops_nxr = {
    .rmsnorm = nxr_ops_rmsnorm,
    .linear = nxr_ops_linear,
    .softmax = nxr_ops_softmax,
};
