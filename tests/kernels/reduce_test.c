/*
 * Native reductions: sum (pairwise), max and argmax against double
 * references on every ISA, plus the property the executor relies on: block
 * partials combined by nxr__reduce_finish equal the sequential result bit
 * for bit, whatever the block size (a power-of-two multiple of the leaf).
 *
 * Sum tolerance: |s - ref| <= u (32 + 2 log2 n) sum |x|: a pairwise sum's
 * bound (log depth) with the leaf's lane accumulation (at most 16 terms per
 * lane) folded into the constant.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "kernels/internal/native.h"
#include "ref.h"

static const size_t lengths[] = {1, 7, 65, 257, 1000, 100003};

Test(kernels_reduce, sum_is_accurate)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    for (size_t ii = 0; ii < nisa; ++ii) {
        cr_assert_eq(isas[ii]->sum(0, NULL), 0.0f, "empty sum is 0");
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; ++li) {
            const size_t n = lengths[li];
            float *x = ref_fill(n, 31 + li, -1, 1);
            double want = 0, mag = 0;
            for (size_t i = 0; i < n; ++i) {
                want += x[i];
                mag += fabs(x[i]);
            }
            const float got = isas[ii]->sum(n, x);
            cr_assert(fabs(got - want) <= U_F32 * (32 + 2 * log2((double)n)) * mag,
                      "%s n=%zu got %.9g want %.9g", isas[ii]->name, n, got, want);
            free(x);
        }
    }
}

/* 2^20 copies of 0.1f: a sequential float sum drifts by percent; the
 * pairwise sum stays within a few ulps. */
Test(kernels_reduce, sum_of_many_equal_terms_does_not_drift)
{
    const size_t n = (size_t)1 << 20;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; ++i)
        x[i] = 0.1f;
    const double want = (double)n * 0.1f;
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    for (size_t ii = 0; ii < nisa; ++ii) {
        const float got = isas[ii]->sum(n, x);
        cr_assert(fabs(got - want) / want <= 1e-6, "%s relative error %.3g", isas[ii]->name,
                  fabs(got - want) / want);
    }
    free(x);
}

Test(kernels_reduce, block_partials_equal_the_sequential_sum)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    const size_t ns[] = {70000, 100003, 256, 257};
    const size_t blocks[] = {NXR_SUM_BASE, 2 * NXR_SUM_BASE, 8 * NXR_SUM_BASE, 0};
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t ni = 0; ni < 4; ++ni) {
            float *x = ref_fill(ns[ni], 41 + ni, -3, 5);
            const float seq = isas[ii]->sum(ns[ni], x);
            for (size_t bi = 0; bi < 4; ++bi) {
                struct nxr__reduce_job job;
                cr_assert_eq(
                    nxr__reduce_job_init(&job, isas[ii], NXR_REDUCE_SUM, x, ns[ni], blocks[bi]), 0);
                job.partial = malloc(job.nblocks * sizeof(float));
                /* Blocks in an arbitrary order and split, as workers would. */
                nxr__reduce_chunk(&job, job.nblocks / 2, job.nblocks, 1);
                nxr__reduce_chunk(&job, 0, job.nblocks / 2, 0);
                float got;
                nxr__reduce_finish(&job, &got, NULL);
                cr_assert_eq(memcmp(&got, &seq, sizeof got), 0, "%s n=%zu block=%zu: %.9g vs %.9g",
                             isas[ii]->name, ns[ni], job.block, got, seq);
                free(job.partial);
            }
            free(x);
        }
}

Test(kernels_reduce, reduce_job_rejects_bad_blocks)
{
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    float x[4] = {1, 2, 3, 4};
    struct nxr__reduce_job job;
    cr_assert_eq(nxr__reduce_job_init(&job, isa, NXR_REDUCE_SUM, x, 4, 3 * NXR_SUM_BASE), -EINVAL);
    cr_assert_eq(nxr__reduce_job_init(&job, isa, NXR_REDUCE_SUM, x, 4, 100), -EINVAL);
    cr_assert_eq(nxr__reduce_job_init(&job, isa, NXR_REDUCE_MAX, x, 0, 0), -EINVAL);
    cr_assert_eq(nxr__reduce_job_init(&job, isa, NXR_REDUCE_SUM, NULL, 4, 0), -EINVAL);
}

static void check_max_argmax(const struct nxr__native_isa *isa, const float *x, size_t n)
{
    size_t want_i = 0;
    for (size_t i = 0; i < n; ++i) {
        if (isnan(x[i])) {
            want_i = i;
            break;
        }
        if (x[i] > x[want_i])
            want_i = i;
    }
    float v;
    const size_t got_i = isa->argmax(n, x, &v);
    const float m = isa->max(n, x);
    cr_assert_eq(got_i, want_i, "%s n=%zu argmax %zu want %zu", isa->name, n, got_i, want_i);
    if (isnan(x[want_i])) {
        cr_assert(isnan(v) && isnan(m));
    } else {
        cr_assert_eq(v, x[want_i]);
        cr_assert_eq(m, x[want_i], "%s n=%zu max", isa->name, n);
    }
}

Test(kernels_reduce, max_and_argmax)
{
    const struct nxr__native_isa *isas[3];
    const size_t nisa = ref_isas(isas);
    for (size_t ii = 0; ii < nisa; ++ii)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; ++li) {
            const size_t n = lengths[li];
            float *x = ref_fill(n, 61 + li, -50, 50);
            check_max_argmax(isas[ii], x, n);
            /* The maximum in the tail, at the front, tied across lanes. */
            x[n - 1] = 1000.0f;
            check_max_argmax(isas[ii], x, n);
            x[0] = 1000.0f;
            check_max_argmax(isas[ii], x, n);
            for (size_t i = 0; i < n; ++i)
                x[i] = (float)(i % 5);
            check_max_argmax(isas[ii], x, n);
            /* NaN: max is NaN, argmax the first NaN. */
            if (n > 3) {
                x[n / 2] = NAN;
                x[n - 1] = NAN;
                check_max_argmax(isas[ii], x, n);
            }
            for (size_t i = 0; i < n; ++i)
                x[i] = -INFINITY;
            check_max_argmax(isas[ii], x, n);
            free(x);
        }
}

Test(kernels_reduce, max_argmax_blocks_match_sequential)
{
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    const size_t n = 100003;
    float *x = ref_fill(n, 71, -1, 1);
    x[77777] = 2.0f;
    x[88888] = 2.0f; /* tie: the first wins */
    struct nxr__reduce_job job;
    cr_assert_eq(nxr__reduce_job_init(&job, isa, NXR_REDUCE_ARGMAX, x, n, NXR_SUM_BASE * 16), 0);
    job.partial = malloc(job.nblocks * sizeof(float));
    job.partial_index = malloc(job.nblocks * sizeof(size_t));
    nxr__reduce_chunk(&job, 3, job.nblocks, 0);
    nxr__reduce_chunk(&job, 0, 3, 1);
    size_t idx;
    float v;
    nxr__reduce_finish(&job, &v, &idx);
    cr_assert_eq(idx, 77777);
    cr_assert_eq(v, 2.0f);
    x[5] = NAN;
    nxr__reduce_chunk(&job, 0, job.nblocks, 0);
    nxr__reduce_finish(&job, &v, &idx);
    cr_assert_eq(idx, 5);
    job.kind = NXR_REDUCE_MAX;
    nxr__reduce_chunk(&job, 0, job.nblocks, 0);
    nxr__reduce_finish(&job, &v, NULL);
    cr_assert(isnan(v));
    free(job.partial);
    free(job.partial_index);
    free(x);
}
