/*
 * nxr kernels, CPU feature queries: which vector ISA the CPU and the OS
 * (saved register state) support. x86-64 asks __builtin_cpu_supports,
 * which checks both CPUID and XGETBV; elsewhere every query is false and
 * the portable kernels run.
 */
#ifndef NXR_KERNELS_INTERNAL_CPU_H
#define NXR_KERNELS_INTERNAL_CPU_H

#include <stdbool.h>

/* Vector ISA tiers, ordered: a higher tier runs everything a lower one does. */
enum nxr__isa_tier {
    NXR_TIER_UNKNOWN = 0,
    NXR_TIER_SSE = 1,    /* SSE2/SSE3 (x86-64 baseline) */
    NXR_TIER_AVX = 2,    /* AVX, 256-bit, no FMA */
    NXR_TIER_AVX2 = 3,   /* AVX2 + FMA */
    NXR_TIER_AVX512 = 4, /* AVX-512F */
};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

static inline bool nxr__cpu_has_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static inline bool nxr__cpu_has_avx512(void)
{
    __builtin_cpu_init();
    return nxr__cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f");
}

static inline enum nxr__isa_tier nxr__cpu_tier(void)
{
    __builtin_cpu_init();
    if (nxr__cpu_has_avx512())
        return NXR_TIER_AVX512;
    if (nxr__cpu_has_avx2_fma())
        return NXR_TIER_AVX2;
    if (__builtin_cpu_supports("avx"))
        return NXR_TIER_AVX;
    return NXR_TIER_SSE;
}

#else

static inline bool nxr__cpu_has_avx2_fma(void)
{
    return false;
}

static inline bool nxr__cpu_has_avx512(void)
{
    return false;
}

static inline enum nxr__isa_tier nxr__cpu_tier(void)
{
    return NXR_TIER_UNKNOWN;
}

#endif

#endif /* NXR_KERNELS_INTERNAL_CPU_H */
