/*
 * Native softmax, RMSNorm and LayerNorm against double references on every
 * ISA, rows of 1, 7, 65, 257 and 1000 columns with padded row strides.
 *
 * Tolerances: softmax |p - ref| <= 4e-6 ref + 1e-12 (inputs in [-8, 8]:
 * exp's argument error is at most 16 u, plus the sum and the scaling);
 * norms |y - ref| <= 2e-5 (1 + |ref|) (a row's mean of squares in float,
 * then one rsqrt and the affine map).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "kernels/internal/native.h"
#include "kernels/internal/provider.h"
#include "ref.h"

static const size_t widths[] = {1, 7, 65, 257, 1000};
enum { ROWS = 3 };

static void run_rows(const struct nxr__native_isa *isa, enum nxr__rows_kind kind, size_t cols,
                     const float *x, size_t ld, const float *gamma, const float *beta, float *out)
{
    struct nxr__rows_job job = {.isa = isa,
                                .kind = kind,
                                .cols = cols,
                                .x = x,
                                .ldx = ld,
                                .gamma = gamma,
                                .beta = beta,
                                .eps = 1e-5f,
                                .out = out,
                                .ldo = ld};
    nxr__rows_chunk(&job, 0, ROWS, 0);
}

Test(kernels_norm, softmax)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; ++wi) {
            const size_t cols = widths[wi], ld = cols + 5;
            float *x = ref_fill(ROWS * ld, 81 + wi, -8, 8), *out = malloc(ROWS * ld * sizeof *out);
            run_rows(isas[ii], NXR_ROWS_SOFTMAX, cols, x, ld, NULL, NULL, out);
            for (size_t r = 0; r < ROWS; ++r) {
                const float *xr = x + r * ld;
                double m = -INFINITY, s = 0;
                for (size_t j = 0; j < cols; ++j)
                    m = xr[j] > m ? xr[j] : m;
                for (size_t j = 0; j < cols; ++j)
                    s += exp(xr[j] - m);
                for (size_t j = 0; j < cols; ++j) {
                    const double want = exp(xr[j] - m) / s;
                    cr_assert(fabs(out[r * ld + j] - want) <= 4e-6 * want + 1e-12,
                              "%s cols=%zu [%zu][%zu] %.9g want %.9g", isas[ii]->name, cols, r, j,
                              out[r * ld + j], want);
                }
            }
            free(x);
            free(out);
        }
}

/* Masked entries (-inf) get exactly 0; a fully masked row is NaN. */
Test(kernels_norm, softmax_masked_entries)
{
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    float x[3 * 20], out[3 * 20];
    for (int i = 0; i < 60; ++i)
        x[i] = (i % 3 == 0) ? -INFINITY : (float)(i % 7) - 3.0f;
    for (int j = 40; j < 60; ++j)
        x[j] = -INFINITY;
    struct nxr__rows_job job = {
        .isa = isa, .kind = NXR_ROWS_SOFTMAX, .cols = 20, .x = x, .ldx = 20, .out = out, .ldo = 20};
    nxr__rows_chunk(&job, 0, 3, 0);
    for (int r = 0; r < 2; ++r) {
        double s = 0;
        for (int j = 0; j < 20; ++j) {
            if (isinf(x[r * 20 + j]))
                cr_assert_eq(out[r * 20 + j], 0.0f);
            s += out[r * 20 + j];
        }
        cr_assert(fabs(s - 1.0) < 1e-5);
    }
    for (int j = 40; j < 60; ++j)
        cr_assert(isnan(out[j]));
}

static void check_norm(enum nxr__rows_kind kind, bool affine)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; ++wi) {
            const size_t cols = widths[wi], ld = cols + 3;
            float *x = ref_fill(ROWS * ld, 91 + wi, -4, 6), *out = malloc(ROWS * ld * sizeof *out);
            float *gamma = affine ? ref_fill(cols, 5, 0.5f, 2.0f) : NULL;
            float *beta = affine ? ref_fill(cols, 6, -1.0f, 1.0f) : NULL;
            run_rows(isas[ii], kind, cols, x, ld, gamma, beta, out);
            for (size_t r = 0; r < ROWS; ++r) {
                const float *xr = x + r * ld;
                double mean = 0, ss = 0;
                for (size_t j = 0; j < cols; ++j)
                    mean += xr[j];
                mean /= (double)cols;
                const double center = kind == NXR_ROWS_LAYERNORM ? mean : 0.0;
                for (size_t j = 0; j < cols; ++j)
                    ss += (xr[j] - center) * (xr[j] - center);
                const double scale = 1.0 / sqrt(ss / (double)cols + 1e-5f);
                for (size_t j = 0; j < cols; ++j) {
                    double want = (xr[j] - center) * scale * (affine ? gamma[j] : 1.0);
                    if (kind == NXR_ROWS_LAYERNORM && affine)
                        want += beta[j];
                    cr_assert(fabs(out[r * ld + j] - want) <= 2e-5 * (1 + fabs(want)),
                              "%s kind %d cols=%zu [%zu][%zu] %.9g want %.9g", isas[ii]->name, kind,
                              cols, r, j, out[r * ld + j], want);
                }
            }
            free(x);
            free(out);
            free(gamma);
            free(beta);
        }
}

Test(kernels_norm, rmsnorm)
{
    check_norm(NXR_ROWS_RMSNORM, false);
    check_norm(NXR_ROWS_RMSNORM, true);
}

Test(kernels_norm, layernorm)
{
    check_norm(NXR_ROWS_LAYERNORM, false);
    check_norm(NXR_ROWS_LAYERNORM, true);
}

Test(kernels_norm, row_ranges_are_bit_identical)
{
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    const size_t rows = 9, cols = 300;
    float *x = ref_fill(rows * cols, 3, -2, 2), *g = ref_fill(cols, 4, 0.5f, 1.5f);
    float *a = malloc(rows * cols * sizeof *a), *b = malloc(rows * cols * sizeof *b);
    for (int kind = NXR_ROWS_SOFTMAX; kind <= NXR_ROWS_LAYERNORM; ++kind) {
        struct nxr__rows_job job = {.isa = isa,
                                    .kind = kind,
                                    .cols = cols,
                                    .x = x,
                                    .ldx = cols,
                                    .gamma = g,
                                    .beta = g,
                                    .eps = 1e-6f,
                                    .out = a,
                                    .ldo = cols};
        nxr__rows_chunk(&job, 0, rows, 0);
        job.out = b;
        nxr__rows_chunk(&job, 4, rows, 1);
        nxr__rows_chunk(&job, 0, 4, 0);
        cr_assert_eq(memcmp(a, b, rows * cols * sizeof *a), 0);
    }
    free(x);
    free(g);
    free(a);
    free(b);
}

/* Through the native provider's table: argument checks. */
Test(kernels_norm, provider_rejects_bad_shapes)
{
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_NORM, &p), 0);
    const struct nxr_kernel_call call = {.threads = 1};
    float x[8] = {0}, out[8];
    cr_assert_eq(p->norm->softmax(p->self, &call, 2, 4, x, 4, out, 4), 0);
    cr_assert_eq(p->norm->softmax(p->self, &call, 2, 0, x, 4, out, 4), -EINVAL);
    cr_assert_eq(p->norm->softmax(p->self, &call, 2, 4, x, 3, out, 4), -EINVAL);
    cr_assert_eq(p->norm->rmsnorm(p->self, &call, 2, 4, x, 4, NULL, -1.0f, out, 4), -EINVAL);
    cr_assert_eq(p->norm->layernorm(p->self, &call, 2, 4, x, 4, NULL, NULL, NAN, out, 4), -EINVAL);
    cr_assert_eq(p->norm->layernorm(p->self, &call, 2, 4, NULL, 4, NULL, NULL, 0, out, 4), -EINVAL);
    nxr_provider_destroy(p);
}
