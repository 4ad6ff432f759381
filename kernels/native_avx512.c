/*
 * nxr native kernels, AVX-512 instance: native_body.inc with 16-float
 * vectors, compiled with -mavx512f -mfma (kernels/BUILD.bazel) and selected
 * only when the CPU and OS support AVX-512F. The GEMM micro-tile is 12 x 32:
 * 24 accumulators + 2 B vectors + 1 broadcast = 27 of 32 zmm registers.
 */
#include "kernels/internal/native.h"

#if defined(__AVX512F__) && defined(__FMA__)
#define NXR_ISA_NAME "avx512"
#define NXR_ISA_SYM  nxr__native_isa_avx512_table
#define VL           16
#define MR           12
#define MC           192
#define KC           128
#define NC           1024
#include "kernels/internal/native_body.inc"
#else
/* Built without the flags (not x86-64): an empty table, never selected. */
const struct nxr__native_isa nxr__native_isa_avx512_table = {.name = NULL};
#endif
