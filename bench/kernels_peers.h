/*
 * bench/kernels' peers for the small shapes, compiled as a service without
 * nxr would build them (-Ofast -march=native -fopenmp: bench/BUILD.bazel):
 * a plain OpenMP row loop of dot products, its column form for x^T W, and
 * the limit every GEMV is measured against, a streaming read of the same
 * bytes (a vectorised sum with several accumulators).
 */
#ifndef NXR_BENCH_KERNELS_PEERS_H
#define NXR_BENCH_KERNELS_PEERS_H

#include <stddef.h>

/* y[i] = sum_p w[i * k + p] x[p], rows split statically over `threads`. */
void peer_omp_gemv_rows(size_t rows, size_t k, const float *w, const float *x, float *y,
                        int threads);

/* y[j] = sum_p x[p] w[p * n + j] (x^T W), column blocks over `threads`. */
void peer_omp_gemv_cols(size_t k, size_t n, const float *w, const float *x, float *y, int threads);

/* y[i] for i in [begin, end) of peer_omp_gemv_rows, on the calling thread
 * only: the body of bench/kernels' per-call row loop (nxr_parallel_for),
 * vectorised as the OpenMP peer's rows are. */
void peer_gemv_rows_range(size_t begin, size_t end, size_t k, const float *w, const float *x,
                          float *y);

/* The sum of w[0, n) by 64 independent lanes (4 AVX-512 or 8 AVX2
 * accumulators), n a multiple of 64: the read side of a GEMV and nothing
 * else. */
float peer_read_sum(const float *w, size_t n);

/* The xor of [p, p + bytes) in 64-bit lanes (8 AVX2 registers, the bytes
 * any format's): the read of bench/read_limit.h. */
unsigned long long peer_read_bytes(const void *p, size_t bytes);

#endif /* NXR_BENCH_KERNELS_PEERS_H */
