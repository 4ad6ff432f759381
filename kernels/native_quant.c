/*
 * Weights in bf16 or 8-bit blocks (kernels/internal/native_quant.h): the
 * packing, done once at load, and the plan and chunk of a call against
 * them. The arithmetic is native_quant.inc, one instance per vector ISA.
 */
#include "kernels/internal/native_quant.h"

#include <math.h>
#include <string.h>

static size_t round_up(size_t x, size_t m)
{
    return (x + m - 1) / m * m;
}

static size_t min_z(size_t a, size_t b)
{
    return a < b ? a : b;
}

size_t nxr__quant_packed_bytes(enum nxr__qformat format, size_t k, size_t n)
{
    const size_t kpad = nxr__quant_kpad(format, k);
    const size_t npad = round_up(n, NXR_QUANT_ROWS);
    if (format == NXR__QFORMAT_BF16)
        return npad * kpad * sizeof(uint16_t);
    return npad / NXR_QUANT_ROWS * nxr__q8_unit_bytes(kpad);
}

static float at(bool trans, const float *src, size_t ld, size_t p, size_t j)
{
    return trans ? src[j * ld + p] : src[p * ld + j];
}

bool nxr__quant_first_nonfinite(bool trans, size_t k, size_t n, const float *src, size_t ld,
                                size_t *p, size_t *j)
{
    for (size_t pp = 0; pp < k; ++pp)
        for (size_t jj = 0; jj < n; ++jj)
            if (!isfinite(at(trans, src, ld, pp, jj))) {
                *p = pp;
                *j = jj;
                return true;
            }
    return false;
}

/* Round to nearest, ties to even, on the bits: the low half decides. NaN
 * stays a (quiet) NaN: adding the rounding bias could carry it into an
 * infinity. */
static uint16_t bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* One block of 32 weights (zero past k) into 8-bit values, stored offset
 * by 128 (native_quant.h), and their scale: s = max|w| / 127, q = round(w
 * / s) (ties to even: lrintf in the default rounding mode), so |q| <= 127
 * and |q s - w| <= s / 2 up to f32 rounding. */
static void q8_block(const float v[NXR_QUANT_BLOCK], uint8_t q[NXR_QUANT_BLOCK], float *scale)
{
    float amax = 0.0f;
    for (size_t i = 0; i < NXR_QUANT_BLOCK; ++i)
        amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
    *scale = amax / 127.0f;
    for (size_t i = 0; i < NXR_QUANT_BLOCK; ++i) {
        long r = *scale > 0.0f ? lrintf(v[i] / *scale) : 0;
        q[i] = (uint8_t)((r > 127 ? 127 : r < -127 ? -127 : r) + 128);
    }
}

void nxr__quant_pack(enum nxr__qformat format, bool trans, size_t k, size_t n, const float *src,
                     size_t ld, void *dst, struct nxr__packed_q *view)
{
    const size_t group = nxr__quant_group(format), kpad = nxr__quant_kpad(format, k);
    const size_t blocks = kpad / NXR_QUANT_BLOCK, npad = round_up(n, NXR_QUANT_ROWS);
    *view = (struct nxr__packed_q){.format = format, .k = k, .n = n, .kpad = kpad, .rows = dst};
    uint16_t *h = dst;
    uint8_t *q = dst;
    if (format == NXR__QFORMAT_Q8_BLOCK32) {
        /* What follows the last group's scales in each unit: the unused
         * half of an odd last group's line (nothing after an even one). */
        const size_t unit = nxr__q8_unit_bytes(kpad);
        const size_t tail =
            nxr__q8_scales_at(kpad, kpad / 64 - 1) + 2 * NXR_QUANT_ROWS * sizeof(float);
        for (size_t u = 0; tail < unit && u < npad / NXR_QUANT_ROWS; ++u)
            memset(q + u * unit + tail, 0, unit - tail);
    }
    /* Tiles of 32 x 32: a tile is read along the source's rows whatever
     * its orientation, then written along the packed rows (op(W)^T); the
     * padding rows past n are written from the tile's zeros. */
    float tile[NXR_QUANT_BLOCK][NXR_QUANT_BLOCK]; /* [j][p] */
    for (size_t j0 = 0; j0 < npad; j0 += NXR_QUANT_BLOCK) {
        const size_t cols = j0 < n ? min_z(NXR_QUANT_BLOCK, n - j0) : 0;
        const size_t rows = min_z(NXR_QUANT_BLOCK, npad - j0);
        for (size_t b = 0; b < blocks; ++b) {
            const size_t p0 = b * NXR_QUANT_BLOCK,
                         len = p0 < k ? min_z(NXR_QUANT_BLOCK, k - p0) : 0;
            memset(tile, 0, sizeof tile);
            if (trans) {
                for (size_t jj = 0; jj < cols; ++jj)
                    for (size_t pp = 0; pp < len; ++pp)
                        tile[jj][pp] = at(true, src, ld, p0 + pp, j0 + jj);
            } else {
                for (size_t pp = 0; pp < len; ++pp)
                    for (size_t jj = 0; jj < cols; ++jj)
                        tile[jj][pp] = at(false, src, ld, p0 + pp, j0 + jj);
            }
            for (size_t jj = 0; jj < rows; ++jj) {
                /* A block never straddles a group: its values are contiguous. */
                const size_t row = j0 + jj;
                if (format == NXR__QFORMAT_BF16) {
                    const size_t at = nxr__quant_value_at(kpad, group, row, p0);
                    for (size_t pp = 0; pp < NXR_QUANT_BLOCK; ++pp)
                        h[at + pp] = bf16_round(tile[jj][pp]);
                } else {
                    q8_block(tile[jj], q + nxr__q8_value_at(kpad, row, p0),
                             (float *)(q + nxr__q8_scale_at(kpad, row, b)));
                }
            }
        }
    }
}

/* ---- the call ------------------------------------------------------------------ */

void nxr__quant_plan_init(struct nxr__quant_plan *plan, const struct nxr__native_isa *isa,
                          const struct nxr_sgemm_args *g, const struct nxr__packed_q *w,
                          const struct nxr_sgemm_epilogue *epilogue)
{
    *plan = (struct nxr__quant_plan){
        .isa = isa,
        .w = w,
        .m = g->m,
        .alpha = g->alpha,
        .beta = g->beta,
        .a = g->a,
        .a_ss = g->trans_a ? 1 : g->lda,
        .a_ps = g->trans_a ? g->lda : 1,
        .c = g->c,
        .ldc = g->ldc,
        .epilogue = epilogue,
        .units = (w->n + NXR_QUANT_ROWS - 1) / NXR_QUANT_ROWS,
    };
}

size_t nxr__quant_scratch_bytes(const struct nxr__packed_q *w, size_t m)
{
    return min_z(m, NXR_QUANT_GROUP) * w->kpad * sizeof(float);
}

size_t nxr__quant_grain(const struct nxr__quant_plan *plan, unsigned threads)
{
    /* At least about 64 KiB of W per participant, then an even split (the
     * static schedule hands out whole chunks: 72 units in chunks of 29 over
     * two participants were 58 against 14, the call as slow as 58). */
    const size_t per_unit = nxr__quant_packed_bytes(plan->w->format, plan->w->k, NXR_QUANT_ROWS);
    const size_t want = 65536;
    const size_t least = per_unit >= want ? 1 : (want + per_unit - 1) / per_unit;
    size_t parts = (plan->units + least - 1) / least;
    if (parts > threads)
        parts = threads;
    return parts > 1 ? (plan->units + parts - 1) / parts : plan->units > 0 ? plan->units : 1;
}

void nxr__quant_chunk(void *arg, size_t begin, size_t end, unsigned worker)
{
    const struct nxr__quant_job *job = arg;
    if (begin < end)
        job->plan.isa->sgemm_quant(&job->plan, begin, end, job->scratch[worker]);
}
