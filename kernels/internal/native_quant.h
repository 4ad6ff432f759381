/*
 * nxr native kernels against weights in bf16 or 8-bit blocks
 * (runtime/nxr_weights.h, "Weight formats"): the packed layout, its packing,
 * and the GEMM that reads it with f32 activations, outputs and accumulation
 * (8-bit blocks on AVX2 quantize the activations per block and multiply in
 * integers: native_quant.inc says why and what it costs in error).
 *
 * Layout. Whatever the source's orientation, a packed copy holds op(W)^T:
 * row j is column j of op(W) along k, kpad values (k rounded up to a
 * group, zero past k), and n is rounded up to a unit of NXR_QUANT_ROWS
 * rows (zero rows). A call's output C[i][j] is a dot product of A's row i
 * with row j. Rows are stored unit by unit, and within a unit interleaved
 * by groups of one cache line each: group g of row 0, of row 1, 2, 3, then
 * group g + 1 of each (nxr__quant_value_at). A kernel reads a unit's four
 * rows side by side, so a decode step (m = 1) reads the copy as one
 * sequential stream, which the hardware prefetcher follows; four rows
 * stored one after another were four short streams (a bf16 row of k = 768
 * is 24 lines), and at k = 768 bench/kernels read 0.62-0.79 of the
 * bandwidth with them against 0.82-0.92 at k = 4096.
 *   bf16: uint16_t values, groups of 32, the top half of each f32 rounded
 *         to nearest even (bits << 16 is the value again);
 *   q8:   8-bit values in [-127, 127] stored offset by 128 (a byte is
 *         value + 128: the int8's bits with the top one flipped,
 *         nxr__q8_value), groups of 64 (two blocks of 32); weight p of row
 *         j is value(j, p) * scale(j, p / 32), the scales f32 in the same
 *         stream: each pair of a unit's groups (512 bytes) is followed by
 *         one line of its 16 scales (group, then row, then block), an odd
 *         last group by a line of its 8 (the rest zero); nxr__q8_value_at
 *         and nxr__q8_scale_at. With the scales in an array of their own
 *         after the values, a decode step read two streams, and the
 *         second held the first back. bench/kernels at k = 768 from
 *         memory, q8 at m = 1, time of f32 over q8 in the same run
 *         (alternated, medians of five): scales apart 2.46x, in the
 *         stream 2.74x (another series: scales apart 2.7x, served from
 *         the cache 3.9x, apart but prefetched 3.1x); bench/decode 110m
 *         8-bit, six alternated pairs, 399 -> 440 tok/s (medians). A
 *         second prefetch for an array apart measured about the same; one
 *         stream needs it in no kernel. The offset is for VNNI:
 *         vpdpbusd multiplies unsigned bytes by signed ones, so unsigned
 *         weights take A's values as they are, and the offset's share
 *         (128 times A's values) is one term per row of A instead of one
 *         per row of W (native_quant.inc); the other kernels flip the bit
 *         back as they load.
 * Zero padding keeps every kernel free of k and n tails (A's rows are
 * copied into zero-padded scratch rows of kpad first).
 */
#ifndef NXR_KERNELS_INTERNAL_NATIVE_QUANT_H
#define NXR_KERNELS_INTERNAL_NATIVE_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/internal/native.h"

/* The runtime's enum nxr_weights_format values (runtime/weights.c checks
 * they agree); F32 packs through nxr__sgemm_pack_b instead. */
enum nxr__qformat {
    NXR__QFORMAT_BF16 = 1,
    NXR__QFORMAT_Q8_BLOCK32 = 2,
};

#define NXR_QUANT_BLOCK 32 /* weights per 8-bit block */
#define NXR_QUANT_ROWS  4  /* rows of W per unit: independent sums in flight */
#define NXR_QUANT_GROUP 16 /* rows of A per pass over W */

struct nxr__packed_q {
    enum nxr__qformat format;
    size_t k, n, kpad;
    const void *rows; /* bf16: uint16_t, units x 4 x kpad; q8: units of nxr__q8_unit_bytes */
};

/* Values of a row per group (one 64-byte line), and kpad's multiple. */
static inline size_t nxr__quant_group(enum nxr__qformat format)
{
    return format == NXR__QFORMAT_BF16 ? 32 : 64;
}

/* A packed row's length: k rounded up to a group. */
static inline size_t nxr__quant_kpad(enum nxr__qformat format, size_t k)
{
    const size_t group = nxr__quant_group(format);
    return (k + group - 1) / group * group;
}

/* bf16: where value p of row j sits, counted in values from rows (kpad a
 * multiple of group). Within a unit (j < NXR_QUANT_ROWS, from the unit's
 * first value) the first term is zero. */
static inline size_t nxr__quant_value_at(size_t kpad, size_t group, size_t j, size_t p)
{
    return (j / NXR_QUANT_ROWS) * NXR_QUANT_ROWS * kpad + (p / group) * NXR_QUANT_ROWS * group +
           (j % NXR_QUANT_ROWS) * group + p % group;
}

/* q8: a group of a unit's rows (one line each), and a pair of groups with
 * the line of their scales after them. */
#define NXR__Q8_GROUP_BYTES (NXR_QUANT_ROWS * 64)
#define NXR__Q8_PAIR_BYTES  (2 * NXR__Q8_GROUP_BYTES + 64)

/* q8: the bytes of a unit of NXR_QUANT_ROWS rows of kpad (a multiple of 64)
 * values with their scales. */
static inline size_t nxr__q8_unit_bytes(size_t kpad)
{
    const size_t groups = kpad / 64;
    return groups / 2 * NXR__Q8_PAIR_BYTES + groups % 2 * (NXR__Q8_GROUP_BYTES + 64);
}

/* q8: the byte of value p of row j, from the copy's first; within a unit
 * (j < NXR_QUANT_ROWS, from the unit's first byte) the first term is zero. */
static inline size_t nxr__q8_value_at(size_t kpad, size_t j, size_t p)
{
    const size_t g = p / 64;
    return j / NXR_QUANT_ROWS * nxr__q8_unit_bytes(kpad) + g / 2 * NXR__Q8_PAIR_BYTES +
           g % 2 * NXR__Q8_GROUP_BYTES + j % NXR_QUANT_ROWS * 64 + p % 64;
}

/* q8: the byte, from a unit's first, of group g's 2 NXR_QUANT_ROWS scales
 * (f32, row by row, a row's two blocks side by side): in the line after
 * its pair of groups (after the one group if the pair is the odd last
 * one), the pair's first group's scales first. */
static inline size_t nxr__q8_scales_at(size_t kpad, size_t g)
{
    const size_t in_pair = g / 2 * 2 + 1 < kpad / 64 ? 2 : 1;
    return g / 2 * NXR__Q8_PAIR_BYTES + in_pair * NXR__Q8_GROUP_BYTES +
           g % 2 * 2 * NXR_QUANT_ROWS * sizeof(float);
}

/* q8: the byte of the scale of block b of row j, as nxr__q8_value_at. */
static inline size_t nxr__q8_scale_at(size_t kpad, size_t j, size_t b)
{
    return j / NXR_QUANT_ROWS * nxr__q8_unit_bytes(kpad) + nxr__q8_scales_at(kpad, b / 2) +
           (j % NXR_QUANT_ROWS * 2 + b % 2) * sizeof(float);
}

/* An 8-bit value of a q8 copy from its stored byte (value + 128). */
static inline int nxr__q8_value(uint8_t stored)
{
    return (int)stored - 128;
}

/* Bytes a packed copy of a k x n op(W) takes (k, n >= 1). */
size_t nxr__quant_packed_bytes(enum nxr__qformat format, size_t k, size_t n);

/* Whether op(W) (src, ld, trans as struct nxr_weights_desc's) has a NaN or
 * an infinity; the first one (in row-major order of op(W)) at (*p, *j). */
bool nxr__quant_first_nonfinite(bool trans, size_t k, size_t n, const float *src, size_t ld,
                                size_t *p, size_t *j);

/* Packs op(W) into dst (nxr__quant_packed_bytes, 64-byte aligned) and
 * describes it in *view. For q8, src must be finite (check first). */
void nxr__quant_pack(enum nxr__qformat format, bool trans, size_t k, size_t n, const float *src,
                     size_t ld, void *dst, struct nxr__packed_q *view);

/* One value of a bf16 row as f32 (the test's and the reference's view). */
static inline float nxr__bf16_value(uint16_t h)
{
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)h << 16};
    return v.f;
}

/* C = alpha * op(A) * W + beta * C, then the epilogue, over units of
 * NXR_QUANT_ROWS columns of C (rows of W), every row of A each. */
struct nxr__quant_plan {
    const struct nxr__native_isa *isa;
    const struct nxr__packed_q *w;
    size_t m;
    float alpha, beta;
    const float *a;
    size_t a_ss, a_ps; /* op(A)[s][p] = a[s * a_ss + p * a_ps] */
    float *c;
    size_t ldc;
    const struct nxr_sgemm_epilogue *epilogue; /* NULL: none */
    size_t units;
};

/* The plan of a valid call that reads A and W (m, n, k >= 1, alpha != 0);
 * args' b, ldb and trans_b are ignored. */
void nxr__quant_plan_init(struct nxr__quant_plan *plan, const struct nxr__native_isa *isa,
                          const struct nxr_sgemm_args *args, const struct nxr__packed_q *w,
                          const struct nxr_sgemm_epilogue *epilogue);

/* Per-worker scratch of a call with m rows of A: up to NXR_QUANT_GROUP
 * zero-padded rows of kpad floats. */
size_t nxr__quant_scratch_bytes(const struct nxr__packed_q *w, size_t m);

/* Units per chunk for a call of `threads` threads: at least about 64 KiB of
 * W per participant, so a chunk pays for its region, and even shares. */
size_t nxr__quant_grain(const struct nxr__quant_plan *plan, unsigned threads);

struct nxr__quant_job {
    struct nxr__quant_plan plan;
    void *const *scratch;
};

/* Units [begin, end) of job->plan. */
void nxr__quant_chunk(void *job, size_t begin, size_t end, unsigned worker);

/* The native GEMM against w with args as nxr_sgemm's (b, ldb, trans_b
 * ignored; k and n w's), with the epilogue (NULL: none). Scratch from call
 * (nxr__quant_scratch_bytes). 0, -EINVAL or the tile loop's errors (alpha
 * 0 only scales C). */
int nxr__native_sgemm_quant(const struct nxr__native_isa *isa, const struct nxr_kernel_call *call,
                            const struct nxr_sgemm_args *args, const struct nxr__packed_q *w,
                            const struct nxr_sgemm_epilogue *epilogue);

#endif /* NXR_KERNELS_INTERNAL_NATIVE_QUANT_H */
