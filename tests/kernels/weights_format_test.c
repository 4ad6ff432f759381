/*
 * Weights in bf16 and 8-bit blocks (kernels/internal/native_quant.h), on
 * every ISA this CPU runs: the packing (bf16 rounds to nearest even, keeps
 * NaN and infinities; an 8-bit block's scale is max|w| / 127 and its values
 * round(w / s)), and the GEMM against them within the bound
 * runtime/nxr_weights.h documents, derived as follows. Packing changes
 * weight p of column j by at most e_p: bf16 keeps 8 significant bits, so
 * |w' - w| <= 2^-8 |w| (2^-134 for subnormals); a block rounds w / s to an
 * integer, |q s - w| <= s / 2 = max|w| / 254, the f32 rounding of s and of
 * q * s adding 2 * 127 * s * 2^-24 < 2^-12 * max|w| / 254. The kernel sums
 * f32 products of A with w' over vector lanes and then across them, which
 * is within 2 (k + 2) u sum |a w'| of the exact sum (u = 2^-24), and
 * alpha * dot + beta * c adds 2 u (|alpha dot| + |beta c|). So against the
 * exact f32-weight result ref,
 *   |C - ref| <= |alpha| sum |a| e + 2 (k + 2) u |alpha| sum |a| |w| (1 + 2^-7)
 *                + 2 u (|ref| + |beta c|) + (the same bound) * 2 u.
 * Where 8-bit blocks multiply in integers (the AVX2 kernels: A's rows are
 * quantized per block of 32 too, t = max|a| / 127, |round(a / t) t - a| <=
 * t / 2 = max|a| / 254), the product w' a' is off from w' a by at most
 * |w'| max|a| / 254 <= (|w| + e) max|a| / 254, times 1 + 2^-12 for the f32
 * rounding of t and of s t: that term is added for them.
 * Every edge size along k and n (1, 15, 16, 17, 31, 32, 33), m = 1..16 and
 * 17 (two passes over W), strides and transposes, alpha and beta; the fused
 * epilogue gives exactly the unfused product followed by the epilogue row;
 * any split of the units gives the same bits.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/internal/native_quant.h"
#include "ref.h"

static const size_t edges[] = {1, 15, 16, 17, 31, 32, 33};
#define NEDGES (sizeof edges / sizeof edges[0])

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void *pack(enum nxr__qformat f, bool trans, size_t k, size_t n, const float *w, size_t ld,
                  struct nxr__packed_q *view)
{
    const size_t bytes = nxr__quant_packed_bytes(f, k, n);
    void *dst = ref_scratch(bytes);
    /* Poisoned: every byte the layout describes (padding and zeros too)
     * must be the packer's, not what the allocator happened to return. */
    memset(dst, 0xa5, bytes);
    nxr__quant_pack(f, trans, k, n, w, ld, dst, view);
    return dst;
}

Test(kernels_weights_format, bf16_rounds_to_nearest_even_and_keeps_specials)
{
    /* value bits -> expected bf16 bits */
    const uint32_t in[] = {0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu,
                           0xbf808000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                           0x7f7fffffu, 0x00000001u, 0x80000000u};
    const uint16_t want[] = {0x3f80u, 0x3f80u, 0x3f82u, 0x3f81u, 0x3f80u, 0xbf80u, 0x7f80u,
                             0xff80u, 0x7fc0u, 0x7fc0u, 0x7f80u, 0x0000u, 0x8000u};
    const size_t n = sizeof in / sizeof in[0];
    float w[sizeof in / sizeof in[0]];
    for (size_t i = 0; i < n; ++i)
        w[i] = float_of(in[i]);
    struct nxr__packed_q v;
    /* k = 1, n values in one row of op(W): each packed row holds one. */
    void *dst = pack(NXR__QFORMAT_BF16, false, 1, n, w, n, &v);
    cr_assert_eq(v.kpad, 32);
    for (size_t i = 0; i < n; ++i) {
        const uint16_t got = ((const uint16_t *)v.rows)[i * v.kpad];
        cr_expect_eq(got, want[i], "bf16(0x%08x) = 0x%04x, want 0x%04x", in[i], got, want[i]);
        for (size_t p = 1; p < v.kpad; ++p)
            cr_expect_eq(((const uint16_t *)v.rows)[i * v.kpad + p], 0, "padding is zero");
    }
    free(dst);
}

/* The layout native_quant.h documents, written out here: units of four
 * rows, interleaved a 64-byte group (32 bf16 values) at a time, k padded
 * to the group and the rows to the unit with zeros. */
Test(kernels_weights_format, bf16_rows_interleave_by_cache_line_in_units_of_four)
{
    enum { K = 40, N = 5, KPAD = 64, NPAD = 8 };
    float w[K * N]; /* op(W) = W, row-major k x n; every value exact in bf16 */
    for (size_t p = 0; p < K; ++p)
        for (size_t j = 0; j < N; ++j)
            w[p * N + j] = (float)(j * K + p + 1);
    struct nxr__packed_q v;
    void *dst = pack(NXR__QFORMAT_BF16, false, K, N, w, N, &v);
    cr_assert_eq(v.kpad, KPAD);
    cr_assert_eq(nxr__quant_packed_bytes(NXR__QFORMAT_BF16, K, N), NPAD * KPAD * 2);
    const uint16_t *h = v.rows;
    for (size_t j = 0; j < NPAD; ++j)
        for (size_t p = 0; p < KPAD; ++p) {
            const size_t at = (j / 4) * 4 * KPAD + (p / 32) * 4 * 32 + (j % 4) * 32 + p % 32;
            const float want = j < N && p < K ? (float)(j * K + p + 1) : 0.0f;
            cr_expect_eq(nxr__bf16_value(h[at]), want, "row %zu, value %zu: %g, want %g", j, p,
                         (double)nxr__bf16_value(h[at]), (double)want);
        }
    free(dst);
}

/* The scale of block b of row j of a q8 copy. */
static float q8_scale_of(const struct nxr__packed_q *v, size_t j, size_t b)
{
    float s;
    memcpy(&s, (const uint8_t *)v->rows + nxr__q8_scale_at(v->kpad, j, b), sizeof s);
    return s;
}

/* The q8 layout native_quant.h documents, written out here: units of four
 * rows; each pair of groups (four rows' 64 values each, interleaved a line
 * at a time) followed by a line of the pair's 16 scales (group, row,
 * block), an odd last group by a line of its 8 and 32 zero bytes; values
 * stored + 128. k = 150: kpad 192, three groups, a unit of 576 + 320. */
Test(kernels_weights_format, q8_scales_follow_each_pair_of_groups_in_the_stream)
{
    enum { K = 150, N = 5, KPAD = 192, NPAD = 8, BLOCKS = KPAD / 32, UNIT = 576 + 320 };
    /* Column j of op(W), block b: 127 s_jb somewhere, so the scale is s_jb
     * (a power of two, different for neighbouring rows and blocks) and
     * every value an exact integer. */
    float w[K * N];
    for (size_t p = 0; p < K; ++p)
        for (size_t j = 0; j < N; ++j) {
            const float s = ldexpf(1.0f, (int)((j * 3 + p / 32) % 7) - 3);
            const int v = p % 32 == 5 ? 127 : (int)((j * 31 + p * 7) % 255) - 127;
            w[p * N + j] = (float)v * s;
        }
    struct nxr__packed_q v;
    void *dst = pack(NXR__QFORMAT_Q8_BLOCK32, false, K, N, w, N, &v);
    cr_assert_eq(v.kpad, KPAD);
    cr_assert_eq(nxr__quant_packed_bytes(NXR__QFORMAT_Q8_BLOCK32, K, N), NPAD / 4 * UNIT);
    const uint8_t *bytes = v.rows;
    for (size_t j = 0; j < NPAD; ++j) {
        const size_t unit = j / 4 * UNIT;
        for (size_t p = 0; p < KPAD; ++p) {
            const size_t g = p / 64;
            const size_t at = unit + g / 2 * 576 + g % 2 * 256 + j % 4 * 64 + p % 64;
            const float s = ldexpf(1.0f, (int)((j * 3 + p / 32) % 7) - 3);
            const int want = j < N && p < K ? (int)(w[p * N + j] / s) : 0;
            cr_expect_eq((int)bytes[at] - 128, want, "row %zu, value %zu: %d, want %d", j, p,
                         (int)bytes[at] - 128, want);
        }
        for (size_t b = 0; b < BLOCKS; ++b) {
            const size_t g = b / 2;
            const size_t line = unit + g / 2 * 576 + (g / 2 == 0 ? 512 : 256);
            float got;
            memcpy(&got, bytes + line + (g % 2 * 8 + j % 4 * 2 + b % 2) * 4, sizeof got);
            const float want =
                j < N && b * 32 < K ? ldexpf(1.0f, (int)((j * 3 + b) % 7) - 3) : 0.0f;
            cr_expect_eq(got, want, "row %zu, block %zu: scale %g, want %g", j, b, (double)got,
                         (double)want);
        }
    }
    for (size_t u = 0; u < NPAD / 4; ++u)
        for (size_t i = UNIT - 32; i < UNIT; ++i)
            cr_expect_eq(bytes[u * UNIT + i], 0, "unit %zu: the odd line's unused byte %zu", u, i);
    free(dst);
}

Test(kernels_weights_format, q8_block_is_symmetric_with_one_scale_per_32)
{
    /* One column of op(W), k = 40: a block of 32 and a padded block of 8. */
    float w[40];
    for (size_t p = 0; p < 40; ++p)
        w[p] = (float)p - 10.0f;   /* block 0: -10 .. 21, block 1: 22 .. 29 */
    w[3] = 10.5f * 21.0f / 127.0f; /* exactly 10.5 steps */
    struct nxr__packed_q v;
    void *dst = pack(NXR__QFORMAT_Q8_BLOCK32, true, 40, 1, w, 40, &v);
    cr_assert_eq(v.kpad, 64);
    /* The stored bytes are value + 128 (native_quant.h): the values by
     * the one helper every reader of the copy uses. */
    const uint8_t *stored = v.rows;
    int q[64];
    for (size_t p = 0; p < 64; ++p)
        q[p] = nxr__q8_value(stored[p]);
    cr_expect_eq(stored[31], 255, "stored offset by 128: +127 is 255");
    cr_expect_eq(stored[40], 128, "and 0 is 128");
    cr_expect_eq(q8_scale_of(&v, 0, 0), 21.0f / 127.0f);
    cr_expect_eq(q8_scale_of(&v, 0, 1), 29.0f / 127.0f);
    cr_expect_eq(q[31], 127, "the block's largest is +127");
    cr_expect_eq(q[39], 127);
    cr_expect_eq(q[3], 10, "a tie rounds to even (q %d)", q[3]);
    for (size_t p = 40; p < 64; ++p)
        cr_expect_eq(q[p], 0, "padding is zero");
    for (size_t p = 0; p < 40; ++p) {
        const float s = q8_scale_of(&v, 0, p / 32);
        cr_expect(fabs(q[p] * (double)s - w[p]) <= s / 2.0 * (1 + 0x1p-12), "p %zu: q %d s %g w %g",
                  p, q[p], (double)s, (double)w[p]);
    }
    /* An all-zero block: scale 0, values 0. */
    float z[32] = {0};
    free(dst);
    dst = pack(NXR__QFORMAT_Q8_BLOCK32, true, 32, 1, z, 32, &v);
    cr_expect_eq(q8_scale_of(&v, 0, 0), 0.0f);
    for (size_t p = 0; p < 32; ++p)
        cr_expect_eq(nxr__q8_value(((const uint8_t *)v.rows)[p]), 0);
    free(dst);
    size_t bp = 99, bj = 99;
    float nf[6] = {1, 2, 3, 4, NAN, 6};
    cr_expect(nxr__quant_first_nonfinite(false, 2, 3, nf, 3, &bp, &bj));
    cr_expect(bp == 1 && bj == 1, "NaN at (%zu, %zu)", bp, bj);
    nf[4] = 5;
    cr_expect(!nxr__quant_first_nonfinite(false, 2, 3, nf, 3, &bp, &bj));
}

/* Whether isa's 8-bit kernel quantizes A (native_quant.inc, Q8_INT: the
 * instances built with AVX2's integer operations). */
static bool quantizes_a(const struct nxr__native_isa *isa)
{
    return strcmp(isa->name, "avx2") == 0 || strcmp(isa->name, "avx512") == 0;
}

/* The largest |a| of p's block in row i of op(A). */
static double a_block_max(const float *a, size_t lda, bool ta, size_t k, size_t i, size_t p)
{
    double m = 0;
    for (size_t q = p / 32 * 32; q < k && q < p / 32 * 32 + 32; ++q)
        m = fmax(m, fabs(ta ? a[q * lda + i] : a[i * lda + q]));
    return m;
}

/* The largest |w| of p's block in column j of op(W). */
static double block_max(const float *w, size_t ld, bool trans, size_t k, size_t p, size_t j)
{
    double m = 0;
    for (size_t q = p / 32 * 32; q < k && q < p / 32 * 32 + 32; ++q)
        m = fmax(m, fabs(trans ? w[j * ld + q] : w[q * ld + j]));
    return m;
}

struct qcase {
    enum nxr__qformat f;
    size_t m, n, k;
    bool ta, tw;
    float alpha, beta;
};

/* Runs the kernel on isa over units [0, units) in the given pieces. */
static void run(const struct nxr__native_isa *isa, const struct nxr__quant_plan *plan,
                const size_t *cuts, size_t ncuts)
{
    float *scratch = ref_scratch(nxr__quant_scratch_bytes(plan->w, plan->m));
    size_t begin = 0;
    for (size_t i = 0; i <= ncuts; ++i) {
        const size_t end = i < ncuts && cuts[i] < plan->units ? cuts[i] : plan->units;
        if (begin < end)
            isa->sgemm_quant(plan, begin, end, scratch);
        begin = end > begin ? end : begin;
    }
    free(scratch);
}

static void check_case(const struct nxr__native_isa *isa, struct qcase t, uint64_t seed)
{
    const size_t a_rows = t.ta ? t.k : t.m, a_cols = t.ta ? t.m : t.k;
    const size_t w_rows = t.tw ? t.n : t.k, w_cols = t.tw ? t.k : t.n;
    const size_t lda = a_cols + 3, ldw = w_cols + 2, ldc = t.n + 5;
    float *a = ref_fill(a_rows * lda, seed, -1.0f, 1.0f);
    float *w = ref_fill(w_rows * ldw, seed + 1, -2.0f, 2.0f);
    /* Each (column of op(W), block) at its own magnitude, a power of two
     * apart from its neighbours': uniform values give every block about
     * the same scale, and a kernel reading another block's or row's scale
     * stayed within the bound (checked). */
    for (size_t r = 0; r < w_rows; ++r)
        for (size_t q = 0; q < w_cols; ++q) {
            const size_t p = t.tw ? q : r, j = t.tw ? r : q;
            w[r * ldw + q] = ldexpf(w[r * ldw + q], (int)((p / 32 + 2 * j) % 5) - 2);
        }
    float *c0 = ref_fill(t.m * ldc, seed + 2, -1.0f, 1.0f);
    float *c = malloc(t.m * ldc * sizeof *c);
    memcpy(c, c0, t.m * ldc * sizeof *c);
    struct nxr__packed_q v;
    void *packed = pack(t.f, t.tw, t.k, t.n, w, ldw, &v);
    const struct nxr_sgemm_args g = {.trans_a = t.ta,
                                     .m = t.m,
                                     .n = t.n,
                                     .k = t.k,
                                     .alpha = t.alpha,
                                     .a = a,
                                     .lda = lda,
                                     .beta = t.beta,
                                     .c = c,
                                     .ldc = ldc};
    struct nxr__quant_plan plan;
    nxr__quant_plan_init(&plan, isa, &g, &v, NULL);
    run(isa, &plan, NULL, 0);
    for (size_t i = 0; i < t.m; ++i)
        for (size_t j = 0; j < t.n; ++j) {
            double ref = 0, abs_aw = 0, pack_err = 0;
            for (size_t p = 0; p < t.k; ++p) {
                const double av = t.ta ? a[p * lda + i] : a[i * lda + p];
                const double wv = t.tw ? w[j * ldw + p] : w[p * ldw + j];
                ref += av * wv;
                abs_aw += fabs(av * wv);
                const double e = t.f == NXR__QFORMAT_BF16
                                     ? fmax(0x1p-8 * fabs(wv), 0x1p-134)
                                     : (1 + 0x1p-12) * block_max(w, ldw, t.tw, t.k, p, j) / 254;
                pack_err += fabs(av) * e;
                if (t.f == NXR__QFORMAT_Q8_BLOCK32 && quantizes_a(isa))
                    pack_err +=
                        (fabs(wv) + e) * (1 + 0x1p-12) * a_block_max(a, lda, t.ta, t.k, i, p) / 254;
            }
            const double cin = c0[i * ldc + j];
            ref = t.alpha * ref + (t.beta != 0 ? t.beta * cin : 0);
            double bound = fabs(t.alpha) * pack_err +
                           2 * (t.k + 2) * U_F32 * fabs(t.alpha) * abs_aw * (1 + 0x1p-7) +
                           2 * U_F32 * (fabs(ref) + fabs(t.beta * cin));
            bound *= 1 + 4 * U_F32;
            const double got = c[i * ldc + j];
            cr_assert(fabs(got - ref) <= bound,
                      "%s %s m %zu n %zu k %zu ta %d tw %d alpha %g beta %g: C[%zu][%zu] = %.9g, "
                      "ref %.9g, off %.3g > bound %.3g",
                      isa->name, t.f == NXR__QFORMAT_BF16 ? "bf16" : "q8", t.m, t.n, t.k, t.ta,
                      t.tw, (double)t.alpha, (double)t.beta, i, j, got, ref, fabs(got - ref),
                      bound);
            for (size_t j2 = t.n; j2 < ldc; ++j2)
                cr_assert_eq(bits_of(c[i * ldc + j2]), bits_of(c0[i * ldc + j2]),
                             "padding of C written");
        }
    free(a);
    free(w);
    free(c0);
    free(c);
    free(packed);
}

static const enum nxr__qformat formats[] = {NXR__QFORMAT_BF16, NXR__QFORMAT_Q8_BLOCK32};

Test(kernels_weights_format, every_edge_size_and_m_within_the_bound, .timeout = 240)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    uint64_t seed = 1;
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t fi = 0; fi < 2; ++fi)
            for (size_t ki = 0; ki < NEDGES; ++ki)
                for (size_t ni = 0; ni < NEDGES; ++ni)
                    for (size_t m = 1; m <= 17; ++m) {
                        const struct qcase t = {.f = formats[fi],
                                                .m = m,
                                                .n = edges[ni],
                                                .k = edges[ki],
                                                .ta = m % 3 == 0,
                                                .tw = (ki + ni + m) % 2 == 0,
                                                .alpha = 1.0f};
                        check_case(isas[ii], t, seed += 7);
                    }
}

Test(kernels_weights_format, alpha_beta_strides_and_long_k)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const float ab[][2] = {{1, 0}, {-0.5f, 1}, {2, -0.25f}, {1, 1}};
    uint64_t seed = 100;
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t fi = 0; fi < 2; ++fi)
            for (size_t x = 0; x < sizeof ab / sizeof ab[0]; ++x)
                for (int ta = 0; ta < 2; ++ta)
                    for (int tw = 0; tw < 2; ++tw) {
                        struct qcase t = {.f = formats[fi],
                                          .m = 3,
                                          .n = 37,
                                          .k = 1000,
                                          .ta = ta,
                                          .tw = tw,
                                          .alpha = ab[x][0],
                                          .beta = ab[x][1]};
                        check_case(isas[ii], t, seed += 3);
                        t.m = 1;
                        t.k = 4099;
                        check_case(isas[ii], t, seed += 3);
                    }
}

/* The fused epilogue is the unfused product followed by the epilogue row,
 * bit for bit; any split of the units gives the same bits. */
Test(kernels_weights_format, epilogue_and_splits_change_no_bit)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const enum nxr_activation acts[] = {NXR_ACTIVATION_NONE, NXR_ACTIVATION_SILU,
                                        NXR_ACTIVATION_GELU_TANH};
    const size_t m = 5, n = 45, k = 70, ldc = n + 1;
    float *a = ref_fill(m * k, 7, -1, 1), *w = ref_fill(k * n, 8, -1, 1);
    float *bias = ref_fill(n, 9, -0.5f, 0.5f);
    float *c1 = malloc(m * ldc * sizeof *c1), *c2 = malloc(m * ldc * sizeof *c2);
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t fi = 0; fi < 2; ++fi)
            for (size_t ai = 0; ai < 3; ++ai)
                for (int with_bias = 0; with_bias < 2; ++with_bias) {
                    struct nxr__packed_q v;
                    void *packed = pack(formats[fi], false, k, n, w, n, &v);
                    const struct nxr_sgemm_args g = {.m = m,
                                                     .n = n,
                                                     .k = k,
                                                     .alpha = 1.0f,
                                                     .a = a,
                                                     .lda = k,
                                                     .c = c1,
                                                     .ldc = ldc};
                    const struct nxr_sgemm_epilogue ep = {.bias = with_bias ? bias : NULL,
                                                          .activation = acts[ai]};
                    struct nxr__quant_plan plan;
                    memset(c1, 0, m * ldc * sizeof *c1);
                    nxr__quant_plan_init(&plan, isas[ii], &g, &v, NULL);
                    run(isas[ii], &plan, NULL, 0);
                    for (size_t i = 0; i < m; ++i)
                        nxr__epilogue_row(isas[ii], n, c1 + i * ldc, ep.bias, ep.activation);
                    struct nxr_sgemm_args g2 = g;
                    g2.c = c2;
                    memset(c2, 0, m * ldc * sizeof *c2);
                    nxr__quant_plan_init(&plan, isas[ii], &g2, &v, &ep);
                    const size_t cuts[] = {1, 2, 5, 7, 11};
                    run(isas[ii], &plan, cuts, sizeof cuts / sizeof cuts[0]);
                    cr_assert(memcmp(c1, c2, m * ldc * sizeof *c1) == 0,
                              "%s format %d act %d bias %d: fused and split differ", isas[ii]->name,
                              formats[fi], acts[ai], with_bias);
                    free(packed);
                }
    free(a);
    free(w);
    free(bias);
    free(c1);
    free(c2);
}

/* A row of A gives the same bits in C whatever rows it is batched with:
 * a language model's sequences decoded together make the tokens each
 * makes alone (service/llama_batch.h). m = 17 takes every grouping of
 * A's rows the kernels have (fours, pairs, the odd one, a second pass of
 * NXR_QUANT_GROUP), and k = 96 an odd count of blocks (three). */
Test(kernels_weights_format, a_row_batched_equals_the_row_alone)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const size_t m = 17, n = 13, k = 96, ldc = n;
    float *a = ref_fill(m * k, 21, -1, 1), *w = ref_fill(n * k, 22, -1, 1);
    float *batched = malloc(m * ldc * sizeof *batched), *alone = malloc(ldc * sizeof *alone);
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t fi = 0; fi < 2; ++fi) {
            struct nxr__packed_q v;
            void *packed = pack(formats[fi], true, k, n, w, k, &v);
            struct nxr_sgemm_args g = {
                .m = m, .n = n, .k = k, .alpha = 1.0f, .a = a, .lda = k, .c = batched, .ldc = ldc};
            struct nxr__quant_plan plan;
            nxr__quant_plan_init(&plan, isas[ii], &g, &v, NULL);
            run(isas[ii], &plan, NULL, 0);
            for (size_t i = 0; i < m; ++i) {
                g.m = 1, g.a = a + i * k, g.c = alone;
                nxr__quant_plan_init(&plan, isas[ii], &g, &v, NULL);
                run(isas[ii], &plan, NULL, 0);
                for (size_t j = 0; j < n; ++j)
                    cr_assert_eq(bits_of(batched[i * ldc + j]), bits_of(alone[j]),
                                 "%s format %d: row %zu of %zu, C[%zu] %.9g batched, %.9g alone",
                                 isas[ii]->name, formats[fi], i, m, j, (double)batched[i * ldc + j],
                                 (double)alone[j]);
            }
            free(packed);
        }
    free(a);
    free(w);
    free(batched);
    free(alone);
}

/* A NaN or an infinity in A reaches C as in any f32 product (the 8-bit
 * kernels that quantize A take the f32 path for such a group of rows, and
 * its other rows are within the f32 path's bound: that path is the AVX2
 * instance's only test of its f32-widening 8-bit code). */
Test(kernels_weights_format, a_nan_in_a_reaches_its_row_of_c)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const size_t m = 3, n = 9, k = 40;
    float *a = ref_fill(m * k, 21, -1, 1), *w = ref_fill(k * n, 22, -1, 1);
    a[1 * k + 33] = NAN;
    float c[3 * 9];
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t fi = 0; fi < 2; ++fi) {
            struct nxr__packed_q v;
            void *packed = pack(formats[fi], false, k, n, w, n, &v);
            const struct nxr_sgemm_args g = {
                .m = m, .n = n, .k = k, .alpha = 1.0f, .a = a, .lda = k, .c = c, .ldc = n};
            struct nxr__quant_plan plan;
            nxr__quant_plan_init(&plan, isas[ii], &g, &v, NULL);
            run(isas[ii], &plan, NULL, 0);
            for (size_t j = 0; j < n; ++j) {
                cr_assert(isnan(c[1 * n + j]), "%s format %d: C[1][%zu] = %g", isas[ii]->name,
                          formats[fi], j, (double)c[1 * n + j]);
                /* Rows 0 and 2 went through the f32 path with it (A not
                 * quantized): within the bound without the activations' term. */
                for (size_t i = 0; i < m; i += 2) {
                    double ref = 0, abs_aw = 0, perr = 0;
                    for (size_t p = 0; p < k; ++p) {
                        const double av = a[i * k + p], wv = w[p * n + j];
                        ref += av * wv;
                        abs_aw += fabs(av * wv);
                        perr += fabs(av) *
                                (formats[fi] == NXR__QFORMAT_BF16
                                     ? fmax(0x1p-8 * fabs(wv), 0x1p-134)
                                     : (1 + 0x1p-12) * block_max(w, n, false, k, p, j) / 254);
                    }
                    const double bound = (perr + 2 * (k + 2) * U_F32 * abs_aw * (1 + 0x1p-7) +
                                          2 * U_F32 * fabs(ref)) *
                                         (1 + 4 * U_F32);
                    cr_assert(fabs(c[i * n + j] - ref) <= bound,
                              "%s format %d: C[%zu][%zu] = %.9g, ref %.9g, bound %.3g",
                              isas[ii]->name, formats[fi], i, j, (double)c[i * n + j], ref, bound);
                }
            }
            free(packed);
        }
    free(a);
    free(w);
}
