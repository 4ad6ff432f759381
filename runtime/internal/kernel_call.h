/*
 * nxr kernel calls, internals: the one request every kernel call through a
 * context makes of the call engine (runtime/kernel_call.c), filled by its
 * public function (runtime/kernel_wrappers.c).
 */
#ifndef NXR_RUNTIME_INTERNAL_KERNEL_CALL_H
#define NXR_RUNTIME_INTERNAL_KERNEL_CALL_H

#include <stddef.h>

#include "kernels/nxr_kernels.h"
#include "runtime/nxr_ctx.h"
#include "runtime/nxr_route.h"
#include "runtime/nxr_weights.h"

/* One kernel call: what to invoke with which arguments, the argument
 * check's verdict, and the inputs placement weighs. */
struct nxr__kcall {
    const char *name; /* the public call, for error details */
    /* The runtime's providers (NULL for an orphaned context, which the
     * engine reports): the argument check asks them for scratch sizes. */
    const nxr_provider_bundle_t *providers;
    enum nxr_provider_family family;
    size_t scratch_bytes; /* per thread */
    /* The kernel's invoker: its dispatch (nxr__bundle_<kernel>) with the
     * arguments unpacked from args, which the wrapper owns for the call. */
    int (*invoke)(const nxr_provider_bundle_t *b, const struct nxr_kernel_call *call, const void *args);
    const void *args;
    int bad;       /* -EINVAL (or another status) when the arguments break the contract */
    char why[160]; /* and which one, why */
    struct nxr_mem_ref in[4];
    size_t nin;
    size_t weight_bytes; /* packed weights the call streams (the stats' count); 0: none */
};

/*
 * Makes the call on ctx (runtime/kernel_call.c's file comment: the thread
 * rule, the verdict, placement, provider rules, fan-out, scratch, permits).
 * Returns the status the public kernel returns; every failure leaves its
 * detail in ctx's last error. -EINVAL for a NULL ctx. Blocks until the
 * kernel is done; the driving thread of ctx, or a body of its domain.
 */
int nxr__kcall_run(nxr_ctx_t *ctx, const struct nxr__kcall *k);

/* nxr_sgemm_packed's arguments resolved on a context's domain: the copy
 * of the weights it reads (as B of the equivalent unpacked call), the ISA
 * the copy was packed for, the epilogue (NULL: none). */
struct nxr__packed_call {
    const struct nxr__native_isa *isa;
    struct nxr_sgemm_args gemm; /* b: the copy's data */
    const struct nxr__packed_b *packed;
    const struct nxr__packed_q *quant;         /* bf16 / q8 weights (then packed is NULL) */
    const struct nxr_sgemm_epilogue *epilogue; /* NULL: none */
};

/* nxr_sgemm_packed's verdict on ctx's domain (runtime/kernel_wrappers.c):
 * fills *pc, and k's bad/why, scratch_bytes and inputs. A step
 * (runtime/step.c) checks its products with it before it runs. */
void nxr__packed_prepare(nxr_ctx_t *ctx, struct nxr__kcall *k, struct nxr__packed_call *pc,
                         const struct nxr_sgemm_packed_args *args,
                         const struct nxr_sgemm_epilogue *ep);

/* Runs the prepared product with `c` (the native kernel of its format). */
int nxr__packed_invoke(const struct nxr_kernel_call *c, const struct nxr__packed_call *pc);

#endif /* NXR_RUNTIME_INTERNAL_KERNEL_CALL_H */
