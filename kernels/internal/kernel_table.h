/*
 * nxr kernels, described once: one row per kernel of the provider ops
 * tables (kernels/nxr_provider.h), from which the preprocessor writes only
 * what carries the kernel's arguments along and names no entry point.
 *
 * The rule: a kernel's public call through a context
 * (runtime/nxr_ctx_kernels.h) takes exactly its provider op's parameters,
 * in the op's order, after the context (the op takes them after `self,
 * call`). So one parameter list serves both, and from a row
 *     K(name, family, table, PARAMS)
 * with PARAMS(P) expanding to P(type, param) for each parameter, this
 * header and its users generate:
 *   - the declaration of nxr__bundle_<name>(bundle, call, params...), the
 *     slot's op dispatched, written out in kernels/bundle.c (a definition
 *     that drifts from the row does not compile);
 *   - struct nxr__<name>_args: the parameters as one struct, which the
 *     public function fills and the call engine passes along unchanged;
 *   - invoke_<name>, the engine's way to the dispatch with that struct
 *     unpacked (static, in runtime/kernel_wrappers.c);
 *   - the op set a provider's table must not leave empty
 *     (kernels/provider.c's table_matches).
 * Every function a caller or a reader looks for is written by hand: the
 * public nxr_<name> (runtime/kernel_wrappers.c: its argument rules from
 * kernels/args.c, the inputs a routing context weighs, the request to the
 * engine) and nxr__bundle_<name> (kernels/bundle.c). The kernel itself is
 * the provider's (kernels/native_provider.c for nxr's own).
 *
 * Adding a kernel: docs/architecture.md, "Adding a kernel", lists the
 * places; tests/kernels/kernel_table_test.py fails when one is missed.
 *
 * NXR__KERNELS_OWN lists the kernels whose public function falls back to
 * another: nxr_sgemm_fused runs nxr_sgemm without an epilogue, and its
 * dispatch runs sgemm + nxr's epilogue when the provider has no
 * sgemm_fused. nxr_sgemm_packed is no provider op (only the native GEMM
 * reads packed weights) and is not in the table.
 */
#ifndef NXR_KERNELS_INTERNAL_KERNEL_TABLE_H
#define NXR_KERNELS_INTERNAL_KERNEL_TABLE_H

#include <stddef.h>

#include "kernels/nxr_provider.h"

/* clang-format off */
#define NXR__SGEMM_PARAMS(P)       P(const struct nxr_sgemm_args *, args)
#define NXR__SGEMM_BATCH_PARAMS(P) P(const struct nxr_sgemm_batch_args *, args)
#define NXR__SGEMM_FUSED_PARAMS(P) P(const struct nxr_sgemm_args *, args) \
                                   P(const struct nxr_sgemm_epilogue *, epilogue)
#define NXR__BINARY_PARAMS(P)      P(enum nxr_binary_op, op) P(size_t, n) P(const float *, x) \
                                   P(const float *, y) P(float *, out)
#define NXR__SCALE_PARAMS(P)       P(size_t, n) P(const float *, x) P(float, alpha) P(float *, out)
#define NXR__UNARY_PARAMS(P)       P(enum nxr_unary_op, op) P(size_t, n) P(const float *, x) \
                                   P(float *, out)
#define NXR__TRIAD_PARAMS(P)       P(size_t, n) P(const float *, b) P(const float *, c) \
                                   P(float, s) P(float *, a)
#define NXR__BINARY_ROWS_PARAMS(P) P(enum nxr_binary_op, op) P(size_t, rows) P(size_t, cols) \
                                   P(const float *, x) P(size_t, ldx) P(const float *, row) \
                                   P(float *, out) P(size_t, ldo)
#define NXR__SUM_PARAMS(P)         P(size_t, n) P(const float *, x) P(float *, out)
#define NXR__MAX_PARAMS(P)         P(size_t, n) P(const float *, x) P(float *, out)
#define NXR__ARGMAX_PARAMS(P)      P(size_t, n) P(const float *, x) P(size_t *, out)
#define NXR__SOFTMAX_PARAMS(P)     P(size_t, rows) P(size_t, cols) P(const float *, x) \
                                   P(size_t, ldx) P(float *, out) P(size_t, ldo)
#define NXR__RMSNORM_PARAMS(P)     P(size_t, rows) P(size_t, cols) P(const float *, x) \
                                   P(size_t, ldx) P(const float *, gamma) P(float, eps) \
                                   P(float *, out) P(size_t, ldo)
#define NXR__LAYERNORM_PARAMS(P)   P(size_t, rows) P(size_t, cols) P(const float *, x) \
                                   P(size_t, ldx) P(const float *, gamma) \
                                   P(const float *, beta) P(float, eps) P(float *, out) \
                                   P(size_t, ldo)

/* K(name, family, ops table, params): every part generated. */
#define NXR__KERNELS(K)                                                   \
    K(sgemm,       GEMM,        gemm,        NXR__SGEMM_PARAMS)           \
    K(sgemm_batch, GEMM,        gemm,        NXR__SGEMM_BATCH_PARAMS)     \
    K(binary,      ELEMENTWISE, elementwise, NXR__BINARY_PARAMS)          \
    K(scale,       ELEMENTWISE, elementwise, NXR__SCALE_PARAMS)           \
    K(unary,       ELEMENTWISE, elementwise, NXR__UNARY_PARAMS)           \
    K(triad,       ELEMENTWISE, elementwise, NXR__TRIAD_PARAMS)           \
    K(binary_rows, ELEMENTWISE, elementwise, NXR__BINARY_ROWS_PARAMS)     \
    K(sum,         REDUCTION,   reduction,   NXR__SUM_PARAMS)             \
    K(max,         REDUCTION,   reduction,   NXR__MAX_PARAMS)             \
    K(argmax,      REDUCTION,   reduction,   NXR__ARGMAX_PARAMS)          \
    K(softmax,     NORM,        norm,        NXR__SOFTMAX_PARAMS)         \
    K(rmsnorm,     NORM,        norm,        NXR__RMSNORM_PARAMS)         \
    K(layernorm,   NORM,        norm,        NXR__LAYERNORM_PARAMS)

/* The same, for a kernel whose public function and dispatch fall back to
 * another (above). */
#define NXR__KERNELS_OWN(K)                                               \
    K(sgemm_fused, GEMM,        gemm,        NXR__SGEMM_FUSED_PARAMS)
/* clang-format on */

/* The parameter-list pieces: `, type param` (after a first parameter),
 * `type param;` (a struct field), and `, from->param` (passed on from the
 * struct `from`). */
#define NXR__PARAM_DECL(type, param)  , type param
#define NXR__PARAM_FIELD(type, param) type param;
#define NXR__PARAM_FROM(type, param)  , from->param

/* The dispatch of every kernel (kernels/bundle.c): its slot's op,
 * NXR_EUNSUPPORTED when the slot has none, with the FP environment checked
 * around foreign providers (the provider's own error wins over NXR_EFPENV;
 * the environment is restored either way). Never another provider. */
#define NXR__BUNDLE_DECLARE(name, family, table, PARAMS)                                           \
    int nxr__bundle_##name(const nxr_provider_bundle_t *bundle,                                    \
                           const struct nxr_kernel_call *call PARAMS(NXR__PARAM_DECL));
NXR__KERNELS(NXR__BUNDLE_DECLARE)
/* The slot's sgemm_fused, or (when it has none) its sgemm followed by
 * nxr__epilogue_apply on the same call: on the domain, through the call's
 * parallel_for. */
NXR__KERNELS_OWN(NXR__BUNDLE_DECLARE)
#undef NXR__BUNDLE_DECLARE

/* Each kernel's parameters as one struct: struct nxr__<name>_args. */
#define NXR__ARGS_STRUCT(name, family, table, PARAMS)                                              \
    struct nxr__##name##_args {                                                                    \
        PARAMS(NXR__PARAM_FIELD)                                                                   \
    };
NXR__KERNELS(NXR__ARGS_STRUCT)
NXR__KERNELS_OWN(NXR__ARGS_STRUCT)
#undef NXR__ARGS_STRUCT

#endif /* NXR_KERNELS_INTERNAL_KERNEL_TABLE_H */
