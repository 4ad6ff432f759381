/*
 * The kernel contract's argument rules, checked once for every provider
 * (see internal/args.h). Every rejection says which argument and why.
 */
#include "kernels/internal/args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static size_t mul_sat(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

static size_t add_sat(size_t a, size_t b)
{
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}

size_t nxr__matrix_bytes(size_t rows, size_t cols, size_t ld)
{
    if (rows == 0 || cols == 0)
        return 0;
    return mul_sat(add_sat(mul_sat(rows - 1, ld), cols), sizeof(float));
}

size_t nxr__batch_bytes(size_t item_bytes, size_t batch, size_t stride)
{
    if (item_bytes == 0 || batch == 0)
        return 0;
    return add_sat(item_bytes, mul_sat(mul_sat(batch - 1, stride), sizeof(float)));
}

bool nxr__spans_overlap(const void *a, size_t an, const void *b, size_t bn)
{
    if (a == NULL || b == NULL || an == 0 || bn == 0)
        return false;
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    uintptr_t ea = an > UINTPTR_MAX - pa ? UINTPTR_MAX : pa + an;
    uintptr_t eb = bn > UINTPTR_MAX - pb ? UINTPTR_MAX : pb + bn;
    return pa < eb && pb < ea;
}

bool nxr__sgemm_reads_ab(const struct nxr_sgemm_args *g)
{
    return g->m > 0 && g->n > 0 && g->k > 0 && g->alpha != 0.0f;
}

size_t nxr__sgemm_a_bytes(const struct nxr_sgemm_args *g)
{
    if (!nxr__sgemm_reads_ab(g))
        return 0;
    return g->trans_a ? nxr__matrix_bytes(g->k, g->m, g->lda) : nxr__matrix_bytes(g->m, g->k, g->lda);
}

size_t nxr__sgemm_b_bytes(const struct nxr_sgemm_args *g)
{
    if (!nxr__sgemm_reads_ab(g))
        return 0;
    return g->trans_b ? nxr__matrix_bytes(g->n, g->k, g->ldb) : nxr__matrix_bytes(g->k, g->n, g->ldb);
}

size_t nxr__sgemm_c_bytes(const struct nxr_sgemm_args *g)
{
    return nxr__matrix_bytes(g->m, g->n, g->ldc);
}

static int bad(char *why, size_t whysz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(char *why, size_t whysz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whysz, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

int nxr__check_sgemm(const struct nxr_sgemm_args *g, char *why, size_t whysz)
{
    static const char *const abc[3] = {"a", "b", "c"};
    return nxr__check_sgemm_named(g, abc, why, whysz);
}

int nxr__check_sgemm_named(const struct nxr_sgemm_args *g, const char *const names[3], char *why,
                           size_t whysz)
{
    return nxr__check_sgemm_b_span(g, names, g != NULL ? nxr__sgemm_b_bytes(g) : 0, why, whysz);
}

int nxr__check_sgemm_b_span(const struct nxr_sgemm_args *g, const char *const names[3],
                            size_t b_bytes, char *why, size_t whysz)
{
    if (g == NULL)
        return bad(why, whysz, "args is NULL");
    if (g->m == 0 || g->n == 0)
        return 0; /* nothing is touched */
    if (g->c == NULL)
        return bad(why, whysz, "%s is NULL", names[2]);
    if (g->ldc < g->n)
        return bad(why, whysz, "ldc (%zu) < n (%zu)", g->ldc, g->n);
    if (!nxr__sgemm_reads_ab(g))
        return 0; /* A and B are not read */
    if (g->a == NULL)
        return bad(why, whysz, "%s is NULL", names[0]);
    if (g->b == NULL)
        return bad(why, whysz, "%s is NULL", names[1]);
    size_t need_a = g->trans_a ? g->m : g->k, need_b = g->trans_b ? g->k : g->n;
    if (g->lda < need_a)
        return bad(why, whysz, "lda (%zu) < %s (%zu) with A %stransposed", g->lda,
                   g->trans_a ? "m" : "k", need_a, g->trans_a ? "" : "not ");
    if (g->ldb < need_b)
        return bad(why, whysz, "ldb (%zu) < %s (%zu) with B %stransposed", g->ldb,
                   g->trans_b ? "k" : "n", need_b, g->trans_b ? "" : "not ");
    size_t c = nxr__sgemm_c_bytes(g);
    if (nxr__spans_overlap(g->c, c, g->a, nxr__sgemm_a_bytes(g)))
        return bad(why, whysz, "%s %s %s (C must not overlap A or B)", names[2],
                   g->c == g->a ? "==" : "overlaps", names[0]);
    if (nxr__spans_overlap(g->c, c, g->b, b_bytes))
        return bad(why, whysz, "%s %s %s (C must not overlap A or B)", names[2],
                   g->c == g->b ? "==" : "overlaps", names[1]);
    return 0;
}

/* Whether C items i and i + d (d >= 1) share an element: an offset of
 * d * stride floats must be dr * ldc + dc with 0 <= dr < m and |dc| < n.
 * Returns the first such d below batch, or 0. */
static size_t first_overlapping_item(const struct nxr_sgemm_args *g, size_t batch, size_t stride)
{
    size_t reach = add_sat(mul_sat(g->m - 1, g->ldc), g->n - 1); /* largest such offset */
    for (size_t d = 1; d < batch; d++) {
        size_t off = mul_sat(d, stride);
        if (off > reach)
            return 0; /* and every larger d is further */
        size_t q = off / g->ldc, r = off % g->ldc;
        if ((q <= g->m - 1 && r <= g->n - 1) || (q + 1 <= g->m - 1 && g->ldc - r <= g->n - 1))
            return d;
    }
    return 0;
}

int nxr__check_sgemm_batch(const struct nxr_sgemm_batch_args *b, char *why, size_t whysz)
{
    if (b == NULL)
        return bad(why, whysz, "args is NULL");
    const struct nxr_sgemm_args *g = &b->gemm;
    int rc = nxr__check_sgemm(g, why, whysz);
    if (rc != 0 || b->batch <= 1 || g->m == 0 || g->n == 0)
        return rc;
    if (b->stride_c == 0)
        return bad(why, whysz, "stride_c is 0 with batch %zu > 1: every item would write one C",
                   b->batch);
    size_t d = first_overlapping_item(g, b->batch, b->stride_c);
    if (d != 0)
        return bad(why, whysz,
                   "C items 0 and %zu overlap (stride_c %zu < the %zu x %zu item with ldc %zu)", d,
                   b->stride_c, g->m, g->n, g->ldc);
    size_t c = nxr__batch_bytes(nxr__sgemm_c_bytes(g), b->batch, b->stride_c);
    if (nxr__spans_overlap(g->c, c, g->a, nxr__batch_bytes(nxr__sgemm_a_bytes(g), b->batch,
                                                           b->stride_a)))
        return bad(why, whysz, "the C items overlap the A items (C must not overlap A or B)");
    if (nxr__spans_overlap(g->c, c, g->b, nxr__batch_bytes(nxr__sgemm_b_bytes(g), b->batch,
                                                           b->stride_b)))
        return bad(why, whysz, "the C items overlap the B items (C must not overlap A or B)");
    return 0;
}

int nxr__check_epilogue(const struct nxr_sgemm_args *g, const struct nxr_sgemm_epilogue *ep, char *why,
                        size_t whysz)
{
    if (ep == NULL)
        return 0;
    if ((unsigned)ep->activation > NXR_ACTIVATION_GELU_TANH)
        return bad(why, whysz, "epilogue->activation (%d) is not an activation",
                   (int)ep->activation);
    if (g->m > 0 && g->n > 0 &&
        nxr__spans_overlap(g->c, nxr__sgemm_c_bytes(g), ep->bias, g->n * sizeof(float)))
        return bad(why, whysz, "epilogue->bias overlaps c");
    return 0;
}

/* out may be the input exactly; any other shared byte is a partial alias. */
static int check_alias(size_t bytes, const float *in, const char *in_name, const float *out,
                       const char *out_name, char *why, size_t whysz)
{
    if (out != in && nxr__spans_overlap(out, bytes, in, bytes))
        return bad(why, whysz, "%s overlaps %s partially (only %s == %s is allowed)", out_name,
                   in_name, out_name, in_name);
    return 0;
}

int nxr__check_vectors(size_t n, const float *x, const float *y, bool two_inputs, const float *out,
                       const char *const names[3], char *why, size_t whysz)
{
    if (n == 0)
        return 0;
    if (x == NULL)
        return bad(why, whysz, "%s is NULL", names[0]);
    if (two_inputs && y == NULL)
        return bad(why, whysz, "%s is NULL", names[1]);
    if (out == NULL)
        return bad(why, whysz, "%s is NULL", names[2]);
    size_t bytes = mul_sat(n, sizeof(float));
    int rc = check_alias(bytes, x, names[0], out, names[2], why, whysz);
    if (rc == 0 && two_inputs)
        rc = check_alias(bytes, y, names[1], out, names[2], why, whysz);
    return rc;
}

int nxr__check_reduction(size_t n, const float *x, const void *out, bool empty_ok, char *why,
                         size_t whysz)
{
    if (out == NULL)
        return bad(why, whysz, "out is NULL");
    if (n == 0 && !empty_ok)
        return bad(why, whysz, "n is 0 (the reduction of nothing has no value)");
    if (n > 0 && x == NULL)
        return bad(why, whysz, "x is NULL");
    return 0;
}

/* out vs x for a rows x cols operation: the same matrix, or disjoint. */
static int check_matrix_alias(size_t rows, size_t cols, const float *x, size_t ldx,
                              const float *out, size_t ldo, char *why, size_t whysz)
{
    if (out == x) {
        if (ldo != ldx)
            return bad(why, whysz, "out == x but ldo (%zu) != ldx (%zu)", ldo, ldx);
        return 0;
    }
    if (nxr__spans_overlap(out, nxr__matrix_bytes(rows, cols, ldo), x,
                           nxr__matrix_bytes(rows, cols, ldx)))
        return bad(why, whysz, "out overlaps x partially (only out == x with ldo == ldx)");
    return 0;
}

int nxr__check_rows(size_t rows, size_t cols, const float *x, size_t ldx, const float *gamma,
                    const float *beta, float eps, const float *out, size_t ldo, char *why,
                    size_t whysz)
{
    if (cols == 0)
        return bad(why, whysz, "cols is 0");
    if (ldx < cols)
        return bad(why, whysz, "ldx (%zu) < cols (%zu)", ldx, cols);
    if (ldo < cols)
        return bad(why, whysz, "ldo (%zu) < cols (%zu)", ldo, cols);
    if (isnan(eps) || eps < 0.0f)
        return bad(why, whysz, "eps (%g) is negative or NaN", (double)eps);
    if (rows == 0)
        return 0;
    if (x == NULL)
        return bad(why, whysz, "x is NULL");
    if (out == NULL)
        return bad(why, whysz, "out is NULL");
    int rc = check_matrix_alias(rows, cols, x, ldx, out, ldo, why, whysz);
    if (rc != 0)
        return rc;
    size_t obytes = nxr__matrix_bytes(rows, cols, ldo), vbytes = mul_sat(cols, sizeof(float));
    if (nxr__spans_overlap(out, obytes, gamma, vbytes))
        return bad(why, whysz, "gamma overlaps out");
    if (nxr__spans_overlap(out, obytes, beta, vbytes))
        return bad(why, whysz, "beta overlaps out");
    return 0;
}

int nxr__check_binary_rows(size_t rows, size_t cols, const float *x, size_t ldx, const float *row,
                           const float *out, size_t ldo, char *why, size_t whysz)
{
    if (ldx < cols)
        return bad(why, whysz, "ldx (%zu) < cols (%zu)", ldx, cols);
    if (ldo < cols)
        return bad(why, whysz, "ldo (%zu) < cols (%zu)", ldo, cols);
    if (rows == 0 || cols == 0)
        return 0;
    if (x == NULL)
        return bad(why, whysz, "x is NULL");
    if (row == NULL)
        return bad(why, whysz, "row is NULL");
    if (out == NULL)
        return bad(why, whysz, "out is NULL");
    int rc = check_matrix_alias(rows, cols, x, ldx, out, ldo, why, whysz);
    if (rc != 0)
        return rc;
    if (nxr__spans_overlap(out, nxr__matrix_bytes(rows, cols, ldo), row, mul_sat(cols, sizeof(float))))
        return bad(why, whysz, "row overlaps out");
    return 0;
}

int nxr__check_binary_op(enum nxr_binary_op op, char *why, size_t whysz)
{
    if (op != NXR_BINARY_ADD && op != NXR_BINARY_MUL)
        return bad(why, whysz,
                   "op %d is not an enum nxr_binary_op (NXR_BINARY_ADD, NXR_BINARY_MUL)", (int)op);
    return 0;
}

int nxr__check_unary_op(enum nxr_unary_op op, char *why, size_t whysz)
{
    if (op != NXR_UNARY_SILU && op != NXR_UNARY_GELU_TANH)
        return bad(why, whysz,
                   "op %d is not an enum nxr_unary_op (NXR_UNARY_SILU, NXR_UNARY_GELU_TANH)",
                   (int)op);
    return 0;
}
