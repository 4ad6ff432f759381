/*
 * The kernel API a service needs, through contexts: row-broadcast binary
 * ops (a bias over a batch), the fused GEMM epilogue (natively, and applied
 * by nxr for a provider without one), the argument rules enforced with an
 * error detail naming the argument (nxr_last_error), the detail of a
 * refusal made inside a body kept per thread, and the many-requests shape:
 * request tasks (OUTER) on the domain's workers, each calling kernels in
 * place with its own scope memory.
 *
 * Equality here is exact where the contract says bit for bit (fused vs the
 * three separate calls; row broadcasts vs a float reference: one rounding).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "ctx_support.h"
#include "tests/kernels/ref.h"
#include "tests/support/cpus.h"

static struct ctx_rt r;

static void open_default(void)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    ctx_rt_open(&r, &o);
}

static void teardown(void)
{
    if (r.rt != NULL)
        ctx_rt_close(&r);
}

TestSuite(kernels_ctx_service, .fini = teardown, .timeout = 120);

/* ---- row broadcasts ----------------------------------------------------------- */

static void rows_case(enum nxr_binary_op op, size_t rows, size_t cols, size_t ldx, size_t ldo,
                      bool in_place)
{
    float *x = ref_fill(rows * ldx + 1, 11 + cols, -2, 2);
    float *row = ref_fill(cols, 12 + cols, -2, 2);
    float *out = in_place ? x : ref_fill(rows * ldo + 1, 13, -9, 9);
    float *x0 = malloc((rows * ldx + 1) * sizeof(float));
    memcpy(x0, x, (rows * ldx + 1) * sizeof(float));
    float *out0 = malloc((rows * (in_place ? ldx : ldo) + 1) * sizeof(float));
    memcpy(out0, out, (rows * (in_place ? ldx : ldo) + 1) * sizeof(float));
    size_t ld_out = in_place ? ldx : ldo;
    int rc = nxr_binary_rows(r.ctx[0], op, rows, cols, x, ldx, row, out, ld_out);
    cr_assert_eq(rc, 0, "%s", nxr_last_error());
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < ld_out; j++) {
            float got = out[i * ld_out + j];
            if (j >= cols) {
                cr_assert_eq(got, out0[i * ld_out + j], "padding [%zu][%zu] untouched", i, j);
                continue;
            }
            float a = x0[i * ldx + j], b = row[j];
            float want = op == NXR_BINARY_ADD ? a + b : a * b;
            cr_assert_eq(got, want, "%s %zux%zu [%zu][%zu]: %.9g, want %.9g",
                         op == NXR_BINARY_ADD ? "add" : "mul", rows, cols, i, j, got, want);
        }
    }
    free(x0);
    free(out0);
    if (!in_place)
        free(out);
    free(x);
    free(row);
}

Test(kernels_ctx_service, binary_rows_is_a_bias_over_a_batch)
{
    open_default();
    rows_case(NXR_BINARY_ADD, 1, 1, 1, 1, false);
    rows_case(NXR_BINARY_ADD, 5, 37, 40, 41, false);
    rows_case(NXR_BINARY_MUL, 5, 37, 40, 37, false);
    rows_case(NXR_BINARY_ADD, 300, 129, 129, 129, true);
    rows_case(NXR_BINARY_MUL, 64, 1024, 1030, 1030, true);
    /* Empty shapes touch nothing. */
    cr_assert_eq(nxr_binary_rows(r.ctx[0], NXR_BINARY_ADD, 0, 8, NULL, 8, NULL, NULL, 8), 0);
    cr_assert_eq(nxr_binary_rows(r.ctx[0], NXR_BINARY_ADD, 8, 0, NULL, 0, NULL, NULL, 0), 0);
}

/* ---- the fused epilogue -------------------------------------------------------- */

struct gemm_case {
    size_t m, n, k;
    float alpha, beta;
    float *a, *b, *bias, *c_init;
};

static void gemm_case_init(struct gemm_case *g, size_t m, size_t n, size_t k, float alpha,
                           float beta, uint64_t seed)
{
    *g = (struct gemm_case){.m = m, .n = n, .k = k, .alpha = alpha, .beta = beta};
    g->a = ref_fill(m * k, seed, -1, 1);
    g->b = ref_fill(k * n, seed + 1, -1, 1);
    g->bias = ref_fill(n, seed + 2, -1, 1);
    g->c_init = ref_fill(m * n, seed + 3, -1, 1);
}

static void gemm_case_fini(struct gemm_case *g)
{
    free(g->a);
    free(g->b);
    free(g->bias);
    free(g->c_init);
}

static struct nxr_sgemm_args args_of(const struct gemm_case *g, float *c)
{
    return (struct nxr_sgemm_args){.m = g->m, .n = g->n, .k = g->k, .alpha = g->alpha, .a = g->a,
                              .lda = g->k, .b = g->b, .ldb = g->n, .beta = g->beta, .c = c,
                              .ldc = g->n};
}

/* fused(ctx) == sgemm + binary_rows(ADD, bias) + unary(act), bit for bit. */
static void expect_fused_equals_unfused(nxr_ctx_t *ctx, const struct gemm_case *g,
                                        enum nxr_activation act, bool bias)
{
    size_t mn = g->m * g->n;
    float *fused = malloc(mn * sizeof(float)), *plain = malloc(mn * sizeof(float));
    memcpy(fused, g->c_init, mn * sizeof(float));
    memcpy(plain, g->c_init, mn * sizeof(float));
    struct nxr_sgemm_epilogue ep = {.bias = bias ? g->bias : NULL, .activation = act};
    struct nxr_sgemm_args fa = args_of(g, fused), pa = args_of(g, plain);
    cr_assert_eq(nxr_sgemm_fused(ctx, &fa, &ep), 0, "%s", nxr_last_error());
    cr_assert_eq(nxr_sgemm(ctx, &pa), 0);
    if (bias)
        cr_assert_eq(nxr_binary_rows(ctx, NXR_BINARY_ADD, g->m, g->n, plain, g->n, g->bias, plain,
                                     g->n),
                     0);
    if (act != NXR_ACTIVATION_NONE)
        cr_assert_eq(nxr_unary(ctx, act == NXR_ACTIVATION_SILU ? NXR_UNARY_SILU
                                                               : NXR_UNARY_GELU_TANH,
                               mn, plain, plain),
                     0);
    for (size_t i = 0; i < mn; i++)
        cr_assert_eq(fused[i], plain[i], "%zux%zux%zu act %d bias %d: C[%zu] %.9g != %.9g", g->m,
                     g->n, g->k, (int)act, bias, i, fused[i], plain[i]);
    free(fused);
    free(plain);
}

Test(kernels_ctx_service, fused_epilogue_equals_the_three_calls_bit_for_bit)
{
    open_default();
    /* Edges in every direction, k over one kc slice (512), n over one nc
     * block (1024: the bias must follow the column block). */
    static const size_t shapes[][3] = {
        {1, 1, 1}, {4, 256, 64}, {67, 133, 45}, {300, 70, 600}, {5, 1100, 30}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        struct gemm_case g;
        gemm_case_init(&g, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 0.0f, 100 + s);
        expect_fused_equals_unfused(r.ctx[0], &g, NXR_ACTIVATION_SILU, true);
        expect_fused_equals_unfused(r.ctx[0], &g, NXR_ACTIVATION_GELU_TANH, true);
        expect_fused_equals_unfused(r.ctx[0], &g, NXR_ACTIVATION_NONE, true);
        expect_fused_equals_unfused(r.ctx[0], &g, NXR_ACTIVATION_SILU, false);
        gemm_case_fini(&g);
    }
    /* beta != 0, and alpha == 0 (no product: C scaled, then the epilogue). */
    struct gemm_case g;
    gemm_case_init(&g, 33, 47, 19, 0.5f, 0.25f, 7);
    expect_fused_equals_unfused(r.ctx[0], &g, NXR_ACTIVATION_GELU_TANH, true);
    g.alpha = 0.0f;
    expect_fused_equals_unfused(r.ctx[0], &g, NXR_ACTIVATION_SILU, true);
    gemm_case_fini(&g);
}

Test(kernels_ctx_service, fused_epilogue_does_not_depend_on_the_split)
{
    open_default();
    struct ctx_rt one;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.num_threads = 1;
    ctx_rt_open(&one, &o);
    struct gemm_case g;
    gemm_case_init(&g, 200, 300, 70, 1.0f, 0.0f, 55);
    size_t mn = g.m * g.n;
    float *wide = malloc(mn * sizeof(float)), *seq = malloc(mn * sizeof(float));
    struct nxr_sgemm_epilogue ep = {.bias = g.bias, .activation = NXR_ACTIVATION_GELU_TANH};
    struct nxr_sgemm_args wa = args_of(&g, wide), sa = args_of(&g, seq);
    cr_assert_eq(nxr_sgemm_fused(r.ctx[0], &wa, &ep), 0);
    cr_assert_eq(nxr_sgemm_fused(one.ctx[0], &sa, &ep), 0);
    cr_assert_eq(memcmp(wide, seq, mn * sizeof(float)), 0, "budget %u vs 1",
                 nxr_ctx_budget(r.ctx[0]));
    free(wide);
    free(seq);
    gemm_case_fini(&g);
    ctx_rt_close(&one);
}

/* A foreign GEMM without sgemm_fused: a plain loop, through parallel_for. */
struct naive_job {
    const struct nxr_sgemm_args *g;
};

static void naive_rows(void *p, size_t b, size_t e, unsigned w)
{
    const struct nxr_sgemm_args *g = ((struct naive_job *)p)->g;
    (void)w;
    for (size_t i = b; i < e; i++)
        for (size_t j = 0; j < g->n; j++) {
            float acc = 0.0f;
            for (size_t p2 = 0; p2 < g->k; p2++)
                acc += g->a[i * g->lda + p2] * g->b[p2 * g->ldb + j];
            g->c[i * g->ldc + j] = g->alpha * acc + (g->beta != 0.0f ? g->beta * g->c[i * g->ldc + j] : 0.0f);
        }
}

static atomic_int naive_calls;

static int naive_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *g)
{
    (void)self;
    atomic_fetch_add_explicit(&naive_calls, 1, memory_order_relaxed);
    struct naive_job job = {.g = g};
    if (call->parallel_for == NULL) {
        naive_rows(&job, 0, g->m, 0);
        return 0;
    }
    return call->parallel_for(call, g->m, 8, naive_rows, &job);
}

static const struct nxr_gemm_ops naive_ops = {.sgemm = naive_sgemm};

Test(kernels_ctx_service, a_provider_without_sgemm_fused_gets_the_epilogue_from_nxr)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "naive";
    d.family = NXR_FAMILY_GEMM;
    d.count = NXR_COUNT_PER_CALL_BOUND;
    d.runs_on = NXR_RUNS_ON_ENGINE_WORKERS;
    d.gemm = &naive_ops;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.gemm = p;
    ctx_rt_open(&r, &o);
    atomic_store(&naive_calls, 0);
    struct gemm_case g;
    gemm_case_init(&g, 90, 50, 30, 1.0f, 0.0f, 77);
    expect_fused_equals_unfused(r.ctx[0], &g, NXR_ACTIVATION_SILU, true);
    cr_assert_eq(atomic_load(&naive_calls), 2, "the provider's sgemm, once per path");
    gemm_case_fini(&g);
    ctx_rt_close(&r);
    nxr_provider_destroy(p);
}

/* ---- the argument rules, with their detail ------------------------------------ */

static void expect_bad(int rc, nxr_ctx_t *ctx, const char *call, const char *why)
{
    cr_assert_eq(rc, -EINVAL, "%s: %s", call, nxr_strerror(rc));
    const char *detail = nxr_last_error();
    cr_assert_eq(nxr_ctx_last_error(ctx), detail, "the deprecated 0.x name reads the same slot");
    cr_assert_eq(strncmp(detail, call, strlen(call)), 0, "the detail names the call: %s", detail);
    cr_assert(strstr(detail, why) != NULL, "the detail says '%s': %s", why, detail);
}

Test(kernels_ctx_service, broken_preconditions_are_einval_with_a_detail)
{
    open_default();
    nxr_ctx_t *ctx = r.ctx[0];
    cr_assert_str_eq(nxr_last_error(), "", "nothing failed yet");
    static float buf[4096];
    struct nxr_sgemm_args g = {.m = 8, .n = 8, .k = 8, .alpha = 1, .a = buf, .lda = 8,
                          .b = buf + 1024, .ldb = 8, .c = buf + 2048, .ldc = 8};
    cr_assert_eq(nxr_sgemm(ctx, &g), 0);
    struct nxr_sgemm_args bad = g;
    bad.c = buf;
    expect_bad(nxr_sgemm(ctx, &bad), ctx, "nxr_sgemm", "c == a");
    bad.c = buf + 40; /* inside A's 64 floats */
    expect_bad(nxr_sgemm(ctx, &bad), ctx, "nxr_sgemm", "c overlaps a");
    bad = g;
    bad.c = buf + 1024 + 60;
    expect_bad(nxr_sgemm(ctx, &bad), ctx, "nxr_sgemm", "c overlaps b");
    bad = g;
    bad.lda = 3;
    expect_bad(nxr_sgemm(ctx, &bad), ctx, "nxr_sgemm", "lda (3) < k (8)");
    struct nxr_sgemm_epilogue ep = {.bias = buf + 2048, .activation = NXR_ACTIVATION_SILU};
    expect_bad(nxr_sgemm_fused(ctx, &g, &ep), ctx, "nxr_sgemm_fused", "bias overlaps c");
    ep = (struct nxr_sgemm_epilogue){.bias = buf, .activation = (enum nxr_activation)7};
    expect_bad(nxr_sgemm_fused(ctx, &g, &ep), ctx, "nxr_sgemm_fused", "not an activation");

    struct nxr_sgemm_batch_args bt = {.gemm = g, .batch = 2};
    expect_bad(nxr_sgemm_batch(ctx, &bt), ctx, "nxr_sgemm_batch", "stride_c is 0");
    bt.stride_c = 40; /* item 1 starts inside item 0's 8 x 8 */
    expect_bad(nxr_sgemm_batch(ctx, &bt), ctx, "nxr_sgemm_batch", "C items 0 and 1 overlap");
    /* Interleaved items that share no element are fine: ldc 16, stride 8. */
    bt.gemm.ldc = 16;
    bt.stride_c = 8;
    cr_assert_eq(nxr_sgemm_batch(ctx, &bt), 0, "%s", nxr_last_error());

    expect_bad(nxr_binary(ctx, NXR_BINARY_ADD, 100, buf, buf + 200, buf + 50), ctx, "nxr_binary",
               "out overlaps x partially");
    expect_bad(nxr_binary(ctx, NXR_BINARY_MUL, 100, buf, buf + 200, buf + 250), ctx,
               "nxr_binary", "out overlaps y partially");
    cr_assert_eq(nxr_binary(ctx, NXR_BINARY_ADD, 100, buf, buf + 200, buf), 0, "out == x");
    expect_bad(nxr_triad(ctx, 100, buf, buf + 300, 2, buf + 10), ctx, "nxr_triad",
               "a overlaps b partially");
    expect_bad(nxr_unary(ctx, NXR_UNARY_SILU, 100, buf, buf + 1), ctx, "nxr_unary",
               "out overlaps x partially");

    expect_bad(nxr_rmsnorm(ctx, 4, 8, buf, 8, NULL, 0, buf, 16), ctx, "nxr_rmsnorm",
               "out == x but ldo (16) != ldx (8)");
    expect_bad(nxr_softmax(ctx, 4, 8, buf, 8, buf + 4, 8), ctx, "nxr_softmax",
               "out overlaps x partially");
    expect_bad(nxr_layernorm(ctx, 4, 8, buf, 8, buf + 1000, buf + 1002, 0, buf + 1000, 8), ctx,
               "nxr_layernorm", "gamma overlaps out");
    cr_assert_eq(nxr_rmsnorm(ctx, 4, 8, buf, 8, NULL, 0, buf, 8), 0, "in place is fine");

    expect_bad(nxr_binary_rows(ctx, NXR_BINARY_ADD, 4, 8, buf, 8, buf + 10, buf, 8), ctx,
               "nxr_binary_rows", "row overlaps out");
    expect_bad(nxr_binary_rows(ctx, NXR_BINARY_ADD, 4, 8, buf, 8, buf + 100, buf, 9), ctx,
               "nxr_binary_rows", "out == x but ldo (9) != ldx (8)");
    expect_bad(nxr_binary_rows(ctx, NXR_BINARY_ADD, 4, 8, buf, 7, buf + 100, buf + 200, 8), ctx,
               "nxr_binary_rows", "ldx (7) < cols (8)");

    int calls = 0;
    cr_assert_eq(nxr_parallel_for(ctx, 5, 1, 0, NULL, &calls), -EINVAL);
    cr_assert(strstr(nxr_last_error(), "nxr_parallel_for: fn is NULL") != NULL, "%s",
              nxr_last_error());
}

struct nested {
    nxr_ctx_t *other;
    atomic_int rc;
    char detail[256];
};

static void call_other_domain(void *p, size_t b, size_t e, unsigned w)
{
    struct nested *n = p;
    (void)b, (void)e;
    float x[4] = {1, 2, 3, 4}, s;
    int rc = nxr_sum(n->other, 4, x, &s);
    if (w == 0) {
        atomic_store(&n->rc, rc);
        snprintf(n->detail, sizeof(n->detail), "%s", nxr_last_error());
    }
}

Test(kernels_ctx_service, a_refusal_inside_a_body_is_explained_to_that_thread_only)
{
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.domains = nxr_test_expand("0:%0;1:%0 shared");
    ctx_rt_open(&r, &o);
    struct nested n = {.other = r.ctx[1]};
    atomic_init(&n.rc, 1);
    cr_assert_eq(nxr_parallel_for(r.ctx[0], 0, 1, 0, call_other_domain, &n), 0);
    cr_assert_eq(atomic_load(&n.rc), NXR_EREENTRANT);
    cr_assert(strstr(n.detail, "nxr_sum: called inside a body of domain 0 on domain 1") != NULL,
              "inside the body: %s", n.detail);
    cr_assert_str_eq(nxr_last_error(), "",
                     "the driver's detail is not the body's");
}

/* ---- many requests on one domain ------------------------------------------------ */

/* A two-layer MLP request: h = silu(x W1 + b1), y = h W2 + b2, with h in the
 * request's own scope. */
/* DH spans two GEMM column blocks (nc = 1024): a fan-out inside a task would
 * have two tiles to split, so "in place" is a real claim. */
enum { BATCH = 4, DIN = 64, DH = 1100, DOUT = 32, REQUESTS = 12 };

struct model {
    float *w1, *b1, *w2, *b2;
};

struct request {
    nxr_ctx_t *ctx;
    const struct model *m;
    nxr_scope_t *scope;
    float x[BATCH * DIN];
    float y[BATCH * DOUT];
    int rc;
};

static int mlp(nxr_ctx_t *ctx, const struct model *m, nxr_scope_t *scope, const float *x,
               float *y)
{
    float *h;
    int rc = nxr_scope_alloc(scope, BATCH * DH * sizeof(float), (void **)&h);
    if (rc != 0)
        return rc;
    struct nxr_sgemm_args l1 = {.m = BATCH, .n = DH, .k = DIN, .alpha = 1, .a = x, .lda = DIN,
                           .b = m->w1, .ldb = DH, .c = h, .ldc = DH};
    struct nxr_sgemm_epilogue e1 = {.bias = m->b1, .activation = NXR_ACTIVATION_SILU};
    if ((rc = nxr_sgemm_fused(ctx, &l1, &e1)) != 0)
        return rc;
    struct nxr_sgemm_args l2 = {.m = BATCH, .n = DOUT, .k = DH, .alpha = 1, .a = h, .lda = DH,
                           .b = m->w2, .ldb = DOUT, .c = y, .ldc = DOUT};
    if ((rc = nxr_sgemm(ctx, &l2)) != 0)
        return rc;
    rc = nxr_binary_rows(ctx, NXR_BINARY_ADD, BATCH, DOUT, y, DOUT, m->b2, y, DOUT);
    nxr_scope_reset(scope);
    return rc;
}

static int request_task(void *arg, size_t i)
{
    struct request *reqs = arg;
    struct request *q = &reqs[i];
    q->rc = mlp(q->ctx, q->m, q->scope, q->x, q->y);
    return q->rc;
}

Test(kernels_ctx_service, request_tasks_run_kernels_in_place_with_their_own_scope)
{
    open_default();
    nxr_ctx_t *ctx = r.ctx[0];
    nxr_domain_t *d = nxr_ctx_domain(ctx);
    struct model m;
    cr_assert_eq(nxr_domain_malloc(d, DIN * DH * sizeof(float), 64, (void **)&m.w1), 0);
    cr_assert_eq(nxr_domain_malloc(d, DH * DOUT * sizeof(float), 64, (void **)&m.w2), 0);
    cr_assert_eq(nxr_domain_malloc(d, DH * sizeof(float), 64, (void **)&m.b1), 0);
    cr_assert_eq(nxr_domain_malloc(d, DOUT * sizeof(float), 64, (void **)&m.b2), 0);
    uint64_t s = 5;
    for (size_t i = 0; i < DIN * DH; i++)
        m.w1[i] = ref_uniform(&s, -0.2f, 0.2f);
    for (size_t i = 0; i < DH * DOUT; i++)
        m.w2[i] = ref_uniform(&s, -0.2f, 0.2f);
    for (size_t i = 0; i < DH; i++)
        m.b1[i] = ref_uniform(&s, -1, 1);
    for (size_t i = 0; i < DOUT; i++)
        m.b2[i] = ref_uniform(&s, -1, 1);
    struct request *reqs = calloc(REQUESTS, sizeof(*reqs));
    for (size_t i = 0; i < REQUESTS; i++) {
        reqs[i].ctx = ctx;
        reqs[i].m = &m;
        cr_assert_eq(nxr_scope_create(d, NULL, &reqs[i].scope), 0);
        /* Warm the scope on the driver, as a service does at start-up: the
         * tasks then bump through a chunk they already hold. (A worker's
         * first pool allocation works too, but TSan misreads the private
         * jemalloc's uninstrumented locks there.) */
        void *warm;
        cr_assert_eq(nxr_scope_alloc(reqs[i].scope, BATCH * DH * sizeof(float), &warm), 0);
        nxr_scope_reset(reqs[i].scope);
        for (size_t j = 0; j < BATCH * DIN; j++)
            reqs[i].x[j] = ref_uniform(&s, -1, 1);
    }
    uint64_t regions = ctx_regions(ctx), nested = ctx_nested_regions(ctx);
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, REQUESTS, request_task, reqs), 0, "%s",
                 nxr_last_error());
    cr_assert_leq(ctx_regions(ctx) - regions, 1, "one region for all requests (none at budget 1)");
    cr_assert_eq(ctx_nested_regions(ctx), nested, "kernels ran in place: no nested fan-out");
    /* Each request's answer equals the same MLP run by the driver. */
    nxr_scope_t *mine;
    cr_assert_eq(nxr_scope_create(d, NULL, &mine), 0);
    for (size_t i = 0; i < REQUESTS; i++) {
        float want[BATCH * DOUT];
        cr_assert_eq(mlp(ctx, &m, mine, reqs[i].x, want), 0);
        cr_assert_eq(memcmp(want, reqs[i].y, sizeof(want)), 0, "request %zu", i);
        nxr_scope_destroy(reqs[i].scope);
    }
    nxr_scope_destroy(mine);
    free(reqs);
    nxr_domain_free(m.w1);
    nxr_domain_free(m.w2);
    nxr_domain_free(m.b1);
    nxr_domain_free(m.b2);
}
