/*
 * bench/kernels, the weight formats (see kernels_formats.h). Method as the
 * rest of bench/kernels: every contender is nxr (no settle between them),
 * the order flips every round, a turn is a burst of calls timed together,
 * figures are medians over rounds and ratios are of medians of one run.
 */
#include "bench/kernels_formats.h"

#include <stdio.h>
#include <string.h>

#include "bench/read_limit.h"
#include "bench/kernels_util.h"
#include "runtime/nxr_weights.h"

static const struct {
    const char *name;
    enum nxr_weights_format format;
} formats[] = {
    {"f32", NXR_WEIGHTS_F32},
    {"bf16", NXR_WEIGHTS_BF16},
    {"q8", NXR_WEIGHTS_Q8_BLOCK32},
};
#define NFORMATS 3
static const size_t ms[] = {1, 4, 16};
#define NMS   3
#define NCONT (NFORMATS * NMS + 1) /* + the read */

struct fsetup {
    struct rt *nat;
    size_t rows, k;
    const float *w, *x;
    float *y;
    nxr_weights_t *packed[NFORMATS];
    struct read_limit limit; /* the f32 packed copy, as its GEMV streams it */
};

/* Contender c: format c / NMS at m = ms[c % NMS], or the read (the last). */
static int fcall(struct fsetup *s, int c)
{
    if (c == NCONT - 1)
        return read_limit_run(s->nat->ctx, &s->limit);
    struct nxr_sgemm_packed_args g = {.m = ms[c % NMS],
                                      .alpha = 1,
                                      .a = s->x,
                                      .lda = s->k,
                                      .w = s->packed[c / NMS],
                                      .c = s->y,
                                      .ldc = s->rows};
    return nxr_sgemm_packed(s->nat->ctx, &g, NULL);
}

static size_t copy_bytes(const struct fsetup *s, int f)
{
    const void *data;
    size_t bytes = 0;
    int rc = nxr_weights_copy(s->packed[f], nxr_ctx_domain(s->nat->ctx), &data, &bytes);
    if (rc != 0)
        die("weights copy", rc);
    return bytes;
}

void formats_section(struct formats_report *rep, size_t mib, size_t k, int reps)
{
    memset(rep, 0, sizeof *rep);
    struct rt nat;
    rt_open(&nat, NULL, NXR_PROVIDER_POLICY_DEFAULT);
    rep->threads = nxr_ctx_budget(nat.ctx);
    if (k == 0)
        k = mib >= 64 ? 4096 : 1024;
    const size_t rows = mib * ((size_t)1 << 18) / k;
    rep->mib = mib;
    rep->rows = rows;
    rep->k = k;
    struct fsetup s = {.nat = &nat, .rows = rows, .k = k};
    float *w = alloc_floats(rows * k), *x = alloc_floats(16 * k), *y = alloc_floats(16 * rows);
    for (size_t i = 0; i < rows * k; i++)
        w[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < 16 * k; i++)
        x[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    s.w = w;
    s.x = x;
    s.y = y;
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.w = w;
    d.trans = true; /* op(W) = W^T: each output a row of W, as a decode step's projections */
    d.k = k;
    d.n = rows;
    d.ldw = k;
    for (int f = 0; f < NFORMATS; f++) {
        int rc = nxr_weights_create_format(nat.rt, &d, formats[f].format, &s.packed[f]);
        if (rc != 0)
            die("weights", rc);
    }
    const void *f32_copy;
    size_t f32_bytes;
    int rc = nxr_weights_copy(s.packed[0], nxr_ctx_domain(nat.ctx), &f32_copy, &f32_bytes);
    if (rc != 0 || (rc = read_limit_add(&s.limit, f32_copy, f32_bytes)) != 0)
        die("the read's bytes", rc);
    /* About 64 MiB of f32 W per turn. */
    const int burst = mib >= 64 ? 1 : (int)(64 / mib);
    double *t[NCONT];
    for (int c = 0; c < NCONT; c++)
        t[c] = calloc((size_t)reps, sizeof(double));
    settle(FAM_NXR);
    for (int r = -1; r < reps; r++) { /* round -1: warm-up */
        for (int i = 0; i < NCONT; i++) {
            const int c = r % 2 ? NCONT - 1 - i : i;
            double t0 = bench_now();
            for (int b = 0; b < burst; b++) {
                int rc = fcall(&s, c);
                if (rc != 0)
                    die("formats", rc);
            }
            if (r >= 0)
                t[c][r] = (bench_now() - t0) / burst;
        }
    }
    /* The read: its best round, an upper bound (bench/read_limit.h). */
    double best_read = t[NCONT - 1][0];
    for (int r = 1; r < reps; r++)
        best_read = t[NCONT - 1][r] < best_read ? t[NCONT - 1][r] : best_read;
    double med[NCONT];
    for (int c = 0; c < NCONT; c++) {
        med[c] = bench_median(t[c], reps);
        free(t[c]);
    }
    rep->read_gbs = (double)s.limit.bytes / best_read * 1e-9;
    for (int f = 0; f < NFORMATS; f++)
        for (int mi = 0; mi < NMS; mi++) {
            const int c = f * NMS + mi;
            const size_t bytes = copy_bytes(&s, f);
            const double gbs = (double)bytes / med[c] * 1e-9;
            rep->row[rep->nrow++] = (struct format_row){.format = formats[f].name,
                                                        .m = ms[mi],
                                                        .bytes = bytes,
                                                        .gbs = gbs,
                                                        .vs_read = gbs / rep->read_gbs,
                                                        .vs_f32 = med[mi] / med[c]};
        }
    read_limit_free(&s.limit);
    for (int f = 0; f < NFORMATS; f++)
        nxr_weights_destroy(s.packed[f]);
    free(w);
    free(x);
    free(y);
    rt_close(&nat);
}

void formats_print_text(const struct formats_report *rep)
{
    printf("\nweight formats: nxr_sgemm_packed, op(W) = W^T of %zu x %zu (%zu MiB of f32), %u "
           "threads; GB/s of each packed copy (medians) against the best streaming read of the "
           "f32 packed copy in the same run (%.1f GB/s)\n",
           rep->k, rep->rows, rep->mib, rep->threads, rep->read_gbs);
    printf("%-6s  %3s  %10s  %8s  %7s  %7s\n", "format", "m", "bytes", "GB/s", "/read", "/f32");
    for (size_t i = 0; i < rep->nrow; i++) {
        const struct format_row *r = &rep->row[i];
        printf("%-6s  %3zu  %10zu  %8.1f  %7.3f  %7.3f\n", r->format, r->m, r->bytes, r->gbs,
               r->vs_read, r->vs_f32);
    }
}

void formats_print_json(const struct formats_report *rep)
{
    printf(",\"formats\":{\"mib\":%zu,\"k\":%zu,\"n\":%zu,\"read_gbs\":%.2f,\"rows\":[", rep->mib,
           rep->k, rep->rows, rep->read_gbs);
    for (size_t i = 0; i < rep->nrow; i++) {
        const struct format_row *r = &rep->row[i];
        printf("%s{\"format\":\"%s\",\"m\":%zu,\"bytes\":%zu,\"gbs\":%.2f,\"vs_read\":%.4f,"
               "\"vs_f32\":%.4f}",
               i ? "," : "", r->format, r->m, r->bytes, r->gbs, r->vs_read, r->vs_f32);
    }
    printf("]}");
}
