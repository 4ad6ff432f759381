/*
 * nxr_span_linear (runtime/nxr_span.h): Y = X op(W) with W sharded across
 * a span, by output rows and by the inner dimension.
 *  - The result is the reference: a naive double-precision product within
 *    a stated tolerance, and bit for bit the one-domain computation it
 *    stands for (BY_OUTPUT: nxr_sgemm of the whole W on a plain context;
 *    BY_INNER: each part's product by nxr_sgemm on a plain context, added
 *    by this test in member order).
 *  - Each member's GEMMs read only its own shard and write its own partial:
 *    a spy GEMM provider checks nxr_mem_domain of every operand against the
 *    domain whose body calls it.
 *  - The combine does not depend on the order members finish: the spy
 *    holds member 0 back until member 1 is done, then the other way round,
 *    and the bits stay the same.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static nxr_ctx_t *span, *plain;

/* ---- the spy: a naive GEMM that checks where its operands live --------------------- */

static struct {
    atomic_int calls[4];      /* per domain id */
    atomic_int remote;        /* an operand of another domain's memory */
    atomic_int unmarked;      /* a call outside any body */
    atomic_int hold;          /* -1: none; else the domain held back */
    atomic_int done_other[4]; /* calls finished per domain */
    atomic_int expect_other;  /* calls the held domain waits for */
} spy;

static void check_operand(const void *p, int domain)
{
    nxr_domain_t *owner;
    if (p != NULL && nxr_mem_domain(rt, p, &owner) == 0 && nxr_domain_id(owner) != domain)
        atomic_fetch_add(&spy.remote, 1);
}

static int spy_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *g)
{
    (void)self, (void)call;
    if (nxr__tls.depth == 0 || nxr__tls.exec == NULL) {
        atomic_fetch_add(&spy.unmarked, 1);
        return -EIO;
    }
    int d = nxr__tls.exec->spec->id & 3;
    atomic_fetch_add(&spy.calls[d], 1);
    if (atomic_load(&spy.hold) == d) /* forced order: the others first */
        nxr_test_wait_at_least(&spy.done_other[3], atomic_load(&spy.expect_other), 20000);
    check_operand(g->a, d);
    check_operand(g->b, d);
    check_operand(g->c, d);
    for (size_t i = 0; i < g->m; i++) {
        for (size_t j = 0; j < g->n; j++) {
            float acc = 0.0f;
            for (size_t p = 0; p < g->k; p++) {
                float a = g->trans_a ? g->a[p * g->lda + i] : g->a[i * g->lda + p];
                float b = g->trans_b ? g->b[j * g->ldb + p] : g->b[p * g->ldb + j];
                acc += a * b;
            }
            g->c[i * g->ldc + j] = g->alpha * acc;
        }
    }
    if (atomic_load(&spy.hold) != d)
        atomic_fetch_add(&spy.done_other[3], 1);
    return 0;
}

static const struct nxr_gemm_ops spy_ops = {.sgemm = spy_sgemm};

static void open_runtime(const char *domains, bool with_spy)
{
    memset(&spy, 0, sizeof(spy));
    atomic_store(&spy.hold, -1);
    static struct nxr_test_runtime fx;
    NXR_TEST_NEED_CPUS(nxr_test_runtime_cpus_needed(domains));
    nxr_test_runtime_opts(&fx, domains, 0);
    nxr_provider_t *p = NULL;
    if (with_spy) {
        struct nxr_provider_desc d;
        nxr_provider_desc_init(&d);
        d.name = "span-spy";
        d.family = NXR_FAMILY_GEMM;
        d.count = NXR_COUNT_SEQUENTIAL;
        d.runs_on = NXR_RUNS_ON_CALLING_THREAD;
        d.gemm = &spy_ops;
        cr_assert_eq(nxr_provider_create(&d, &p), 0);
        fx.opts.providers[NXR_FAMILY_GEMM] = p;
    }
    NXR_TEST_RUNTIME_OPEN(&fx);
    rt = fx.rt;
    nxr_provider_destroy(p); /* the runtime keeps its own reference */
    cr_assert_eq(nxr_ctx_create(rt, 0, &plain), 0);
}

static void open_span(const int *ids, size_t n)
{
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    so.domain_ids = ids;
    so.count = n;
    cr_assert_eq(nxr_span_create(rt, &so, &span), 0);
}

static void teardown(void)
{
    nxr_ctx_destroy(span);
    nxr_ctx_destroy(plain);
    span = plain = NULL;
    nxr_runtime_destroy(rt);
    rt = NULL;
}

TestSuite(runtime_span_kernels, .fini = teardown, .timeout = 60);

/* ---- data ------------------------------------------------------------------------------ */

static void fill(float *v, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((int)((seed >> 9) % 2001) - 1000) / 997.0f;
    }
}

/* W (rows x cols, dense) into shards of the same shape. */
static nxr_shards_t *shard(const float *w, size_t rows, size_t cols, const size_t *parts)
{
    nxr_shards_t *s;
    cr_assert_eq(nxr_shards_create(span, rows, cols * sizeof(float), parts,
                                   nxr_span_domain_count(span), &s),
                 0, "%s", nxr_last_error());
    for (size_t r = 0; r < rows; r++)
        memcpy(nxr_shards_row(s, r), w + r * cols, cols * sizeof(float));
    return s;
}

/* Y = X op(W) in double, op(W)[p][j] = W[j][p] (BY_OUTPUT) or W[p][j]. */
static void naive(size_t m, size_t k, size_t n, const float *x, const float *w, bool by_output,
                  double *y)
{
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) {
            double acc = 0.0;
            for (size_t p = 0; p < k; p++)
                acc += (double)x[i * k + p] * (by_output ? w[j * k + p] : w[p * n + j]);
            y[i * n + j] = acc;
        }
    }
}

static void expect_close(const float *got, const double *want, size_t count, size_t k)
{
    /* Float accumulation over k terms of magnitude <= 1: |error| <= k * eps
     * * sum|terms| <= k^2 * 2^-24; 1e-5 * k covers it for these sizes. */
    for (size_t i = 0; i < count; i++)
        cr_expect(fabs(got[i] - want[i]) <= 1e-5 * (double)k * (1.0 + fabs(want[i])),
                  "y[%zu] = %.9g, want %.9g", i, got[i], want[i]);
}

/* ---- by output rows --------------------------------------------------------------------- */

static void by_output(const size_t *parts, size_t m)
{
    enum { K = 29, N = 37 };
    float w[N * K], x[4 * K], y[4 * N], ref[4 * N];
    double want[4 * N];
    fill(w, N * K, 1);
    fill(x, m * K, 2);
    nxr_shards_t *s = shard(w, N, K, parts);
    struct nxr_span_linear_args a = {.m = m, .k = K, .n = N, .x = x, .ldx = K, .w = s,
                                     .layout = NXR_SHARD_BY_OUTPUT, .y = y, .ldy = N};
    memset(y, 0xff, sizeof(y));
    cr_assert_eq(nxr_span_linear(span, &a), 0, "%s", nxr_last_error());
    naive(m, K, N, x, w, true, want);
    expect_close(y, want, m * N, K);
    /* The one-domain computation it stands for: X W^T on a plain context. */
    struct nxr_sgemm_args g = {.trans_b = true, .m = m, .n = N, .k = K, .alpha = 1.0f, .a = x,
                          .lda = K, .b = w, .ldb = K, .beta = 0.0f, .c = ref, .ldc = N};
    cr_assert_eq(nxr_sgemm(plain, &g), 0);
    cr_expect(memcmp(y, ref, m * N * sizeof(float)) == 0, "not the one-domain bits");

    /* The output sharded like W: row j of y_shards is output j. */
    nxr_shards_t *ys;
    cr_assert_eq(nxr_shards_create(span, N, m * sizeof(float), parts,
                                   nxr_span_domain_count(span), &ys),
                 0);
    a.y = NULL;
    a.y_shards = ys;
    cr_assert_eq(nxr_span_linear(span, &a), 0, "%s", nxr_last_error());
    for (size_t j = 0; j < N; j++) {
        const float *col = nxr_shards_row(ys, j);
        for (size_t i = 0; i < m; i++)
            cr_expect(fabs(col[i] - want[i * N + j]) <= 1e-5 * K * (1.0 + fabs(want[i * N + j])),
                      "sharded y[%zu][%zu] = %g, want %g", i, j, col[i], want[i * N + j]);
    }
    nxr_shards_destroy(ys);
    nxr_shards_destroy(s);
}

Test(runtime_span_kernels, by_output_rows_gives_the_one_domain_result)
{
    open_runtime("0:%0;1:%0 shared;2:%0 shared", false);
    const int ids[] = {0, 1, 2};
    open_span(ids, 3);
    by_output(NULL, 1); /* y = W x, the budget split */
    const size_t parts[] = {5, 0, 32}; /* an empty part too */
    by_output(parts, 3);
}

Test(runtime_span_kernels, a_one_domain_context_runs_the_same_kernel)
{
    open_runtime("0:%0", false);
    const int ids[] = {0};
    open_span(ids, 1);
    by_output(NULL, 2);
}

/* ---- by the inner dimension ---------------------------------------------------------------- */

enum { IK = 53, IN = 41, IM = 3 };

/* Runs the inner-sharded product into y and checks it against the naive
 * product and the member-order sum of per-part products on a plain
 * context. */
static void by_inner(const size_t *parts, float *y)
{
    float w[IK * IN], x[IM * IK];
    double want[IM * IN];
    fill(w, IK * IN, 3);
    fill(x, IM * IK, 4);
    nxr_shards_t *s = shard(w, IK, IN, parts);
    struct nxr_span_linear_args a = {.m = IM, .k = IK, .n = IN, .x = x, .ldx = IK, .w = s,
                                     .layout = NXR_SHARD_BY_INNER, .y = y, .ldy = IN};
    cr_assert_eq(nxr_span_linear(span, &a), 0, "%s", nxr_last_error());
    naive(IM, IK, IN, x, w, false, want);
    expect_close(y, want, IM * IN, IK);
    /* Part by part on one domain, added in member order. */
    float sum[IM * IN], part[IM * IN];
    for (size_t q = 0; q < nxr_shards_count(s); q++) {
        struct nxr_shard sh;
        cr_assert_eq(nxr_shards_part(s, q, &sh), 0);
        struct nxr_sgemm_args g = {.m = IM, .n = IN, .k = sh.rows, .alpha = 1.0f, .a = x + sh.row0,
                              .lda = IK, .b = w + sh.row0 * IN, .ldb = IN, .beta = 0.0f,
                              .c = part, .ldc = IN};
        cr_assert_eq(nxr_sgemm(plain, &g), 0);
        for (size_t i = 0; i < IM * IN; i++)
            sum[i] = q == 0 ? part[i] : sum[i] + part[i];
    }
    cr_expect(memcmp(y, sum, sizeof(sum)) == 0, "not the member-order sum of the parts");
    nxr_shards_destroy(s);
}

Test(runtime_span_kernels, by_inner_rows_is_the_member_order_sum_of_the_parts)
{
    open_runtime("0:%0;1:%0 shared;2:%0 shared", false);
    const int ids[] = {0, 1, 2};
    open_span(ids, 3);
    float y[IM * IN];
    by_inner(NULL, y);
    const size_t parts[] = {20, 0, 33};
    by_inner(parts, y);
}

Test(runtime_span_kernels, by_inner_rows_is_bit_identical_whatever_the_budgets)
{
    /* The same partition over members of budget 2 and 2, then 1 and 1: the
     * teams split the columns differently, the bits must not move. */
    const size_t parts[] = {31, 22};
    float y2[IM * IN], y1[IM * IN];
    open_runtime("0:%0,%1;1:%0,%1 shared", false);
    const int ids[] = {0, 1};
    open_span(ids, 2);
    cr_expect_eq(nxr_ctx_budget(span), 4);
    by_inner(parts, y2);
    teardown();
    open_runtime("0:%0;1:%1", false);
    open_span(ids, 2);
    by_inner(parts, y1);
    cr_expect(memcmp(y1, y2, sizeof(y1)) == 0, "the budgets changed the bits");
}

/* ---- who reads what, in which order ---------------------------------------------------------- */

Test(runtime_span_kernels, each_member_reads_only_its_own_shard)
{
    open_runtime("0:%0;1:%0 shared", true);
    const int ids[] = {0, 1};
    open_span(ids, 2);
    enum { K = 24, N = 40 };
    float *w = malloc(N * K * sizeof(float)), x[2 * K], y[2 * N];
    fill(w, N * K, 5);
    fill(x, 2 * K, 6);
    nxr_shards_t *s = shard(w, N, K, NULL);
    struct nxr_span_linear_args a = {.m = 2, .k = K, .n = N, .x = x, .ldx = K, .w = s,
                                     .layout = NXR_SHARD_BY_OUTPUT, .y = y, .ldy = N};
    cr_assert_eq(nxr_span_linear(span, &a), 0, "%s", nxr_last_error());
    nxr_shards_destroy(s);
    /* Inner: W is K x N (rows of N), and the partials are pool memory. */
    s = shard(w, K, N, NULL);
    a.w = s;
    a.layout = NXR_SHARD_BY_INNER;
    a.k = K;
    a.n = N;
    cr_assert_eq(nxr_span_linear(span, &a), 0, "%s", nxr_last_error());
    nxr_shards_destroy(s);
    free(w);
    cr_expect_gt(atomic_load(&spy.calls[0]), 0, "member 0 computed nothing");
    cr_expect_gt(atomic_load(&spy.calls[1]), 0, "member 1 computed nothing");
    cr_expect_eq(atomic_load(&spy.remote), 0, "a GEMM touched another member's memory");
    cr_expect_eq(atomic_load(&spy.unmarked), 0, "a GEMM ran outside a member's body");
}

/* Runs the inner product with member `held` held back until the other's
 * GEMMs are done (its partial finishes last). */
static void inner_held(int held, const size_t *parts, float *y)
{
    enum { K = 30, N = 33 };
    float w[K * N], x[2 * K];
    fill(w, K * N, 7);
    fill(x, 2 * K, 8);
    nxr_shards_t *s = shard(w, K, N, parts);
    /* The other member runs one GEMM per participant (budget 1: one). */
    atomic_store(&spy.done_other[3], 0);
    atomic_store(&spy.expect_other, 1);
    atomic_store(&spy.hold, held);
    struct nxr_span_linear_args a = {.m = 2, .k = K, .n = N, .x = x, .ldx = K, .w = s,
                                     .layout = NXR_SHARD_BY_INNER, .y = y, .ldy = N};
    cr_assert_eq(nxr_span_linear(span, &a), 0, "%s", nxr_last_error());
    atomic_store(&spy.hold, -1);
    cr_expect_geq(atomic_load(&spy.done_other[3]), 1, "the other member ran first");
    nxr_shards_destroy(s);
}

Test(runtime_span_kernels, the_combine_does_not_depend_on_who_finished_first)
{
    open_runtime("0:%0;1:%0 shared", true);
    const int ids[] = {0, 1};
    open_span(ids, 2);
    const size_t parts[] = {13, 17};
    float first[66], second[66];
    inner_held(0, parts, first);
    inner_held(1, parts, second);
    cr_expect(memcmp(first, second, sizeof(first)) == 0, "the finishing order changed the bits");
}

/* ---- the ordinary kernels on a span ------------------------------------------------ */

/* A GEMM that fans out through call->parallel_for over rows of C, naive,
 * recording which domain and participant ran each row. */
static struct {
    unsigned threads;
    atomic_int rows_by_domain[4];
    atomic_int bad_worker;
} fan;

struct fan_job {
    const struct nxr_kernel_call *call;
    const struct nxr_sgemm_args *g;
};

static void fan_rows(void *p, size_t b, size_t e, unsigned worker)
{
    const struct fan_job *j = p;
    const struct nxr_sgemm_args *g = j->g;
    if (worker >= j->call->threads || nxr__tls.exec == NULL)
        atomic_fetch_add(&fan.bad_worker, 1);
    else
        atomic_fetch_add(&fan.rows_by_domain[nxr__tls.exec->spec->id & 3], (int)(e - b));
    for (size_t i = b; i < e; i++)
        for (size_t n = 0; n < g->n; n++) {
            float acc = 0.0f;
            for (size_t p = 0; p < g->k; p++)
                acc += g->a[i * g->lda + p] * g->b[p * g->ldb + n];
            g->c[i * g->ldc + n] = acc;
        }
}

static int fan_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *g)
{
    (void)self;
    fan.threads = call->threads;
    struct fan_job j = {.call = call, .g = g};
    if (call->parallel_for == NULL) {
        fan_rows(&j, 0, g->m, 0);
        return 0;
    }
    return call->parallel_for(call, g->m, 1, fan_rows, &j);
}

static const struct nxr_gemm_ops fan_ops = {.sgemm = fan_sgemm};

Test(runtime_span_kernels, an_ordinary_kernel_on_a_span_splits_across_the_members)
{
    memset(&fan, 0, sizeof(fan));
    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, "0:%0;1:%0 shared;2:%0 shared", 0);
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "span-fan";
    d.family = NXR_FAMILY_GEMM;
    d.count = NXR_COUNT_PER_CALL_BOUND;
    d.runs_on = NXR_RUNS_ON_ENGINE_WORKERS;
    d.gemm = &fan_ops;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    fx.opts.providers[NXR_FAMILY_GEMM] = p;
    NXR_TEST_RUNTIME_OPEN(&fx);
    rt = fx.rt;
    nxr_provider_destroy(p);
    const int ids[] = {2, 0, 1};
    open_span(ids, 3);
    enum { M = 30, K = 5, N = 4 };
    float a[M * K], b[K * N], c[M * N];
    fill(a, M * K, 9);
    fill(b, K * N, 10);
    struct nxr_sgemm_args g = {.m = M, .n = N, .k = K, .alpha = 1.0f, .a = a, .lda = K, .b = b,
                          .ldb = N, .beta = 0.0f, .c = c, .ldc = N};
    cr_assert_eq(nxr_sgemm(span, &g), 0, "%s", nxr_last_error());
    cr_expect_eq(fan.threads, 3, "the span's budget");
    cr_expect_eq(atomic_load(&fan.bad_worker), 0);
    /* 30 rows, budgets 1:1:1 in the order 2, 0, 1. */
    cr_expect_eq(atomic_load(&fan.rows_by_domain[2]), 10);
    cr_expect_eq(atomic_load(&fan.rows_by_domain[0]), 10);
    cr_expect_eq(atomic_load(&fan.rows_by_domain[1]), 10);
    for (size_t i = 0; i < M; i++)
        for (size_t n = 0; n < N; n++) {
            double want = 0.0;
            for (size_t q = 0; q < K; q++)
                want += (double)a[i * K + q] * b[q * N + n];
            cr_expect(fabs(c[i * N + n] - want) < 1e-5, "c[%zu][%zu]", i, n);
        }
}

Test(runtime_span_kernels, native_kernels_on_a_span_give_the_one_domain_bits)
{
    open_runtime("0:%0;1:%0 shared", false);
    const int ids[] = {0, 1};
    open_span(ids, 2);
    enum { M = 70, K = 90, N = 130 };
    float *a = malloc(M * K * sizeof(float)), *b = malloc(K * N * sizeof(float));
    float *c1 = malloc(M * N * sizeof(float)), *c2 = malloc(M * N * sizeof(float));
    fill(a, M * K, 11);
    fill(b, K * N, 12);
    struct nxr_sgemm_args g = {.m = M, .n = N, .k = K, .alpha = 1.0f, .a = a, .lda = K, .b = b,
                          .ldb = N, .beta = 0.0f, .c = c1, .ldc = N};
    cr_assert_eq(nxr_sgemm(span, &g), 0, "%s", nxr_last_error());
    g.c = c2;
    cr_assert_eq(nxr_sgemm(plain, &g), 0);
    cr_expect(memcmp(c1, c2, M * N * sizeof(float)) == 0, "the span changed the bits");
    float s1, s2;
    cr_assert_eq(nxr_sum(span, M * K, a, &s1), 0);
    cr_assert_eq(nxr_sum(plain, M * K, a, &s2), 0);
    cr_expect(memcmp(&s1, &s2, sizeof(float)) == 0);
    free(a), free(b), free(c1), free(c2);
}

/* ---- argument rules before any member starts -------------------------------------- */

/* y overlapping x breaks nxr_sgemm's rule (C must not overlap A): the span
 * refuses the whole call before any member runs, so y is unchanged, and the
 * detail names the overlap as nxr_sgemm does (issue 30, defect 8). */
static void expect_overlap_refused(enum nxr_shard_layout layout)
{
    enum { M = 2, K = 64, N = 64 };
    float w[N * K];
    fill(w, N * K, 3);
    nxr_shards_t *s = layout == NXR_SHARD_BY_OUTPUT ? shard(w, N, K, NULL) : shard(w, K, N, NULL);
    /* One buffer: x is its first M x K, y starts inside x. */
    static float buf[M * K + M * N];
    fill(buf, M * K + M * N, 4);
    float before[M * K + M * N];
    memcpy(before, buf, sizeof(before));
    struct nxr_span_linear_args a = {.m = M,
                                     .k = K,
                                     .n = N,
                                     .x = buf,
                                     .ldx = K,
                                     .w = s,
                                     .layout = layout,
                                     .y = buf + K / 2,
                                     .ldy = N};
    int rc = nxr_span_linear(span, &a);
    cr_expect_eq(rc, -EINVAL, "got %d (%s)", rc, nxr_strerror(rc));
    cr_expect(strstr(nxr_last_error(), "nxr_span_linear: ") == nxr_last_error(), "%s",
              nxr_last_error());
    cr_expect_not_null(strstr(nxr_last_error(), "y overlaps x"), "the detail: %s",
                       nxr_last_error());
    size_t changed = 0;
    for (size_t i = 0; i < M * K + M * N; i++)
        changed += memcmp(&buf[i], &before[i], sizeof(float)) != 0;
    cr_expect_eq(changed, 0, "%zu outputs written by a refused call", changed);
    nxr_shards_destroy(s);
}

Test(runtime_span_kernels, y_overlapping_x_is_refused_before_any_member_writes)
{
    open_runtime("0:%0;1:%0 shared", false);
    const int ids[] = {0, 1};
    open_span(ids, 2);
    expect_overlap_refused(NXR_SHARD_BY_OUTPUT);
    expect_overlap_refused(NXR_SHARD_BY_INNER);
}
