/*
 * Kernel calls through a context: the provider placement rules applied per
 * call (kernels/internal/rules.h), then the call made where they say, with
 * per-worker scratch from the domain's pool, the domain's permit or the
 * exclusive permit as needed.
 *
 * Every public kernel packs its arguments and an invoker (the bundle's
 * dispatch for that op) into a `struct kcall`; run() does the rest, so the
 * placement logic exists once. Where a call runs:
 *  - a one-thread decision (INLINE) goes through nxr__exec_call: the calling
 *    thread when it is on the domain, else one of the domain's workers;
 *  - an ENGINE_WORKERS provider granted several threads is called on the
 *    calling thread with call->parallel_for set, and every chunk of its work
 *    goes through the domain's executor (workers, plus the caller only when
 *    it is inside the domain);
 *  - a provider with its own threads runs under the domain's permit (whole
 *    allowed set) or the exclusive permit, as the rules say, and is called
 *    on the domain the same way (nxr__exec_call_admitted). Its own threads
 *    are where the library put them: under the exclusive permit nothing
 *    else runs, which is that policy's whole claim.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/pool.h"
#include "base/internal/sys.h"
#include "kernels/internal/provider.h"
#include "kernels/internal/rules.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"

struct kcall {
    enum nxr_provider_family family;
    size_t scratch_bytes; /* per thread */
    int (*invoke)(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *call, const void *args);
    const void *args;
};

/* ---- call->parallel_for: the provider's way onto the domain's workers ------ */

/* The runner behind call->parallel_for. For a foreign provider each chunk
 * is bracketed by an FP environment snapshot and check on the thread that
 * ran it: the check around the whole call sees only the calling thread,
 * and a foreign chunk on a worker could otherwise leave, say, flush-to-zero
 * set on that worker for every later operation of the domain. */
struct runner {
    struct nxr__exec *exec;
    bool foreign;
    atomic_int fpenv_status; /* NXR_EFPENV once a chunk changed its thread's environment */
};

struct checked_chunk {
    nxr_for_fn fn;
    void *arg;
    struct runner *runner;
};

static void checked_chunk_body(void *p, size_t begin, size_t end, unsigned worker)
{
    const struct checked_chunk *c = p;
    nxr_fpenv_t before;
    nxr_fpenv_get(&before);
    c->fn(c->arg, begin, end, worker);
    /* nxr_fpenv_check restores `before` on this thread when it differs.
     * Relaxed: the status is read after the region joined. */
    if (nxr_fpenv_check(&before) != 0)
        atomic_store_explicit(&c->runner->fpenv_status, NXR_EFPENV, memory_order_relaxed);
}

static int runner_parallel_for(const nxr_kernel_call_t *call, size_t n, size_t grain, nxr_for_fn fn,
                               void *arg)
{
    struct runner *r = call->runner;
    struct nxr_for_opts o;
    nxr_for_opts_init(&o);
    o.grain = grain;
    o.max_threads = call->threads;
    if (!r->foreign)
        return nxr__exec_parallel_for(r->exec, 0, n, &o, fn, arg);
    struct checked_chunk c = {.fn = fn, .arg = arg, .runner = r};
    return nxr__exec_parallel_for(r->exec, 0, n, &o, checked_chunk_body, &c);
}

/* ---- one call ------------------------------------------------------------------ */

struct invocation {
    nxr_ctx_t *ctx;
    const struct kcall *k;
    const nxr_provider_t *p;
    unsigned threads;
    bool fan_out;     /* give the provider call->parallel_for */
    int global_count; /* > 0: run with the provider's global count set to it */
};

struct provider_call {
    const nxr_provider_bundle_t *bundle;
    const nxr_kernel_call_t *call;
    const struct kcall *k;
};

static int call_provider(void *p)
{
    const struct provider_call *pc = p;
    return pc->k->invoke(pc->bundle, pc->call, pc->k->args);
}

/* Calls the provider with inv->threads threads and per-thread scratch. The
 * scratch is one buffer of the domain's pool (node-local; released after the
 * call, so the next call of the same shape gets the same buffer back, LIFO,
 * and a steady stream of calls allocates nothing). */
static int invoke(void *p)
{
    const struct invocation *inv = p;
    nxr_runtime_t *rt = inv->ctx->rt;
    size_t bytes = (inv->k->scratch_bytes + 63) & ~(size_t)63;
    void *stack_ptrs[64];
    void **ptrs = stack_ptrs;
    nxr_buffer_t *scratch = NULL;
    int rc = 0;
    if (bytes > 0) {
        if (inv->threads > 64 && (ptrs = nxr__malloc(inv->threads * sizeof(*ptrs))) == NULL)
            return -ENOMEM;
        /* Pool buffers are 64-byte aligned (page-aligned from 4 KiB), and
         * bytes is a multiple of 64: every thread's slice is aligned too. */
        if (bytes > SIZE_MAX / inv->threads) {
            rc = -ENOMEM;
            goto out_free;
        }
        rc = nxr__pool_acquire(inv->ctx->domain->pool, bytes * inv->threads, &scratch);
        if (rc != 0)
            goto out_free;
        unsigned char *block = nxr_buffer_data(scratch);
        for (unsigned i = 0; i < inv->threads; i++)
            ptrs[i] = block + (size_t)i * bytes;
    }
    struct runner r = {.exec = inv->ctx->exec, .foreign = nxr_provider_is_foreign(inv->p)};
    atomic_init(&r.fpenv_status, 0);
    nxr_kernel_call_t call = {
        .threads = inv->threads,
        .scratch = bytes > 0 ? (void *const *)ptrs : NULL,
        .scratch_bytes = bytes,
        .parallel_for = inv->fan_out ? runner_parallel_for : NULL,
        .runner = inv->fan_out ? &r : NULL,
    };
    struct provider_call pc = {.bundle = rt->providers, .call = &call, .k = inv->k};
    /* A global count is set only under the exclusive permit (and the count
     * gate); any other call holds the gate shared, so that the count it was
     * admitted at cannot move under it (kernels/global_count.c). */
    rc = inv->global_count > 0
             ? nxr__global_threads_run(inv->p, inv->global_count, call_provider, &pc)
             : nxr__global_threads_hold(inv->p, call_provider, &pc);
    if (rc == 0)
        rc = atomic_load_explicit(&r.fpenv_status, memory_order_relaxed);
out_free:
    nxr_buffer_release(scratch);
    if (ptrs != stack_ptrs)
        free(ptrs);
    return rc;
}

static int run_entered(nxr_ctx_t *ctx, const struct kcall *k)
{
    nxr_runtime_t *rt = ctx->rt;
    const struct nxr_domain *d = ctx->domain;
    const nxr_provider_t *p = nxr_provider_bundle_get(rt->providers, k->family);
    enum nxr_provider_placement placement = nxr_provider_placement(p);
    enum nxr__nesting nesting = nxr__exec_nesting(ctx->exec);
    if (nesting == NXR__NEST_OTHER)
        return NXR_EREENTRANT; /* a body of another domain: not this domain's CPUs */
    if (d->spec.admission == NXR_ADMISSION_CALLER_MANAGED &&
        placement == NXR_RUNS_ON_EXTERNAL_WORKERS)
        return NXR_EPLACEMENT; /* its threads would escape the caller's pool */
    /* Nested in a body: one thread, the one we are on (one fan-out level). */
    unsigned budget = nesting == NXR__NEST_INLINE ? 1 : d->spec.budget;
    /* "Whole" is the process's set, not the runtime's (opts.allowed_cpus may
     * narrow it): a provider's own threads were made under the process's
     * affinity, and another runtime of the process may own the rest. */
    bool whole = d->spec.cpus != NULL && hwloc_bitmap_isequal(d->spec.cpus, rt->topo.process);
    struct nxr__run_decision dec = nxr__provider_decide_now(p, budget, whole, rt->settings.policy);
    struct invocation inv = {.ctx = ctx, .k = k, .p = p, .threads = dec.threads};
    int rc;
    switch (dec.run) {
    case NXR_RUN_INLINE:
        /* One thread of the domain: the caller when it is on it, else a
         * worker (work never leaves the domain's CPUs). */
        return nxr__exec_call(ctx->exec, invoke, &inv);
    case NXR_RUN_DOMAIN:
        if (placement == NXR_RUNS_ON_ENGINE_WORKERS) {
            /* Its chunks enter the domain per region, through parallel_for. */
            inv.fan_out = true;
            return invoke(&inv);
        }
        /* Its own threads, confined because the domain is everything we may
         * use: hold the domain's permit around the call, made on the domain
         * (the caller, or a worker when the caller is off it). */
        if ((rc = nxr__exec_enter(ctx->exec)) != 0)
            return rc;
        rc = nxr__exec_call_admitted(ctx->exec, invoke, &inv);
        nxr__exec_leave(ctx->exec);
        return rc;
    case NXR_RUN_EXCLUSIVE:
        if (nesting != NXR__NEST_NONE)
            return NXR_EREENTRANT; /* waiting here could wait on our own operation */
        if ((rc = nxr__arbiter_acquire_exclusive(rt->arbiter)) != 0)
            return rc;
        /* Only a process-global count is set (and restored). A PER_CALL_BOUND
         * provider on external workers (a partial domain under this policy)
         * has no global count: its bound is call->threads alone, and asking
         * nxr__global_threads_run to set one would fail with -EINVAL. */
        if (nxr_provider_count_control(p) == NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
            inv.global_count = (int)dec.threads;
        /* The exclusive permit covers every domain: the call is made on
         * this one's CPUs (here, or on a worker) without its own permit. */
        rc = nxr__exec_call_admitted(ctx->exec, invoke, &inv);
        nxr__arbiter_release_exclusive(rt->arbiter);
        return rc;
    case NXR_RUN_REJECT:
    default:
        return dec.status != 0 ? dec.status : NXR_EPLACEMENT;
    }
}

static int run(nxr_ctx_t *ctx, const struct kcall *k)
{
    if (ctx == NULL)
        return -EINVAL;
    bool entered = nxr__ctx_enter(ctx);
    int rc = run_entered(ctx, k);
    nxr__ctx_leave(ctx, entered);
    return rc;
}

/* ---- the public kernels: argument packing only ------------------------------ */

static const nxr_provider_bundle_t *providers_of(const nxr_ctx_t *ctx)
{
    return ctx->rt->providers;
}

static int inv_sgemm(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *a)
{
    return nxr__bundle_sgemm(b, c, a);
}

int nxr_sgemm(nxr_ctx_t *ctx, const nxr_sgemm_args_t *args)
{
    if (ctx == NULL || args == NULL)
        return -EINVAL;
    struct kcall k = {NXR_FAMILY_GEMM, nxr__bundle_sgemm_scratch(providers_of(ctx), args),
                      inv_sgemm, args};
    return run(ctx, &k);
}

static int inv_sgemm_batch(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c,
                           const void *a)
{
    return nxr__bundle_sgemm_batch(b, c, a);
}

int nxr_sgemm_batch(nxr_ctx_t *ctx, const nxr_sgemm_batch_args_t *args)
{
    if (ctx == NULL || args == NULL)
        return -EINVAL;
    struct kcall k = {NXR_FAMILY_GEMM, nxr__bundle_sgemm_scratch(providers_of(ctx), &args->gemm),
                      inv_sgemm_batch, args};
    return run(ctx, &k);
}

struct ew_args {
    int op;
    size_t n;
    const float *x, *y;
    float *out;
    float s;
};

static int inv_binary(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct ew_args *a = p;
    return nxr__bundle_binary(b, c, (enum nxr_binary_op)a->op, a->n, a->x, a->y, a->out);
}

int nxr_binary(nxr_ctx_t *ctx, enum nxr_binary_op op, size_t n, const float *x, const float *y,
               float *out)
{
    struct ew_args a = {.op = op, .n = n, .x = x, .y = y, .out = out};
    struct kcall k = {NXR_FAMILY_ELEMENTWISE, 0, inv_binary, &a};
    return run(ctx, &k);
}

static int inv_scale(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct ew_args *a = p;
    return nxr__bundle_scale(b, c, a->n, a->s, a->x, a->out);
}

int nxr_scale(nxr_ctx_t *ctx, size_t n, float alpha, const float *x, float *out)
{
    struct ew_args a = {.n = n, .x = x, .out = out, .s = alpha};
    struct kcall k = {NXR_FAMILY_ELEMENTWISE, 0, inv_scale, &a};
    return run(ctx, &k);
}

static int inv_unary(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct ew_args *a = p;
    return nxr__bundle_unary(b, c, (enum nxr_unary_op)a->op, a->n, a->x, a->out);
}

int nxr_unary(nxr_ctx_t *ctx, enum nxr_unary_op op, size_t n, const float *x, float *out)
{
    struct ew_args a = {.op = op, .n = n, .x = x, .out = out};
    struct kcall k = {NXR_FAMILY_ELEMENTWISE, 0, inv_unary, &a};
    return run(ctx, &k);
}

static int inv_triad(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct ew_args *a = p;
    return nxr__bundle_triad(b, c, a->n, a->out, a->x, a->y, a->s);
}

int nxr_triad(nxr_ctx_t *ctx, size_t n, float *a_out, const float *b_in, const float *c_in, float s)
{
    struct ew_args a = {.n = n, .x = b_in, .y = c_in, .out = a_out, .s = s};
    struct kcall k = {NXR_FAMILY_ELEMENTWISE, 0, inv_triad, &a};
    return run(ctx, &k);
}

struct reduce_args {
    size_t n;
    const float *x;
    float *value;
    size_t *index;
};

static int inv_sum(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct reduce_args *a = p;
    return nxr__bundle_sum(b, c, a->n, a->x, a->value);
}

static int inv_max(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct reduce_args *a = p;
    return nxr__bundle_max(b, c, a->n, a->x, a->value);
}

static int inv_argmax(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct reduce_args *a = p;
    return nxr__bundle_argmax(b, c, a->n, a->x, a->index);
}

int nxr_sum(nxr_ctx_t *ctx, size_t n, const float *x, float *out)
{
    struct reduce_args a = {.n = n, .x = x, .value = out};
    struct kcall k = {NXR_FAMILY_REDUCTION, 0, inv_sum, &a};
    return run(ctx, &k);
}

int nxr_max(nxr_ctx_t *ctx, size_t n, const float *x, float *out)
{
    struct reduce_args a = {.n = n, .x = x, .value = out};
    struct kcall k = {NXR_FAMILY_REDUCTION, 0, inv_max, &a};
    return run(ctx, &k);
}

int nxr_argmax(nxr_ctx_t *ctx, size_t n, const float *x, size_t *out)
{
    struct reduce_args a = {.n = n, .x = x, .index = out};
    struct kcall k = {NXR_FAMILY_REDUCTION, 0, inv_argmax, &a};
    return run(ctx, &k);
}

struct rows_args {
    size_t rows, cols;
    const float *x;
    size_t ldx;
    const float *gamma, *beta;
    float eps;
    float *out;
    size_t ldo;
};

static int inv_softmax(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct rows_args *a = p;
    return nxr__bundle_softmax(b, c, a->rows, a->cols, a->x, a->ldx, a->out, a->ldo);
}

static int inv_rmsnorm(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct rows_args *a = p;
    return nxr__bundle_rmsnorm(b, c, a->rows, a->cols, a->x, a->ldx, a->gamma, a->eps, a->out,
                               a->ldo);
}

static int inv_layernorm(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct rows_args *a = p;
    return nxr__bundle_layernorm(b, c, a->rows, a->cols, a->x, a->ldx, a->gamma, a->beta, a->eps,
                                 a->out, a->ldo);
}

int nxr_softmax(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx, float *out,
                size_t ldo)
{
    struct rows_args a = {.rows = rows, .cols = cols, .x = x, .ldx = ldx, .out = out, .ldo = ldo};
    struct kcall k = {NXR_FAMILY_NORM, 0, inv_softmax, &a};
    return run(ctx, &k);
}

int nxr_rmsnorm(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx,
                const float *gamma, float eps, float *out, size_t ldo)
{
    struct rows_args a = {.rows = rows,
                          .cols = cols,
                          .x = x,
                          .ldx = ldx,
                          .gamma = gamma,
                          .eps = eps,
                          .out = out,
                          .ldo = ldo};
    struct kcall k = {NXR_FAMILY_NORM, 0, inv_rmsnorm, &a};
    return run(ctx, &k);
}

int nxr_layernorm(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx,
                  const float *gamma, const float *beta, float eps, float *out, size_t ldo)
{
    struct rows_args a = {.rows = rows,
                          .cols = cols,
                          .x = x,
                          .ldx = ldx,
                          .gamma = gamma,
                          .beta = beta,
                          .eps = eps,
                          .out = out,
                          .ldo = ldo};
    struct kcall k = {NXR_FAMILY_NORM, 0, inv_layernorm, &a};
    return run(ctx, &k);
}
