/*
 * Span kernels (runtime/nxr_span.h): Y = X op(W) with W sharded across the
 * span's members. Each member's part is run by that member's team (the
 * span's loop over given parts, runtime/span.c), one GEMM per participant
 * on its own rows or columns, called through the member's own context from
 * inside the body, so the nesting rule runs it in place on one thread of
 * that member's CPUs, with scratch from that member's pool.
 *
 * BY_OUTPUT: member i writes the outputs of its rows; nothing to combine.
 * BY_INNER: member i writes its partial X[:, rows_i] W_i into a buffer of
 * its own pool, then the output columns are split across the members
 * again and each sums the partials of its columns in member order. The
 * partition is the shards' (fixed when they were made) and the order is
 * fixed, so the result does not depend on budgets or on who ran what.
 *
 * On a context over one domain the same code runs with one part, through
 * nxr_parallel_for on that context (no span permit, no partial).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "base/internal/last_error.h"
#include "kernels/internal/args.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/shards.h"
#include "runtime/internal/span.h"

/* Output columns per chunk of BY_INNER's partial and combine phases. */
#define COLUMN_CHUNK 16

static const char call[] = "nxr_span_linear";

struct linear {
    nxr_ctx_t *ctx;
    const struct nxr_span_linear_args *a;
    size_t ldw;     /* W's row stride in floats */
    size_t ldys;    /* y_shards' row stride in floats */
    size_t nparts;
    size_t columns; /* column chunks of n */
    float *partial[NXR__SPAN_MAX]; /* BY_INNER: member i's m x n partial (or y) */
    atomic_int status;             /* the first GEMM error */
    /* Its detail, from the thread that ran it (written once, by the thread
     * whose compare-exchange set status; read after the join). */
    char status_why[NXR__LAST_ERROR_BYTES];
};

/* The context whose kernels run in place on this body's thread. */
static nxr_ctx_t *body_ctx(const struct linear *l)
{
    const struct nxr__span *s = l->ctx->span;
    if (s == NULL)
        return l->ctx;
    int m = nxr__span_member_of_body(s);
    return m >= 0 ? s->member[m] : l->ctx;
}

static void gemm(struct linear *l, const struct nxr_sgemm_args *g)
{
    int rc = nxr_sgemm(body_ctx(l), g);
    int none = 0;
    if (rc != 0 && /* Relaxed: read after the operation joined. */
        atomic_compare_exchange_strong_explicit(&l->status, &none, rc, memory_order_relaxed,
                                                memory_order_relaxed))
        snprintf(l->status_why, sizeof(l->status_why), "%s", nxr_last_error());
}

/* BY_OUTPUT: output rows [b, e) of W (its parts in order). */
static void output_rows(void *p, size_t b, size_t e, unsigned worker)
{
    struct linear *l = p;
    const struct nxr_span_linear_args *a = l->a;
    (void)worker;
    for (size_t i = 0; i < l->nparts && b < e; i++) {
        const struct nxr_shard *w = &a->w->parts[i];
        if (b >= w->row0 + w->rows)
            continue;
        size_t r1 = e < w->row0 + w->rows ? e : w->row0 + w->rows;
        const float *wr = (const float *)w->data + (b - w->row0) * l->ldw;
        struct nxr_sgemm_args g = {.alpha = 1.0f, .beta = 0.0f, .k = a->k};
        if (a->y != NULL) { /* Y[:, b:r1] = X W[b:r1]^T */
            g = (struct nxr_sgemm_args){.trans_b = true, .m = a->m, .n = r1 - b, .k = a->k,
                                   .alpha = 1.0f, .a = a->x, .lda = a->ldx, .b = wr,
                                   .ldb = l->ldw, .beta = 0.0f, .c = a->y + b, .ldc = a->ldy};
        } else { /* Y^T[b:r1, :] = W[b:r1] X^T, in the output's own part */
            const struct nxr_shard *y = &a->y_shards->parts[i];
            g = (struct nxr_sgemm_args){.trans_b = true, .m = r1 - b, .n = a->m, .k = a->k,
                                   .alpha = 1.0f, .a = wr, .lda = l->ldw, .b = a->x,
                                   .ldb = a->ldx, .beta = 0.0f,
                                   .c = (float *)y->data + (b - y->row0) * l->ldys,
                                   .ldc = l->ldys};
        }
        gemm(l, &g);
        b = r1;
    }
}

/* BY_INNER, phase 1: units [b, e) of part * columns + column chunk. */
static void inner_partials(void *p, size_t b, size_t e, unsigned worker)
{
    struct linear *l = p;
    const struct nxr_span_linear_args *a = l->a;
    (void)worker;
    while (b < e) {
        size_t part = b / l->columns, c0 = b % l->columns;
        size_t stop = (part + 1) * l->columns < e ? (part + 1) * l->columns : e;
        size_t c1 = stop - part * l->columns;
        size_t j0 = c0 * COLUMN_CHUNK, j1 = c1 * COLUMN_CHUNK < a->n ? c1 * COLUMN_CHUNK : a->n;
        const struct nxr_shard *w = &a->w->parts[part];
        float *out = l->partial[part];
        size_t ldo = l->nparts == 1 ? a->ldy : a->n;
        /* P_part[:, j0:j1] = X[:, rows] W_part[:, j0:j1]; k = 0 writes zeros. */
        struct nxr_sgemm_args g = {.m = a->m, .n = j1 - j0, .k = w->rows, .alpha = 1.0f,
                              .a = a->x + w->row0, .lda = a->ldx,
                              .b = w->rows > 0 ? (const float *)w->data + j0 : a->x,
                              .ldb = w->rows > 0 ? l->ldw : a->n, .beta = 0.0f,
                              .c = out + j0, .ldc = ldo};
        gemm(l, &g);
        b = stop;
    }
}

/* BY_INNER, phase 2: column chunks [b, e) of Y, summed in member order. */
static void inner_combine(void *p, size_t b, size_t e, unsigned worker)
{
    struct linear *l = p;
    const struct nxr_span_linear_args *a = l->a;
    (void)worker;
    size_t j0 = b * COLUMN_CHUNK, j1 = e * COLUMN_CHUNK < a->n ? e * COLUMN_CHUNK : a->n;
    for (size_t i = 0; i < a->m; i++) {
        float *y = a->y + i * a->ldy;
        for (size_t j = j0; j < j1; j++) {
            float acc = l->partial[0][i * a->n + j];
            for (size_t q = 1; q < l->nparts; q++)
                acc += l->partial[q][i * a->n + j];
            y[j] = acc;
        }
    }
}

/* Runs fn over `units` split at `bounds` (member i gets [bounds[i],
 * bounds[i+1])): the span's loop over parts (in place inside a member's
 * body); on one domain, its loop. */
static int run_units(struct linear *l, const size_t *bounds, size_t units, nxr_for_fn fn,
                     char *why, size_t whysz)
{
    nxr_ctx_t *ctx = l->ctx;
    if (units == 0)
        return 0;
    if (ctx->span == NULL)
        return nxr_parallel_for(ctx, 0, units, 1, fn, l);
    return nxr__span_for_parts(ctx, bounds, fn, l, why, whysz);
}

/*
 * nxr_sgemm's argument rules (kernels/internal/args.h), applied before any
 * member starts to each member's whole part as the GEMM it stands for in
 * the caller's arrays, so that a call one of them would refuse (y
 * overlapping x or a part of w) writes nothing. The operands are named as
 * the caller knows them.
 */
static int member_gemms_bad(const struct nxr_span_linear_args *a, char *why, size_t whysz)
{
    const nxr_shards_t *w = a->w;
    size_t ldw = w->row_bytes / sizeof(float);
    for (size_t i = 0; i < w->n; i++) {
        const struct nxr_shard *p = &w->parts[i];
        char part[32], ypart[48];
        snprintf(part, sizeof(part), "w (part %zu)", i);
        snprintf(ypart, sizeof(ypart), "y_shards (part %zu)", i);
        const char *names[3] = {"x", part, "y"};
        struct nxr_sgemm_args g = {.alpha = 1.0f, .beta = 0.0f};
        if (a->layout == NXR_SHARD_BY_INNER) { /* Y += X[:, rows] W_part */
            g = (struct nxr_sgemm_args){.m = a->m,
                                        .n = a->n,
                                        .k = p->rows,
                                        .alpha = 1.0f,
                                        .a = a->x + p->row0,
                                        .lda = a->ldx,
                                        .b = p->data,
                                        .ldb = ldw,
                                        .c = a->y,
                                        .ldc = a->ldy};
        } else if (a->y != NULL) { /* Y[:, rows] = X W_part^T */
            g = (struct nxr_sgemm_args){.trans_b = true,
                                        .m = a->m,
                                        .n = p->rows,
                                        .k = a->k,
                                        .alpha = 1.0f,
                                        .a = a->x,
                                        .lda = a->ldx,
                                        .b = p->data,
                                        .ldb = ldw,
                                        .c = a->y + p->row0,
                                        .ldc = a->ldy};
        } else { /* Y_part^T = W_part X^T */
            const struct nxr_shard *y = &a->y_shards->parts[i];
            names[0] = part;
            names[1] = "x";
            names[2] = ypart;
            g = (struct nxr_sgemm_args){.trans_b = true,
                                        .m = p->rows,
                                        .n = a->m,
                                        .k = a->k,
                                        .alpha = 1.0f,
                                        .a = p->data,
                                        .lda = ldw,
                                        .b = a->x,
                                        .ldb = a->ldx,
                                        .c = y->data,
                                        .ldc = a->y_shards->row_bytes / sizeof(float)};
        }
        char rule[NXR__LAST_ERROR_BYTES / 2];
        if (p->rows > 0 && nxr__check_sgemm_named(&g, names, rule, sizeof(rule)) != 0) {
            snprintf(why, whysz, "member %zu's part: %s", i, rule);
            return -EINVAL;
        }
    }
    return 0;
}

/* Why the arguments are bad (into why), or 0. */
static int check(const nxr_ctx_t *ctx, const struct nxr_span_linear_args *a, char *why,
                 size_t whysz)
{
#define BAD(...) (snprintf(why, whysz, __VA_ARGS__), -EINVAL)
    if (a == NULL)
        return BAD("args is NULL");
    if (a->layout != NXR_SHARD_BY_OUTPUT && a->layout != NXR_SHARD_BY_INNER)
        return BAD("layout %d is not a shard layout", (int)a->layout);
    if (a->x == NULL || a->w == NULL)
        return BAD("%s is NULL", a->x == NULL ? "x" : "w");
    if ((a->y == NULL) == (a->y_shards == NULL))
        return BAD("give exactly one of y and y_shards");
    if (a->y_shards != NULL && a->layout != NXR_SHARD_BY_OUTPUT)
        return BAD("y_shards: a sharded output needs layout NXR_SHARD_BY_OUTPUT");
    if (a->ldx < a->k || a->ldx == 0)
        return BAD("ldx (%zu) < k (%zu)", a->ldx, a->k);
    if (a->y != NULL && (a->ldy < a->n || a->ldy == 0))
        return BAD("ldy (%zu) < n (%zu)", a->ldy, a->n);
    size_t members = nxr_span_domain_count(ctx);
    const nxr_shards_t *w = a->w;
    if (w->n != members)
        return BAD("w has %zu parts, the span %zu members", w->n, members);
    size_t want_rows = a->layout == NXR_SHARD_BY_OUTPUT ? a->n : a->k;
    size_t want_cols = a->layout == NXR_SHARD_BY_OUTPUT ? a->k : a->n;
    if (w->rows != want_rows)
        return BAD("w has %zu rows, the layout needs %s = %zu", w->rows,
                   a->layout == NXR_SHARD_BY_OUTPUT ? "n" : "k", want_rows);
    if (w->row_bytes % sizeof(float) != 0 || w->row_bytes / sizeof(float) < want_cols)
        return BAD("w's rows (%zu bytes) do not hold %zu floats", w->row_bytes, want_cols);
    for (size_t i = 0; i < members; i++) {
        if (w->parts[i].domain != nxr_span_domain_at(ctx, i))
            return BAD("w's part %zu lies on domain %d, the span's member %zu is domain %d", i,
                       nxr_domain_id(w->parts[i].domain), i,
                       nxr_domain_id(nxr_span_domain_at(ctx, i)));
    }
    const nxr_shards_t *y = a->y_shards;
    if (y != NULL) {
        if (y->n != members || y->rows != a->n || y->row_bytes % sizeof(float) != 0 ||
            y->row_bytes / sizeof(float) < a->m)
            return BAD("y_shards must have %zu parts of n = %zu rows of m = %zu floats", members,
                       a->n, a->m);
        for (size_t i = 0; i < members; i++) {
            if (y->parts[i].row0 != w->parts[i].row0 || y->parts[i].rows != w->parts[i].rows ||
                y->parts[i].domain != w->parts[i].domain)
                return BAD("y_shards' part %zu does not match w's (rows and domain)", i);
        }
    }
    return member_gemms_bad(a, why, whysz);
#undef BAD
}

static int linear(nxr_ctx_t *ctx, const struct nxr_span_linear_args *a, char *why, size_t whysz)
{
    int rc = check(ctx, a, why, whysz);
    if (rc != 0)
        return rc;
    if (a->m == 0 || a->n == 0)
        return 0;
    struct linear l = {.ctx = ctx, .a = a, .nparts = a->w->n,
                       .ldw = a->w->row_bytes / sizeof(float),
                       .ldys = a->y_shards != NULL ? a->y_shards->row_bytes / sizeof(float) : 0,
                       .columns = (a->n + COLUMN_CHUNK - 1) / COLUMN_CHUNK};
    atomic_init(&l.status, 0);
    size_t bounds[NXR__SPAN_MAX + 1];
    if (a->layout == NXR_SHARD_BY_OUTPUT) {
        for (size_t i = 0; i < l.nparts; i++)
            bounds[i] = a->w->parts[i].row0;
        bounds[l.nparts] = a->n;
        rc = run_units(&l, bounds, a->n, output_rows, why, whysz);
        if (rc == 0 && (rc = atomic_load_explicit(&l.status, memory_order_relaxed)) != 0)
            snprintf(why, whysz, "a member's GEMM: %.400s", l.status_why);
        return rc;
    }
    /* BY_INNER. One part: it is the whole product, written into y. */
    nxr_buffer_t *bufs[NXR__SPAN_MAX] = {0};
    if (l.nparts == 1) {
        l.partial[0] = a->y;
    } else {
        if (a->m > SIZE_MAX / sizeof(float) / a->n)
            return -ENOMEM;
        for (size_t i = 0; i < l.nparts; i++) {
            rc = nxr_buffer_acquire(a->w->parts[i].domain, a->m * a->n * sizeof(float), &bufs[i]);
            if (rc != 0) {
                snprintf(why, whysz, "the partial of member %zu (%zu bytes): %s", i,
                         a->m * a->n * sizeof(float), nxr_strerror(rc));
                goto out_release;
            }
            l.partial[i] = nxr_buffer_data(bufs[i]);
        }
    }
    for (size_t i = 0; i <= l.nparts; i++)
        bounds[i] = i * l.columns;
    rc = run_units(&l, bounds, l.nparts * l.columns, inner_partials, why, whysz);
    if (rc == 0 && (rc = atomic_load_explicit(&l.status, memory_order_relaxed)) != 0)
        snprintf(why, whysz, "a member's GEMM: %.400s", l.status_why);
    if (rc == 0 && l.nparts > 1) {
        for (size_t i = 0; i < l.nparts; i++)
            nxr_span_share(ctx, l.columns, i, &bounds[i], &bounds[i + 1]);
        rc = run_units(&l, bounds, l.columns, inner_combine, why, whysz);
    }
out_release:
    for (size_t i = 0; i < l.nparts; i++)
        nxr_buffer_release(bufs[i]);
    return rc;
}

int nxr_span_linear(nxr_ctx_t *ctx, const struct nxr_span_linear_args *args)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, call);
    if (rc != 0)
        return rc;
    return nxr__ctx_call_close(&c, ctx->domain, linear(ctx, args, c.why, sizeof(c.why)));
}
