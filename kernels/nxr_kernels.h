/*
 * nxr kernels, for their callers: the kernel families and their argument
 * structs, the providers a runtime can be given (nxr's native ones,
 * OpenBLAS), the policy for providers that cannot be confined to a domain,
 * and the floating-point environment (MXCSR on x86-64, FPCR on aarch64),
 * which nxr snapshots around every call into foreign code. The kernels
 * themselves are called through a context (runtime/nxr_ctx_kernels.h).
 *
 * Writing a provider (the ops tables, the per-call struct, provider
 * descriptors, bundles and the classification below) is
 * kernels/nxr_provider.h.
 *
 * Threads: creation and destruction are the owner's; every const accessor
 * may run on any thread while the object lives.
 */
#ifndef NXR_KERNELS_H
#define NXR_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/nxr_fwd.h"
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

/* How a runtime treats providers that cannot be confined to a domain. */
enum nxr_provider_policy {
    /* Unset (option structs): NXR_PROVIDER_POLICY, else strict. */
    NXR_PROVIDER_POLICY_DEFAULT = 0,
    /* Strict placement: a provider whose threads could leave the domain is
     * rejected (NXR_EPLACEMENT) unless it runs on the calling worker only. */
    NXR_PROVIDER_STRICT = 1,
    /* Process-wide exclusive: such a provider runs while holding a permit
     * for the whole process, with its count set to the domain's budget and
     * restored afterwards. */
    NXR_PROVIDER_PROCESS_EXCLUSIVE = 2,
};

NXR_API const char *nxr_provider_family_name(enum nxr_provider_family family);

/* ---- kernel arguments ---------------------------------------------- */

/*
 * C = alpha * op(A) * op(B) + beta * C, row-major, op(X) = X or X^T.
 * op(A) is m x k, op(B) is k x n, C is m x n. lda >= (trans_a ? m : k),
 * ldb >= (trans_b ? k : n), ldc >= n (each at least 1). When beta == 0, C is
 * not read (NaN in C does not propagate); when alpha == 0 or k == 0, A and B
 * are not read. C must not overlap A or B: C's extent (its first element to
 * its last, ldc included) must not meet A's or B's when they are read.
 */
struct nxr_sgemm_args {
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
};

/* batch GEMMs; item i uses a + i*stride_a, b + i*stride_b, c + i*stride_c
 * (strides in floats). Every item obeys struct nxr_sgemm_args's rules; no two
 * items' C share an element (so stride_c == 0 needs batch <= 1), and the C
 * items' whole span must not meet the A or B items' spans. */
struct nxr_sgemm_batch_args {
    struct nxr_sgemm_args gemm;
    size_t batch;
    size_t stride_a, stride_b, stride_c;
};

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
struct nxr_sgemm_epilogue {
    const float *bias;
    enum nxr_activation activation;
};

/* ---- providers ------------------------------------------------------- */


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

/* Getters: NULL and NXR_FAMILY_GEMM for a NULL provider. */
NXR_API const char *nxr_provider_name(const nxr_provider_t *p);
NXR_API enum nxr_provider_family nxr_provider_family(const nxr_provider_t *p);

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
struct nxr_fpenv {
    bool supported;
    unsigned control; /* MXCSR & 0xffc0, or FPCR */
    unsigned x87;     /* x87 control word (x86-64 only) */
};

/* Reads the calling thread's environment. */
NXR_API void nxr_fpenv_get(struct nxr_fpenv *out);
/* Writes env's control state to the calling thread (flags are kept). */
NXR_API void nxr_fpenv_set(const struct nxr_fpenv *env);
NXR_API bool nxr_fpenv_equal(const struct nxr_fpenv *a, const struct nxr_fpenv *b);
/* Round to nearest, gradual underflow, every exception masked. */
NXR_API bool nxr_fpenv_is_default(const struct nxr_fpenv *env);
NXR_API bool nxr_fpenv_flush_to_zero(const struct nxr_fpenv *env);
NXR_API bool nxr_fpenv_denormals_are_zero(const struct nxr_fpenv *env);
NXR_API enum nxr_rounding nxr_fpenv_rounding(const struct nxr_fpenv *env);

/*
 * Compares the calling thread's environment with `expected`: 0 when equal,
 * else restores `expected` and returns NXR_EFPENV (nxr_last_error() says
 * what had changed); -EINVAL for a NULL `expected`. nxr calls this after
 * every call into a foreign provider.
 */
NXR_API int nxr_fpenv_check(const struct nxr_fpenv *expected);

#ifdef __cplusplus
}
#endif

#endif /* NXR_KERNELS_H */
