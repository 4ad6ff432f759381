/*
 * Batched GEMM through a context never nests fan-out. The team counts the
 * regions it dispatches to workers and, separately, any dispatched by a
 * thread that was itself running a region body (nxr__team_regions,
 * nxr__team_nested_regions). The native provider picks:
 *  - OUTER (items in parallel, each GEMM sequential) when batch >= threads
 *    and an item is at most 128^3 multiply-adds: exactly one region for the
 *    whole batch;
 *  - INNER otherwise (few or large items): one item after another, each
 *    split over the domain: one region per item, all issued by the caller;
 *  - budget 1, or a call from inside a loop body: no region of its own.
 * In every case no region starts from inside a body, and every item equals
 * a double reference: |C - ref| <= 2 (k + 2) u (|alpha| sum |a b| + |beta c|).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "ctx_support.h"
#include "tests/kernels/ref.h"

TestSuite(kernels_ctx_batch, .timeout = 60);

struct batch {
    size_t m, n, k, count;
    float alpha, beta;
    bool null_operands; /* alpha == 0: A and B are NULL (never read) */
    float *a, *b, *c, *c0;
    struct nxr_sgemm_batch_args args;
};

/* Items with padded strides (ld = cols + 1, one spare float between items). */
static void batch_init(struct batch *bt, size_t m, size_t n, size_t k, size_t count, uint64_t seed)
{
    bt->m = m, bt->n = n, bt->k = k, bt->count = count;
    if (bt->alpha == 0 && bt->beta == 0)
        bt->alpha = 1;
    const size_t sa = m * (k + 1) + 1, sb = k * (n + 1) + 1, sc = m * (n + 1) + 1;
    bt->a = bt->null_operands ? NULL : ref_fill(sa * count, seed, -1, 1);
    bt->b = bt->null_operands ? NULL : ref_fill(sb * count, seed + 1, -1, 1);
    bt->c = ref_fill(sc * count, seed + 2, -1, 1);
    bt->c0 = malloc(sc * count * sizeof(float));
    memcpy(bt->c0, bt->c, sc * count * sizeof(float));
    bt->args = (struct nxr_sgemm_batch_args){
        .gemm = {.m = m,
                 .n = n,
                 .k = k,
                 .alpha = bt->alpha,
                 .a = bt->a,
                 .lda = k + 1,
                 .b = bt->b,
                 .ldb = n + 1,
                 .beta = bt->beta,
                 .c = bt->c,
                 .ldc = n + 1},
        .batch = count,
        .stride_a = sa,
        .stride_b = sb,
        .stride_c = sc,
    };
}

static void batch_check(const struct batch *bt)
{
    const struct nxr_sgemm_batch_args *x = &bt->args;
    for (size_t it = 0; it < bt->count; it++) {
        const float *a = bt->a ? bt->a + it * x->stride_a : NULL;
        const float *b = bt->b ? bt->b + it * x->stride_b : NULL;
        const float *c = bt->c + it * x->stride_c, *c0 = bt->c0 + it * x->stride_c;
        for (size_t i = 0; i < bt->m; i++)
            for (size_t j = 0; j < bt->n; j++) {
                double dot = 0, mag = 0;
                for (size_t p = 0; a != NULL && p < bt->k; p++) {
                    double t = (double)a[i * x->gemm.lda + p] * b[p * x->gemm.ldb + j];
                    dot += t;
                    mag += fabs(t);
                }
                double cij = c0[i * x->gemm.ldc + j];
                double want = bt->alpha * dot + bt->beta * cij;
                double tol = 2.0 * (double)(bt->k + 2) * U_F32 *
                                 (fabs(bt->alpha) * mag + fabs(bt->beta * cij)) +
                             1e-30;
                cr_assert(fabs(c[i * x->gemm.ldc + j] - want) <= tol,
                          "item %zu C[%zu][%zu] = %.9g, want %.9g", it, i, j,
                          c[i * x->gemm.ldc + j], want);
            }
        /* The padding column and the spare float between items stay. */
        for (size_t i = 0; i < bt->m; i++)
            cr_assert_eq(c[i * x->gemm.ldc + bt->n], c0[i * x->gemm.ldc + bt->n]);
    }
}

static void batch_fini(struct batch *bt)
{
    free(bt->a);
    free(bt->b);
    free(bt->c);
    free(bt->c0);
}

static struct ctx_rt R;

static void open_default(int num_threads)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.num_threads = num_threads;
    ctx_rt_open(&R, &o);
    if (num_threads == 0 && nxr_ctx_budget(R.ctx[0]) < 2) {
        ctx_rt_close(&R);
        cr_skip_test("the default domain has one CPU: nothing fans out");
    }
}

/* Runs bt on R.ctx[0]; returns the regions it dispatched, and checks that
 * none was nested. */
static uint64_t run_counted(struct batch *bt)
{
    uint64_t r0 = ctx_regions(R.ctx[0]), n0 = ctx_nested_regions(R.ctx[0]);
    int rc = nxr_sgemm_batch(R.ctx[0], &bt->args);
    cr_assert_eq(rc, 0, "%s", nxr_strerror(rc));
    cr_assert_eq(ctx_nested_regions(R.ctx[0]), n0, "a region started from inside a body");
    batch_check(bt);
    return ctx_regions(R.ctx[0]) - r0;
}

Test(kernels_ctx_batch, outer_many_small_items_use_one_region)
{
    open_default(0);
    struct batch bt = {0};
    batch_init(&bt, 33, 47, 41, 9, 1);
    cr_assert_eq(run_counted(&bt), 1u, "OUTER: one region for the whole batch");
    batch_fini(&bt);
    /* The boundary: items of exactly 128^3 multiply-adds are still OUTER. */
    bt = (struct batch){.alpha = 0.5f, .beta = -1.0f};
    batch_init(&bt, 128, 128, 128, nxr_ctx_budget(R.ctx[0]), 2); /* as many items as threads */
    cr_assert_eq(run_counted(&bt), 1u, "128^3 items: OUTER");
    batch_fini(&bt);
    ctx_rt_close(&R);
}

Test(kernels_ctx_batch, inner_large_items_use_one_region_per_item)
{
    open_default(0);
    struct batch bt = {0};
    /* 160 x 161 x 160 > 128^3 multiply-adds per item. */
    batch_init(&bt, 160, 161, 160, 3, 3);
    cr_assert_eq(run_counted(&bt), 3u, "INNER: one region per item, from the caller");
    batch_fini(&bt);
    ctx_rt_close(&R);
}

Test(kernels_ctx_batch, fewer_items_than_threads_run_inner)
{
    open_default(0);
    struct batch bt = {0};
    batch_init(&bt, 64, 65, 63, 1, 4);
    cr_assert_eq(run_counted(&bt), 1u, "one item, split over the domain");
    batch_fini(&bt);
    ctx_rt_close(&R);
}

/* alpha == 0: A and B are never read and may be NULL, on the INNER path too
 * (items must not offset a NULL operand). */
Test(kernels_ctx_batch, inner_items_with_null_operands)
{
    open_default(0);
    struct batch bt = {.alpha = 0, .beta = 2, .null_operands = true};
    batch_init(&bt, 160, 161, 160, 2, 5);
    cr_assert_eq(run_counted(&bt), 2u);
    batch_fini(&bt);
    ctx_rt_close(&R);
}

Test(kernels_ctx_batch, budget_one_dispatches_no_region)
{
    open_default(1);
    struct batch bt = {0};
    batch_init(&bt, 33, 47, 41, 9, 6);
    cr_assert_eq(run_counted(&bt), 0u);
    batch_fini(&bt);
    bt = (struct batch){0};
    batch_init(&bt, 160, 161, 160, 2, 7);
    cr_assert_eq(run_counted(&bt), 0u);
    batch_fini(&bt);
    ctx_rt_close(&R);
}

/* ---- from inside a loop body ------------------------------------------------------ */

struct nested {
    nxr_ctx_t *ctx[2]; /* a context per participant */
    struct batch bt[2];
    atomic_int rc[2];
};

static void nested_body(void *arg, size_t begin, size_t end, unsigned participant)
{
    struct nested *n = arg;
    for (size_t i = begin; i < end; i++)
        atomic_store(&n->rc[i], nxr_sgemm_batch(n->ctx[participant & 1], &n->bt[i].args));
}

Test(kernels_ctx_batch, called_from_a_loop_body_adds_no_region, .timeout = 30)
{
    open_default(0);
    struct nested n;
    memset(&n, 0, sizeof n);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(nxr_ctx_create(R.rt, nxr_domain_id(nxr_ctx_domain(R.ctx[0])), &n.ctx[i]), 0);
        /* Large items (INNER on a service thread) and small ones (OUTER). */
        if (i == 0)
            batch_init(&n.bt[i], 160, 161, 160, 3, 8);
        else
            batch_init(&n.bt[i], 33, 47, 41, 9, 9);
    }
    uint64_t r0 = ctx_regions(R.ctx[0]);
    cr_assert_eq(nxr_parallel_for(R.ctx[0], 0, 2, 1, nested_body, &n), 0);
    cr_assert_eq(ctx_regions(R.ctx[0]), r0 + 1, "the loop is the only region");
    cr_assert_eq(ctx_nested_regions(R.ctx[0]), 0u);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(atomic_load(&n.rc[i]), 0);
        batch_check(&n.bt[i]);
        batch_fini(&n.bt[i]);
        nxr_ctx_destroy(n.ctx[i]);
    }
    ctx_rt_close(&R);
}
