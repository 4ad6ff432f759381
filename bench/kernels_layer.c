/*
 * bench/kernels, the service's own products (see kernels_layer.h). Method
 * as the rest of bench/kernels: the contenders (nxr_sgemm_packed, the read
 * of the same copies, cblas_sgemm) alternate within each round, the order
 * flipping round by round, families settling between them; a turn is one
 * pass over every copy (each call a copy the previous calls did not touch,
 * so W comes from memory as in a decode step); figures are medians over
 * rounds.
 */
#include "bench/kernels_layer.h"

#include <cblas.h>
#include <errno.h>
#include <string.h>

#include "bench/kernels_util.h"
#include "bench/read_limit.h"
#include "runtime/nxr_weights.h"

/* The copies of one shape: at least this much W in all, past the LLC. */
#define LAYER_MIB 96

enum layer_contender { L_NXR, L_READ, L_OB, L_COUNT };

static enum family layer_family(int c)
{
    return c == L_OB ? FAM_OPENBLAS : FAM_NXR;
}

struct layer_shape {
    struct rt *nat;
    size_t k, n, copies;
    float **w;          /* the unpacked copies (OpenBLAS's) */
    nxr_weights_t **pw; /* the packed copies (nxr's) */
    struct read_limit limit;
};

static void shape_open(struct layer_shape *s, struct rt *nat, size_t k, size_t n, size_t copies)
{
    *s = (struct layer_shape){.nat = nat, .k = k, .n = n, .copies = copies};
    s->w = calloc(copies, sizeof *s->w);
    s->pw = calloc(copies, sizeof *s->pw);
    if (s->w == NULL || s->pw == NULL)
        die("layer copies", -ENOMEM);
    const nxr_domain_t *dom = nxr_ctx_domain(nat->ctx);
    const int id = nxr_domain_id(dom);
    for (size_t c = 0; c < copies; c++) {
        s->w[c] = alloc_floats(k * n);
        for (size_t i = 0; i < k * n; i++)
            s->w[c][i] = (float)((i * 7 + c) % 13) / 13.0f - 0.5f;
        struct nxr_weights_desc d;
        nxr_weights_desc_init(&d);
        d.w = s->w[c];
        d.k = k;
        d.n = n;
        d.ldw = n;
        d.domain_ids = &id;
        d.domain_count = 1;
        int rc = nxr_weights_create(nat->rt, &d, &s->pw[c]);
        if (rc != 0)
            die("layer weights", rc);
        const void *data;
        size_t bytes;
        rc = nxr_weights_copy(s->pw[c], dom, &data, &bytes);
        if (rc != 0)
            die("layer weights' copy", rc);
        if (read_limit_add(&s->limit, data, bytes) != 0)
            die("layer read", -ENOMEM);
    }
}

static void shape_close(struct layer_shape *s)
{
    for (size_t c = 0; c < s->copies; c++) {
        nxr_weights_destroy(s->pw[c]);
        free(s->w[c]);
    }
    free(s->w);
    free(s->pw);
    read_limit_free(&s->limit);
}

/* One turn: every copy once (the read: all of them in one read). */
static void turn(struct layer_shape *s, int c, size_t m, const float *a, float *y)
{
    int rc = 0;
    if (c == L_READ) {
        rc = read_limit_run(s->nat->ctx, &s->limit);
    } else {
        for (size_t i = 0; i < s->copies && rc == 0; i++) {
            if (c == L_NXR) {
                const struct nxr_sgemm_packed_args g = {
                    .m = m, .alpha = 1, .a = a, .lda = s->k, .w = s->pw[i], .c = y, .ldc = s->n};
                rc = nxr_sgemm_packed(s->nat->ctx, &g, NULL);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)s->n, (int)s->k,
                            1.0f, a, (int)s->k, s->w[i], (int)s->n, 0.0f, y, (int)s->n);
            }
        }
    }
    if (rc != 0)
        die("layer product", rc);
}

static void shape_rows(struct layer_report *rep, struct layer_shape *s, const size_t *ms, size_t nm,
                       int reps)
{
    const size_t max_m = ms[nm - 1];
    float *a = alloc_floats(max_m * s->k), *y = alloc_floats(max_m * s->n);
    for (size_t i = 0; i < max_m * s->k; i++)
        a[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    const double bytes = (double)s->copies * (double)(s->k * s->n * sizeof(float));
    double *t[L_COUNT];
    for (int i = 0; i < L_COUNT; i++)
        if ((t[i] = calloc((size_t)reps, sizeof(double))) == NULL)
            die("layer times", -ENOMEM);
    for (size_t j = 0; j < nm; j++) {
        for (int r = -1; r < reps; r++) { /* round -1: warm-up */
            const int order[L_COUNT] = {r % 2 ? L_READ : L_NXR, r % 2 ? L_NXR : L_READ, L_OB};
            for (int i = 0; i < L_COUNT; i++) {
                settle(layer_family(order[i]));
                const double t0 = bench_now();
                turn(s, order[i], ms[j], a, y);
                if (r >= 0)
                    t[order[i]][r] = bench_now() - t0;
            }
        }
        struct layer_row *row = &rep->row[rep->nrow++];
        *row = (struct layer_row){.m = ms[j], .k = s->k, .n = s->n};
        row->nxr_gbs = bytes / bench_median(t[L_NXR], reps) * 1e-9;
        row->read_gbs = bytes / bench_median(t[L_READ], reps) * 1e-9;
        row->openblas_gbs = bytes / bench_median(t[L_OB], reps) * 1e-9;
        row->nxr_vs_read = row->nxr_gbs / row->read_gbs;
        row->nxr_vs_openblas = row->nxr_gbs / row->openblas_gbs;
    }
    for (int i = 0; i < L_COUNT; i++)
        free(t[i]);
    free(a);
    free(y);
}

void layer_section(struct layer_report *rep, bool short_run, int reps)
{
    memset(rep, 0, sizeof *rep);
    struct rt nat;
    rt_open(&nat, NULL, NXR_PROVIDER_POLICY_DEFAULT);
    rep->threads = nxr_ctx_budget(nat.ctx);
    openblas_set_num_threads((int)rep->threads);
    static const size_t kn[][2] = {{768, 2048}, {2048, 768}};
    static const size_t ms[] = {1, 4, 8, 12, 16, 20}, ms_short[] = {1, 16};
    const size_t shapes = short_run ? 1 : 2;
    for (size_t i = 0; i < shapes; i++) {
        const size_t one = kn[i][0] * kn[i][1] * sizeof(float);
        const size_t copies = short_run ? 2 : ((size_t)LAYER_MIB << 20) / one + 1;
        rep->copies_mib = copies * one >> 20;
        struct layer_shape s;
        shape_open(&s, &nat, kn[i][0], kn[i][1], copies);
        shape_rows(rep, &s, short_run ? ms_short : ms,
                   short_run ? sizeof ms_short / sizeof ms_short[0] : sizeof ms / sizeof ms[0],
                   reps);
        shape_close(&s);
    }
    rt_close(&nat);
}

void layer_print_text(const struct layer_report *rep)
{
    printf("\nthe service's products: packed f32 W (column panels) from memory, %zu MiB of "
           "copies, %u threads, GB/s of W (medians): nxr_sgemm_packed against the read of the "
           "same copies and cblas_sgemm\n",
           rep->copies_mib, rep->threads);
    printf("%3s  %5s  %5s  %8s  %8s  %8s  %7s  %7s\n", "m", "k", "n", "nxr", "read", "OpenBLAS",
           "/read", "/OB");
    for (size_t i = 0; i < rep->nrow; i++) {
        const struct layer_row *r = &rep->row[i];
        printf("%3zu  %5zu  %5zu  %8.1f  %8.1f  %8.1f  %7.3f  %7.3f\n", r->m, r->k, r->n,
               r->nxr_gbs, r->read_gbs, r->openblas_gbs, r->nxr_vs_read, r->nxr_vs_openblas);
    }
}

void layer_print_json(const struct layer_report *rep)
{
    printf(",\"layer_products\":{\"threads\":%u,\"copies_mib\":%zu,\"rows\":[", rep->threads,
           rep->copies_mib);
    for (size_t i = 0; i < rep->nrow; i++) {
        const struct layer_row *r = &rep->row[i];
        printf("%s{\"m\":%zu,\"k\":%zu,\"n\":%zu,\"nxr_gbs\":%.2f,\"read_gbs\":%.2f,"
               "\"openblas_gbs\":%.2f,\"nxr_vs_read\":%.4f,\"nxr_vs_openblas\":%.4f}",
               i ? "," : "", r->m, r->k, r->n, r->nxr_gbs, r->read_gbs, r->openblas_gbs,
               r->nxr_vs_read, r->nxr_vs_openblas);
    }
    printf("]}");
}
