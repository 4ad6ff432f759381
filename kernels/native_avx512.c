/*
 * nxr native kernels, AVX-512 instance: native_body.inc with 16-float
 * vectors, compiled with -mavx512f -mfma (kernels/BUILD.bazel) and selected
 * only when the CPU and OS support AVX-512F. The GEMM micro-tile is 8 x 32:
 * 16 accumulators + 2 B vectors + 1 broadcast = 19 of 32 zmm registers.
 * Measured single-thread on Zen 4 (bench/sgemm_native_probe and a block
 * sweep): 12 x 32 and 14 x 32 tiles ran 5-15% slower than 8 x 32, and a
 * deep kc (512) with a short mc (64) beat kc 128-256: fewer passes over C,
 * and the 64 x 512 A block (128 KiB) stays in L2.
 */
#include "kernels/internal/native.h"

#if defined(__AVX512F__) && defined(__FMA__)
#define NXR_ISA_NAME "avx512"
#define NXR_ISA_SYM  nxr__native_isa_avx512_table
#define VL           16
#define MR           8
#define MC           64
#define KC           512
#define NC           1024
#include "kernels/internal/native_body.inc"
#else
/* Built without the flags (not x86-64): an empty table, never selected. */
const struct nxr__native_isa nxr__native_isa_avx512_table = {.name = NULL};
#endif
