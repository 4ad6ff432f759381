/*
 * bench/kernels, the per-call cost (see kernels_percall.h). One context on
 * the first domain. A contender's turn is a burst of BURST calls back to
 * back, as a decode step makes them; the two contenders alternate round by
 * round and the order flips every round (kernels.c's method). The row loop
 * is decode's OpenMP peer's matmul (one dot product per output, W stored
 * out x in, vectorised: kernels_peers.c), run through nxr_parallel_for
 * with the static schedule. A third row, the same loop with an empty body,
 * is the region's own cost: what a call costs beyond it is the call's.
 */
#include "bench/kernels_percall.h"

#include <stdio.h>
#include <string.h>

#include "bench/kernels_peers.h"
#include "bench/kernels_util.h"
#include "runtime/nxr_weights.h"

/* Calls per turn: at these shapes a call is tens of microseconds, so a
 * turn is a few milliseconds (long against the clock, short against the
 * machine's load swings). */
#define BURST 200

struct rows_arg {
    const float *w, *x;
    float *y;
    size_t k;
};

static void dot_rows(void *p, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    const struct rows_arg *a = p;
    peer_gemv_rows_range(begin, end, a->k, a->w, a->x, a->y);
}

static void empty_rows(void *p, size_t begin, size_t end, unsigned worker)
{
    (void)p, (void)begin, (void)end, (void)worker;
}

static double burst_packed(nxr_ctx_t *ctx, const struct nxr_sgemm_packed_args *g)
{
    const double t0 = bench_now();
    for (int i = 0; i < BURST; i++) {
        int rc = nxr_sgemm_packed(ctx, g, NULL);
        if (rc != 0)
            die("nxr_sgemm_packed", rc);
    }
    return (bench_now() - t0) / BURST;
}

static double burst_loop(nxr_ctx_t *ctx, nxr_for_fn fn, struct rows_arg *a, size_t n)
{
    const double t0 = bench_now();
    for (int i = 0; i < BURST; i++) {
        int rc = nxr_parallel_for(ctx, 0, n, 0, fn, a);
        if (rc != 0)
            die("nxr_parallel_for", rc);
    }
    return (bench_now() - t0) / BURST;
}

static void one_shape(struct rt *r, size_t n, size_t k, int reps, struct percall_row *row)
{
    float *w = alloc_floats(n * k), *x = alloc_floats(k), *y = alloc_floats(n);
    for (size_t i = 0; i < n * k; i++)
        w[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < k; i++)
        x[i] = (float)(i % 7) / 7.0f;
    /* Packed as docs/guide.md says to pack f32 weights: from W^T (k x n),
     * untransposed, into panels. */
    float *wt = alloc_floats(n * k);
    for (size_t o = 0; o < n; o++)
        for (size_t i = 0; i < k; i++)
            wt[i * n + o] = w[o * k + i];
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.w = wt;
    d.k = k;
    d.n = n;
    d.ldw = n;
    nxr_weights_t *pw;
    int rc = nxr_weights_create(r->rt, &d, &pw);
    free(wt);
    if (rc != 0)
        die("nxr_weights_create", rc);
    struct nxr_sgemm_packed_args g = {
        .m = 1, .alpha = 1.0f, .a = x, .lda = k, .w = pw, .beta = 0.0f, .c = y, .ldc = n};
    struct rows_arg a = {.w = w, .x = x, .y = y, .k = k};
    double *tp = calloc((size_t)reps, sizeof(double)), *tl = calloc((size_t)reps, sizeof(double));
    double *te = calloc((size_t)reps, sizeof(double));
    if (tp == NULL || tl == NULL || te == NULL)
        die("calloc", -12);
    burst_packed(r->ctx, &g); /* warm: pool scratch, pages, caches */
    burst_loop(r->ctx, dot_rows, &a, n);
    for (int i = 0; i < reps; i++) {
        if (i % 2 == 0) {
            tp[i] = burst_packed(r->ctx, &g);
            tl[i] = burst_loop(r->ctx, dot_rows, &a, n);
        } else {
            tl[i] = burst_loop(r->ctx, dot_rows, &a, n);
            tp[i] = burst_packed(r->ctx, &g);
        }
        te[i] = burst_loop(r->ctx, empty_rows, &a, n);
    }
    row->n = n;
    row->k = k;
    row->packed_vs_loop = pair_ratio(tp, tl, reps);
    row->packed_us = 1e6 * bench_median(tp, (size_t)reps);
    row->loop_us = 1e6 * bench_median(tl, (size_t)reps);
    row->region_us = 1e6 * bench_median(te, (size_t)reps);
    free(te);
    free(tp);
    free(tl);
    nxr_weights_destroy(pw);
    free(w);
    free(x);
    free(y);
}

void percall_section(struct percall_report *rep, int reps)
{
    struct rt r;
    rt_open(&r, NULL, NXR_PROVIDER_POLICY_DEFAULT);
    settle(FAM_NXR);
    rep->threads = nxr_ctx_budget(r.ctx);
    one_shape(&r, 288, 288, reps, &rep->rows[0]);
    one_shape(&r, 768, 288, reps, &rep->rows[1]);
    rt_close(&r);
}

void percall_print_text(const struct percall_report *rep)
{
    printf("\nPer-call cost, m = 1, %u threads (bursts of %d calls; medians):\n", rep->threads,
           BURST);
    printf("%-10s  %12s  %12s  %12s  %14s\n", "n x k", "packed us", "row loop us", "packed/loop",
           "empty loop us");
    for (int i = 0; i < 2; i++) {
        const struct percall_row *r = &rep->rows[i];
        char shape[32];
        snprintf(shape, sizeof shape, "%zux%zu", r->n, r->k);
        printf("%-10s  %12.2f  %12.2f  %12.3f  %14.2f\n", shape, r->packed_us, r->loop_us,
               r->packed_vs_loop, r->region_us);
    }
    printf("goal: packed/loop <= 1.2 at 288x288: %s\n",
           rep->rows[0].packed_vs_loop <= 1.2 ? "met" : "MISSED");
}

void percall_print_json(const struct percall_report *rep)
{
    printf(",\"percall\":[");
    for (int i = 0; i < 2; i++) {
        const struct percall_row *r = &rep->rows[i];
        printf("%s{\"n\":%zu,\"k\":%zu,\"packed_us\":%.3f,\"loop_us\":%.3f,"
               "\"packed_vs_loop\":%.4f,\"empty_loop_us\":%.3f}",
               i ? "," : "", r->n, r->k, r->packed_us, r->loop_us, r->packed_vs_loop, r->region_us);
    }
    printf("]");
}
