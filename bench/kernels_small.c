/*
 * bench/kernels, the small shapes (see kernels_small.h). Method as the rest
 * of bench/kernels: contenders alternate within each round, families
 * (nxr, OpenMP, OpenBLAS) settle between them, a turn is a burst of calls
 * timed together, figures are medians over rounds, ratios are of medians
 * of the same run.
 */
#include "bench/kernels_small.h"

#include <cblas.h>
#include <errno.h>
#include <omp.h>
#include <string.h>

#include "bench/kernels_peers.h"
#include "bench/kernels_util.h"
#include "bench/read_limit.h"

/* ---- GEMV ---------------------------------------------------------------- */

enum gemv_contender {
    G_N1,          /* nxr_sgemm m x 1 */
    G_M1T,         /* nxr_sgemm 1 x n, trans_b */
    G_M1T_PACKED,  /* nxr_sgemm_packed, W packed transposed */
    G_M1,          /* nxr_sgemm 1 x n, W k x n */
    G_M1_PACKED,   /* nxr_sgemm_packed, W in panels */
    G_READ,        /* the sum of W on nxr's threads */
    G_OMP_ROWS,    /* OpenMP rows of dot products: y = W x */
    G_OMP_COLS,    /* OpenMP columns: y = x^T W */
    G_OB_N,        /* cblas_sgemv NoTrans: y = W x */
    G_OB_T,        /* cblas_sgemv Trans: y = W^T x, i.e. x^T W */
    G_COUNT
};

static enum family gemv_family(int c)
{
    return c <= G_READ ? FAM_NXR : c <= G_OMP_COLS ? FAM_OMP : FAM_OPENBLAS;
}

struct gemv_setup {
    struct rt *nat;
    size_t rows, k; /* W is rows x k, row-major (as m1: k = rows, n = k) */
    const float *w, *x;
    float *y;
    nxr_weights_t *packed_t, *packed_p;
    int threads;
    struct read_limit limit; /* W's bytes (bench/read_limit.h) */
};

static int gemv_call(struct gemv_setup *s, int c)
{
    nxr_ctx_t *ctx = s->nat->ctx;
    switch (c) {
    case G_N1: {
        struct nxr_sgemm_args g = {.m = s->rows, .n = 1, .k = s->k, .alpha = 1, .a = s->w,
                              .lda = s->k, .b = s->x, .ldb = 1, .c = s->y, .ldc = 1};
        return nxr_sgemm(ctx, &g);
    }
    case G_M1T: {
        struct nxr_sgemm_args g = {.trans_b = true, .m = 1, .n = s->rows, .k = s->k, .alpha = 1,
                              .a = s->x, .lda = s->k, .b = s->w, .ldb = s->k, .c = s->y,
                              .ldc = s->rows};
        return nxr_sgemm(ctx, &g);
    }
    case G_M1: {
        struct nxr_sgemm_args g = {.m = 1, .n = s->k, .k = s->rows, .alpha = 1, .a = s->x,
                              .lda = s->rows, .b = s->w, .ldb = s->k, .c = s->y, .ldc = s->k};
        return nxr_sgemm(ctx, &g);
    }
    case G_M1T_PACKED:
    case G_M1_PACKED: {
        const bool t = c == G_M1T_PACKED;
        struct nxr_sgemm_packed_args g = {.m = 1, .alpha = 1, .a = s->x, .lda = t ? s->k : s->rows,
                                     .w = t ? s->packed_t : s->packed_p, .c = s->y,
                                     .ldc = t ? s->rows : s->k};
        return nxr_sgemm_packed(ctx, &g, NULL);
    }
    case G_READ:
        return read_limit_run(ctx, &s->limit);
    case G_OMP_ROWS:
        peer_omp_gemv_rows(s->rows, s->k, s->w, s->x, s->y, s->threads);
        return 0;
    case G_OMP_COLS:
        peer_omp_gemv_cols(s->rows, s->k, s->w, s->x, s->y, s->threads);
        return 0;
    case G_OB_N:
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)s->rows, (int)s->k, 1.0f, s->w, (int)s->k,
                    s->x, 1, 0.0f, s->y, 1);
        return 0;
    case G_OB_T:
        cblas_sgemv(CblasRowMajor, CblasTrans, (int)s->rows, (int)s->k, 1.0f, s->w, (int)s->k,
                    s->x, 1, 0.0f, s->y, 1);
        return 0;
    }
    return -1;
}

static void gemv_size(struct small_report *rep, struct rt *nat, size_t mib, size_t rows,
                      size_t k, int reps)
{
    struct gemv_setup s = {.nat = nat, .rows = rows, .k = k, .threads = (int)rep->threads};
    float *w = alloc_floats(rows * k), *x = alloc_floats(rows > k ? rows : k),
          *y = alloc_floats(rows > k ? rows : k);
#pragma omp parallel for schedule(static) num_threads(s.threads)
    for (size_t i = 0; i < rows * k; i++)
        w[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < (rows > k ? rows : k); i++)
        x[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    s.w = w;
    s.x = x;
    s.y = y;
    if (read_limit_add(&s.limit, w, rows * k * sizeof(float)) != 0)
        die("the read's bytes", -ENOMEM);
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.w = w;
    d.trans = true; /* op(W) = W^T: k x rows */
    d.k = k;
    d.n = rows;
    d.ldw = k;
    int rc = nxr_weights_create(nat->rt, &d, &s.packed_t);
    if (rc != 0)
        die("weights (transposed)", rc);
    d.trans = false; /* op(W) = W: rows x k, as m1's k x n */
    d.k = rows;
    d.n = k;
    rc = nxr_weights_create(nat->rt, &d, &s.packed_p);
    if (rc != 0)
        die("weights (panels)", rc);
    /* A turn's calls back to back: at least 256 MiB of W below 512 MiB.
     * The limit is the best of reads that follow reads (read_limit.h); a
     * turn of one 64 MiB call (about 1.3 ms) instead timed the first call
     * after a settle, whose threads were parked and whose cores idle: every
     * layout, OpenBLAS's and the OpenMP loop's too, read at 0.55-0.71 of
     * the limit that way and at 0.89-1.03 in turns of four (two runs,
     * alternated with the old binary). That start is the per-call row's
     * subject, not a GEMV's streaming rate. 512 MiB calls (10 ms) stay
     * single. At 64 MiB the read's best round can still be partly served
     * by L3 (one run: 78 GB/s at 64 MiB, 46 at 512, every contender
     * 42-52 at 64): read /read there against the 512 MiB row. */
    const int burst = mib >= 512 ? 1 : mib >= 64 ? 4 : (int)(64 / mib);
    double *t[G_COUNT];
    for (int c = 0; c < G_COUNT; c++) {
        t[c] = calloc((size_t)reps, sizeof(double));
        settle(gemv_family(c));
        if ((rc = gemv_call(&s, c)) != 0) /* warm-up */
            die("gemv warm-up", rc);
    }
    for (int r = 0; r < reps; r++) {
        /* Families in a fixed order (one settle each), contenders inside a
         * family in an order that flips every round. */
        for (int i = 0; i < G_COUNT; i++) {
            int c = i;
            const enum family f = gemv_family(i);
            if (r % 2) { /* reverse within the family */
                int lo = i, hi = i;
                while (lo > 0 && gemv_family(lo - 1) == f)
                    lo--;
                while (hi + 1 < G_COUNT && gemv_family(hi + 1) == f)
                    hi++;
                c = lo + hi - i;
            }
            settle(f);
            double t0 = bench_now();
            for (int b = 0; b < burst; b++)
                if ((rc = gemv_call(&s, c)) != 0)
                    die("gemv", rc);
            t[c][r] = (bench_now() - t0) / burst;
        }
    }
    /* The read: its best round, an upper bound (bench/read_limit.h); the
     * others: medians. */
    for (int r = 1; r < reps; r++)
        t[G_READ][0] = t[G_READ][r] < t[G_READ][0] ? t[G_READ][r] : t[G_READ][0];
    double med[G_COUNT];
    for (int c = 0; c < G_COUNT; c++) {
        med[c] = (double)rows * (double)k * sizeof(float) /
                 (c == G_READ ? t[c][0] : bench_median(t[c], reps)) * 1e-9;
        free(t[c]);
    }
    static const struct {
        const char *shape;
        bool trans, packed;
        int nxr, ob, omp;
    } rows_out[] = {
        {"n1", false, false, G_N1, G_OB_N, G_OMP_ROWS},
        {"m1_trans", true, false, G_M1T, G_OB_N, G_OMP_ROWS},
        {"m1_trans", true, true, G_M1T_PACKED, G_OB_N, G_OMP_ROWS},
        {"m1", false, false, G_M1, G_OB_T, G_OMP_COLS},
        {"m1", false, true, G_M1_PACKED, G_OB_T, G_OMP_COLS},
    };
    for (size_t i = 0; i < sizeof rows_out / sizeof rows_out[0]; i++)
        rep->gemv[rep->ngemv++] = (struct gemv_row){
            .mib = mib, .shape = rows_out[i].shape, .trans = rows_out[i].trans,
            .packed = rows_out[i].packed, .nxr = med[rows_out[i].nxr],
            .openblas = med[rows_out[i].ob], .omp_loop = med[rows_out[i].omp],
            .read = med[G_READ]};
    nxr_weights_destroy(s.packed_t);
    nxr_weights_destroy(s.packed_p);
    read_limit_free(&s.limit);
    free(w);
    free(x);
    free(y);
}

/* ---- small-batch GEMM ------------------------------------------------------- */

enum gemm_contender { S_NXR, S_NXR_PACKED, S_OB, S_COUNT };

static void gemm_shape(struct small_report *rep, struct rt *nat, size_t m, size_t k, size_t n,
                       int reps)
{
    float *a = alloc_floats(m * k), *w = alloc_floats(k * n), *c = alloc_floats(m * n);
    for (size_t i = 0; i < m * k; i++)
        a[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    for (size_t i = 0; i < k * n; i++)
        w[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.w = w;
    d.k = k;
    d.n = n;
    d.ldw = n;
    nxr_weights_t *pw;
    int rc = nxr_weights_create(nat->rt, &d, &pw);
    if (rc != 0)
        die("weights", rc);
    struct nxr_sgemm_args g = {.m = m, .n = n, .k = k, .alpha = 1, .a = a, .lda = k, .b = w,
                          .ldb = n, .c = c, .ldc = n};
    struct nxr_sgemm_packed_args pg = {.m = m, .alpha = 1, .a = a, .lda = k, .w = pw, .c = c,
                                  .ldc = n};
    /* About 8 MiB of W per turn. */
    const size_t wbytes = k * n * sizeof(float);
    const int burst = wbytes >= ((size_t)8 << 20) ? 1 : (int)(((size_t)8 << 20) / wbytes);
    double *t[S_COUNT];
    for (int i = 0; i < S_COUNT; i++)
        t[i] = calloc((size_t)reps, sizeof(double));
    for (int r = -1; r < reps; r++) { /* round -1: warm-up */
        const int order[S_COUNT] = {r % 2 ? S_NXR_PACKED : S_NXR, r % 2 ? S_NXR : S_NXR_PACKED,
                                    S_OB};
        for (int i = 0; i < S_COUNT; i++) {
            const int ct = order[i];
            settle(ct == S_OB ? FAM_OPENBLAS : FAM_NXR);
            double t0 = bench_now();
            for (int b = 0; b < burst; b++) {
                if (ct == S_NXR)
                    rc = nxr_sgemm(nat->ctx, &g);
                else if (ct == S_NXR_PACKED)
                    rc = nxr_sgemm_packed(nat->ctx, &pg, NULL);
                else
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k,
                                1.0f, a, (int)k, w, (int)n, 0.0f, c, (int)n);
                if (rc != 0)
                    die("small gemm", rc);
            }
            if (r >= 0)
                t[ct][r] = (bench_now() - t0) / burst;
        }
    }
    const double flop = 2.0 * (double)m * (double)k * (double)n;
    double med[S_COUNT];
    for (int i = 0; i < S_COUNT; i++) {
        med[i] = flop / bench_median(t[i], reps) * 1e-9;
        free(t[i]);
    }
    for (int p = 0; p < 2; p++)
        rep->gemm[rep->ngemm++] = (struct small_gemm_row){
            .m = m, .k = k, .n = n, .packed = p == 1, .nxr = med[p ? S_NXR_PACKED : S_NXR],
            .openblas = med[S_OB]};
    nxr_weights_destroy(pw);
    free(a);
    free(w);
    free(c);
}

size_t small_only_mib; /* kernels.c's --gemv-mib: that GEMV size alone */

void small_section(struct small_report *rep, int reps)
{
    memset(rep, 0, sizeof *rep);
    struct rt nat;
    rt_open(&nat, NULL, NXR_PROVIDER_POLICY_DEFAULT);
    rep->threads = nxr_ctx_budget(nat.ctx);
    openblas_set_num_threads((int)rep->threads);
    omp_set_dynamic(0);
    if (small_only_mib != 0) {
        const size_t k = small_only_mib >= 64 ? 16384 : 1024;
        gemv_size(rep, &nat, small_only_mib, small_only_mib * ((size_t)1 << 18) / k, k, reps);
        rt_close(&nat);
        return;
    }
    gemv_size(rep, &nat, 4, 1024, 1024, reps);
    gemv_size(rep, &nat, 64, 4096, 4096, reps);
    gemv_size(rep, &nat, 512, 8192, 16384, reps / 2 > 4 ? reps / 2 : 4);
    static const size_t kn[][2] = {{256, 1024}, {1024, 256}, {4096, 4096}};
    static const size_t ms[] = {1, 4, 16};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++)
            gemm_shape(rep, &nat, ms[j], kn[i][0], kn[i][1], reps);
    rt_close(&nat);
}

/* ---- output -------------------------------------------------------------------- */

void small_print_text(const struct small_report *rep, double native_2048)
{
    printf("\nGEMV y = W x, %u threads, GB/s of W (medians): nxr against OpenBLAS sgemv, an "
           "OpenMP loop and the best streaming read of W (bench/read_limit.h)\n",
           rep->threads);
    printf("%5s  %-9s %-6s  %8s  %8s  %8s  %8s  %7s  %7s  %7s\n", "MiB", "shape", "packed",
           "nxr", "OpenBLAS", "OMP loop", "read", "/read", "/OB", "/OMP");
    for (size_t i = 0; i < rep->ngemv; i++) {
        const struct gemv_row *g = &rep->gemv[i];
        printf("%5zu  %-9s %-6s  %8.1f  %8.1f  %8.1f  %8.1f  %7.3f  %7.3f  %7.3f\n", g->mib,
               g->shape, g->packed ? "yes" : "no", g->nxr, g->openblas, g->omp_loop, g->read,
               g->nxr / g->read, g->nxr / g->openblas, g->nxr / g->omp_loop);
    }
    /* --only-small measures no peak: the column then says so instead of inf. */
    if (native_2048 > 0)
        printf("\nsmall-batch GEMM C = X W (W k x n), GFLOP/s (medians); native 2048 peak %.1f\n",
               native_2048);
    else
        printf("\nsmall-batch GEMM C = X W (W k x n), GFLOP/s (medians); no native 2048 peak "
               "measured (--only-small)\n");
    printf("%3s  %5s  %5s  %-6s  %8s  %8s  %7s  %9s\n", "m", "k", "n", "packed", "nxr",
           "OpenBLAS", "/OB", "/peak2048");
    for (size_t i = 0; i < rep->ngemm; i++) {
        const struct small_gemm_row *g = &rep->gemm[i];
        printf("%3zu  %5zu  %5zu  %-6s  %8.1f  %8.1f  %7.3f  ", g->m, g->k, g->n,
               g->packed ? "yes" : "no", g->nxr, g->openblas, g->nxr / g->openblas);
        if (native_2048 > 0)
            printf("%9.3f\n", g->nxr / native_2048);
        else
            printf("%9s\n", "-");
    }
}

void small_print_json(const struct small_report *rep)
{
    printf(",\"gemv\":[");
    for (size_t i = 0; i < rep->ngemv; i++) {
        const struct gemv_row *g = &rep->gemv[i];
        printf("%s{\"mib\":%zu,\"shape\":\"%s\",\"trans\":%s,\"packed\":%s,\"nxr_gbs\":%.2f,"
               "\"openblas_gbs\":%.2f,\"omp_loop_gbs\":%.2f,\"read_gbs\":%.2f}",
               i ? "," : "", g->mib, g->shape, g->trans ? "true" : "false",
               g->packed ? "true" : "false", g->nxr, g->openblas, g->omp_loop, g->read);
    }
    printf("],\"small_gemm\":[");
    for (size_t i = 0; i < rep->ngemm; i++) {
        const struct small_gemm_row *g = &rep->gemm[i];
        printf("%s{\"m\":%zu,\"k\":%zu,\"n\":%zu,\"packed\":%s,\"nxr_gflops\":%.2f,"
               "\"openblas_gflops\":%.2f}",
               i ? "," : "", g->m, g->k, g->n, g->packed ? "true" : "false", g->nxr,
               g->openblas);
    }
    printf("]");
}
