/*
 * How the small-shape GEMM path (kernels/internal/native.h) cuts its units
 * for the domain's static schedule: a call granted T threads is shared so
 * that no participant gets more than an even share of the units (decode's
 * m = 1 products at dim 288 were cut into chunks of ~64 KiB of W, 5 chunks
 * over 2 participants: 3 against 2, a call 1.25x slower than an even split;
 * issue 28 part 2). The split is read from the grain the provider passes to
 * call->parallel_for, cut as the executor's static schedule cuts it
 * (executor/parallel_for.c: chunks of `grain`, contiguous shares that
 * differ by at most one chunk). The same for the bf16 and 8-bit weight
 * formats' kernel (kernels/internal/native_quant.h), which cut the same way.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/internal/native_quant.h"
#include "kernels/internal/provider.h"

struct seen {
    size_t n, grain;
    int calls;
};

static int recording_for(const struct nxr_kernel_call *call, size_t n, size_t grain, nxr_for_fn fn,
                         void *arg)
{
    struct seen *s = call->runner;
    s->n = n;
    s->grain = grain;
    s->calls++;
    fn(arg, 0, n, 0);
    return 0;
}

/* The largest share, in units, of n units in chunks of grain over at most
 * threads participants (executor/parallel_for.c's nxr__for_shape and
 * static_body). */
static size_t largest_share(size_t n, size_t grain, unsigned threads, unsigned *participants)
{
    if (grain == 0)
        grain = n / threads + (n % threads != 0);
    const size_t chunks = n / grain + (n % grain != 0);
    const unsigned p = chunks < threads ? (unsigned)chunks : threads;
    const size_t most = chunks / p + (chunks % p != 0);
    *participants = p;
    return most * grain < n ? most * grain : n;
}

static void check_even(size_t n_out, size_t k, unsigned threads)
{
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_GEMM, &p), 0);
    float *a = calloc(k, sizeof(float)), *b = calloc(n_out * k, sizeof(float));
    float *c = calloc(n_out, sizeof(float));
    cr_assert(a != NULL && b != NULL && c != NULL);
    struct seen s = {0};
    const struct nxr_kernel_call call = {
        .threads = threads, .parallel_for = recording_for, .runner = &s};
    /* m = 1, B transposed (decode's x W^T): the small path's dot kernel. */
    const struct nxr_sgemm_args g = {.trans_b = true,
                                     .m = 1,
                                     .n = n_out,
                                     .k = k,
                                     .alpha = 1.0f,
                                     .a = a,
                                     .lda = k,
                                     .b = b,
                                     .ldb = k,
                                     .c = c,
                                     .ldc = n_out};
    cr_assert_eq(p->gemm->sgemm(p->self, &call, &g), 0);
    cr_assert_eq(s.calls, 1, "n %zu k %zu: one region", n_out, k);
    unsigned used;
    const size_t most = largest_share(s.n, s.grain, threads, &used);
    const size_t even = s.n / used + (s.n % used != 0);
    cr_assert_eq(most, even,
                 "n %zu k %zu, %u threads: %zu units in chunks of %zu give a participant %zu "
                 "units, an even split over %u gives %zu",
                 n_out, k, threads, s.n, s.grain, most, used, even);
    free(a);
    free(b);
    free(c);
    nxr_provider_destroy(p);
}

Test(kernels_small_split, even_shares_at_decode_shapes)
{
    const size_t shapes[][2] = {{288, 288}, {768, 288}, {864, 288}, {1536, 288},
                                {288, 768}, {768, 768}, {17, 33},   {2304, 768}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (unsigned t = 2; t <= 4; t++)
            check_even(shapes[i][0], shapes[i][1], t);
}

static void check_even_quant(enum nxr__qformat f, size_t n_out, size_t k, unsigned threads)
{
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_GEMM, &p), 0);
    const struct nxr__native_isa *isa;
    cr_assert(nxr__provider_native_gemm(p, &isa));
    float *a = calloc(k, sizeof(float)), *w = calloc(n_out * k, sizeof(float));
    float *c = calloc(n_out, sizeof(float));
    const size_t bytes = (nxr__quant_packed_bytes(f, k, n_out) + 63) / 64 * 64;
    void *dst = aligned_alloc(64, bytes);
    cr_assert(a != NULL && w != NULL && c != NULL && dst != NULL);
    struct nxr__packed_q view;
    nxr__quant_pack(f, true, k, n_out, w, k, dst, &view);
    const size_t sb = (nxr__quant_scratch_bytes(&view, 1) + 63) / 64 * 64;
    unsigned char *scratch = aligned_alloc(64, sb * threads + 64);
    void *slots[4];
    for (unsigned i = 0; i < threads; i++)
        slots[i] = scratch + i * sb;
    struct seen s = {0};
    const struct nxr_kernel_call call = {.threads = threads,
                                         .scratch = (void *const *)slots,
                                         .scratch_bytes = sb,
                                         .parallel_for = recording_for,
                                         .runner = &s};
    const struct nxr_sgemm_args g = {.trans_b = true,
                                     .m = 1,
                                     .n = n_out,
                                     .k = k,
                                     .alpha = 1.0f,
                                     .a = a,
                                     .lda = k,
                                     .b = dst,
                                     .ldb = k,
                                     .c = c,
                                     .ldc = n_out};
    cr_assert_eq(nxr__native_sgemm_quant(isa, &call, &g, &view, NULL), 0);
    cr_assert_eq(s.calls, 1, "format %d n %zu k %zu: one region", (int)f, n_out, k);
    unsigned used;
    const size_t most = largest_share(s.n, s.grain, threads, &used);
    const size_t even = s.n / used + (s.n % used != 0);
    cr_assert_eq(most, even,
                 "format %d, n %zu k %zu, %u threads: %zu units in chunks of %zu give a "
                 "participant %zu units, an even split over %u gives %zu",
                 (int)f, n_out, k, threads, s.n, s.grain, most, used, even);
    free(a);
    free(w);
    free(c);
    free(dst);
    free(scratch);
    nxr_provider_destroy(p);
}

Test(kernels_small_split, even_shares_for_the_weight_formats)
{
    const size_t shapes[][2] = {{288, 288}, {768, 288}, {864, 288}, {288, 768}, {2304, 768}};
    const enum nxr__qformat formats[] = {NXR__QFORMAT_BF16, NXR__QFORMAT_Q8_BLOCK32};
    for (size_t f = 0; f < 2; f++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (unsigned t = 2; t <= 4; t++)
                check_even_quant(formats[f], shapes[i][0], shapes[i][1], t);
}

/* Runs every unit as a chunk of its own: each chunk's share of W is then a
 * few rows, which the dot kernel reads four rows at a time. */
static int unit_by_unit_for(const struct nxr_kernel_call *call, size_t n, size_t grain,
                            nxr_for_fn fn, void *arg)
{
    (void)call, (void)grain;
    for (size_t u = 0; u < n; u++)
        fn(arg, u, u + 1, 0);
    return 0;
}

/* Runs all the units as one chunk: a share of megabytes, which the dot
 * kernel of a GEMV with short rows reads one row after another. */
static int one_chunk_for(const struct nxr_kernel_call *call, size_t n, size_t grain, nxr_for_fn fn,
                         void *arg)
{
    (void)call, (void)grain;
    fn(arg, 0, n, 0);
    return 0;
}

/* y = x W^T, W n_out x k row-major, through the native provider with the
 * given way of running the chunks. */
static void gemv_with(nxr_provider_t *p,
                      int (*run)(const struct nxr_kernel_call *, size_t, size_t, nxr_for_fn,
                                 void *),
                      const float *x, const float *w, size_t n_out, size_t k, size_t m, float *y)
{
    const struct nxr_kernel_call call = {.threads = 1, .parallel_for = run};
    const struct nxr_sgemm_args g = {.trans_b = true,
                                     .m = m,
                                     .n = n_out,
                                     .k = k,
                                     .alpha = 1.0f,
                                     .a = x,
                                     .lda = k,
                                     .b = w,
                                     .ldb = k,
                                     .c = y,
                                     .ldc = n_out};
    memset(y, 0xff, m * n_out * sizeof(float)); /* NaN: a row not written shows */
    cr_assert_eq(p->gemm->sgemm(p->self, &call, &g), 0);
}

/* A GEMV whose share of W is megabytes of short rows (the 15m classifier's
 * 288 floats) reads W one row at a time (native_small.inc,
 * DOT_STREAM_ROW_BYTES): each row's sum is the same bits as when the same
 * rows are read four at a time (short shares), and as row 0 of the same
 * product with two rows of x (the m = 2 kernel): which rows go together
 * never changes a sum, so batched equals alone. */
Test(kernels_small_split, one_row_at_a_time_same_bits_as_four)
{
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_native_create(NXR_FAMILY_GEMM, &p), 0);
    const size_t ks[] = {288, 33, 17};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        const size_t k = ks[i];
        /* Over 4 MiB of W in one share, and a row count that leaves a
         * partial unit of four. */
        const size_t n_out = ((size_t)5 << 20) / (k * sizeof(float)) + 3;
        float *x = malloc(2 * k * sizeof(float)), *w = malloc(n_out * k * sizeof(float));
        float *one = malloc(n_out * sizeof(float)), *four = malloc(n_out * sizeof(float));
        float *pair = malloc(2 * n_out * sizeof(float));
        cr_assert(x != NULL && w != NULL && one != NULL && four != NULL && pair != NULL);
        uint32_t seed = 12345u + (uint32_t)k;
        for (size_t j = 0; j < n_out * k; j++) {
            seed = seed * 1664525u + 1013904223u;
            w[j] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
        }
        for (size_t j = 0; j < 2 * k; j++)
            x[j] = (float)((j * 37) % 101) / 50.0f - 1.0f;
        gemv_with(p, one_chunk_for, x, w, n_out, k, 1, one);
        gemv_with(p, unit_by_unit_for, x, w, n_out, k, 1, four);
        gemv_with(p, one_chunk_for, x, w, n_out, k, 2, pair);
        for (size_t l = 0; l < n_out; l++) {
            cr_assert(memcmp(&one[l], &four[l], sizeof(float)) == 0,
                      "k %zu, row %zu of %zu: one row at a time %a, four at a time %a", k, l, n_out,
                      (double)one[l], (double)four[l]);
            cr_assert(memcmp(&one[l], &pair[l], sizeof(float)) == 0,
                      "k %zu, row %zu of %zu: m = 1 %a, row 0 of m = 2 %a", k, l, n_out,
                      (double)one[l], (double)pair[l]);
        }
        free(x), free(w), free(one), free(four), free(pair);
    }
    nxr_provider_destroy(p);
}
