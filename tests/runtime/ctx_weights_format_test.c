/*
 * Weights in bf16 and 8-bit blocks through contexts on real runtimes
 * (nxr_weights_create_format, nxr_sgemm_packed): each format within the
 * bound runtime/nxr_weights.h documents against the exact product with the
 * original f32 weights (tests/kernels/weights_format_test.c derives it),
 * on a budget of one and of every allowed CPU, with the same bits on both;
 * the fused epilogue is f32(product + bias) then the activation; alpha 0
 * only scales C; the format is reported; bad input is a typed error naming
 * the problem, with *out NULL (leaks: the ASan run).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctx_support.h"
#include "tests/kernels/ref.h"

static double op_at(const float *x, size_t ld, bool trans, size_t r, size_t c)
{
    return trans ? x[c * ld + r] : x[r * ld + c];
}

struct fcase {
    enum nxr_weights_format f;
    size_t m, n, k;
    bool ta, tw;
    float alpha, beta;
};

static double pack_err(enum nxr_weights_format f, const float *w, size_t ldw, bool tw, size_t k,
                       size_t p, size_t j)
{
    if (f == NXR_WEIGHTS_BF16)
        return fmax(0x1p-8 * fabs(op_at(w, ldw, tw, p, j)), 0x1p-134);
    double mx = 0;
    for (size_t q = p / 32 * 32; q < k && q < p / 32 * 32 + 32; q++)
        mx = fmax(mx, fabs(op_at(w, ldw, tw, q, j)));
    return (1 + 0x1p-12) * mx / 254;
}

/* The largest |a| of p's block of 32 in row i of op(A). */
static double a_block_max(const float *a, size_t lda, bool ta, size_t k, size_t i, size_t p)
{
    double mx = 0;
    for (size_t q = p / 32 * 32; q < k && q < p / 32 * 32 + 32; q++)
        mx = fmax(mx, fabs(op_at(a, lda, ta, i, q)));
    return mx;
}

/* One case on every budget's context: within the bound, the same bits on
 * each budget. */
static void check_case(struct ctx_rt *rs, size_t nrt, struct fcase t, uint64_t seed)
{
    const size_t a_rows = t.ta ? t.k : t.m, a_cols = t.ta ? t.m : t.k;
    const size_t w_rows = t.tw ? t.n : t.k, w_cols = t.tw ? t.k : t.n;
    const size_t lda = a_cols + 1, ldw = w_cols + 3, ldc = t.n + 2;
    float *a = ref_fill(a_rows * lda, seed, -1.0f, 1.0f);
    float *w = ref_fill(w_rows * ldw, seed + 1, -1.0f, 1.0f);
    float *c0 = ref_fill(t.m * ldc, seed + 2, -1.0f, 1.0f);
    float *first = malloc(t.m * ldc * sizeof *first), *c = malloc(t.m * ldc * sizeof *c);
    for (size_t ri = 0; ri < nrt; ri++) {
        struct nxr_weights_desc d;
        nxr_weights_desc_init(&d);
        d.trans = t.tw;
        d.k = t.k;
        d.n = t.n;
        d.w = w;
        d.ldw = ldw;
        nxr_weights_t *pw;
        cr_assert_eq(nxr_weights_create_format(rs[ri].rt, &d, t.f, &pw), 0, "%s", nxr_last_error());
        cr_assert_eq(nxr_weights_format(pw), t.f);
        memcpy(c, c0, t.m * ldc * sizeof *c);
        struct nxr_sgemm_packed_args pa = {.trans_a = t.ta,
                                           .m = t.m,
                                           .alpha = t.alpha,
                                           .a = a,
                                           .lda = lda,
                                           .w = pw,
                                           .beta = t.beta,
                                           .c = c,
                                           .ldc = ldc};
        cr_assert_eq(nxr_sgemm_packed(rs[ri].ctx[0], &pa, NULL), 0, "%s", nxr_last_error());
        nxr_weights_destroy(pw);
        if (ri == 0)
            memcpy(first, c, t.m * ldc * sizeof *c);
        else
            cr_assert_eq(memcmp(first, c, t.m * ldc * sizeof *c), 0,
                         "budgets differ: m %zu n %zu k %zu", t.m, t.n, t.k);
    }
    for (size_t i = 0; i < t.m; i++)
        for (size_t j = 0; j < ldc; j++) {
            const double cin = c0[i * ldc + j];
            if (j >= t.n) {
                cr_assert_eq(memcmp(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float)), 0,
                             "padding written");
                continue;
            }
            double ref = 0, mag = 0, perr = 0;
            for (size_t p = 0; p < t.k; p++) {
                const double av = op_at(a, lda, t.ta, i, p), wv = op_at(w, ldw, t.tw, p, j);
                ref += av * wv;
                mag += fabs(av * wv);
                const double e = pack_err(t.f, w, ldw, t.tw, t.k, p, j);
                perr += fabs(av) * e;
                /* 8-bit blocks may quantize A per block too (AVX2): its term. */
                if (t.f == NXR_WEIGHTS_Q8_BLOCK32)
                    perr +=
                        (fabs(wv) + e) * (1 + 0x1p-12) * a_block_max(a, lda, t.ta, t.k, i, p) / 254;
            }
            ref = t.alpha * ref + (t.beta != 0 ? t.beta * cin : 0);
            const double bound =
                (fabs(t.alpha) * perr + 2 * (t.k + 2) * U_F32 * fabs(t.alpha) * mag * (1 + 0x1p-7) +
                 2 * U_F32 * (fabs(ref) + fabs(t.beta * cin))) *
                (1 + 4 * U_F32);
            cr_assert(fabs(c[i * ldc + j] - ref) <= bound,
                      "format %d m %zu n %zu k %zu ta %d tw %d: C[%zu][%zu] = %.9g, ref %.9g, "
                      "bound %.3g",
                      t.f, t.m, t.n, t.k, t.ta, t.tw, i, j, (double)c[i * ldc + j], ref, bound);
        }
    free(a);
    free(w);
    free(c0);
    free(first);
    free(c);
}

static const enum nxr_weights_format formats[] = {NXR_WEIGHTS_BF16, NXR_WEIGHTS_Q8_BLOCK32};

Test(kernels_ctx_weights_format, within_the_bound_and_the_same_bits_on_every_budget, .timeout = 240)
{
    struct ctx_rt rs[2];
    for (int i = 0; i < 2; i++) {
        struct ctx_rt_opts o;
        ctx_rt_opts_init(&o);
        o.num_threads = i == 0 ? 1 : 0; /* 1, then no cap */
        ctx_rt_open(&rs[i], &o);
    }
    static const size_t ms[] = {1, 2, 7, 16, 17}, ns[] = {1, 17, 33, 300}, ks[] = {1, 31, 600};
    uint64_t seed = 1;
    for (size_t fi = 0; fi < 2; fi++)
        for (size_t im = 0; im < sizeof ms / sizeof ms[0]; im++)
            for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++)
                for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++) {
                    struct fcase t = {.f = formats[fi],
                                      .m = ms[im],
                                      .n = ns[in],
                                      .k = ks[ik],
                                      .ta = (im + ik) % 2,
                                      .tw = (in + ik) % 2,
                                      .alpha = 1.0f};
                    check_case(rs, 2, t, seed += 5);
                    t.alpha = -0.5f;
                    t.beta = 0.75f;
                    check_case(rs, 2, t, seed += 5);
                }
    /* A GEMV long enough to split over every worker (64 KiB chunks). */
    for (size_t fi = 0; fi < 2; fi++) {
        struct fcase t = {.f = formats[fi], .m = 1, .n = 2000, .k = 777, .alpha = 1.0f};
        check_case(rs, 2, t, seed += 5);
    }
    for (int i = 0; i < 2; i++)
        ctx_rt_close(&rs[i]);
}

static double act_ref(enum nxr_activation act, double x, double *t)
{
    if (act == NXR_ACTIVATION_SILU) {
        *t = -x;
        return x / (1.0 + exp(-x));
    }
    const double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    *t = -2.0 * u;
    return x / (1.0 + exp(-2.0 * u));
}

/* The epilogue applies to the product the call computes: f32(C + bias),
 * then the activation (within the activation kernels' own bound,
 * tests/kernels/elementwise_test.c). */
Test(kernels_ctx_weights_format, the_epilogue_applies_to_the_product)
{
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    ctx_rt_open(&r, &o);
    const size_t m = 3, n = 70, k = 100;
    float *a = ref_fill(m * k, 1, -1, 1), *w = ref_fill(k * n, 2, -1, 1);
    float *bias = ref_fill(n, 3, -2, 2);
    float plain[3 * 70], fused[3 * 70];
    const enum nxr_activation acts[] = {NXR_ACTIVATION_NONE, NXR_ACTIVATION_SILU,
                                        NXR_ACTIVATION_GELU_TANH};
    for (size_t fi = 0; fi < 2; fi++)
        for (size_t ai = 0; ai < 3; ai++) {
            struct nxr_weights_desc d;
            nxr_weights_desc_init(&d);
            d.k = k;
            d.n = d.ldw = n;
            d.w = w;
            nxr_weights_t *pw;
            cr_assert_eq(nxr_weights_create_format(r.rt, &d, formats[fi], &pw), 0);
            struct nxr_sgemm_packed_args pa = {
                .m = m, .alpha = 1, .a = a, .lda = k, .w = pw, .c = plain, .ldc = n};
            cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, NULL), 0, "%s", nxr_last_error());
            const struct nxr_sgemm_epilogue ep = {.bias = bias, .activation = acts[ai]};
            pa.c = fused;
            cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, &ep), 0, "%s", nxr_last_error());
            for (size_t i = 0; i < m * n; i++) {
                const float z = plain[i] + bias[i % n];
                if (acts[ai] == NXR_ACTIVATION_NONE) {
                    cr_assert_eq(memcmp(&fused[i], &z, sizeof z), 0, "C + bias at %zu", i);
                    continue;
                }
                double tt;
                const double want = act_ref(acts[ai], z, &tt);
                const double tol = U_F32 * (16.0 + 4.0 * fabs(tt)) * fabs(want) + 1e-37;
                cr_assert(fabs(fused[i] - want) <= tol, "format %d act %d at %zu: %.9g want %.9g",
                          formats[fi], acts[ai], i, (double)fused[i], want);
            }
            /* alpha 0: C = beta C, then the epilogue; W and A unread. */
            pa.alpha = 0;
            pa.a = NULL;
            pa.beta = 2;
            memcpy(fused, plain, sizeof plain);
            const struct nxr_sgemm_epilogue bias_only = {.bias = bias};
            cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, &bias_only), 0, "%s", nxr_last_error());
            for (size_t i = 0; i < m * n; i++)
                cr_assert_eq(fused[i], 2 * plain[i] + bias[i % n]);
            nxr_weights_destroy(pw);
        }
    free(a);
    free(w);
    free(bias);
    ctx_rt_close(&r);
}

Test(kernels_ctx_weights_format, bad_input_is_a_typed_error)
{
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    ctx_rt_open(&r, &o);
    float w[64] = {0}, c[64] = {0};
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = 4;
    d.n = d.ldw = 8;
    d.w = w;
    nxr_weights_t *pw = (nxr_weights_t *)1;
    cr_assert_eq(nxr_weights_create_format(r.rt, &d, (enum nxr_weights_format)3, &pw), -EINVAL);
    cr_assert_null(pw);
    cr_assert(strstr(nxr_last_error(), "format 3 is no enum nxr_weights_format") != NULL, "%s",
              nxr_last_error());
    pw = (nxr_weights_t *)1;
    cr_assert_eq(nxr_weights_create_format(r.rt, &d, (enum nxr_weights_format) - 1, &pw), -EINVAL);
    cr_assert_null(pw);
    w[2 * 8 + 5] = INFINITY;
    pw = (nxr_weights_t *)1;
    cr_assert_eq(nxr_weights_create_format(r.rt, &d, NXR_WEIGHTS_Q8_BLOCK32, &pw), -EINVAL);
    cr_assert_null(pw);
    cr_assert(strstr(nxr_last_error(), "op(W)[2][5] is not finite") != NULL, "%s",
              nxr_last_error());
    /* bf16 keeps infinities. */
    cr_assert_eq(nxr_weights_create_format(r.rt, &d, NXR_WEIGHTS_BF16, &pw), 0);
    cr_assert_eq(nxr_weights_format(pw), NXR_WEIGHTS_BF16);
    cr_assert_eq(nxr_weights_format(NULL), NXR_WEIGHTS_F32);
    /* The call's rules name the copy. */
    const void *data;
    size_t bytes;
    cr_assert_eq(nxr_weights_copy(pw, nxr_ctx_domain(r.ctx[0]), &data, &bytes), 0);
    cr_assert_eq(bytes, 8 * 32 * 2, "8 rows of 32 (k padded) bf16");
    float a[4] = {1, 1, 1, 1};
    struct nxr_sgemm_packed_args pa = {
        .m = 1, .alpha = 1, .a = a, .lda = 4, .w = pw, .c = (float *)data + 4, .ldc = 8};
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, NULL), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "overlaps the packed weights") != NULL, "%s",
              nxr_last_error());
    pa.c = c;
    pa.lda = 3;
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, NULL), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "lda (3) < k (4)") != NULL, "%s", nxr_last_error());
    pa.lda = 4;
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, NULL), 0, "%s", nxr_last_error());
    cr_assert(isinf(c[5]), "the infinity is read back (C[0][5] = %g)", (double)c[5]);
    nxr_weights_destroy(pw);
    ctx_rt_close(&r);
}
