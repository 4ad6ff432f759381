/*
 * The model's steps under OpenMP (see omp_path.h): each step one
 * `#pragma omp parallel for` over the team the calling thread opens. The
 * arithmetic differs from nxr's kernels (OpenBLAS's GEMM blocking and
 * libm's expf/tanhf against nxr's vector code), so results agree within a
 * tolerance, not bit for bit (service/compare.h).
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "service/omp_path.h"

static int omp_rmsnorm(void *self, size_t rows, size_t cols, const float *x, const float *gamma,
                       float eps, float *out)
{
    (void)self;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float ss = 0.0f;
        for (size_t j = 0; j < cols; j++)
            ss += xr[j] * xr[j];
        const float inv = 1.0f / sqrtf(ss / (float)cols + eps);
        for (size_t j = 0; j < cols; j++)
            out[r * cols + j] = xr[j] * inv * gamma[j];
    }
    return 0;
}

static float act_of(enum svc_act act, float v)
{
    switch (act) {
    case SVC_ACT_SILU:
        return v / (1.0f + expf(-v));
    case SVC_ACT_GELU:
        return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    case SVC_ACT_NONE:
        break;
    }
    return v;
}

static int omp_linear(void *self, size_t rows, size_t in, size_t out, const float *x,
                      const float *w, const float *b, enum svc_act act, bool accumulate, float *y)
{
    (void)self;
    /* One column block per thread, 16 columns aligned: each thread writes
     * its own columns of y, so blocks never share a cache line's worth of
     * work in the middle of a row. */
    const size_t threads = (size_t)omp_get_max_threads();
    const size_t block = ((out + threads - 1) / threads + 15) / 16 * 16;
    const size_t blocks = (out + block - 1) / block;
#pragma omp parallel for schedule(static)
    for (size_t jb = 0; jb < blocks; jb++) {
        const size_t j0 = jb * block, nb = out - j0 < block ? out - j0 : block;
        for (size_t r = 0; r < rows; r++) {
            float *yr = y + r * out + j0;
            for (size_t j = 0; j < nb; j++)
                yr[j] = accumulate ? yr[j] + b[j0 + j] : b[j0 + j];
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)nb, (int)in, 1.0f,
                    x, (int)in, w + j0, (int)out, 1.0f, y + j0, (int)out);
        if (act != SVC_ACT_NONE) {
            for (size_t r = 0; r < rows; r++) {
                float *yr = y + r * out + j0;
                for (size_t j = 0; j < nb; j++)
                    yr[j] = act_of(act, yr[j]);
            }
        }
    }
    return 0;
}

static int omp_softmax(void *self, size_t rows, size_t cols, const float *x, float *out)
{
    (void)self;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *o = out + r * cols;
        float m = xr[0];
        for (size_t j = 1; j < cols; j++)
            m = xr[j] > m ? xr[j] : m;
        float sum = 0.0f;
        for (size_t j = 0; j < cols; j++)
            sum += (o[j] = expf(xr[j] - m));
        const float inv = 1.0f / sum;
        for (size_t j = 0; j < cols; j++)
            o[j] *= inv;
    }
    return 0;
}

const struct svc_ops svc_ops_omp = {
    .rmsnorm = omp_rmsnorm,
    .linear = omp_linear,
    .softmax = omp_softmax,
};
