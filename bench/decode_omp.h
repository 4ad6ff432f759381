/*
 * bench/decode's limit as its OpenMP peer's threads see it (the peer
 * itself is service/llama_omp.h). Compiled apart, like the peer (-Ofast
 * -march=native -fopenmp: bench/BUILD.bazel).
 */
#ifndef NXR_BENCH_DECODE_OMP_H
#define NXR_BENCH_DECODE_OMP_H

#include <stddef.h>

/* The streaming read of w[0, floats) (floats a multiple of 64) on
 * `threads` OpenMP threads, one even share each (bench/kernels'
 * peer_read_sum): the limit as this engine's threads see it. Returns the
 * sum, so that the read is not optimised away. */
float decode_omp_read(const float *w, size_t floats, int threads);

#endif /* NXR_BENCH_DECODE_OMP_H */
