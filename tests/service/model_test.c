/*
 * The service's model and its pieces, against references written here:
 *  - the forward pass through nxr's kernels equals a double-precision
 *    scalar reference of the same equations (model.h) within 1e-5 per
 *    probability, computed on the calling thread (kernels split over the
 *    domain) and inside a task (kernels in place): the two give the same
 *    bits;
 *  - nearest-rank percentiles on hand-computed samples;
 *  - batch sizes stay in range and hit every size;
 *  - a replica's pages are on its domain's node when memory is bound.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "service/model.h"
#include "service/stats.h"
#include "service/stream.h"
#include "service/weights.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static nxr_ctx_t *ctx;

static void setup(void)
{
    static struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_CTX);
    rt = fx.rt;
    ctx = fx.ctx;
}

static void teardown(void)
{
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}

/* The model's equations, in double, straight from model.h's comment. */
static void reference(const struct svc_model_shape *s, const float *w, size_t rows,
                      const float *in, double *out)
{
    const size_t h = s->hidden, f = s->ffn, V = s->vocab;
    double *x = calloc(rows * h, sizeof(double)), *t = calloc(rows * h, sizeof(double));
    double *u = calloc(rows * f, sizeof(double)), *lg = calloc(rows * V, sizeof(double));
    for (size_t i = 0; i < rows * h; i++)
        x[i] = in[i];
    for (size_t l = 0; l <= s->layers; l++) {
        const float *gamma = w;
        for (size_t r = 0; r < rows; r++) {
            double ss = 0;
            for (size_t j = 0; j < h; j++)
                ss += x[r * h + j] * x[r * h + j];
            double inv = 1.0 / sqrt(ss / (double)h + 1e-5);
            for (size_t j = 0; j < h; j++)
                t[r * h + j] = x[r * h + j] * inv * gamma[j];
        }
        if (l == s->layers)
            break;
        const float *wu = gamma + h, *bu = wu + h * f, *wd = bu + f, *bd = wd + f * h;
        w = bd + h;
        for (size_t r = 0; r < rows; r++) {
            for (size_t j = 0; j < f; j++) {
                double a = bu[j];
                for (size_t k = 0; k < h; k++)
                    a += t[r * h + k] * wu[k * f + j];
                u[r * f + j] = l % 2 == 0 ? a / (1.0 + exp(-a))
                                          : 0.5 * a * (1.0 + tanh(0.7978845608028654 *
                                                                  (a + 0.044715 * a * a * a)));
            }
            for (size_t j = 0; j < h; j++) {
                double a = bd[j];
                for (size_t k = 0; k < f; k++)
                    a += u[r * f + k] * wd[k * h + j];
                x[r * h + j] += a;
            }
        }
    }
    const float *wh = w + h, *bh = wh + h * V;
    for (size_t r = 0; r < rows; r++) {
        double m = -INFINITY, sum = 0;
        for (size_t j = 0; j < V; j++) {
            double a = bh[j];
            for (size_t k = 0; k < h; k++)
                a += t[r * h + k] * wh[k * V + j];
            lg[r * V + j] = a;
            m = a > m ? a : m;
        }
        for (size_t j = 0; j < V; j++)
            sum += exp(lg[r * V + j] - m);
        for (size_t j = 0; j < V; j++)
            out[r * V + j] = exp(lg[r * V + j] - m) / sum;
    }
    free(x);
    free(t);
    free(u);
    free(lg);
}

struct task_arg {
    const struct svc_model_shape *s;
    const float *w, *in;
    size_t rows;
    float *out, *scratch;
    int rc;
};

static int forward_task(void *p, size_t index)
{
    struct task_arg *a = p;
    (void)index;
    a->rc = svc_model_forward(&svc_ops_nxr, ctx, a->s, a->w, a->rows, a->in, a->out, a->scratch);
    return a->rc;
}

Test(service_model, forward_matches_the_reference_and_is_split_invariant, .init = setup,
     .fini = teardown)
{
    /* 3 blocks: SiLU, GELU, SiLU; 24 rows so kernels split over the domain. */
    const struct svc_model_shape s = svc_model_shape_make(48, 3, 40);
    const size_t rows = 24;
    float *w = malloc(svc_model_floats(&s) * sizeof(float));
    float *in = malloc(rows * s.hidden * sizeof(float));
    float *a = malloc(rows * s.vocab * sizeof(float)), *b = malloc(rows * s.vocab * sizeof(float));
    float *scratch = malloc(svc_model_scratch_floats(&s, rows) * sizeof(float));
    double *ref = malloc(rows * s.vocab * sizeof(double));
    svc_model_fill(&s, 11, w);
    svc_model_input(&s, 11, 5, rows, in);
    cr_assert_eq(svc_model_forward(&svc_ops_nxr, ctx, &s, w, rows, in, a, scratch), 0);
    struct task_arg t = {.s = &s, .w = w, .in = in, .rows = rows, .out = b, .scratch = scratch};
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, 1, forward_task, &t), 0);
    cr_assert_eq(memcmp(a, b, rows * s.vocab * sizeof(float)), 0,
                 "in place (a task) and split (INNER) differ");
    reference(&s, w, rows, in, ref);
    double worst = 0, total = 0;
    for (size_t i = 0; i < rows * s.vocab; i++) {
        worst = fmax(worst, fabs(a[i] - ref[i]));
        total += a[i];
    }
    cr_expect_leq(worst, 1e-5, "max |nxr - reference| = %g", worst);
    cr_expect(fabs(total - (double)rows) < 1e-3, "rows of probabilities sum to %g", total);
    free(w);
    free(in);
    free(a);
    free(b);
    free(scratch);
    free(ref);
}

Test(service_stats, nearest_rank_percentiles)
{
    double v[100];
    for (int i = 0; i < 100; i++)
        v[i] = 100 - i; /* unsorted on purpose */
    struct svc_latency l = svc_latency_summarise(v, 100);
    cr_expect_eq(l.p50_ms, 50);
    cr_expect_eq(l.p95_ms, 95);
    cr_expect_eq(l.p99_ms, 99);
    cr_expect_eq(l.max_ms, 100);
    double three[] = {3, 1, 2};
    l = svc_latency_summarise(three, 3);
    cr_expect_eq(l.p50_ms, 2); /* rank ceil(1.5) = 2 */
    cr_expect_eq(l.p99_ms, 3);
    double one[] = {7};
    l = svc_latency_summarise(one, 1);
    cr_expect(l.p50_ms == 7 && l.p99_ms == 7);
    cr_expect_eq(svc_latency_summarise(NULL, 0).count, 0);
}

Test(service_stream, batch_sizes_in_range_mostly_small)
{
    struct svc_stream s = {.seed = 3, .batch_min = 1, .batch_max = 16};
    unsigned hits[17] = {0}, small = 0;
    for (uint64_t i = 0; i < 20000; i++) {
        size_t r = svc_stream_rows(&s, i);
        cr_assert(r >= 1 && r <= 16, "rows %zu", r);
        hits[r]++;
        small += r <= 4;
    }
    for (int r = 1; r <= 16; r++)
        cr_expect_gt(hits[r], 0, "size %d never drawn", r);
    /* log-uniform over [1, 17): P(rows <= 4) = ln 5 / ln 17 = 0.568 */
    cr_expect(small > 10800 && small < 11900, "%u of 20000 requests have <= 4 rows", small);
    cr_expect_eq(svc_stream_rows(&s, 99), svc_stream_rows(&s, 99), "a function of the index");
    s.batch_min = s.batch_max = 5;
    cr_expect_eq(svc_stream_rows(&s, 1), 5);
}

Test(service_weights, replica_pages_on_the_domain_node, .init = setup, .fini = teardown)
{
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    const size_t bytes = 3 * 4096 + 100;
    float *master = malloc(bytes);
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        master[i] = (float)i;
    struct svc_replica r;
    cr_assert_eq(svc_replica_create(&r, d, master, bytes), 0);
    cr_expect_eq(memcmp(r.w, master, bytes), 0, "the replica is a copy");
    cr_expect_geq(r.pages, 4);
    if (nxr_domain_mem_binding(d) == NXR_MEM_BOUND) {
        cr_expect_eq(r.pages_on_node, r.pages);
        cr_expect_eq(r.on_node, 1.0);
    }
    svc_replica_destroy(&r);
    svc_replica_destroy(&r); /* emptied: a no-op */
    free(master);
}
