/*
 * The kernel contract's argument rules (kernels/nxr_kernels.h), checked
 * once for every provider: the runtime checks each call's arguments here
 * before any provider sees them, so a foreign provider is never handed a
 * call that breaks the contract and every failure names its argument.
 *
 * Each check returns 0, or -EINVAL with a reason written into why ("lda (3)
 * < k (4) with A not transposed"). An op outside its enum is -EINVAL
 * here; an op of the enum that the configured provider lacks is the
 * provider's NXR_EUNSUPPORTED.
 *
 * Extents: a rows x cols matrix with row stride ld spans
 * ((rows - 1) * ld + cols) floats from its first element; overlap rules
 * compare those spans (conservative for interleaved layouts, which the
 * contract forbids anyway). Byte counts saturate at SIZE_MAX instead of
 * wrapping, so an absurd shape overlaps everything rather than nothing.
 */
#ifndef NXR_KERNELS_INTERNAL_ARGS_H
#define NXR_KERNELS_INTERNAL_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/nxr_provider.h"

/* Bytes of a rows x cols float matrix with row stride ld (0 if empty). */
size_t nxr__matrix_bytes(size_t rows, size_t cols, size_t ld);

/* Whether [a, a + an) and [b, b + bn) share a byte (empty ranges never do). */
bool nxr__spans_overlap(const void *a, size_t an, const void *b, size_t bn);

/* Whether the GEMM reads A and B (m, n, k > 0 and alpha != 0). */
bool nxr__sgemm_reads_ab(const struct nxr_sgemm_args *g);

/* The bytes op(A), op(B) and C span as stored (0 when not touched). */
size_t nxr__sgemm_a_bytes(const struct nxr_sgemm_args *g);
size_t nxr__sgemm_b_bytes(const struct nxr_sgemm_args *g);
size_t nxr__sgemm_c_bytes(const struct nxr_sgemm_args *g);

/* The bytes all items of one operand span: item extent + (batch-1)*stride. */
size_t nxr__batch_bytes(size_t item_bytes, size_t batch, size_t stride);

int nxr__check_sgemm(const struct nxr_sgemm_args *g, char *why, size_t whysz);
/* The same rules, the operands A, B and C named as the caller knows them
 * (a span kernel's member GEMM: "x", "w (part 1)", "y"). */
int nxr__check_sgemm_named(const struct nxr_sgemm_args *g, const char *const names[3], char *why,
                           size_t whysz);
/* The same, B spanning b_bytes from g->b whatever ldb says (weights packed in
 * a format whose bytes are not floats). */
int nxr__check_sgemm_b_span(const struct nxr_sgemm_args *g, const char *const names[3],
                            size_t b_bytes, char *why, size_t whysz);
int nxr__check_sgemm_batch(const struct nxr_sgemm_batch_args *b, char *why, size_t whysz);
int nxr__check_epilogue(const struct nxr_sgemm_args *g, const struct nxr_sgemm_epilogue *ep, char *why,
                        size_t whysz);

/* Vectors of n floats: x (and y when two_inputs) read, out written; names
 * are the three arguments' names in the public call ("x", "y", "out"). */
int nxr__check_vectors(size_t n, const float *x, const float *y, bool two_inputs, const float *out,
                       const char *const names[3], char *why, size_t whysz);

/* Reductions: x of n floats (n >= 1 unless empty_ok), out non-NULL. */
int nxr__check_reduction(size_t n, const float *x, const void *out, bool empty_ok, char *why,
                         size_t whysz);

/* Row kernels (softmax, norms): shapes, eps, and out vs x, gamma, beta. */
int nxr__check_rows(size_t rows, size_t cols, const float *x, size_t ldx, const float *gamma,
                    const float *beta, float eps, const float *out, size_t ldo, char *why,
                    size_t whysz);

/* An op outside enum nxr_binary_op / enum nxr_unary_op. */
int nxr__check_binary_op(enum nxr_binary_op op, char *why, size_t whysz);
int nxr__check_unary_op(enum nxr_unary_op op, char *why, size_t whysz);

/* Row broadcasts: out[r][c] = x[r][c] op row[c]. */
int nxr__check_binary_rows(size_t rows, size_t cols, const float *x, size_t ldx, const float *row,
                           const float *out, size_t ldo, char *why, size_t whysz);

#endif /* NXR_KERNELS_INTERNAL_ARGS_H */
