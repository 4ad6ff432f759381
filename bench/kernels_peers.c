/* bench/kernels' small-shape peers (see kernels_peers.h). */
#include "bench/kernels_peers.h"

void peer_omp_gemv_rows(size_t rows, size_t k, const float *w, const float *x, float *y,
                        int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t i = 0; i < rows; i++) {
        const float *wi = w + i * k;
        float s = 0.0f;
        for (size_t p = 0; p < k; p++)
            s += wi[p] * x[p];
        y[i] = s;
    }
}

void peer_gemv_rows_range(size_t begin, size_t end, size_t k, const float *w, const float *x,
                          float *y)
{
    for (size_t i = begin; i < end; i++) {
        const float *wi = w + i * k;
        float s = 0.0f;
        for (size_t p = 0; p < k; p++)
            s += wi[p] * x[p];
        y[i] = s;
    }
}

#define COL_BLOCK 256

void peer_omp_gemv_cols(size_t k, size_t n, const float *w, const float *x, float *y,
                        int threads)
{
    const size_t blocks = (n + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t b = 0; b < blocks; b++) {
        const size_t j0 = b * COL_BLOCK, j1 = j0 + COL_BLOCK < n ? j0 + COL_BLOCK : n;
        float acc[COL_BLOCK] = {0};
        for (size_t p = 0; p < k; p++)
            for (size_t j = j0; j < j1; j++)
                acc[j - j0] += x[p] * w[p * n + j];
        for (size_t j = j0; j < j1; j++)
            y[j] = acc[j - j0];
    }
}

float peer_read_sum(const float *w, size_t n)
{
    float acc[64] = {0};
    for (size_t i = 0; i + 64 <= n; i += 64)
        for (size_t j = 0; j < 64; j++)
            acc[j] += w[i + j];
    float s = 0.0f;
    for (size_t j = 0; j < 64; j++)
        s += acc[j];
    return s;
}
