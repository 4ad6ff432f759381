/*
 * Kernel tests, shared helpers: a deterministic generator, naive double
 * references, the ISAs this CPU runs, and 64-byte aligned scratch.
 */
#ifndef NXR_TESTS_KERNELS_REF_H
#define NXR_TESTS_KERNELS_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/internal/native.h"

/* 2^-24: half an ulp of 1.0f, the unit roundoff of float. */
#define U_F32 5.9604644775390625e-8

static inline uint64_t ref_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline float ref_uniform(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(ref_next(s) >> 40) / (double)(1ull << 24));
}

static inline float *ref_fill(size_t n, uint64_t seed, float lo, float hi)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    uint64_t s = seed;
    for (size_t i = 0; i < n; ++i)
        v[i] = ref_uniform(&s, lo, hi);
    return v;
}

/* The ISAs to test: portable always, AVX2/AVX-512 when this CPU has them. */
static inline size_t ref_isas(const struct nxr__native_isa *out[3])
{
    size_t n = 0;
    out[n++] = nxr__native_isa_portable();
    if (nxr__native_isa_avx2() != NULL)
        out[n++] = nxr__native_isa_avx2();
    if (nxr__native_isa_avx512() != NULL)
        out[n++] = nxr__native_isa_avx512();
    return n;
}

static inline void *ref_scratch(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

#endif /* NXR_TESTS_KERNELS_REF_H */
