/*
 * bench/kernels, the small shapes (kernels_small.c): GEMV over W of 4, 64
 * and 512 MiB and small-batch GEMM (m = 1, 4, 16), nxr unpacked and packed
 * against OpenBLAS, a plain OpenMP loop and the streaming read of the same
 * bytes, all on the domain's budget of threads, in one run.
 */
#ifndef NXR_BENCH_KERNELS_SMALL_H
#define NXR_BENCH_KERNELS_SMALL_H

#include <stdbool.h>
#include <stddef.h>

/* One GEMV: y = W x over the same bytes, in one of three call shapes:
 * "n1" (nxr_sgemm m x 1 = W(m x k) x), "m1_trans" (1 x n = x^T W^T,
 * trans_b; packed: W packed transposed), "m1" (1 x n = x^T W, W stored
 * k x n; packed: W in panels). GB/s = W's bytes / time. */
struct gemv_row {
    size_t mib;
    const char *shape;
    bool trans, packed;
    double nxr, openblas, omp_loop, read;
};

struct small_gemm_row {
    size_t m, k, n;
    bool packed;
    double nxr, openblas; /* GFLOP/s */
};

struct small_report {
    unsigned threads;
    struct gemv_row gemv[16];
    size_t ngemv;
    struct small_gemm_row gemm[24];
    size_t ngemm;
};

/* Nonzero: small_section runs only the GEMV of that many MiB. */
extern size_t small_only_mib;

/* Runs both parts; `reps` rounds each (the 512 MiB GEMV: half). */
void small_section(struct small_report *rep, int reps);

/* The table and the goal lines, against `native_2048` GFLOP/s. */
void small_print_text(const struct small_report *rep, double native_2048);

/* ,"gemv":[...],"small_gemm":[...] (inside the caller's object). */
void small_print_json(const struct small_report *rep);

#endif /* NXR_BENCH_KERNELS_SMALL_H */
