/*
 * Native SGEMM against a naive double reference: every ISA this CPU runs,
 * odd and non-square shapes (1, 7, 65, 257, shapes past each cache block:
 * m > mc, n > nc, k > kc),
 * all four transpose combinations, alpha/beta cases, padded leading
 * dimensions, tile ranges split across workers, batched GEMM.
 *
 * Tolerance: |C - C_ref| <= 2 (k + 2) u (|alpha| sum_p |a_ip b_pj| + |beta c_ij|),
 * u = 2^-24: the classical dot-product bound with a factor of 2 to spare.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <float.h>
#include <string.h>

#include "kernels/internal/native.h"
#include "ref.h"

struct shape {
    size_t m, n, k;
};

/* op(X)[r][c] for a row-major X stored as rows x cols = trans ? (c, r) : (r, c). */
static double op_at(const float *x, size_t ld, bool trans, size_t r, size_t c)
{
    return trans ? x[c * ld + r] : x[r * ld + c];
}

/* Runs one case on isa and checks every element (and that C's padding
 * columns are untouched). */
static void check_case(const struct nxr__native_isa *isa, struct shape s, bool ta, bool tb,
                       float alpha, float beta, uint64_t seed)
{
    const size_t a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
    const size_t b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
    const size_t lda = a_cols + 3, ldb = b_cols + 1, ldc = s.n + 2;
    float *a = ref_fill(a_rows * lda, seed, -1.0f, 1.0f);
    float *b = ref_fill(b_rows * ldb, seed + 1, -1.0f, 1.0f);
    float *c = ref_fill(s.m * ldc, seed + 2, -1.0f, 1.0f);
    float *c0 = malloc(s.m * ldc * sizeof *c0);
    memcpy(c0, c, s.m * ldc * sizeof *c);
    if (beta == 0.0f) /* beta == 0 must not read C: NaN must not leak */
        for (size_t i = 0; i < s.m; ++i)
            for (size_t j = 0; j < s.n; ++j)
                c[i * ldc + j] = NAN;

    struct nxr_sgemm_args g = {.trans_a = ta,
                          .trans_b = tb,
                          .m = s.m,
                          .n = s.n,
                          .k = s.k,
                          .alpha = alpha,
                          .a = a,
                          .lda = lda,
                          .b = b,
                          .ldb = ldb,
                          .beta = beta,
                          .c = c,
                          .ldc = ldc};
    struct nxr__sgemm_job job;
    cr_assert_eq(nxr__sgemm_plan_init(&job.plan, isa, &g, 1), 0);
    void *scratch = ref_scratch(job.plan.scratch_bytes);
    void *const scr[1] = {scratch};
    job.scratch = scr;
    nxr__sgemm_chunk(&job, 0, nxr__sgemm_plan_tiles(&job.plan), 0);

    for (size_t i = 0; i < s.m; ++i) {
        for (size_t j = 0; j < s.n; ++j) {
            double dot = 0.0, mag = 0.0;
            for (size_t p = 0; p < s.k; ++p) {
                const double t = op_at(a, lda, ta, i, p) * op_at(b, ldb, tb, p, j);
                dot += t;
                mag += fabs(t);
            }
            const double cij = c0[i * ldc + j];
            const double want = alpha * dot + (beta == 0.0f ? 0.0 : beta * cij);
            const double bound = fabs(alpha) * mag + (beta == 0.0f ? 0.0 : fabs(beta * cij));
            const double tol = 2.0 * (double)(s.k + 2) * U_F32 * bound + 1e-30;
            const double got = c[i * ldc + j];
            cr_assert(fabs(got - want) <= tol,
                      "%s m=%zu n=%zu k=%zu ta=%d tb=%d alpha=%g beta=%g: C[%zu][%zu]=%.9g "
                      "want %.9g (tol %.3g)",
                      isa->name, s.m, s.n, s.k, ta, tb, alpha, beta, i, j, got, want, tol);
        }
        for (size_t j = s.n; j < ldc; ++j)
            cr_assert_eq(memcmp(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float)), 0,
                         "padding column %zu of row %zu written", j, i);
    }
    free(scratch);
    free(a);
    free(b);
    free(c);
    free(c0);
}

static const struct shape shapes[] = {
    {1, 1, 1},    {7, 7, 7},    {65, 65, 65}, {257, 257, 257}, {7, 65, 257},  {257, 7, 65},
    {65, 257, 7}, {1, 257, 65}, {257, 1, 7},  {130, 33, 300},  {9, 1100, 20}, /* more than one nc
                                                                                 tile */
};

Test(kernels_gemm, every_shape_and_transpose)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si)
            for (int t = 0; t < 4; ++t)
                check_case(isas[ii], shapes[si], t & 1, t & 2, 1.0f, 0.0f, 17 * si + t);
}

Test(kernels_gemm, alpha_beta)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const struct shape s[] = {{7, 65, 257}, {65, 33, 7}, {257, 257, 65}, {20, 70, 1100}};
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t si = 0; si < sizeof s / sizeof s[0]; ++si) {
            check_case(isas[ii], s[si], false, true, 0.5f, -1.5f, 100 + si);
            check_case(isas[ii], s[si], true, false, -2.0f, 1.0f, 200 + si);
            check_case(isas[ii], s[si], true, true, 1.0f, 0.25f, 300 + si);
        }
}

/* alpha == 0 and k == 0 scale C by beta and never read A or B (NULL). */
Test(kernels_gemm, alpha_zero_and_k_zero_do_not_read_operands)
{
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    float c[3 * 5];
    for (int i = 0; i < 15; ++i)
        c[i] = (float)i;
    struct nxr_sgemm_args g = {.m = 3, .n = 5, .k = 4, .alpha = 0.0f, .beta = 2.0f, .c = c, .ldc = 5};
    struct nxr__sgemm_job job;
    cr_assert_eq(nxr__sgemm_plan_init(&job.plan, isa, &g, 1), 0);
    job.scratch = NULL;
    nxr__sgemm_chunk(&job, 0, nxr__sgemm_plan_tiles(&job.plan), 0);
    for (int i = 0; i < 15; ++i)
        cr_assert_eq(c[i], 2.0f * (float)i);

    g.alpha = 1.0f;
    g.k = 0;
    g.beta = 0.0f;
    cr_assert_eq(nxr__sgemm_plan_init(&job.plan, isa, &g, 1), 0);
    nxr__sgemm_chunk(&job, 0, nxr__sgemm_plan_tiles(&job.plan), 0);
    for (int i = 0; i < 15; ++i)
        cr_assert_eq(c[i], 0.0f);
}

Test(kernels_gemm, invalid_arguments_are_einval)
{
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    float a[16], b[16], c[16];
    struct nxr__sgemm_plan plan;
    struct nxr_sgemm_args g = {.m = 4,
                          .n = 4,
                          .k = 4,
                          .alpha = 1.0f,
                          .a = a,
                          .lda = 4,
                          .b = b,
                          .ldb = 4,
                          .c = c,
                          .ldc = 4};
    cr_assert_eq(nxr__sgemm_plan_init(&plan, isa, &g, 1), 0);
    g.lda = 3;
    cr_assert_eq(nxr__sgemm_plan_init(&plan, isa, &g, 1), -EINVAL);
    g.lda = 4;
    g.trans_b = true;
    g.ldb = 3; /* op(B) = B^T: B is n x k, needs ldb >= k */
    cr_assert_eq(nxr__sgemm_plan_init(&plan, isa, &g, 1), -EINVAL);
    g.ldb = 4;
    g.ldc = 3;
    cr_assert_eq(nxr__sgemm_plan_init(&plan, isa, &g, 1), -EINVAL);
    g.ldc = 4;
    g.a = NULL;
    cr_assert_eq(nxr__sgemm_plan_init(&plan, isa, &g, 1), -EINVAL);
    cr_assert_eq(nxr__sgemm_plan_init(&plan, isa, NULL, 1), -EINVAL);
    g.a = a;
    g.m = 0; /* empty: valid, nothing to do */
    cr_assert_eq(nxr__sgemm_plan_init(&plan, isa, &g, 1), 0);
    cr_assert_eq(nxr__sgemm_plan_tiles(&plan), 0);
}

/* Tiles split over "workers" with their own scratch give the bit-identical
 * result of one sequential pass: what the executor will rely on. */
Test(kernels_gemm, tile_ranges_split_bit_identically)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const size_t m = 257, n = 1100, k = 300;
    float *a = ref_fill(m * k, 1, -1, 1), *b = ref_fill(k * n, 2, -1, 1);
    float *c1 = calloc(m * n, sizeof *c1), *c2 = calloc(m * n, sizeof *c2);
    for (size_t ii = 0; ii < nisa; ++ii) {
        struct nxr_sgemm_args g = {.m = m,
                              .n = n,
                              .k = k,
                              .alpha = 1.0f,
                              .a = a,
                              .lda = k,
                              .b = b,
                              .ldb = n,
                              .beta = 0.0f,
                              .c = c1,
                              .ldc = n};
        struct nxr__sgemm_job job;
        cr_assert_eq(nxr__sgemm_plan_init(&job.plan, isas[ii], &g, 4), 0);
        const size_t tiles = nxr__sgemm_plan_tiles(&job.plan);
        cr_assert_geq(tiles, 4, "parts=4 gives every worker a tile");
        void *const scr[2] = {ref_scratch(job.plan.scratch_bytes),
                              ref_scratch(job.plan.scratch_bytes)};
        job.scratch = scr;
        nxr__sgemm_chunk(&job, 0, tiles, 0);
        job.plan.args.c = c2;
        nxr__sgemm_chunk(&job, 0, 1, 1);
        nxr__sgemm_chunk(&job, 1, tiles - 1, 0);
        nxr__sgemm_chunk(&job, tiles - 1, tiles, 1);
        cr_assert_eq(memcmp(c1, c2, m * n * sizeof *c1), 0, "%s", isas[ii]->name);
        free(scr[0]);
        free(scr[1]);
    }
    free(a);
    free(b);
    free(c1);
    free(c2);
}

/* With parts participants, the plan splits the columns first: each static
 * share (parallel_for's cut of the tiles) is whole tile columns, so no
 * participant packs another's B block; and the split changes no bit. */
Test(kernels_gemm, a_split_plan_gives_each_part_its_own_columns)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const size_t sizes[][3] = {{512, 512, 512}, {257, 1100, 300}, {96, 200, 64}};
    for (size_t ii = 0; ii < nisa; ++ii) {
        for (size_t si = 0; si < 3; si++) {
            const size_t m = sizes[si][0], n = sizes[si][1], k = sizes[si][2];
            float *a = ref_fill(m * k, 3, -1, 1), *b = ref_fill(k * n, 4, -1, 1);
            float *c1 = calloc(m * n, sizeof *c1), *c2 = calloc(m * n, sizeof *c2);
            struct nxr_sgemm_args g = {.m = m, .n = n, .k = k, .alpha = 1.0f, .a = a, .lda = k,
                                  .b = b, .ldb = n, .beta = 0.0f, .c = c1, .ldc = n};
            struct nxr__sgemm_job one, two;
            cr_assert_eq(nxr__sgemm_plan_init(&one.plan, isas[ii], &g, 1), 0);
            cr_assert_eq(nxr__sgemm_plan_init(&two.plan, isas[ii], &g, 2), 0);
            const size_t tiles = nxr__sgemm_plan_tiles(&two.plan);
            cr_assert_geq(two.plan.tiles_n, 2, "%s %zu: columns split for two parts",
                          isas[ii]->name, n);
            /* Static shares of `tiles` chunks over 2 participants. */
            const size_t share0 = tiles - tiles / 2;
            cr_assert_eq(share0 % two.plan.tiles_m, 0, "%s %zu: share 0 is whole columns",
                         isas[ii]->name, n);
            cr_assert_eq(two.plan.nc % isas[ii]->nr, 0);
            void *const scr[2] = {ref_scratch(one.plan.scratch_bytes),
                                  ref_scratch(one.plan.scratch_bytes)};
            one.scratch = scr;
            two.scratch = scr;
            nxr__sgemm_chunk(&one, 0, nxr__sgemm_plan_tiles(&one.plan), 0);
            two.plan.args.c = c2;
            nxr__sgemm_chunk(&two, 0, share0, 0);
            nxr__sgemm_chunk(&two, share0, tiles, 1);
            cr_assert_eq(memcmp(c1, c2, m * n * sizeof *c1), 0, "%s %zu", isas[ii]->name, n);
            free(scr[0]);
            free(scr[1]);
            free(a);
            free(b);
            free(c1);
            free(c2);
        }
    }
}

Test(kernels_gemm, batched_items_match_single_gemms)
{
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    const size_t batch = 3, m = 65, n = 7, k = 33;
    const size_t sa = m * k + 5, sb = k * n + 3, sc = m * n + 1;
    float *a = ref_fill(batch * sa, 7, -1, 1), *b = ref_fill(batch * sb, 8, -1, 1);
    float *c = calloc(batch * sc, sizeof *c), *want = calloc(batch * sc, sizeof *want);
    struct nxr_sgemm_batch_args args = {.gemm = {.m = m,
                                            .n = n,
                                            .k = k,
                                            .alpha = 1.0f,
                                            .a = a,
                                            .lda = k,
                                            .b = b,
                                            .ldb = n,
                                            .beta = 0.0f,
                                            .c = c,
                                            .ldc = n},
                                   .batch = batch,
                                   .stride_a = sa,
                                   .stride_b = sb,
                                   .stride_c = sc};
    void *scratch = ref_scratch(nxr__sgemm_scratch_bytes(isa));
    void *const scr[1] = {scratch};
    struct nxr__sgemm_batch_job job;
    cr_assert_eq(nxr__sgemm_batch_job_init(&job, isa, &args, scr), 0);
    nxr__sgemm_batch_chunk(&job, 0, 1, 0);
    nxr__sgemm_batch_chunk(&job, 1, batch, 0);
    for (size_t i = 0; i < batch; ++i) {
        struct nxr_sgemm_args one = args.gemm;
        one.a = a + i * sa;
        one.b = b + i * sb;
        one.c = want + i * sc;
        /* A single GEMM as nxr_sgemm runs it: small shapes on their path. */
        struct nxr__small_plan sp;
        if (nxr__small_plan_init(&sp, isa, &one, NULL, NULL)) {
            isa->sgemm_small(&sp, 0, sp.units, scratch);
        } else {
            struct nxr__sgemm_job sj;
            cr_assert_eq(nxr__sgemm_plan_init(&sj.plan, isa, &one, 1), 0);
            sj.scratch = scr;
            nxr__sgemm_chunk(&sj, 0, nxr__sgemm_plan_tiles(&sj.plan), 0);
        }
        for (size_t r = 0; r < m; ++r)
            for (size_t j = 0; j < n; ++j) {
                double dot = 0, mag = 0;
                for (size_t p = 0; p < k; ++p) {
                    dot += (double)one.a[r * k + p] * one.b[p * n + j];
                    mag += fabs((double)one.a[r * k + p] * one.b[p * n + j]);
                }
                cr_assert(fabs(c[i * sc + r * n + j] - dot) <= 2.0 * (k + 2) * U_F32 * mag);
            }
    }
    cr_assert_eq(memcmp(c, want, batch * sc * sizeof *c), 0, "items equal single GEMMs");
    free(scratch);
    free(a);
    free(b);
    free(c);
    free(want);
}
