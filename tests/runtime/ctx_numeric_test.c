/*
 * Every kernel through a context on a real runtime, against naive double
 * references, on odd sizes (1, 7, 65, 257, non-square, transposed operands,
 * padded strides) and on sizes large enough to be split over the domain's
 * workers. Targets: the default domain, a declared "0:%0,%1" (both with a
 * budget of 2 here, so the split really happens: the team's region count
 * must grow), the two one-CPU domains of "0:%0;1:%1", and the default domain
 * capped at one thread (opts.num_threads = 1, the sequential reference:
 * no region at all). A one-thread target whose CPUs the test thread is not
 * confined to runs each call as exactly one region on a worker (work never
 * leaves the domain).
 *
 * Bit for bit: every kernel promises that how its range is cut changes no
 * result (elementwise, rows, reductions in fixed blocks combined in a fixed
 * tree, GEMM tiles over all of k), so every target's output must equal the
 * sequential target's exactly (memcmp), padding included.
 *
 * Tolerances, u = 2^-24 (the same as the unit tests of each kernel):
 *  - sgemm: |C - ref| <= 2 (k + 2) u (|alpha| sum |a b| + |beta c|);
 *  - add, mul, scale: exactly the double result rounded to float;
 *  - triad: 2 u (|b| + |s c|);
 *  - SiLU, GELU-tanh: u (16 + 4 |t|) |ref| + 1e-37, t the exp argument;
 *  - sum: u (32 + 2 log2 n) sum |x|; max and argmax exact (first index);
 *  - softmax (inputs in [-8, 8]): 4e-6 ref + 1e-12;
 *    RMSNorm, LayerNorm: 2e-5 (1 + |ref|).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctx_support.h"
#include "tests/kernels/ref.h"

/* ---- targets ------------------------------------------------------------------ */

enum { SEQ = 0, MAX_TARGETS = 6 };

struct target {
    nxr_ctx_t *ctx;
    const char *name;
    bool parallel; /* budget > 1: large work must be split */
};

static struct ctx_rt rts[4];
static size_t nrts;
static struct target targets[MAX_TARGETS];
static size_t ntargets;

static void add_runtime(const char *domains, int num_threads, const char *name)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.domains = domains != NULL ? nxr_test_expand(domains) : NULL; /* tests/support/cpus.h */
    o.num_threads = num_threads;
    struct ctx_rt *r = &rts[nrts++];
    ctx_rt_open(r, &o);
    for (size_t i = 0; i < r->nctx && ntargets < MAX_TARGETS; i++)
        targets[ntargets++] = (struct target){
            .ctx = r->ctx[i], .name = name, .parallel = nxr_ctx_budget(r->ctx[i]) > 1};
}

static void open_targets(void)
{
    nrts = ntargets = 0;
    add_runtime(NULL, 1, "default, 1 thread"); /* targets[SEQ] */
    add_runtime(NULL, 0, "default");
    if (nxr_test_cpu_count() >= 2) {
        add_runtime("0:%0,%1", 0, "0:%0,%1");
        add_runtime("0:%0;1:%1", 0, "0:%0;1:%1");
    }
}

static void close_targets(void)
{
    for (size_t i = 0; i < nrts; i++)
        ctx_rt_close(&rts[i]);
    nrts = ntargets = 0;
}

TestSuite(kernels_ctx_numeric, .init = open_targets, .fini = close_targets, .timeout = 120);

/*
 * Runs one kernel call on every target. Each target's output buffer (bytes
 * long) starts as a copy of init (or all-ones bits: NaN), so in-place and
 * beta != 0 calls see the same input everywhere. Checks that the call
 * succeeded, that parallel targets dispatched a region when `split` (and
 * one-thread targets never did), and that every output equals the
 * sequential target's bit for bit. outs[t] stays allocated for the caller's
 * reference check (free with free_outs).
 */
typedef int (*kernel_fn)(nxr_ctx_t *ctx, const void *args, void *out);

static void run_all(kernel_fn fn, const void *args, size_t bytes, const void *init, bool split,
                    void *outs[MAX_TARGETS], const char *what)
{
    for (size_t t = 0; t < ntargets; t++) {
        outs[t] = malloc(bytes ? bytes : 1);
        if (init != NULL)
            memcpy(outs[t], init, bytes);
        else
            memset(outs[t], 0xff, bytes);
        uint64_t r0 = ctx_regions(targets[t].ctx), n0 = ctx_nested_regions(targets[t].ctx);
        int rc = fn(targets[t].ctx, args, outs[t]);
        cr_assert_eq(rc, 0, "%s on %s: %s", what, targets[t].name, nxr_strerror(rc));
        uint64_t regions = ctx_regions(targets[t].ctx) - r0;
        if (!targets[t].parallel) {
            /* One thread of the domain: the caller when it is inside the
             * domain (no region), else one hand-off to a worker. */
            bool inside = thread_inside(nxr_domain_cpuset(nxr_ctx_domain(targets[t].ctx)));
            cr_assert_eq(regions, inside ? 0u : 1u, "%s on %s: %s", what, targets[t].name,
                         inside ? "one thread runs inline" : "one hand-off to a worker");
        }
        else if (split)
            cr_assert_gt(regions, 0u, "%s on %s: not split over the domain", what, targets[t].name);
        cr_assert_eq(ctx_nested_regions(targets[t].ctx), n0);
        if (t != SEQ)
            cr_assert_eq(memcmp(outs[t], outs[SEQ], bytes), 0,
                         "%s on %s differs from the sequential result", what, targets[t].name);
    }
}

static void free_outs(void *outs[MAX_TARGETS])
{
    for (size_t t = 0; t < ntargets; t++)
        free(outs[t]);
}

/* ---- GEMM ------------------------------------------------------------------------ */

struct gemm_case {
    struct nxr_sgemm_args g; /* c is replaced by each target's buffer */
};

static int call_sgemm(nxr_ctx_t *ctx, const void *args, void *out)
{
    struct nxr_sgemm_args g = ((const struct gemm_case *)args)->g;
    g.c = out;
    return nxr_sgemm(ctx, &g);
}

static double op_at(const float *x, size_t ld, bool trans, size_t r, size_t c)
{
    return trans ? x[c * ld + r] : x[r * ld + c];
}

static void gemm_case(size_t m, size_t n, size_t k, bool ta, bool tb, float alpha, float beta,
                      uint64_t seed)
{
    const size_t a_rows = ta ? k : m, a_cols = ta ? m : k;
    const size_t b_rows = tb ? n : k, b_cols = tb ? k : n;
    const size_t lda = a_cols + 3, ldb = b_cols + 1, ldc = n + 2;
    float *a = ref_fill(a_rows * lda, seed, -1, 1), *b = ref_fill(b_rows * ldb, seed + 1, -1, 1);
    float *c0 = ref_fill(m * ldc, seed + 2, -1, 1);
    struct gemm_case gc = {.g = {.trans_a = ta,
                                 .trans_b = tb,
                                 .m = m,
                                 .n = n,
                                 .k = k,
                                 .alpha = alpha,
                                 .a = a,
                                 .lda = lda,
                                 .b = b,
                                 .ldb = ldb,
                                 .beta = beta,
                                 .ldc = ldc}};
    char what[96];
    snprintf(what, sizeof what, "sgemm %zux%zux%zu ta=%d tb=%d alpha=%g beta=%g", m, n, k, ta, tb,
             alpha, beta);
    void *outs[MAX_TARGETS];
    /* Small shapes (m or n <= 16) split along the long side once W is a
     * few chunks of the small path (16384 floats each); others by m. */
    const bool small = (m <= 16 && m <= n) || (n <= 16 && n < m);
    const size_t long_side = m <= 16 && m <= n ? n : m;
    const bool split = small ? long_side * k >= 4 * 16384 : m >= 65;
    run_all(call_sgemm, &gc, m * ldc * sizeof(float), c0, split, outs, what);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double dot = 0, mag = 0;
            for (size_t p = 0; p < k; p++) {
                double t = op_at(a, lda, ta, i, p) * op_at(b, ldb, tb, p, j);
                dot += t;
                mag += fabs(t);
            }
            double cij = c0[i * ldc + j];
            double want = alpha * dot + (beta == 0 ? 0 : beta * cij);
            double tol =
                2.0 * (double)(k + 2) * U_F32 * (fabs(alpha) * mag + fabs(beta * cij)) + 1e-30;
            for (size_t t = 0; t < ntargets; t++) {
                const float *c = outs[t];
                cr_assert(fabs(c[i * ldc + j] - want) <= tol,
                          "%s on %s: C[%zu][%zu] %.9g want %.9g", what, targets[t].name, i, j,
                          c[i * ldc + j], want);
            }
        }
    /* Padding columns: bit-equality to SEQ covers the other targets. */
    for (size_t i = 0; i < m; i++)
        for (size_t j = n; j < ldc; j++)
            cr_assert_eq(memcmp((float *)outs[SEQ] + i * ldc + j, c0 + i * ldc + j, 4), 0);
    free_outs(outs);
    free(a);
    free(b);
    free(c0);
}

Test(kernels_ctx_numeric, sgemm_every_shape_and_transpose)
{
    static const size_t shapes[][3] = {{1, 1, 1},    {7, 7, 7},      {65, 65, 65}, {257, 257, 257},
                                       {7, 65, 257}, {257, 7, 65},   {65, 257, 7}, {1, 257, 65},
                                       {257, 1, 7},  {130, 33, 300}, {9, 1100, 20},
                                       {4, 1000, 300}, {700, 3, 200}, {1, 2000, 257},
                                       {2000, 1, 257}, {16, 3000, 33}, {17, 3000, 33}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t & 2, 1.0f, 0.0f,
                      17 * s + (uint64_t)t);
}

Test(kernels_ctx_numeric, sgemm_alpha_beta)
{
    gemm_case(257, 65, 33, false, true, 0.5f, -1.5f, 100);
    gemm_case(65, 257, 129, true, false, -2.0f, 1.0f, 200);
    gemm_case(130, 130, 65, true, true, 1.0f, 0.25f, 300);
}

/* Batched: small items (OUTER when split) and large ones (INNER). */
struct batch_case {
    struct nxr_sgemm_batch_args x;
};

static int call_batch(nxr_ctx_t *ctx, const void *args, void *out)
{
    struct nxr_sgemm_batch_args x = ((const struct batch_case *)args)->x;
    x.gemm.c = out;
    return nxr_sgemm_batch(ctx, &x);
}

static void batch_case(size_t m, size_t n, size_t k, size_t count, uint64_t seed)
{
    const size_t sa = m * k + 5, sb = k * n + 3, sc = m * n + 1;
    float *a = ref_fill(sa * count, seed, -1, 1), *b = ref_fill(sb * count, seed + 1, -1, 1);
    float *c0 = ref_fill(sc * count, seed + 2, -1, 1);
    struct batch_case bc = {.x = {.gemm = {.m = m,
                                           .n = n,
                                           .k = k,
                                           .alpha = 1,
                                           .a = a,
                                           .lda = k,
                                           .b = b,
                                           .ldb = n,
                                           .beta = 0.5f,
                                           .ldc = n},
                                  .batch = count,
                                  .stride_a = sa,
                                  .stride_b = sb,
                                  .stride_c = sc}};
    char what[64];
    snprintf(what, sizeof what, "sgemm_batch %zu x %zux%zux%zu", count, m, n, k);
    void *outs[MAX_TARGETS];
    run_all(call_batch, &bc, sc * count * sizeof(float), c0, true, outs, what);
    for (size_t it = 0; it < count; it++)
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double dot = 0, mag = 0;
                for (size_t p = 0; p < k; p++) {
                    double t = (double)a[it * sa + i * k + p] * b[it * sb + p * n + j];
                    dot += t;
                    mag += fabs(t);
                }
                double cij = c0[it * sc + i * n + j], want = dot + 0.5 * cij;
                double tol = 2.0 * (double)(k + 2) * U_F32 * (mag + fabs(0.5 * cij));
                double got = ((const float *)outs[SEQ])[it * sc + i * n + j];
                cr_assert(fabs(got - want) <= tol, "%s item %zu [%zu][%zu] %.9g want %.9g", what,
                          it, i, j, got, want);
            }
    free_outs(outs);
    free(a);
    free(b);
    free(c0);
}

Test(kernels_ctx_numeric, sgemm_batch)
{
    batch_case(33, 47, 41, 9, 400);    /* OUTER on a budget of 2 */
    batch_case(160, 161, 160, 3, 500); /* INNER: items above 128^3 */
}

/* ---- elementwise ------------------------------------------------------------------ */

static const size_t ew_lengths[] = {1, 7, 65, 257, 100003};
#define EW_SPLIT(n) ((n) > 16384) /* native_provider.c's EW_GRAIN */

enum ew_kind { EW_ADD, EW_MUL, EW_SCALE, EW_SILU, EW_GELU, EW_TRIAD, EW_SCALE_IN_PLACE };

struct ew_case {
    enum ew_kind kind;
    size_t n;
    const float *x, *y;
    float s;
};

static int call_ew(nxr_ctx_t *ctx, const void *args, void *out)
{
    const struct ew_case *e = args;
    switch (e->kind) {
    case EW_ADD:
        return nxr_binary(ctx, NXR_BINARY_ADD, e->n, e->x, e->y, out);
    case EW_MUL:
        return nxr_binary(ctx, NXR_BINARY_MUL, e->n, e->x, e->y, out);
    case EW_SCALE:
        return nxr_scale(ctx, e->n, e->x, e->s, out);
    case EW_SILU:
        return nxr_unary(ctx, NXR_UNARY_SILU, e->n, e->x, out);
    case EW_GELU:
        return nxr_unary(ctx, NXR_UNARY_GELU_TANH, e->n, e->x, out);
    case EW_TRIAD:
        return nxr_triad(ctx, e->n, e->x, e->y, e->s, out);
    case EW_SCALE_IN_PLACE:
        return nxr_scale(ctx, e->n, out, e->s, out);
    }
    return -EINVAL;
}

static double silu_ref(double x, double *t)
{
    *t = -x;
    return x / (1.0 + exp(-x));
}

static double gelu_ref(double x, double *t)
{
    const double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    *t = -2.0 * u;
    return x / (1.0 + exp(-2.0 * u));
}

Test(kernels_ctx_numeric, elementwise)
{
    for (size_t li = 0; li < sizeof ew_lengths / sizeof ew_lengths[0]; li++) {
        const size_t n = ew_lengths[li];
        float *x = ref_fill(n, 1 + li, -12, 12), *y = ref_fill(n, 50 + li, -3, 3);
        for (int k = EW_ADD; k <= EW_SCALE_IN_PLACE; k++) {
            struct ew_case e = {.kind = (enum ew_kind)k, .n = n, .x = x, .y = y, .s = -0.37f};
            char what[48];
            snprintf(what, sizeof what, "elementwise kind %d n=%zu", k, n);
            void *outs[MAX_TARGETS];
            run_all(call_ew, &e, n * sizeof(float), k == EW_SCALE_IN_PLACE ? x : NULL, EW_SPLIT(n),
                    outs, what);
            const float *o = outs[SEQ];
            for (size_t i = 0; i < n; i++) {
                double t = 0, want = 0, tol = 0;
                switch ((enum ew_kind)k) {
                case EW_ADD:
                    want = (float)((double)x[i] + y[i]);
                    break;
                case EW_MUL:
                    want = (float)((double)x[i] * y[i]);
                    break;
                case EW_SCALE:
                case EW_SCALE_IN_PLACE:
                    want = (float)((double)x[i] * -0.37f);
                    break;
                case EW_SILU:
                    want = silu_ref(x[i], &t);
                    tol = U_F32 * (16.0 + 4.0 * fabs(t)) * fabs(want) + 1e-37;
                    break;
                case EW_GELU:
                    want = gelu_ref(x[i], &t);
                    tol = U_F32 * (16.0 + 4.0 * fabs(t)) * fabs(want) + 1e-37;
                    break;
                case EW_TRIAD:
                    want = (double)x[i] + (double)-0.37f * y[i];
                    tol = 2 * U_F32 * (fabs(x[i]) + fabs(-0.37f * y[i]));
                    break;
                }
                cr_assert(fabs(o[i] - want) <= tol, "%s i=%zu: %.9g want %.9g", what, i, o[i],
                          want);
            }
            free_outs(outs);
        }
        free(x);
        free(y);
    }
}

/* ---- reductions ------------------------------------------------------------------- */

enum red_kind { RED_SUM, RED_MAX, RED_ARGMAX };

struct red_case {
    enum red_kind kind;
    size_t n;
    const float *x;
};

static int call_red(nxr_ctx_t *ctx, const void *args, void *out)
{
    const struct red_case *r = args;
    switch (r->kind) {
    case RED_SUM:
        return nxr_sum(ctx, r->n, r->x, out);
    case RED_MAX:
        return nxr_max(ctx, r->n, r->x, out);
    case RED_ARGMAX:
        return nxr_argmax(ctx, r->n, r->x, out);
    }
    return -EINVAL;
}

/* Runs the three reductions on x and checks them; returns argmax. */
static size_t reductions(size_t n, const float *x, const char *label)
{
    const bool split = n > 16384; /* nxr__reduce_block() */
    char what[64];
    void *outs[MAX_TARGETS];

    snprintf(what, sizeof what, "sum %s n=%zu", label, n);
    struct red_case r = {.kind = RED_SUM, .n = n, .x = x};
    run_all(call_red, &r, sizeof(float), NULL, split, outs, what);
    double want = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        want += x[i];
        mag += fabs(x[i]);
    }
    float got = *(float *)outs[SEQ];
    if (isnan(want))
        cr_assert(isnan(got), "%s: %.9g want NaN", what, got);
    else
        cr_assert(fabs(got - want) <= U_F32 * (32 + 2 * log2((double)n)) * mag,
                  "%s: %.9g want %.9g", what, got, want);
    free_outs(outs);

    snprintf(what, sizeof what, "max %s n=%zu", label, n);
    r.kind = RED_MAX;
    run_all(call_red, &r, sizeof(float), NULL, split, outs, what);
    float m = x[0];
    size_t first = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) {
            m = x[i];
            first = i;
            break;
        }
        if (x[i] > m) {
            m = x[i];
            first = i;
        }
    }
    got = *(float *)outs[SEQ];
    cr_assert(isnan(m) ? isnan(got) : got == m, "%s: %.9g want %.9g", what, got, m);
    free_outs(outs);

    snprintf(what, sizeof what, "argmax %s n=%zu", label, n);
    r.kind = RED_ARGMAX;
    run_all(call_red, &r, sizeof(size_t), NULL, split, outs, what);
    size_t index = *(size_t *)outs[SEQ];
    cr_assert_eq(index, first, "%s: %zu want %zu (the first maximum)", what, index, first);
    free_outs(outs);
    return index;
}

Test(kernels_ctx_numeric, reductions)
{
    static const size_t lengths[] = {1, 7, 65, 257, 3 * 16384 + 5, 100003};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        float *x = ref_fill(lengths[li], 31 + li, -1, 1);
        reductions(lengths[li], x, "random");
        free(x);
    }
    /* Ties across blocks: the first index wins wherever the cut falls. */
    const size_t n = 100003;
    float *x = ref_fill(n, 77, -1, 1);
    x[5] = x[40000] = x[99999] = 2.0f;
    cr_assert_eq(reductions(n, x, "tie"), 5u);
    /* NaN: max is NaN, argmax the first NaN. */
    x[70000] = NAN;
    x[50000] = NAN;
    cr_assert_eq(reductions(n, x, "nan"), 50000u);
    free(x);
}

/* ---- rows: softmax, RMSNorm, LayerNorm ---------------------------------------------- */

enum row_kind { ROW_SOFTMAX, ROW_RMSNORM, ROW_LAYERNORM };

struct row_case {
    enum row_kind kind;
    size_t rows, cols, ld;
    const float *x, *gamma, *beta;
};

static int call_rows(nxr_ctx_t *ctx, const void *args, void *out)
{
    const struct row_case *r = args;
    switch (r->kind) {
    case ROW_SOFTMAX:
        return nxr_softmax(ctx, r->rows, r->cols, r->x, r->ld, out, r->ld);
    case ROW_RMSNORM:
        return nxr_rmsnorm(ctx, r->rows, r->cols, r->x, r->ld, r->gamma, 1e-5f, out, r->ld);
    case ROW_LAYERNORM:
        return nxr_layernorm(ctx, r->rows, r->cols, r->x, r->ld, r->gamma, r->beta, 1e-5f, out,
                             r->ld);
    }
    return -EINVAL;
}

static void row_case(enum row_kind kind, size_t rows, size_t cols, bool affine, uint64_t seed)
{
    const size_t ld = cols + 3;
    float *x =
        ref_fill(rows * ld, seed, kind == ROW_SOFTMAX ? -8 : -4, kind == ROW_SOFTMAX ? 8 : 6);
    float *gamma = affine ? ref_fill(cols, seed + 1, 0.5f, 2.0f) : NULL;
    float *beta = affine ? ref_fill(cols, seed + 2, -1.0f, 1.0f) : NULL;
    float *init = ref_fill(rows * ld, seed + 3, 0, 1); /* padding must survive */
    struct row_case rc = {.kind = kind,
                          .rows = rows,
                          .cols = cols,
                          .ld = ld,
                          .x = x,
                          .gamma = gamma,
                          .beta = kind == ROW_LAYERNORM ? beta : NULL};
    const size_t grain = cols >= 16384 ? 1 : 16384 / cols; /* native_provider.c ROW_ELEMS */
    char what[64];
    snprintf(what, sizeof what, "rows kind %d %zux%zu affine=%d", kind, rows, cols, affine);
    void *outs[MAX_TARGETS];
    run_all(call_rows, &rc, rows * ld * sizeof(float), init, rows > grain, outs, what);
    const float *o = outs[SEQ];
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        double mx = -INFINITY, s = 0, mean = 0, ss = 0;
        for (size_t j = 0; j < cols; j++) {
            mx = xr[j] > mx ? xr[j] : mx;
            mean += xr[j];
        }
        mean /= (double)cols;
        const double center = kind == ROW_LAYERNORM ? mean : 0.0;
        for (size_t j = 0; j < cols; j++) {
            s += exp(xr[j] - mx);
            ss += (xr[j] - center) * (xr[j] - center);
        }
        const double scale = 1.0 / sqrt(ss / (double)cols + 1e-5f);
        for (size_t j = 0; j < cols; j++) {
            double want, tol;
            if (kind == ROW_SOFTMAX) {
                want = exp(xr[j] - mx) / s;
                tol = 4e-6 * want + 1e-12;
            } else {
                want = (xr[j] - center) * scale * (affine ? gamma[j] : 1.0);
                if (kind == ROW_LAYERNORM && affine)
                    want += beta[j];
                tol = 2e-5 * (1 + fabs(want));
            }
            cr_assert(fabs(o[r * ld + j] - want) <= tol, "%s [%zu][%zu] %.9g want %.9g", what, r, j,
                      o[r * ld + j], want);
        }
        for (size_t j = cols; j < ld; j++)
            cr_assert_eq(memcmp(&o[r * ld + j], &init[r * ld + j], 4), 0, "%s: padding", what);
    }
    free_outs(outs);
    free(x);
    free(gamma);
    free(beta);
    free(init);
}

Test(kernels_ctx_numeric, rows)
{
    static const size_t shapes[][2] = {{1, 1},     {7, 7},     {65, 65},  {257, 257},
                                       {300, 257}, {65, 1000}, {3, 20000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        row_case(ROW_SOFTMAX, shapes[s][0], shapes[s][1], false, 81 + s);
        for (int affine = 0; affine < 2; affine++) {
            row_case(ROW_RMSNORM, shapes[s][0], shapes[s][1], affine, 91 + s);
            row_case(ROW_LAYERNORM, shapes[s][0], shapes[s][1], affine, 101 + s);
        }
    }
}
