/*
 * nxr providers, internals: the provider object, bundles with one typed
 * slot per family, the dispatch functions the runtime calls, and the
 * OpenBLAS-style global-count guard.
 *
 * A provider is immutable after nxr_provider_create; only its reference
 * count changes. A bundle resolves every slot when it is created (provider,
 * ops table, self, classification, foreign or not), so a call reads one
 * struct field and never looks anything up. Calls into a foreign provider
 * are bracketed by a floating-point environment snapshot and check; a
 * change is restored and reported as NXR_EFPENV. A provider's error is
 * returned as it is: nothing falls back to another provider.
 */
#ifndef NXR_KERNELS_INTERNAL_PROVIDER_H
#define NXR_KERNELS_INTERNAL_PROVIDER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "kernels/internal/kernel_table.h"
#include "kernels/nxr_provider.h"

struct nxr_provider {
    /* Holders: the creator plus each bundle slot. Increments are relaxed
     * (a holder already has a reference); the decrement is acq_rel so the
     * last holder sees every other holder's writes before release. */
    atomic_uint refs;
    char *name;
    enum nxr_provider_family family;
    enum nxr_count_control count;
    enum nxr_provider_runs_on runs_on;
    bool foreign;
    const struct nxr_gemm_ops *gemm;
    const struct nxr_elementwise_ops *elementwise;
    const struct nxr_reduction_ops *reduction;
    const struct nxr_norm_ops *norm;
    const struct nxr_global_threads_ops *global_threads;
    void *self;
    void (*release)(void *self);
};

/* Validates and creates; foreign selects the FP environment checks. A
 * refusal's detail (nxr_last_error) is told as the public function `call`'s.
 * nxr_provider_create is this with foreign = true. */
int nxr__provider_new(const char *call, const struct nxr_provider_desc *desc, bool foreign,
                      nxr_provider_t **out);

/* True for the five classification pairs that can exist. */
bool nxr__classification_valid(enum nxr_count_control count, enum nxr_provider_runs_on placement);

void nxr__provider_retain(nxr_provider_t *p);

/* One family's slot, resolved at bundle creation. */
struct nxr__slot {
    nxr_provider_t *provider;
    void *self;
    bool foreign;
};

struct nxr_provider_bundle {
    struct nxr__slot slot[NXR_FAMILY_COUNT];
    const struct nxr_gemm_ops *gemm;
    const struct nxr_elementwise_ops *elementwise;
    const struct nxr_reduction_ops *reduction;
    const struct nxr_norm_ops *norm;
};

/* Dispatch: nxr__bundle_<kernel>(b, call, the op's parameters), one per row
 * of kernels/internal/kernel_table.h, declared there and written out in
 * kernels/bundle.c. And the scratch a
 * GEMM call needs (the slot's sgemm_scratch; 0 without one). */
size_t nxr__bundle_sgemm_scratch(const nxr_provider_bundle_t *b, const struct nxr_sgemm_args *args);

/* nxr's own epilogue over C's rows (native kernels, the best ISA), run
 * through call->parallel_for when the call has one, else on this thread. */
int nxr__epilogue_apply(const struct nxr_kernel_call *call, const struct nxr_sgemm_args *args,
                        const struct nxr_sgemm_epilogue *epilogue);

/*
 * Process-global thread counts and their gate (kernels/global_count.c: why a
 * gate, and its lock order: any permit first).
 *
 * nxr__global_threads_run runs fn(arg) with a GLOBAL_OR_UNCONTROLLED
 * provider's process-global thread count set to `count`, and puts the
 * previous count back afterwards (also when fn changed it, also when fn
 * failed), all with the gate held exclusively. Only for use while holding
 * the process-wide exclusive permit: the count is visible to every thread of
 * every runtime. Returns fn's status, -EINVAL (no global_threads ops,
 * count < 1), or NXR_EREENTRANT when the calling thread already holds the
 * gate (a provider calling back into nxr from inside its own call).
 */
int nxr__global_threads_run(const nxr_provider_t *p, int count, int (*fn)(void *arg), void *arg);

/* The provider's global count as it rests (0 when it has none): read with
 * the gate held shared, so never a count another runtime set for its call. */
int nxr__global_threads_get(const nxr_provider_t *p);

/* The same for a library's count outside any provider (the OpenBLAS probe
 * at runtime creation): get() with the gate held shared. */
int nxr__global_count_read(int (*get)(void));

/* Runs fn(arg) with the gate held shared when p has a global count (else
 * just runs it): no runtime changes the count during fn. Returns fn's status
 * or -EINVAL (NULL p or fn). */
int nxr__global_threads_hold(const nxr_provider_t *p, int (*fn)(void *arg), void *arg);

#endif /* NXR_KERNELS_INTERNAL_PROVIDER_H */
