/*
 * Native elementwise kernels (add, mul, scale, SiLU, GELU-tanh, STREAM
 * triad) against double references on every ISA this CPU runs, at lengths
 * that exercise the vector body and every tail (0, 1, 7, 65, 257, 4099).
 *
 * Tolerances: add, mul and scale are correctly rounded, so they must equal
 * the double result rounded to float exactly. Triad may fuse (one rounding)
 * or not (two): |err| <= 2u (|b| + |s c|). SiLU and GELU go through nxr's
 * exp (< 1 ulp) and a division: relative error <= u (16 + 4|t|), t the exp
 * argument: t is computed in float with up to three roundings (GELU's
 * cubic), and exp turns its absolute error 3u|t| into a relative one; plus
 * 1e-37 absolute where results underflow.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <string.h>

#include "kernels/internal/native.h"
#include "ref.h"

static const size_t lengths[] = {0, 1, 7, 65, 257, 4099};

static void run(const struct nxr__native_isa *isa, enum nxr__ew_kind kind, size_t n, const float *x,
                const float *y, float alpha, float *out)
{
    struct nxr__ew_job job = {.isa = isa, .kind = kind, .x = x, .y = y, .out = out, .alpha = alpha};
    nxr__ew_chunk(&job, 0, n, 0);
}

Test(kernels_elementwise, add_mul_scale_are_correctly_rounded)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; ++li) {
            const size_t n = lengths[li];
            float *x = ref_fill(n, 1 + li, -100, 100), *y = ref_fill(n, 50 + li, -3, 3);
            float *out = ref_fill(n + 1, 99, 0, 1);
            const float sentinel = out[n];
            run(isas[ii], NXR_EW_ADD, n, x, y, 0, out);
            for (size_t i = 0; i < n; ++i)
                cr_assert_eq(out[i], (float)((double)x[i] + y[i]), "%s add n=%zu i=%zu",
                             isas[ii]->name, n, i);
            run(isas[ii], NXR_EW_MUL, n, x, y, 0, out);
            for (size_t i = 0; i < n; ++i)
                cr_assert_eq(out[i], (float)((double)x[i] * y[i]), "%s mul", isas[ii]->name);
            run(isas[ii], NXR_EW_SCALE, n, x, NULL, -0.37f, out);
            for (size_t i = 0; i < n; ++i)
                cr_assert_eq(out[i], (float)((double)x[i] * -0.37f), "%s scale", isas[ii]->name);
            cr_assert_eq(out[n], sentinel, "the element after the tail is not written");
            free(x);
            free(y);
            free(out);
        }
}

Test(kernels_elementwise, triad)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const float s = 3.0f;
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; ++li) {
            const size_t n = lengths[li];
            float *b = ref_fill(n, 3, -1, 1), *c = ref_fill(n, 4, -1, 1), *a = ref_fill(n, 5, 0, 1);
            run(isas[ii], NXR_EW_TRIAD, n, b, c, s, a);
            for (size_t i = 0; i < n; ++i) {
                const double want = (double)b[i] + (double)s * c[i];
                cr_assert(fabs(a[i] - want) <= 2 * U_F32 * (fabs(b[i]) + fabs(s * c[i])),
                          "%s triad i=%zu", isas[ii]->name, i);
            }
            free(a);
            free(b);
            free(c);
        }
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
    /* 0.5 x (1 + tanh u) == x / (1 + exp(-2u)); the tanh form cancels to
     * 0 in double for u < -19, where the true value is still a float. */
    return x / (1.0 + exp(-2.0 * u));
}

static void check_activation(enum nxr__ew_kind kind, double (*ref)(double, double *))
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const float special[] = {0.0f,   -0.0f, 1e-30f, -1e-30f, 1.0f,   -1.0f,  20.0f,
                             -20.0f, 60.0f, -60.0f, -88.0f,  -90.0f, 3.5e-3f};
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; ++li) {
            const size_t n = lengths[li] + sizeof special / sizeof special[0];
            float *x = ref_fill(n, 11 + li, -12, 12), *out = malloc(n * sizeof *out);
            memcpy(x, special, sizeof special);
            run(isas[ii], kind, n, x, NULL, 0, out);
            for (size_t i = 0; i < n; ++i) {
                double t;
                const double want = ref(x[i], &t);
                const double tol = U_F32 * (16.0 + 4.0 * fabs(t)) * fabs(want) + 1e-37;
                cr_assert(fabs(out[i] - want) <= tol, "%s x=%.9g got %.9g want %.9g",
                          isas[ii]->name, x[i], out[i], want);
            }
            free(x);
            free(out);
        }
}

Test(kernels_elementwise, silu)
{
    check_activation(NXR_EW_SILU, silu_ref);
}

Test(kernels_elementwise, gelu_tanh)
{
    check_activation(NXR_EW_GELU_TANH, gelu_ref);
}

/* The executor may cut anywhere: every split gives the same bits, and the
 * output may be the input. */
Test(kernels_elementwise, chunks_are_bit_identical_and_in_place_works)
{
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    const size_t n = 1001;
    float *x = ref_fill(n, 21, -8, 8);
    float *whole = malloc(n * sizeof *whole), *parts = malloc(n * sizeof *parts);
    const enum nxr__ew_kind kinds[] = {NXR_EW_SILU, NXR_EW_GELU_TANH, NXR_EW_SCALE};
    for (size_t ki = 0; ki < 3; ++ki) {
        struct nxr__ew_job job = {
            .isa = isa, .kind = kinds[ki], .x = x, .out = whole, .alpha = 1.5f};
        nxr__ew_chunk(&job, 0, n, 0);
        job.out = parts;
        nxr__ew_chunk(&job, 0, 3, 0);
        nxr__ew_chunk(&job, 3, 20, 1);
        nxr__ew_chunk(&job, 20, 999, 0);
        nxr__ew_chunk(&job, 999, n, 1);
        cr_assert_eq(memcmp(whole, parts, n * sizeof *whole), 0, "kind %zu", ki);
        memcpy(parts, x, n * sizeof *x);
        job.x = parts; /* in place */
        nxr__ew_chunk(&job, 0, n, 0);
        cr_assert_eq(memcmp(whole, parts, n * sizeof *whole), 0, "in place, kind %zu", ki);
    }
    free(x);
    free(whole);
    free(parts);
}
