/* bench/kernels' small-shape peers (see kernels_peers.h). */
#include "bench/kernels_peers.h"

#include <immintrin.h>

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

void peer_omp_gemv_cols(size_t k, size_t n, const float *w, const float *x, float *y, int threads)
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

/* 8 AVX2 registers of integer xor over 256 bytes an iteration: loads and
 * nothing else worth the name, and no byte pattern (a bf16 pair, an 8-bit
 * block) can be a denormal that slows a float add down. */
__attribute__((target("avx2"))) static unsigned long long read_avx2(const unsigned char *b,
                                                                    size_t bytes)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0;
    size_t i = 0;
    for (; i + 256 <= bytes; i += 256) {
        const __m256i *v = (const __m256i *)(b + i);
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(v + 0));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(v + 1));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(v + 2));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(v + 3));
        a4 = _mm256_xor_si256(a4, _mm256_loadu_si256(v + 4));
        a5 = _mm256_xor_si256(a5, _mm256_loadu_si256(v + 5));
        a6 = _mm256_xor_si256(a6, _mm256_loadu_si256(v + 6));
        a7 = _mm256_xor_si256(a7, _mm256_loadu_si256(v + 7));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)),
                          _mm256_xor_si256(_mm256_xor_si256(a4, a5), _mm256_xor_si256(a6, a7)));
    unsigned long long lane[4], s = 0;
    _mm256_storeu_si256((__m256i *)lane, a0);
    for (; i < bytes; i++)
        s ^= b[i];
    return s ^ lane[0] ^ lane[1] ^ lane[2] ^ lane[3];
}

unsigned long long peer_read_bytes(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    if (__builtin_cpu_supports("avx2"))
        return read_avx2(b, bytes);
    unsigned long long s = 0;
    for (size_t i = 0; i < bytes; i++)
        s ^= b[i];
    return s;
}
