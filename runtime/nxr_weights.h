/*
 * nxr packed weights: a weight matrix prepared once, at load, into the
 * layout nxr's native GEMM reads, in the node memory of each domain that
 * uses it, so that calls against it never pack and never read another
 * node's memory (docs/contracts.md, "Spans, shards and packed weights").
 *
 * Usage. A service loads its model once: for each weight matrix W it fills
 * an struct nxr_weights_desc (op(W) is k x n, as the B operand of
 * C = op(A) * op(W); `trans` when W is stored n x k), names the domains that
 * will run calls against it (NULL: every domain of the runtime) and calls
 * nxr_weights_create, which copies W into each of those domains' arenas
 * (bound to the domain's node before first touch: nxr_mem_domain and
 * nxr_mem_node answer for every page). The caller may then free its own
 * copy. Each serving thread, on a context of one of those domains, runs
 * nxr_sgemm_packed (with an optional fused bias + activation epilogue) with
 * its activations as A: one row for a decode step (a GEMV), a few rows for
 * a small batch, or many; the call reads that domain's copy. The result is
 * bit for bit what nxr_sgemm (or nxr_sgemm_fused) gives on the same
 * arguments with the original W, so packed and plain paths can be compared
 * exactly (f32 weights; nxr_weights_create_format packs bf16 or 8-bit
 * blocks, within a documented error instead). At shutdown,
 * nxr_weights_destroy before nxr_runtime_destroy.
 *
 * The f32 layout follows the source's orientation (an untransposed W becomes
 * column panels of the GEMM micro-kernel's width over all of k; a
 * transposed one stays rows of k, re-strided and aligned): it is the one
 * that gives the same bits as the unpacked call. bf16 and 8-bit blocks
 * ("Weight formats" below) are rows of k per column of op(W) whichever the
 * orientation. Every layout is nxr's native
 * kernels' layout: a runtime whose GEMM provider is not nxr's own
 * (NXR_GEMM=openblas, an injected provider) refuses to pack
 * (NXR_EUNSUPPORTED), never silently runs another kernel.
 */
#ifndef NXR_WEIGHTS_H
#define NXR_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/nxr_fwd.h"
#include "base/nxr_status.h"
#include "kernels/nxr_kernels.h"
#include "runtime/nxr_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What to pack. op(W) is k x n: W[p][j] at w[p * ldw + j] (trans false,
 * ldw >= n) or at w[j * ldw + p] (trans true, ldw >= k). domain_ids lists
 * the domains that get a copy (domain_count of them, no duplicates); NULL
 * means every domain of the runtime. */
struct nxr_weights_desc {
    bool trans;
    size_t k, n;
    const float *w;
    size_t ldw;
    const int *domain_ids;
    size_t domain_count;
};

/* Everything zero/NULL/false (every domain). */
NXR_API void nxr_weights_desc_init(struct nxr_weights_desc *desc);

/*
 * Packs desc->w once per listed domain, into memory of that domain's arena
 * (nxr_domain_malloc), and returns the handle in *out. The copying is done
 * by the calling thread (the pages are bound to each domain's node whoever
 * writes them); desc->w is only read, and may be freed afterwards. Returns
 * 0, -EINVAL (NULL argument, k or n 0, ldw too small, NULL w, a duplicate
 * id), NXR_ENODOMAIN (an id the runtime lacks), NXR_EUNSUPPORTED (the
 * runtime's GEMM provider is not nxr's native one), -ENOMEM or
 * NXR_EPLACEMENT; on failure *out is NULL and nothing stays allocated. Any
 * thread, not from inside a body; blocks while it copies.
 */
NXR_API int nxr_weights_create(nxr_runtime_t *rt, const struct nxr_weights_desc *desc,
                               nxr_weights_t **out);

/*
 * Weight formats. A packed copy holds op(W) in one of these; the call's
 * inputs, outputs and accumulation are f32 whatever the format (8-bit blocks
 * may quantize A per block on CPUs with an integer dot product), and only
 * W's values change on packing (nxr_sgemm_packed's error bound below):
 *   NXR_WEIGHTS_F32        W as given: the same bits as nxr_sgemm.
 *   NXR_WEIGHTS_BF16       each weight rounded to bfloat16 (the top 16 bits of
 *                          its f32, round to nearest, ties to even; NaN and
 *                          infinities kept): 2 bytes a weight, relative error
 *                          at most 2^-8 per weight (0 for exactly
 *                          representable values; values past bf16's largest
 *                          finite one become infinite).
 *   NXR_WEIGHTS_Q8_BLOCK32 signed 8-bit blocks: along k, every 32 weights of
 *                          one column of op(W) (the last block of a column
 *                          zero-padded) share one f32 scale s = max|w| / 127;
 *                          each weight is stored as q = round(w / s) in
 *                          [-127, 127] (symmetric: no offset) and read back as
 *                          q * s. 36 bytes per 32 weights; error at most s / 2
 *                          = max|w| / 254 per weight (times 1 + 2^-12 for
 *                          the f32 rounding of s and q * s). W must be
 *                          finite: blocks hold no NaN or infinity (-EINVAL
 *                          names the first such weight).
 * The bf16 and 8-bit copies hold each column of op(W) along k whatever
 * desc->trans says, four columns interleaved a cache line at a time (a
 * decode step reads the copy as one stream), k padded to 32 (bf16) or 64
 * (8-bit) and the columns to a multiple of 4 with zeros (8-bit values are
 * stored offset by 128, for the VNNI instruction, and the scales in the
 * same stream, a line of them after every two lines of each of the four
 * columns; an odd last pair pads 32 bytes); f32's layout is
 * nxr_weights_create's. nxr_weights_copy's bytes are the library's: the
 * layout may change between releases. The values are f32 on input.
 */
enum nxr_weights_format {
    NXR_WEIGHTS_F32 = 0,
    NXR_WEIGHTS_BF16 = 1,
    NXR_WEIGHTS_Q8_BLOCK32 = 2,
};

/* Weights per block of NXR_WEIGHTS_Q8_BLOCK32. */
#define NXR_WEIGHTS_Q8_BLOCK 32

/*
 * nxr_weights_create in the given format: the same arguments, rules and
 * errors, plus -EINVAL for a format that is no enum nxr_weights_format value
 * (the detail names it) and, for NXR_WEIGHTS_Q8_BLOCK32, for a non-finite
 * weight. nxr_weights_create(rt, desc, out) is
 * nxr_weights_create_format(rt, desc, NXR_WEIGHTS_F32, out). On failure *out
 * is NULL and nothing stays allocated.
 */
NXR_API int nxr_weights_create_format(nxr_runtime_t *rt, const struct nxr_weights_desc *desc,
                                      enum nxr_weights_format format, nxr_weights_t **out);

/* The format w was packed in (NXR_WEIGHTS_F32 for NULL). */
NXR_API enum nxr_weights_format nxr_weights_format(const nxr_weights_t *w);

/* Frees every copy (back to its domain's arena) and the handle. NULL is a
 * no-op. Not while a call against w is running; before the runtime goes. */
NXR_API void nxr_weights_destroy(nxr_weights_t *w);

/* op(W)'s shape as packed (0 for NULL). */
NXR_API size_t nxr_weights_k(const nxr_weights_t *w);
NXR_API size_t nxr_weights_n(const nxr_weights_t *w);

/*
 * The copy that lives on domain d: its first byte and its length in bytes
 * (the packed layout, padding included), for placement checks
 * (nxr_mem_node page by page, nxr_mem_domain). Returns 0, -EINVAL or
 * NXR_ENODOMAIN (w has no copy on d). Any thread; the memory stays w's.
 */
NXR_API int nxr_weights_copy(const nxr_weights_t *w, const nxr_domain_t *d, const void **data,
                             size_t *bytes);

/*
 * Huge pages. A copy of at least one huge page (2 MiB) is allocated in whole
 * huge pages, aligned, and advised for transparent huge pages
 * (MADV_HUGEPAGE) before it is first touched, unless NXR_HUGEPAGES=off: a
 * decode step streams every weight once per token, and on 4 KiB pages that is
 * a TLB miss per 4 KiB. The system decides the rest: in THP mode `madvise`
 * (the common one) or `always` the kernel backs the advised range with huge
 * pages when it has them free; in mode `never` nothing is advised. The node
 * binding and the page check (nxr_mem_node) hold either way.
 *
 * Reports, for d's copy: *advised, whether the kernel took the advice (false
 * for a copy under 2 MiB, NXR_HUGEPAGES=off, THP mode never, or a refused
 * advice), and *huge_bytes, how many of the copy's bytes (nxr_weights_copy's
 * length) the kernel backs with huge pages now (it may split or collapse
 * them later). Returns 0, -EINVAL (a NULL argument), NXR_ENODOMAIN (no copy
 * on d) or -ENOSYS (the kernel cannot say: the page-table query,
 * PAGEMAP_SCAN, needs Linux 6.7; *advised is still set). Any thread;
 * reads page tables only.
 */
NXR_API int nxr_weights_huge_pages(const nxr_weights_t *w, const nxr_domain_t *d, bool *advised,
                                   size_t *huge_bytes);

/*
 * C = alpha * op(A) * op(W) + beta * C, then the epilogue (NULL: none):
 * C[i][j] = act(C[i][j] + bias[j]), as nxr_sgemm_fused. op(A) is m x k
 * (lda >= (trans_a ? m : k)), C is m x n (ldc >= n), with k and n those of
 * w. The rules of struct nxr_sgemm_args hold (beta 0 never reads C, alpha 0
 * never reads A or W, C must not overlap A or the bias).
 */
struct nxr_sgemm_packed_args {
    bool trans_a;
    size_t m;
    float alpha;
    const float *a;
    size_t lda;
    const nxr_weights_t *w;
    float beta;
    float *c;
    size_t ldc;
};

/*
 * Runs the product on ctx's domain against that domain's copy of the
 * weights, with the domain's workers as nxr_sgemm does (small m splits the
 * columns of W across them, each streaming its share once; nothing is
 * packed per call). Same bits as nxr_sgemm_fused with the original W.
 * Returns 0, nxr_sgemm's errors, -EINVAL (also: a routing context, which
 * has no domain to choose a copy by; NULL w), NXR_ENODOMAIN (w has no copy
 * on ctx's domain; the detail names it). The context's thread rule applies;
 * blocks until the product is done.
 *
 * Weights in bf16 or 8-bit blocks (nxr_weights_format): the same call and
 * rules; W's values are the packed ones, everything else is f32 (A is read
 * as f32, products are accumulated in f32 per output, then alpha, beta and
 * the epilogue as for f32). Not bit-equal to nxr_sgemm: against the exact
 * product with the original W, each output of the product (before the
 * epilogue) is off by at most
 *     |alpha| sum_p |A[i][p]| e_p + 2 (k + 2) u |alpha| sum_p |A[i][p] W[p][j]|
 *     + 2 u (|C[i][j]| + |beta C_in[i][j]|)
 * with u = 2^-24 and e_p = max(2^-8 |W[p][j]|, 2^-134) (bf16) or
 * (1 + 2^-12) max|W| / 254 over p's block of column j (8-bit blocks): the
 * first term is the packing's, the others are f32 accumulation and the
 * alpha/beta update, as for any f32 product. With 8-bit blocks, CPUs whose
 * kernel multiplies in integers (AVX2 and AVX-512, both with AVX2's 256-bit
 * integer operations) quantize A's rows per block of 32 as
 * well (t = max|a| / 127, round(a / t)), which adds
 *     |alpha| sum_p (|W[p][j]| + e_p) (1 + 2^-12) max|A[i][.]| / 254
 * (the max over p's block of A's row); a row group of A holding a NaN or
 * an infinity is not quantized, so they reach C as in f32. The bits may
 * differ between CPUs (vector widths, integer or f32 products), not between
 * calls or budgets on one CPU. Any m is allowed; the formats are made for
 * m <= 16 (a decode step's GEMV, a small batch): larger m runs as groups of
 * 16 rows, each streaming W again.
 */
NXR_API int nxr_sgemm_packed(nxr_ctx_t *ctx, const struct nxr_sgemm_packed_args *args,
                             const struct nxr_sgemm_epilogue *epilogue);

#ifdef __cplusplus
}
#endif

#endif /* NXR_WEIGHTS_H */
