/*
 * nxr providers, for their authors: how a kernel implementation plugs into
 * nxr. (Calling kernels needs only kernels/nxr_kernels.h.)
 *
 * A provider implements one kernel family (GEMM, elementwise, reductions,
 * norms/softmax): nxr's own native kernels, OpenBLAS, or a host-supplied
 * table. Each provider is classified once, when it is created, on two
 * independent axes (docs/contracts.md, "Providers"):
 *   - thread-count control: can it keep one call within a thread budget,
 *     without touching any other domain (PER_CALL_BOUND), is it always one
 *     thread (SEQUENTIAL), does its adapter force one thread on every call
 *     (CLAMP_TO_ONE), or is its count process-global or not controllable at
 *     all (GLOBAL_OR_UNCONTROLLED);
 *   - where it runs: do the threads of a call run on nxr's domain workers
 *     (ENGINE_WORKERS), only on the calling thread (CALLING_THREAD), or on
 *     threads the provider owns (EXTERNAL_WORKERS).
 * The classification decides where a call may run (the provider rules in
 * docs/contracts.md); an impossible combination is NXR_EPROVIDER at
 * creation, never a silent downgrade. A provider is immutable after
 * creation.
 *
 * A bundle holds one provider per family, resolved when the bundle is
 * created: the call path reads a typed slot, never looks a name up. No
 * provider error falls back to another provider; a request a provider does
 * not implement is NXR_EUNSUPPORTED.
 *
 * Also here: the OpenBLAS probe (threading model, core, configuration),
 * which is how nxr classifies the OpenBLAS it runs with.
 *
 * Threads: creation and destruction are the owner's; every const accessor
 * and every provider call may run on any thread while the object lives.
 */
#ifndef NXR_PROVIDER_H
#define NXR_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/nxr_fwd.h"
#include "base/nxr_status.h"
#include "executor/nxr_executor.h"
#include "kernels/nxr_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- classification ---------------------------------------------------- */

/* Axis 1: who bounds the number of threads one call uses. */
enum nxr_count_control {
    /* The call takes its budget as an argument and stays within it without
     * affecting any other thread (native kernels, MKL's _local setter). */
    NXR_COUNT_PER_CALL_BOUND = 0,
    /* Always one thread, whatever the budget (a sequential BLAS build). */
    NXR_COUNT_SEQUENTIAL = 1,
    /* The adapter forces single-threaded mode on every call and restores the
     * library's setting afterwards; a budget of eight still runs one thread. */
    NXR_COUNT_CLAMP_TO_ONE = 2,
    /* The count is process-global (parallel OpenBLAS: its _local setter is
     * the global one) or cannot be set at all. */
    NXR_COUNT_GLOBAL_OR_UNCONTROLLED = 3,
};

/* Axis 2: where the threads of one call run. */
enum nxr_provider_runs_on {
    /* On the domain's own workers, handed over by nxr per call. */
    NXR_RUNS_ON_ENGINE_WORKERS = 0,
    /* Only on the thread that calls (already pinned when it is a worker). */
    NXR_RUNS_ON_CALLING_THREAD = 1,
    /* On threads the provider creates and owns (OpenBLAS's pool); nxr cannot
     * confine them to a domain. */
    NXR_RUNS_ON_EXTERNAL_WORKERS = 2,
};

NXR_API const char *nxr_count_control_name(enum nxr_count_control count);
NXR_API const char *nxr_provider_runs_on_name(enum nxr_provider_runs_on runs_on);

/* ---- calls ----------------------------------------------------------- */

/*
 * What nxr hands a provider with each call. threads is the most threads the
 * call may use (>= 1; 1 = the calling thread only). scratch[w], for
 * w < threads, is a per-worker area of scratch_bytes bytes aligned to 64
 * (a provider states what it needs through its *_scratch op; zero needs no
 * array). Through a context, the areas are slices of one buffer of the
 * domain's pool (node-local), acquired for the call and released after it,
 * so calls of one shape reuse the same memory.
 *
 * parallel_for is how an ENGINE_WORKERS provider uses the domain's workers:
 * it splits [0, n) into chunks of `grain` (0: one chunk per participant,
 * as nxr_parallel_for's grain 0) and runs fn(arg, begin, end, w)
 * over them with at most `threads` participants (w < threads selects
 * scratch[w]), on the domain's CPUs, and returns when all ran: 0 or a
 * negative status. A range of one chunk runs on the calling thread when that
 * thread is on the domain, else on one worker. When parallel_for is set,
 * every piece of the provider's work must go through it: the thread that
 * called the provider may be outside the domain. When it is NULL, the
 * calling thread is on the domain and the provider runs there, sequentially.
 * runner is parallel_for's own state; providers pass the call through
 * untouched.
 */
struct nxr_kernel_call {
    unsigned threads;
    void *const *scratch;
    size_t scratch_bytes;
    int (*parallel_for)(const struct nxr_kernel_call *call, size_t n, size_t grain, nxr_for_fn fn,
                        void *arg);
    void *runner;
};

/* Each op returns 0, -EINVAL (bad arguments), NXR_EUNSUPPORTED (an op enum
 * value it does not implement) or the provider's own error. A NULL op in a
 * table means the request is NXR_EUNSUPPORTED. */
struct nxr_gemm_ops {
    /* Per-worker scratch bytes a call with these arguments needs (NULL: 0). */
    size_t (*sgemm_scratch)(void *self, const struct nxr_sgemm_args *args);
    int (*sgemm)(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *args);
    int (*sgemm_batch)(void *self, const struct nxr_kernel_call *call,
                       const struct nxr_sgemm_batch_args *args);
    /* Optional: sgemm with the epilogue applied while C is written back.
     * When NULL, nxr calls sgemm and then applies the epilogue itself, on
     * the domain, through call->parallel_for like the provider's own work.
     * epilogue is never NULL here. */
    int (*sgemm_fused)(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *args,
                       const struct nxr_sgemm_epilogue *epilogue);
};

/* Vectors of n floats; out may alias an input exactly, not partially (a
 * partial overlap is -EINVAL). */
struct nxr_elementwise_ops {
    int (*binary)(void *self, const struct nxr_kernel_call *call, enum nxr_binary_op op, size_t n,
                  const float *x, const float *y, float *out);
    /* out = alpha * x */
    int (*scale)(void *self, const struct nxr_kernel_call *call, size_t n, const float *x, float alpha,
                 float *out);
    int (*unary)(void *self, const struct nxr_kernel_call *call, enum nxr_unary_op op, size_t n,
                 const float *x, float *out);
    /* STREAM triad: a = b + s * c */
    int (*triad)(void *self, const struct nxr_kernel_call *call, size_t n, const float *b,
                 const float *c, float s, float *a);
    /* Optional: a row broadcast over a rows x cols matrix,
     * out[r][c] = x[r][c] op row[c] (a bias over a batch), row strides
     * ldx, ldo >= cols; out may be x (then ldo == ldx), row must not overlap
     * out. NULL: the request is NXR_EUNSUPPORTED. */
    int (*binary_rows)(void *self, const struct nxr_kernel_call *call, enum nxr_binary_op op,
                       size_t rows, size_t cols, const float *x, size_t ldx, const float *row,
                       float *out, size_t ldo);
};

/* n >= 1 for max and argmax (-EINVAL otherwise); the sum of 0 floats is 0.
 * A NaN anywhere makes max NaN and argmax the index of the first NaN. */
struct nxr_reduction_ops {
    int (*sum)(void *self, const struct nxr_kernel_call *call, size_t n, const float *x, float *out);
    int (*max)(void *self, const struct nxr_kernel_call *call, size_t n, const float *x, float *out);
    int (*argmax)(void *self, const struct nxr_kernel_call *call, size_t n, const float *x, size_t *out);
};

/* rows x cols matrices with row strides ldx, ldo >= cols; every op works on
 * each row independently. gamma, beta: cols floats, or NULL for 1 and 0,
 * not overlapping out. eps >= 0. out may be x (with ldo == ldx); any other
 * overlap of out and x is -EINVAL. */
struct nxr_norm_ops {
    /* out = exp(x - max) / sum(exp(x - max)); a row of all -inf is NaN. */
    int (*softmax)(void *self, const struct nxr_kernel_call *call, size_t rows, size_t cols,
                   const float *x, size_t ldx, float *out, size_t ldo);
    /* out = x / sqrt(mean(x^2) + eps) * gamma */
    int (*rmsnorm)(void *self, const struct nxr_kernel_call *call, size_t rows, size_t cols,
                   const float *x, size_t ldx, const float *gamma, float eps, float *out,
                   size_t ldo);
    /* out = (x - mean) / sqrt(var + eps) * gamma + beta (biased variance) */
    int (*layernorm)(void *self, const struct nxr_kernel_call *call, size_t rows, size_t cols,
                     const float *x, size_t ldx, const float *gamma, const float *beta, float eps,
                     float *out, size_t ldo);
};

/* A process-global thread count (required for GLOBAL_OR_UNCONTROLLED
 * providers, which nxr only ever runs at count 1 or under the process-wide
 * exclusive permit with set-and-restore; refused on any other provider). */
struct nxr_global_threads_ops {
    int (*get)(void *self);
    void (*set)(void *self, int count);
};

/* ---- providers ------------------------------------------------------- */

/*
 * What a provider is, filled by the host (start from nxr_provider_desc_init)
 * and copied at creation. Exactly the ops table of `family` is set; the
 * others stay NULL. self is passed to every op. release(self), if set, runs
 * when the last reference to the provider goes.
 */
struct nxr_provider_desc {
    const char *name;
    enum nxr_provider_family family;
    enum nxr_count_control count;
    enum nxr_provider_runs_on runs_on;
    const struct nxr_gemm_ops *gemm;
    const struct nxr_elementwise_ops *elementwise;
    const struct nxr_reduction_ops *reduction;
    const struct nxr_norm_ops *norm;
    const struct nxr_global_threads_ops *global_threads;
    void *self;
    void (*release)(void *self);
};

/* Everything NULL/zero: family GEMM, PER_CALL_BOUND on ENGINE_WORKERS. */
NXR_API void nxr_provider_desc_init(struct nxr_provider_desc *desc);

/*
 * Creates a provider from a description (copied; the ops tables are
 * referenced, not copied, and must outlive the provider). Returns 0 and
 * *out, or -EINVAL (NULL argument, empty name, family out of range) or
 * NXR_EPROVIDER: an impossible classification (valid pairs:
 * PER_CALL_BOUND x ENGINE_WORKERS, PER_CALL_BOUND x EXTERNAL_WORKERS,
 * SEQUENTIAL x CALLING_THREAD, CLAMP_TO_ONE x CALLING_THREAD,
 * GLOBAL_OR_UNCONTROLLED x EXTERNAL_WORKERS), a missing or extra ops table,
 * a table whose family op set is empty, a GLOBAL_OR_UNCONTROLLED
 * provider without global_threads get and set, or global_threads on any
 * other classification (the count gate is held around a call with a count,
 * and a provider that asks for permits inside its call would take them
 * under the gate: the lock order is permit, then gate). -ENOMEM. On failure *out is
 * NULL and release was not called. Providers created here are foreign: nxr
 * checks the floating-point environment around each of their calls.
 */
NXR_API int nxr_provider_create(const struct nxr_provider_desc *desc, nxr_provider_t **out);

/* Getters: the enums' first values (and false) for a NULL provider. */
NXR_API enum nxr_count_control nxr_provider_count_control(const nxr_provider_t *p);
NXR_API enum nxr_provider_runs_on nxr_provider_runs_on(const nxr_provider_t *p);
/* True for providers made by nxr_provider_create (checked around calls). */
NXR_API bool nxr_provider_is_foreign(const nxr_provider_t *p);

/* ---- bundles --------------------------------------------------------- */


struct nxr_provider_bundle_opts {
    /* One provider per family (indexed by enum nxr_provider_family); NULL
     * selects nxr's native provider for that family. */
    nxr_provider_t *providers[NXR_FAMILY_COUNT];
};

NXR_API void nxr_provider_bundle_opts_init(struct nxr_provider_bundle_opts *opts);

/*
 * Creates a bundle: each slot is resolved now and holds a reference to its
 * provider. opts may be NULL (all native). Returns 0 and *out, -EINVAL (a
 * provider in the slot of another family) or -ENOMEM; on failure *out is
 * NULL and no reference is held.
 */
NXR_API int nxr_provider_bundle_create(const struct nxr_provider_bundle_opts *opts,
                                       nxr_provider_bundle_t **out);

/* Drops the bundle's references. NULL is a no-op. */
NXR_API void nxr_provider_bundle_destroy(nxr_provider_bundle_t *b);

/* The provider in a family's slot (owned by the bundle); NULL when family
 * is out of range. */
NXR_API const nxr_provider_t *nxr_provider_bundle_get(const nxr_provider_bundle_t *b,
                                                      enum nxr_provider_family family);

/* ---- OpenBLAS -------------------------------------------------------- */

enum nxr_openblas_threading {
    NXR_OPENBLAS_SEQUENTIAL = 0, /* openblas_get_parallel() == 0 */
    NXR_OPENBLAS_PTHREADS = 1,   /* == 1 */
    NXR_OPENBLAS_OPENMP = 2,     /* == 2 */
    NXR_OPENBLAS_UNKNOWN = 3,    /* anything else: classified as GLOBAL */
};

/* What OpenBLAS says about itself. */
struct nxr_openblas_info {
    /* The system has an OpenBLAS nxr can load (libopenblas.so.0 with the
     * entry points nxr uses); false leaves every other field 0/"" except
     * threading (UNKNOWN) and diagnostic. */
    bool present;
    enum nxr_openblas_threading threading;
    int parallel;     /* openblas_get_parallel() as reported */
    int threads;      /* openblas_get_num_threads() at probe time */
    char core[64];    /* openblas_get_corename() */
    char config[256]; /* openblas_get_config() */
    enum nxr_count_control count;
    enum nxr_provider_runs_on runs_on;
    /* The core's kernels are far below the CPU's vector ISA (e.g. Prescott
     * SSE3 kernels on an AVX2 or AVX-512 CPU): OpenBLAS fell back, from an
     * OPENBLAS_CORETYPE setting or a CPU it does not know, and GEMM runs
     * several times slower than it could. */
    bool core_fallback;
    char diagnostic[256]; /* why core_fallback is set; "" otherwise */
};

/* Probes OpenBLAS. nxr does not link it: the first probe (or
 * nxr_provider_openblas_create) loads it into the process, and the pthreads
 * build starts its threads then; a process that never probes it or creates
 * its provider runs none of them. Reads, never changes, its state. Any
 * thread. */
NXR_API void nxr_openblas_probe(struct nxr_openblas_info *out);

#ifdef __cplusplus
}
#endif

#endif /* NXR_PROVIDER_H */
