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
