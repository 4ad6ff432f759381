/*
 * nxr native kernels, AVX2+FMA instance: native_body.inc with 8-float
 * vectors, compiled with -mavx2 -mfma (kernels/BUILD.bazel) and selected
 * only when the CPU and OS support both. The GEMM micro-tile is 6 x 16:
 * 12 accumulators + 2 B vectors + 1 broadcast = 15 of 16 ymm registers.
 * Blocks: a 72 x 512 A block (144 KiB, L2), 512 x 1024 B block (L2/L3).
 */
#include "kernels/internal/native.h"

#if defined(__AVX2__) && defined(__FMA__)
#define NXR_ISA_NAME "avx2"
#define NXR_ISA_SYM  nxr__native_isa_avx2_table
#define VL           8
#define MR           6
#define MC           72
#define KC           512
#define NC           1024
#include "kernels/internal/native_body.inc"
#else
/* Built without the flags (not x86-64): an empty table, never selected. */
const struct nxr__native_isa nxr__native_isa_avx2_table = {.name = NULL};
#endif
