/*
 * The small-shape GEMM path (kernels/internal/native.h, "small shapes") on
 * every ISA this CPU runs: which shapes take it; the reference result for
 * every transpose combination, m/n/k edge sizes (1, 15, 16, 17, lengths
 * that are no multiple of the vector width, k past a kc slice), leading
 * dimensions larger than the shape, alpha/beta cases; C's padding
 * untouched; the same bits however the units are cut between workers; the
 * fused epilogue equal to the product followed by the row epilogue; a
 * packed op(B) equal, bit for bit, to the unpacked call.
 *
 * Tolerance: |C - C_ref| <= 2 (k + 2) u (|alpha| sum_p |a_ip b_pj| + |beta c_ij|),
 * u = 2^-24, as gemm_test.c.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/internal/native.h"
#include "ref.h"

static double op_at(const float *x, size_t ld, bool trans, size_t r, size_t c)
{
    return trans ? x[c * ld + r] : x[r * ld + c];
}

struct mats {
    struct nxr_sgemm_args g;
    float *a, *b, *c, *c0;
    size_t c_floats;
};

/* Operands of one case with padded leading dimensions (+3, +1, +2). */
static void mats_make(struct mats *t, size_t m, size_t n, size_t k, bool ta, bool tb, float alpha,
                      float beta, uint64_t seed)
{
    const size_t a_rows = ta ? k : m, a_cols = ta ? m : k;
    const size_t b_rows = tb ? n : k, b_cols = tb ? k : n;
    const size_t lda = a_cols + 3, ldb = b_cols + 1, ldc = n + 2;
    t->a = ref_fill(a_rows * lda, seed, -1.0f, 1.0f);
    t->b = ref_fill(b_rows * ldb, seed + 1, -1.0f, 1.0f);
    t->c_floats = m * ldc;
    t->c0 = ref_fill(t->c_floats, seed + 2, -1.0f, 1.0f);
    t->c = malloc(t->c_floats * sizeof(float));
    memcpy(t->c, t->c0, t->c_floats * sizeof(float));
    t->g = (struct nxr_sgemm_args){.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k,
                              .alpha = alpha, .a = t->a, .lda = lda, .b = t->b, .ldb = ldb,
                              .beta = beta, .c = t->c, .ldc = ldc};
}

static void mats_free(struct mats *t)
{
    free(t->a);
    free(t->b);
    free(t->c);
    free(t->c0);
}

static void check_ref(const struct mats *t, const char *isa)
{
    const struct nxr_sgemm_args *g = &t->g;
    for (size_t i = 0; i < g->m; i++) {
        for (size_t j = 0; j < g->n; j++) {
            double dot = 0, mag = 0;
            for (size_t p = 0; p < g->k; p++) {
                double v = op_at(t->a, g->lda, g->trans_a, i, p) *
                           op_at(t->b, g->ldb, g->trans_b, p, j);
                dot += v;
                mag += fabs(v);
            }
            const double c0 = t->c0[i * g->ldc + j];
            const double want = g->alpha * dot + (g->beta != 0.0f ? g->beta * c0 : 0.0);
            const double tol =
                2.0 * (double)(g->k + 2) * U_F32 * (fabs(g->alpha) * mag + fabs(g->beta * c0)) +
                1e-30;
            cr_assert(fabs(t->c[i * g->ldc + j] - want) <= tol,
                      "%s m %zu n %zu k %zu ta %d tb %d alpha %g beta %g: C[%zu][%zu] = %.9g, "
                      "want %.9g",
                      isa, g->m, g->n, g->k, g->trans_a, g->trans_b, (double)g->alpha,
                      (double)g->beta, i, j, (double)t->c[i * g->ldc + j], want);
        }
        for (size_t j = g->n; j < g->ldc; j++)
            cr_assert_eq(memcmp(&t->c[i * g->ldc + j], &t->c0[i * g->ldc + j], sizeof(float)), 0,
                         "%s: padding of row %zu written", isa, i);
    }
}

/* Runs the whole small plan on one worker. */
static void run_small(const struct nxr__native_isa *isa, const struct nxr_sgemm_args *g,
                      const struct nxr__packed_b *packed, const struct nxr_sgemm_epilogue *ep)
{
    struct nxr__small_plan plan;
    cr_assert(nxr__small_plan_init(&plan, isa, g, packed, ep), "m %zu n %zu takes the small path",
              g->m, g->n);
    void *scratch = ref_scratch(plan.scratch_bytes + 64);
    isa->sgemm_small(&plan, 0, plan.units, scratch);
    free(scratch);
}

Test(kernels_gemm_small, which_shapes_take_the_path)
{
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    float a[4] = {0}, b[4] = {0}, c[4] = {0};
    struct nxr__small_plan p;
    struct nxr_sgemm_args g = {.m = 16, .n = 4096, .k = 64, .alpha = 1, .a = a, .lda = 64, .b = b,
                          .ldb = 4096, .c = c, .ldc = 4096};
    cr_assert(nxr__small_plan_init(&p, isa, &g, NULL, NULL));
    cr_assert(!p.dot && !p.transposed && p.scratch_bytes == 0, "x W: axpy, nothing copied");
    g.trans_b = true;
    g.ldb = 64;
    cr_assert(nxr__small_plan_init(&p, isa, &g, NULL, NULL));
    cr_assert(p.dot && p.scratch_bytes == 0, "x W^T: dot products along k, nothing copied");
    g.m = NXR_SMALL_STREAM_MAX;
    cr_assert(nxr__small_plan_init(&p, isa, &g, NULL, NULL) && p.dot,
              "m 64 x n 4096 transposed: W's rows streamed once, still the small path");
    g.m = NXR_SMALL_STREAM_MAX + 1;
    cr_assert(!nxr__small_plan_init(&p, isa, &g, NULL, NULL), "m 65 x n 4096 W^T: the tile loop");
    g.trans_b = false;
    g.ldb = 4096;
    g.m = NXR_SMALL_MAX + 1;
    cr_assert(!nxr__small_plan_init(&p, isa, &g, NULL, NULL), "m 17 x n 4096 W: the tile loop");
    /* The same W packed in panels streams them to 64 rows: the axpy
     * kernel's bits are the tile loop's (packed_b_gives_the_unpacked_bits). */
    const struct nxr__packed_b panels = {.panels = true, .k = 64, .n = 4096, .data = b};
    g.m = NXR_SMALL_STREAM_MAX;
    cr_assert(nxr__small_plan_init(&p, isa, &g, &panels, NULL) && !p.dot,
              "m 64 x n 4096 packed panels: the axpy kernel");
    g.m = NXR_SMALL_STREAM_MAX + 1;
    cr_assert(!nxr__small_plan_init(&p, isa, &g, &panels, NULL),
              "m 65 packed panels: the tile loop");
    g = (struct nxr_sgemm_args){.m = 4096, .n = 1, .k = 64, .alpha = 1, .a = a, .lda = 64, .b = b,
                           .ldb = 1, .c = c, .ldc = 1};
    cr_assert(nxr__small_plan_init(&p, isa, &g, NULL, NULL));
    cr_assert(p.dot && p.transposed && p.scratch_bytes == 0, "W x: a GEMV along W's rows");
    g.alpha = 0.0f;
    cr_assert(!nxr__small_plan_init(&p, isa, &g, NULL, NULL), "alpha 0 only scales C");
}

static const size_t small_sides[] = {1, 2, 5, 8, 9, 15, 16};
static const size_t long_sides[] = {1, 3, 15, 16, 17, 40, 70};
static const size_t depths[] = {1, 15, 16, 17, 33};

Test(kernels_gemm_small, reference_for_every_transpose_and_edge_size, .timeout = 120)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    uint64_t seed = 1;
    for (size_t ii = 0; ii < nisa; ii++)
        for (size_t is = 0; is < sizeof small_sides / sizeof small_sides[0]; is++)
            for (size_t il = 0; il < sizeof long_sides / sizeof long_sides[0]; il++)
                for (size_t ik = 0; ik < sizeof depths / sizeof depths[0]; ik++)
                    for (int t = 0; t < 8; t++) {
                        /* t & 4: the small side is n instead of m. */
                        const size_t s = small_sides[is], l = long_sides[il];
                        const size_t m = t & 4 ? (l > s ? l : s + 1) : s;
                        const size_t n = t & 4 ? s : (l > s ? l : s);
                        struct mats x;
                        mats_make(&x, m, n, depths[ik], t & 1, t & 2, 1.0f, 0.0f, seed++);
                        run_small(isas[ii], &x.g, NULL, NULL);
                        check_ref(&x, isas[ii]->name);
                        mats_free(&x);
                    }
}

Test(kernels_gemm_small, alpha_beta_and_k_past_a_slice, .timeout = 60)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    static const float ab[][2] = {{1.0f, 1.0f}, {-0.5f, 0.25f}, {2.0f, -1.0f}, {0.75f, 0.0f}};
    uint64_t seed = 1000;
    for (size_t ii = 0; ii < nisa; ii++)
        for (size_t c = 0; c < 4; c++)
            for (int t = 0; t < 8; t++) {
                const size_t k = c % 2 ? 1100 : 47; /* 1100: three kc slices */
                struct mats x;
                if (t & 4)
                    mats_make(&x, 37, 3, k, t & 1, t & 2, ab[c][0], ab[c][1], seed++);
                else
                    mats_make(&x, 3, 37, k, t & 1, t & 2, ab[c][0], ab[c][1], seed++);
                run_small(isas[ii], &x.g, NULL, NULL);
                check_ref(&x, isas[ii]->name);
                mats_free(&x);
            }
}

/* The same plan cut into unit ranges run by different "workers" (their own
 * scratch) gives the bits of the whole range run at once. */
Test(kernels_gemm_small, the_split_changes_no_bit)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    uint64_t seed = 2000;
    for (size_t ii = 0; ii < nisa; ii++)
        for (int t = 0; t < 8; t++) {
            struct mats x;
            if (t & 4)
                mats_make(&x, 301, 5, 70, t & 1, t & 2, 1.0f, 0.5f, seed++);
            else
                mats_make(&x, 5, 301, 70, t & 1, t & 2, 1.0f, 0.5f, seed++);
            struct nxr__small_plan plan;
            cr_assert(nxr__small_plan_init(&plan, isas[ii], &x.g, NULL, NULL));
            cr_assert_geq(plan.units, 3);
            void *s0 = ref_scratch(plan.scratch_bytes + 64), *s1 = ref_scratch(plan.scratch_bytes + 64);
            isas[ii]->sgemm_small(&plan, 0, plan.units, s0);
            float *whole = malloc(x.c_floats * sizeof(float));
            memcpy(whole, x.c, x.c_floats * sizeof(float));
            memcpy(x.c, x.c0, x.c_floats * sizeof(float));
            isas[ii]->sgemm_small(&plan, 1, 3, s1);
            isas[ii]->sgemm_small(&plan, 0, 1, s0);
            isas[ii]->sgemm_small(&plan, 3, plan.units, s1);
            cr_assert_eq(memcmp(whole, x.c, x.c_floats * sizeof(float)), 0,
                         "%s t %d: a split run differs", isas[ii]->name, t);
            free(whole);
            free(s0);
            free(s1);
            mats_free(&x);
        }
}

/* Fused: the epilogue applied by the path equals the product, then the row
 * epilogue over C (what the unfused calls do), bit for bit. */
Test(kernels_gemm_small, fused_epilogue_equals_product_then_epilogue)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    uint64_t seed = 3000;
    for (size_t ii = 0; ii < nisa; ii++)
        for (int t = 0; t < 8; t++)
            for (int act = 0; act <= NXR_ACTIVATION_GELU_TANH; act++) {
                struct mats x;
                if (t & 4)
                    mats_make(&x, 70, 7, 33, t & 1, t & 2, 1.0f, 1.0f, seed++);
                else
                    mats_make(&x, 7, 70, 33, t & 1, t & 2, 1.0f, 1.0f, seed++);
                float *bias = ref_fill(x.g.n, seed++, -0.5f, 0.5f);
                const struct nxr_sgemm_epilogue ep = {.bias = bias,
                                                 .activation = (enum nxr_activation)act};
                run_small(isas[ii], &x.g, NULL, &ep);
                float *fused = malloc(x.c_floats * sizeof(float));
                memcpy(fused, x.c, x.c_floats * sizeof(float));
                memcpy(x.c, x.c0, x.c_floats * sizeof(float));
                run_small(isas[ii], &x.g, NULL, NULL);
                for (size_t i = 0; i < x.g.m; i++)
                    nxr__epilogue_row(isas[ii], x.g.n, x.c + i * x.g.ldc, bias, ep.activation);
                cr_assert_eq(memcmp(fused, x.c, x.c_floats * sizeof(float)), 0,
                             "%s t %d act %d: fused differs", isas[ii]->name, t, act);
                free(fused);
                free(bias);
                mats_free(&x);
            }
}

/* op(B) packed once (panels from an untransposed B, rows from a transposed
 * one), on the small path and on the tile loop: the unpacked call's bits. */
Test(kernels_gemm_small, packed_b_gives_the_unpacked_bits)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    /* 1100 wide: unpacked rows that far apart take the streaming form of
     * the axpy kernel, packed panels the register one. 2100 wide with 4
     * rows of X and 8200 wide with one span more than one run of columns
     * (a run is 8192 floats of sums shared by the rows), with a tail. */
    static const size_t shapes[][3] = {{1, 70, 33},     {16, 100, 600}, {40, 5, 33},
                                       {3, 1, 17},      {17, 70, 600},  {40, 100, 20},
                                       {3, 1100, 600},  {1, 2100, 30},  {1100, 4, 40},
                                       {12, 1100, 40},  {4, 2100, 20},  {1, 8200, 9}};
    uint64_t seed = 4000;
    for (size_t ii = 0; ii < nisa; ii++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 4; t++) {
                const size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                struct mats x;
                mats_make(&x, m, n, k, t & 1, t & 2, 1.0f, 0.5f, seed++);
                float *packed = ref_scratch(nxr__sgemm_packed_bytes(isas[ii], t & 2, k, n));
                struct nxr__packed_b view;
                nxr__sgemm_pack_b(isas[ii], t & 2, k, n, x.b, x.g.ldb, packed, &view);
                /* Unpacked, through the dispatch the provider uses. */
                struct nxr__small_plan sp;
                const bool small = nxr__small_plan_init(&sp, isas[ii], &x.g, NULL, NULL);
                void *scratch = ref_scratch(nxr__sgemm_scratch_bytes(isas[ii]) + nxr__sgemm_scratch_for(isas[ii], &x.g, NULL) +
                                            (size_t)NXR_SMALL_STREAM_MAX * 4 * (k + 16));
                void *const scr[1] = {scratch};
                struct nxr__sgemm_job job = {.scratch = scr};
                if (small) {
                    isas[ii]->sgemm_small(&sp, 0, sp.units, scratch);
                } else {
                    cr_assert_eq(nxr__sgemm_plan_init(&job.plan, isas[ii], &x.g, 1), 0);
                    nxr__sgemm_chunk(&job, 0, nxr__sgemm_plan_tiles(&job.plan), 0);
                }
                float *plain = malloc(x.c_floats * sizeof(float));
                memcpy(plain, x.c, x.c_floats * sizeof(float));
                memcpy(x.c, x.c0, x.c_floats * sizeof(float));
                /* Packed: rows are the transposed call on the copy; panels
                 * ride in the plan, and take the small path to 64 rows where
                 * unpacked W takes it to 16 (17 x 70, 40 x 100: the tile
                 * loop unpacked), with the same bits. */
                struct nxr_sgemm_args pg = x.g;
                pg.b = packed;
                pg.trans_b = !view.panels;
                pg.ldb = view.panels ? n : view.ld;
                if (nxr__small_plan_init(&sp, isas[ii], &pg, view.panels ? &view : NULL, NULL)) {
                    cr_assert(small || view.panels,
                              "packed rows took the small path where unpacked did not");
                    isas[ii]->sgemm_small(&sp, 0, sp.units, scratch);
                } else {
                    cr_assert(!small);
                    cr_assert_eq(nxr__sgemm_plan_init(&job.plan, isas[ii], &pg, 1), 0);
                    job.plan.packed = view.panels ? &view : NULL;
                    nxr__sgemm_chunk(&job, 0, nxr__sgemm_plan_tiles(&job.plan), 0);
                }
                cr_assert_eq(memcmp(plain, x.c, x.c_floats * sizeof(float)), 0,
                             "%s m %zu n %zu k %zu tb %d: packed differs", isas[ii]->name, m, n,
                             k, t >> 1);
                check_ref(&x, isas[ii]->name);
                free(plain);
                free(scratch);
                free(packed);
                mats_free(&x);
            }
}
