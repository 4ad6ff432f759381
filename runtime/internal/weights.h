/*
 * Packed weights, internals (runtime/nxr_weights.h is the contract): the
 * handle, one packed copy per domain, each in its domain's arena.
 * Immutable after nxr_weights_create: calls on any domain read it without a
 * lock.
 */
#ifndef NXR_RUNTIME_INTERNAL_WEIGHTS_H
#define NXR_RUNTIME_INTERNAL_WEIGHTS_H

#include "kernels/internal/native.h"
#include "kernels/internal/native_quant.h"
#include "runtime/internal/runtime.h"
#include "runtime/nxr_weights.h"

struct nxr__weights_copy {
    const struct nxr_domain *domain;
    void *data;    /* nxr_domain_malloc of domain (owned) */
    size_t bytes;  /* the packed layout's */
    size_t mapped; /* what was allocated: bytes, or whole huge pages when advised */
    bool huge_advised; /* the kernel took MADV_HUGEPAGE for [data, data + mapped) */
    struct nxr__packed_b view;  /* f32: view.data == data */
    struct nxr__packed_q qview; /* bf16, q8: qview.rows == data */
};

struct nxr_weights {
    nxr_runtime_t *rt;
    const struct nxr__native_isa *isa; /* the layout's (the GEMM provider's) */
    enum nxr_weights_format format;
    bool trans;
    size_t k, n;
    size_t count;
    struct nxr__weights_copy copy[]; /* count of them, in desc order */
};

/* The copy on domain d, or NULL. */
const struct nxr__weights_copy *nxr__weights_on(const nxr_weights_t *w,
                                                const struct nxr_domain *d);

#endif /* NXR_RUNTIME_INTERNAL_WEIGHTS_H */
