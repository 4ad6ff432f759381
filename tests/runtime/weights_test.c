/*
 * Packed weights (runtime/nxr_weights.h) through contexts on real runtimes:
 * a packed call gives exactly the bits of the unpacked call with the
 * original W (memcmp), for both source orientations, small and large m,
 * edge sizes, alpha/beta and fused epilogues, on a budget of one and of
 * every allowed CPU; and both are within the dot-product bound of a naive
 * double reference (|C - ref| <= 2 (k + 2) u (|alpha| sum |a w| + |beta c|),
 * u = 2^-24). Bad input is a typed error that leaves nothing allocated.
 * Where the copies live: weights_placement_test.c.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctx_support.h"
#include "tests/kernels/ref.h"

static double op_at(const float *x, size_t ld, bool trans, size_t r, size_t c)
{
    return trans ? x[c * ld + r] : x[r * ld + c];
}

struct gcase {
    size_t m, n, k;
    bool ta, tw;
    float alpha, beta;
    bool bias;
    enum nxr_activation act;
};

/* One case on ctx: W packed for ctx's domain, then the packed call and the
 * unpacked one on the same inputs, compared bit for bit and against the
 * reference (before the activation: with one, only bit equality). */
static void check_case(nxr_runtime_t *rt, nxr_ctx_t *ctx, struct gcase g, uint64_t seed)
{
    const size_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
    const size_t w_rows = g.tw ? g.n : g.k, w_cols = g.tw ? g.k : g.n;
    const size_t lda = a_cols + 3, ldw = w_cols + 5, ldc = g.n + 2;
    float *a = ref_fill(a_rows * lda, seed, -1.0f, 1.0f);
    float *w = ref_fill(w_rows * ldw, seed + 1, -1.0f, 1.0f);
    float *c0 = ref_fill(g.m * ldc, seed + 2, -1.0f, 1.0f);
    float *bias = ref_fill(g.n, seed + 3, -0.5f, 0.5f);
    float *cp = malloc(g.m * ldc * sizeof *cp), *cu = malloc(g.m * ldc * sizeof *cu);
    memcpy(cp, c0, g.m * ldc * sizeof *cp);
    memcpy(cu, c0, g.m * ldc * sizeof *cu);

    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.trans = g.tw;
    d.k = g.k;
    d.n = g.n;
    d.w = w;
    d.ldw = ldw;
    int id = nxr_domain_id(nxr_ctx_domain(ctx));
    d.domain_ids = &id;
    d.domain_count = 1;
    nxr_weights_t *pw;
    cr_assert_eq(nxr_weights_create(rt, &d, &pw), 0);
    cr_assert_eq(nxr_weights_k(pw), g.k);
    cr_assert_eq(nxr_weights_n(pw), g.n);

    struct nxr_sgemm_epilogue ep = {.bias = g.bias ? bias : NULL, .activation = g.act};
    struct nxr_sgemm_packed_args pa = {.trans_a = g.ta, .m = g.m, .alpha = g.alpha, .a = a,
                                  .lda = lda, .w = pw, .beta = g.beta, .c = cp, .ldc = ldc};
    int rc = nxr_sgemm_packed(ctx, &pa, &ep);
    cr_assert_eq(rc, 0, "%s", nxr_last_error());
    struct nxr_sgemm_args ua = {.trans_a = g.ta, .trans_b = g.tw, .m = g.m, .n = g.n, .k = g.k,
                           .alpha = g.alpha, .a = a, .lda = lda, .b = w, .ldb = ldw,
                           .beta = g.beta, .c = cu, .ldc = ldc};
    cr_assert_eq(nxr_sgemm_fused(ctx, &ua, &ep), 0, "%s", nxr_last_error());
    cr_assert_eq(memcmp(cp, cu, g.m * ldc * sizeof *cp), 0,
                 "packed != unpacked: m %zu n %zu k %zu ta %d tw %d alpha %g beta %g", g.m, g.n,
                 g.k, g.ta, g.tw, (double)g.alpha, (double)g.beta);
    for (size_t i = 0; i < g.m; i++) {
        for (size_t j = g.n; j < ldc; j++)
            cr_assert_eq(memcmp(&cp[i * ldc + j], &c0[i * ldc + j], sizeof(float)), 0,
                         "padding written");
        if (g.act != NXR_ACTIVATION_NONE)
            continue;
        for (size_t j = 0; j < g.n; j++) {
            double ref = 0, mag = 0;
            for (size_t p = 0; p < g.k; p++) {
                double t = op_at(a, lda, g.ta, i, p) * op_at(w, ldw, g.tw, p, j);
                ref += t;
                mag += fabs(t);
            }
            ref = g.alpha * ref + (g.beta != 0.0f ? g.beta * c0[i * ldc + j] : 0.0);
            mag = fabs(g.alpha) * mag + fabs(g.beta * c0[i * ldc + j]);
            if (g.bias) {
                ref += bias[j];
                mag += fabs(bias[j]) + fabs(ref);
            }
            double tol = 2.0 * (double)(g.k + 3) * U_F32 * mag + 1e-30;
            cr_assert(fabs(cp[i * ldc + j] - ref) <= tol,
                      "C[%zu][%zu] = %.9g, ref %.9g (m %zu n %zu k %zu ta %d tw %d)", i, j,
                      (double)cp[i * ldc + j], ref, g.m, g.n, g.k, g.ta, g.tw);
        }
    }
    nxr_weights_destroy(pw);
    free(a);
    free(w);
    free(c0);
    free(bias);
    free(cp);
    free(cu);
}

static const size_t ms[] = {1, 4, 16, 17, 40};
static const size_t ns[] = {1, 15, 17, 100};
static const size_t ks[] = {1, 17, 600}; /* 600: past a kc slice */

static void sweep(nxr_runtime_t *rt, nxr_ctx_t *ctx)
{
    uint64_t seed = 1;
    for (size_t im = 0; im < sizeof ms / sizeof ms[0]; im++)
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++)
            for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++)
                for (int t = 0; t < 4; t++) {
                    struct gcase g = {.m = ms[im], .n = ns[in], .k = ks[ik], .ta = t & 1,
                                      .tw = (t >> 1) & 1, .alpha = 1.0f, .beta = 0.0f};
                    check_case(rt, ctx, g, seed++);
                }
}

Test(runtime_weights, packed_equals_unpacked_bit_for_bit_on_every_budget, .timeout = 120)
{
    for (int threads = 1; threads >= 0; threads--) { /* 1, then no cap */
        struct ctx_rt r;
        struct ctx_rt_opts o;
        ctx_rt_opts_init(&o);
        o.num_threads = threads;
        ctx_rt_open(&r, &o);
        sweep(r.rt, r.ctx[0]);
        ctx_rt_close(&r);
    }
}

Test(runtime_weights, alpha_beta_and_epilogues, .timeout = 120)
{
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    ctx_rt_open(&r, &o);
    static const float alphas[] = {1.0f, -0.5f, 0.0f}, betas[] = {0.0f, 1.0f, 0.25f};
    uint64_t seed = 100;
    for (size_t ia = 0; ia < 3; ia++)
        for (size_t ib = 0; ib < 3; ib++)
            for (int t = 0; t < 4; t++) {
                struct gcase g = {.m = 3, .n = 70, .k = 33, .ta = t & 1, .tw = (t >> 1) & 1,
                                  .alpha = alphas[ia], .beta = betas[ib], .bias = ib != 1};
                check_case(r.rt, r.ctx[0], g, seed++);
                g.m = 20;
                g.act = ia == 0 ? NXR_ACTIVATION_SILU : NXR_ACTIVATION_GELU_TANH;
                check_case(r.rt, r.ctx[0], g, seed++);
                g.n = 5; /* an n-small shape */
                g.m = 50;
                check_case(r.rt, r.ctx[0], g, seed++);
            }
    /* Past every cache block (n > nc, k > kc), small and large m. */
    for (int t = 0; t < 4; t++)
        for (size_t m = 4; m <= 40; m += 36) {
            struct gcase g = {.m = m, .n = 1100, .k = 600, .ta = t & 1, .tw = (t >> 1) & 1,
                              .alpha = 0.5f, .beta = 0.5f, .bias = true};
            check_case(r.rt, r.ctx[0], g, seed++);
        }
    ctx_rt_close(&r);
}

Test(runtime_weights, bad_input_is_a_typed_error_and_leaves_nothing)
{
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    ctx_rt_open(&r, &o);
    float w[64] = {0}, a[64] = {0}, c[64] = {0};
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = 4;
    d.n = 8;
    d.w = w;
    d.ldw = 8;
    nxr_weights_t *pw = (nxr_weights_t *)1;
    cr_assert_eq(nxr_weights_create(NULL, &d, &pw), -EINVAL);
    cr_assert_null(pw);
    cr_assert_eq(nxr_weights_create(r.rt, NULL, &pw), -EINVAL);
    d.ldw = 7;
    cr_assert_eq(nxr_weights_create(r.rt, &d, &pw), -EINVAL);
    d.ldw = 8;
    d.trans = true;
    cr_assert_eq(nxr_weights_create(r.rt, &d, &pw), 0); /* ldw 8 >= k 4 */
    nxr_weights_destroy(pw);
    d.trans = false;
    d.k = 0;
    cr_assert_eq(nxr_weights_create(r.rt, &d, &pw), -EINVAL);
    d.k = 4;
    d.w = NULL;
    cr_assert_eq(nxr_weights_create(r.rt, &d, &pw), -EINVAL);
    d.w = w;
    int ids[2] = {0, 0};
    d.domain_ids = ids;
    d.domain_count = 2;
    cr_assert_eq(nxr_weights_create(r.rt, &d, &pw), -EINVAL, "a duplicate id");
    cr_assert_null(pw);
    ids[1] = 12345;
    cr_assert_eq(nxr_weights_create(r.rt, &d, &pw), NXR_ENODOMAIN);
    cr_assert_null(pw);
    d.domain_count = 1;
    cr_assert_eq(nxr_weights_create(r.rt, &d, &pw), 0);

    struct nxr_sgemm_packed_args pa = {.m = 2, .alpha = 1, .a = a, .lda = 4, .w = pw, .c = c,
                                  .ldc = 8};
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], NULL, NULL), -EINVAL);
    cr_assert_str_eq(nxr_last_error(), "nxr_sgemm_packed: args is NULL");
    pa.lda = 3;
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, NULL), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "lda (3) < k (4)") != NULL, "%s",
              nxr_last_error());
    pa.lda = 4;
    pa.ldc = 7;
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, NULL), -EINVAL);
    pa.ldc = 8;
    const void *data;
    size_t bytes;
    cr_assert_eq(nxr_weights_copy(pw, nxr_ctx_domain(r.ctx[0]), &data, &bytes), 0);
    pa.c = (float *)data; /* C inside the packed weights */
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, NULL), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "overlaps the packed weights") != NULL,
              "%s", nxr_last_error());
    pa.c = c;
    struct nxr_sgemm_epilogue ep = {.bias = c, .activation = NXR_ACTIVATION_NONE};
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, &ep), -EINVAL, "bias overlaps C");
    ep = (struct nxr_sgemm_epilogue){.activation = (enum nxr_activation)9};
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, &ep), -EINVAL);
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, NULL), 0);

    nxr_ctx_t *placing;
    cr_assert_eq(nxr_ctx_create(r.rt, NXR_DOMAIN_AUTO, &placing), 0);
    cr_assert_eq(nxr_sgemm_packed(placing, &pa, NULL), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "routing context") != NULL);
    nxr_ctx_destroy(placing);
    nxr_weights_destroy(pw);
    ctx_rt_close(&r);
}

Test(runtime_weights, a_domain_without_a_copy_is_enodomain)
{
    if (nxr_test_cpu_count() < 2)
        cr_skip_test("needs two allowed CPUs for two domains");
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.domains = nxr_test_expand("0:%0;1:%1");
    ctx_rt_open(&r, &o);
    float w[32] = {0}, a[8] = {0}, c[16] = {0};
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = 4;
    d.n = 8;
    d.w = w;
    d.ldw = 8;
    int id = 1;
    d.domain_ids = &id;
    d.domain_count = 1;
    nxr_weights_t *pw;
    cr_assert_eq(nxr_weights_create(r.rt, &d, &pw), 0);
    struct nxr_sgemm_packed_args pa = {.m = 2, .alpha = 1, .a = a, .lda = 4, .w = pw, .c = c,
                                  .ldc = 8};
    cr_assert_eq(nxr_sgemm_packed(r.ctx[0], &pa, NULL), NXR_ENODOMAIN);
    cr_assert(strstr(nxr_last_error(), "no copy on domain 0") != NULL, "%s",
              nxr_last_error());
    cr_assert_eq(nxr_sgemm_packed(r.ctx[1], &pa, NULL), 0);
    const void *data;
    size_t bytes;
    cr_assert_eq(nxr_weights_copy(pw, nxr_ctx_domain(r.ctx[0]), &data, &bytes), NXR_ENODOMAIN);
    nxr_weights_destroy(pw);
    ctx_rt_close(&r);
}

Test(runtime_weights, a_runtime_without_the_native_gemm_refuses_to_pack)
{
    nxr_provider_t *ob;
    cr_assert_eq(nxr_provider_openblas_create(&ob), 0);
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.gemm = ob;
    ctx_rt_open(&r, &o);
    float w[32] = {0};
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = 4;
    d.n = 8;
    d.w = w;
    d.ldw = 8;
    nxr_weights_t *pw = (nxr_weights_t *)1;
    cr_assert_eq(nxr_weights_create(r.rt, &d, &pw), NXR_EUNSUPPORTED);
    cr_assert_null(pw);
    /* The bf16 and 8-bit kernels are the native provider's too. */
    for (int f = NXR_WEIGHTS_BF16; f <= NXR_WEIGHTS_Q8_BLOCK32; f++) {
        pw = (nxr_weights_t *)1;
        cr_assert_eq(nxr_weights_create_format(r.rt, &d, (enum nxr_weights_format)f, &pw),
                     NXR_EUNSUPPORTED);
        cr_assert_null(pw);
    }
    ctx_rt_close(&r);
    nxr_provider_destroy(ob);
}
