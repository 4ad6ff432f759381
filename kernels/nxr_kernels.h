/*
 * nxr kernels and providers: the public face of the kernel layer.
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
 *   - placement: do the threads of a call run on nxr's domain workers
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
 * Also here: the floating-point environment (MXCSR on x86-64, FPCR on
 * aarch64), which nxr snapshots around every call into foreign code, and
 * the OpenBLAS probe (threading model, core, configuration).
 *
 * Threads: creation and destruction are the owner's; every const accessor
 * and every provider call may run on any thread while the object lives.
 */
#ifndef NXR_KERNELS_H
#define NXR_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/nxr_status.h"
#include "executor/nxr_executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- classification ---------------------------------------------------- */

enum nxr_provider_family {
    NXR_FAMILY_GEMM = 0,
    NXR_FAMILY_ELEMENTWISE = 1,
    NXR_FAMILY_REDUCTION = 2,
    NXR_FAMILY_NORM = 3, /* softmax, RMSNorm, LayerNorm */
    NXR_FAMILY_COUNT = 4,
};

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
enum nxr_provider_placement {
    /* On the domain's own workers, handed over by nxr per call. */
    NXR_RUNS_ON_ENGINE_WORKERS = 0,
    /* Only on the thread that calls (already pinned when it is a worker). */
    NXR_RUNS_ON_CALLING_THREAD = 1,
    /* On threads the provider creates and owns (OpenBLAS's pool); nxr cannot
     * confine them to a domain. */
    NXR_RUNS_ON_EXTERNAL_WORKERS = 2,
};

/* How a runtime treats providers that cannot be confined to a domain. */
enum nxr_provider_policy {
    /* Strict placement: a provider whose threads could leave the domain is
     * rejected (NXR_EPLACEMENT) unless it runs on the calling worker only. */
    NXR_PROVIDER_STRICT = 0,
    /* Process-wide exclusive: such a provider runs while holding a permit
     * for the whole process, with its count set to the domain's budget and
     * restored afterwards. */
    NXR_PROVIDER_PROCESS_EXCLUSIVE = 1,
};

NXR_API const char *nxr_provider_family_name(enum nxr_provider_family family);
NXR_API const char *nxr_count_control_name(enum nxr_count_control count);
NXR_API const char *nxr_provider_placement_name(enum nxr_provider_placement placement);

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
typedef struct nxr_kernel_call nxr_kernel_call_t;
struct nxr_kernel_call {
    unsigned threads;
    void *const *scratch;
    size_t scratch_bytes;
    int (*parallel_for)(const nxr_kernel_call_t *call, size_t n, size_t grain, nxr_for_fn fn,
                        void *arg);
    void *runner;
};

/*
 * C = alpha * op(A) * op(B) + beta * C, row-major, op(X) = X or X^T.
 * op(A) is m x k, op(B) is k x n, C is m x n. lda >= (trans_a ? m : k),
 * ldb >= (trans_b ? k : n), ldc >= n (each at least 1). When beta == 0, C is
 * not read (NaN in C does not propagate); when alpha == 0 or k == 0, A and B
 * are not read. C must not overlap A or B: C's extent (its first element to
 * its last, ldc included) must not meet A's or B's when they are read.
 */
typedef struct nxr_sgemm_args {
    bool trans_a, trans_b;
    size_t m, n, k;
    float alpha;
    const float *a;
    size_t lda;
    const float *b;
    size_t ldb;
    float beta;
    float *c;
    size_t ldc;
} nxr_sgemm_args_t;

/* batch GEMMs; item i uses a + i*stride_a, b + i*stride_b, c + i*stride_c
 * (strides in floats). Every item obeys nxr_sgemm_args_t's rules; no two
 * items' C share an element (so stride_c == 0 needs batch <= 1), and the C
 * items' whole span must not meet the A or B items' spans. */
typedef struct nxr_sgemm_batch_args {
    nxr_sgemm_args_t gemm;
    size_t batch;
    size_t stride_a, stride_b, stride_c;
} nxr_sgemm_batch_args_t;

enum nxr_binary_op {
    NXR_BINARY_ADD = 0, /* out = x + y */
    NXR_BINARY_MUL = 1, /* out = x * y */
};

enum nxr_unary_op {
    NXR_UNARY_SILU = 0,      /* x * sigmoid(x) */
    NXR_UNARY_GELU_TANH = 1, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
};

/* The activation of a fused GEMM epilogue. */
enum nxr_activation {
    NXR_ACTIVATION_NONE = 0,
    NXR_ACTIVATION_SILU = 1,      /* as NXR_UNARY_SILU */
    NXR_ACTIVATION_GELU_TANH = 2, /* as NXR_UNARY_GELU_TANH */
};

/*
 * What a fused GEMM does to C after the product: C[i][j] = act(C[i][j] +
 * bias[j]), bias being n floats (NULL: no bias) that must not overlap C.
 * The result equals nxr_sgemm, then nxr_binary_rows(ADD, bias), then
 * nxr_unary(act) over C, bit for bit with nxr's native kernels.
 */
typedef struct nxr_sgemm_epilogue {
    const float *bias;
    enum nxr_activation activation;
} nxr_sgemm_epilogue_t;

/* Each op returns 0, -EINVAL (bad arguments), NXR_EUNSUPPORTED (an op enum
 * value it does not implement) or the provider's own error. A NULL op in a
 * table means the request is NXR_EUNSUPPORTED. */
typedef struct nxr_gemm_ops {
    /* Per-worker scratch bytes a call with these arguments needs (NULL: 0). */
    size_t (*sgemm_scratch)(void *self, const nxr_sgemm_args_t *args);
    int (*sgemm)(void *self, const nxr_kernel_call_t *call, const nxr_sgemm_args_t *args);
    int (*sgemm_batch)(void *self, const nxr_kernel_call_t *call,
                       const nxr_sgemm_batch_args_t *args);
    /* Optional: sgemm with the epilogue applied while C is written back.
     * When NULL, nxr calls sgemm and then applies the epilogue itself, on
     * the domain, through call->parallel_for like the provider's own work.
     * epilogue is never NULL here. */
    int (*sgemm_fused)(void *self, const nxr_kernel_call_t *call, const nxr_sgemm_args_t *args,
                       const nxr_sgemm_epilogue_t *epilogue);
} nxr_gemm_ops_t;

/* Vectors of n floats; out may alias an input exactly, not partially (a
 * partial overlap is -EINVAL). */
typedef struct nxr_elementwise_ops {
    int (*binary)(void *self, const nxr_kernel_call_t *call, enum nxr_binary_op op, size_t n,
                  const float *x, const float *y, float *out);
    /* out = alpha * x */
    int (*scale)(void *self, const nxr_kernel_call_t *call, size_t n, float alpha, const float *x,
                 float *out);
    int (*unary)(void *self, const nxr_kernel_call_t *call, enum nxr_unary_op op, size_t n,
                 const float *x, float *out);
    /* STREAM triad: a = b + s * c */
    int (*triad)(void *self, const nxr_kernel_call_t *call, size_t n, float *a, const float *b,
                 const float *c, float s);
    /* Optional: a row broadcast over a rows x cols matrix,
     * out[r][c] = x[r][c] op row[c] (a bias over a batch), row strides
     * ldx, ldo >= cols; out may be x (then ldo == ldx), row must not overlap
     * out. NULL: the request is NXR_EUNSUPPORTED. */
    int (*binary_rows)(void *self, const nxr_kernel_call_t *call, enum nxr_binary_op op,
                       size_t rows, size_t cols, const float *x, size_t ldx, const float *row,
                       float *out, size_t ldo);
} nxr_elementwise_ops_t;

/* n >= 1 for max and argmax (-EINVAL otherwise); the sum of 0 floats is 0.
 * A NaN anywhere makes max NaN and argmax the index of the first NaN. */
typedef struct nxr_reduction_ops {
    int (*sum)(void *self, const nxr_kernel_call_t *call, size_t n, const float *x, float *out);
    int (*max)(void *self, const nxr_kernel_call_t *call, size_t n, const float *x, float *out);
    int (*argmax)(void *self, const nxr_kernel_call_t *call, size_t n, const float *x, size_t *out);
} nxr_reduction_ops_t;

/* rows x cols matrices with row strides ldx, ldo >= cols; every op works on
 * each row independently. gamma, beta: cols floats, or NULL for 1 and 0,
 * not overlapping out. eps >= 0. out may be x (with ldo == ldx); any other
 * overlap of out and x is -EINVAL. */
typedef struct nxr_norm_ops {
    /* out = exp(x - max) / sum(exp(x - max)); a row of all -inf is NaN. */
    int (*softmax)(void *self, const nxr_kernel_call_t *call, size_t rows, size_t cols,
                   const float *x, size_t ldx, float *out, size_t ldo);
    /* out = x / sqrt(mean(x^2) + eps) * gamma */
    int (*rmsnorm)(void *self, const nxr_kernel_call_t *call, size_t rows, size_t cols,
                   const float *x, size_t ldx, const float *gamma, float eps, float *out,
                   size_t ldo);
    /* out = (x - mean) / sqrt(var + eps) * gamma + beta (biased variance) */
    int (*layernorm)(void *self, const nxr_kernel_call_t *call, size_t rows, size_t cols,
                     const float *x, size_t ldx, const float *gamma, const float *beta, float eps,
                     float *out, size_t ldo);
} nxr_norm_ops_t;

/* A process-global thread count (required for GLOBAL_OR_UNCONTROLLED
 * providers, which nxr only ever runs at count 1 or under the process-wide
 * exclusive permit with set-and-restore; refused on any other provider). */
typedef struct nxr_global_threads_ops {
    int (*get)(void *self);
    void (*set)(void *self, int count);
} nxr_global_threads_ops_t;

/* ---- providers ------------------------------------------------------- */

typedef struct nxr_provider nxr_provider_t;

/*
 * What a provider is, filled by the host (start from nxr_provider_desc_init)
 * and copied at creation. Exactly the ops table of `family` is set; the
 * others stay NULL. self is passed to every op. release(self), if set, runs
 * when the last reference to the provider goes.
 */
typedef struct nxr_provider_desc {
    const char *name;
    enum nxr_provider_family family;
    enum nxr_count_control count;
    enum nxr_provider_placement placement;
    const nxr_gemm_ops_t *gemm;
    const nxr_elementwise_ops_t *elementwise;
    const nxr_reduction_ops_t *reduction;
    const nxr_norm_ops_t *norm;
    const nxr_global_threads_ops_t *global_threads;
    void *self;
    void (*release)(void *self);
} nxr_provider_desc_t;

/* Everything NULL/zero: family GEMM, PER_CALL_BOUND on ENGINE_WORKERS. */
NXR_API void nxr_provider_desc_init(nxr_provider_desc_t *desc);

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
NXR_API int nxr_provider_create(const nxr_provider_desc_t *desc, nxr_provider_t **out);

/*
 * nxr's native provider for a family: PER_CALL_BOUND x ENGINE_WORKERS. The
 * vector ISA (AVX-512, AVX2+FMA or portable) is chosen once, here, from what
 * the CPU and OS support. 0, -EINVAL or -ENOMEM.
 */
NXR_API int nxr_provider_native_create(enum nxr_provider_family family, nxr_provider_t **out);

/*
 * The OpenBLAS GEMM provider, classified from the library (loaded now if
 * the process does not have it yet, see nxr_openblas_probe;
 * openblas_get_parallel): a sequential build is SEQUENTIAL x
 * CALLING_THREAD; a pthreads or OpenMP build is GLOBAL_OR_UNCONTROLLED x
 * EXTERNAL_WORKERS. Its sgemm refuses (NXR_EPLACEMENT) to run when
 * OpenBLAS's current count exceeds call->threads, so it never runs wider
 * than it was granted. It never changes OpenBLAS's thread count; nxr does
 * that only inside the exclusive permit. 0, -EINVAL, -ENOMEM or
 * NXR_EUNSUPPORTED (no OpenBLAS on this system).
 */
NXR_API int nxr_provider_openblas_create(nxr_provider_t **out);

/* Drops the caller's reference (a bundle holds its own). NULL is a no-op. */
NXR_API void nxr_provider_destroy(nxr_provider_t *p);

NXR_API const char *nxr_provider_name(const nxr_provider_t *p);
NXR_API enum nxr_provider_family nxr_provider_family(const nxr_provider_t *p);
NXR_API enum nxr_count_control nxr_provider_count_control(const nxr_provider_t *p);
NXR_API enum nxr_provider_placement nxr_provider_placement(const nxr_provider_t *p);
/* True for providers made by nxr_provider_create (checked around calls). */
NXR_API bool nxr_provider_is_foreign(const nxr_provider_t *p);

/* ---- bundles --------------------------------------------------------- */

typedef struct nxr_provider_bundle nxr_provider_bundle_t;

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

/* ---- floating-point environment -------------------------------------- */

enum nxr_rounding {
    NXR_ROUND_NEAREST = 0,
    NXR_ROUND_DOWN = 1,
    NXR_ROUND_UP = 2,
    NXR_ROUND_TOWARD_ZERO = 3,
};

/*
 * A snapshot of the calling thread's floating-point control state: MXCSR's
 * control bits (rounding, flush-to-zero, denormals-are-zero, exception
 * masks) and the x87 control word on x86-64; FPCR on aarch64. Sticky
 * exception flags are not part of it (ordinary arithmetic sets them).
 * supported is false where nxr cannot read the registers; then every
 * comparison succeeds and restoring does nothing, so the facility never
 * reports a change it cannot observe.
 */
typedef struct nxr_fpenv {
    bool supported;
    unsigned control; /* MXCSR & 0xffc0, or FPCR */
    unsigned x87;     /* x87 control word (x86-64 only) */
} nxr_fpenv_t;

/* Reads the calling thread's environment. */
NXR_API void nxr_fpenv_get(nxr_fpenv_t *out);
/* Writes env's control state to the calling thread (flags are kept). */
NXR_API void nxr_fpenv_set(const nxr_fpenv_t *env);
NXR_API bool nxr_fpenv_equal(const nxr_fpenv_t *a, const nxr_fpenv_t *b);
/* Round to nearest, gradual underflow, every exception masked. */
NXR_API bool nxr_fpenv_is_default(const nxr_fpenv_t *env);
NXR_API bool nxr_fpenv_flush_to_zero(const nxr_fpenv_t *env);
NXR_API bool nxr_fpenv_denormals_are_zero(const nxr_fpenv_t *env);
NXR_API enum nxr_rounding nxr_fpenv_rounding(const nxr_fpenv_t *env);

/*
 * Compares the calling thread's environment with `expected`: 0 when equal,
 * else restores `expected` and returns NXR_EFPENV. nxr calls this after
 * every call into a foreign provider.
 */
NXR_API int nxr_fpenv_check(const nxr_fpenv_t *expected);

/* ---- OpenBLAS -------------------------------------------------------- */

enum nxr_openblas_threading {
    NXR_OPENBLAS_SEQUENTIAL = 0, /* openblas_get_parallel() == 0 */
    NXR_OPENBLAS_PTHREADS = 1,   /* == 1 */
    NXR_OPENBLAS_OPENMP = 2,     /* == 2 */
    NXR_OPENBLAS_UNKNOWN = 3,    /* anything else: classified as GLOBAL */
};

/* What OpenBLAS says about itself. */
typedef struct nxr_openblas_info {
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
    enum nxr_provider_placement placement;
    /* The core's kernels are far below the CPU's vector ISA (e.g. Prescott
     * SSE3 kernels on an AVX2 or AVX-512 CPU): OpenBLAS fell back, from an
     * OPENBLAS_CORETYPE setting or a CPU it does not know, and GEMM runs
     * several times slower than it could. */
    bool core_fallback;
    char diagnostic[256]; /* why core_fallback is set; "" otherwise */
} nxr_openblas_info_t;

/* Probes OpenBLAS. nxr does not link it: the first probe (or
 * nxr_provider_openblas_create) loads it into the process, and the pthreads
 * build starts its threads then; a process that never probes it or creates
 * its provider runs none of them. Reads, never changes, its state. Any
 * thread. */
NXR_API void nxr_openblas_probe(nxr_openblas_info_t *out);

#ifdef __cplusplus
}
#endif

#endif /* NXR_KERNELS_H */
