/*
 * nxr native kernels, portable instance: native_body.inc with 4-float
 * vectors, which every GCC/Clang target lowers to what it has (SSE2 on
 * x86-64, NEON on aarch64, scalar elsewhere). Always built, always usable.
 */
#define NXR_ISA_NAME "portable"
#define NXR_ISA_SYM  nxr__native_isa_portable_table
#define VL           4
#define MR           6
#define MC           72
#define KC           512
#define NC           1024
#include "kernels/internal/native_body.inc"
