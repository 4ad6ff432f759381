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

#include "service/ops.h"

static int nxr_ops_rmsnorm(void *self, size_t rows, size_t cols, const float *x,
                           const float *gamma, float eps, float *out)
{
    return nxr_rmsnorm(self, rows, cols, x, cols, gamma, eps, out, cols);
}

static enum nxr_activation activation(enum svc_act act)
{
    return act == SVC_ACT_SILU   ? NXR_ACTIVATION_SILU
           : act == SVC_ACT_GELU ? NXR_ACTIVATION_GELU_TANH
                                 : NXR_ACTIVATION_NONE;
}

static int nxr_ops_linear(void *self, size_t rows, size_t in, size_t out, const float *x,
                          const float *w, const float *b, enum svc_act act, bool accumulate,
                          float *y)
{
    /* One call: y = act(x W + b), or for the residual y = act(y + x W + b),
     * the bias and activation applied as each tile of y is written. */
    struct nxr_sgemm_args g = {
        .m = rows, .n = out, .k = in, .alpha = 1.0f, .a = x, .lda = in,
        .b = w, .ldb = out, .beta = accumulate ? 1.0f : 0.0f, .c = y, .ldc = out,
    };
    struct nxr_sgemm_epilogue ep = {.bias = b, .activation = activation(act)};
    return nxr_sgemm_fused(self, &g, &ep);
}

/* The same against W packed once for this context's domain: nothing is
 * packed per call. */
static int nxr_ops_linear_packed(void *self, size_t rows, const float *x, const nxr_weights_t *w,
                                 const float *b, enum svc_act act, bool accumulate, float *y)
{
    const size_t in = nxr_weights_k(w), out = nxr_weights_n(w);
    struct nxr_sgemm_packed_args g = {
        .m = rows, .alpha = 1.0f, .a = x, .lda = in, .w = w,
        .beta = accumulate ? 1.0f : 0.0f, .c = y, .ldc = out,
    };
    struct nxr_sgemm_epilogue ep = {.bias = b, .activation = activation(act)};
    return nxr_sgemm_packed(self, &g, &ep);
}

static int nxr_ops_softmax(void *self, size_t rows, size_t cols, const float *x, float *out)
{
    return nxr_softmax(self, rows, cols, x, cols, out, cols);
}

const struct svc_ops svc_ops_nxr = {
    .rmsnorm = nxr_ops_rmsnorm,
    .linear = nxr_ops_linear,
    .linear_packed = nxr_ops_linear_packed,
    .softmax = nxr_ops_softmax,
};
