/*
 * Kernel calls through a context: the provider placement rules applied per
 * call (kernels/internal/rules.h), then the call made where they say, with
 * per-worker scratch from the domain's pool, the domain's permit or the
 * exclusive permit as needed.
 *
 * On a span (runtime/nxr_span.h) an ENGINE_WORKERS provider's chunks are
 * split across the members by the span's loop (its per-thread scratch, one
 * slot per participant of the span, from the first member's pool); inside
 * a member's body the call runs in place there; other providers run on
 * the first member.
 *
 * Every public kernel packs its arguments and an invoker (the bundle's
 * dispatch for that op) into a `struct kcall`, with the verdict of the
 * contract's argument check (kernels/internal/args.h) and the inputs a
 * placing context weighs; run() does the rest, so the logic exists once:
 * the thread rule, the argument verdict (-EINVAL with its reason in the
 * context's error detail), the domain (the context's, or the one its inputs
 * choose: runtime/place.c), then where the call runs:
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/pool.h"
#include "base/internal/sys.h"
#include "kernels/internal/args.h"
#include "kernels/internal/provider.h"
#include "kernels/internal/rules.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/place.h"
#include "runtime/internal/runtime.h"
#include "runtime/internal/weights.h"
#include "runtime/internal/span.h"

/* One kernel call, packed by its public wrapper: what to invoke, the
 * argument check's verdict, and the inputs placement weighs. */
struct kcall {
    const char *name; /* the public call, for error details */
    enum nxr_provider_family family;
    size_t scratch_bytes; /* per thread */
    int (*invoke)(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *call, const void *args);
    const void *args;
    int bad;      /* -EINVAL when the arguments break the contract */
    char why[160]; /* and which one, why */
    struct nxr_mem_ref in[4];
    size_t nin;
};

/* ---- call->parallel_for: the provider's way onto the domain's workers ------ */

/* The runner behind call->parallel_for. For a foreign provider each chunk
 * is bracketed by an FP environment snapshot and check on the thread that
 * ran it: the check around the whole call sees only the calling thread,
 * and a foreign chunk on a worker could otherwise leave, say, flush-to-zero
 * set on that worker for every later operation of the domain. */
struct runner {
    struct nxr__exec *exec;
    nxr_ctx_t *span; /* a span's call: chunks split across its members */
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
    struct checked_chunk c = {.fn = fn, .arg = arg, .runner = r};
    if (r->foreign) {
        fn = checked_chunk_body;
        arg = &c;
    }
    if (r->span != NULL) {
        char why[NXR__CTX_ERROR_BYTES];
        return nxr__span_parallel_for(r->span, 0, n, &o, fn, arg, why, sizeof(why));
    }
    return nxr__exec_parallel_for(r->exec, 0, n, &o, fn, arg);
}

/* ---- one call ------------------------------------------------------------------ */

struct invocation {
    nxr_runtime_t *rt;
    struct nxr_domain *domain; /* the domain the call runs on (its scratch too) */
    struct nxr__exec *exec;    /* &domain->exec */
    nxr_ctx_t *span;           /* fan out across this span's members (else NULL) */
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
    nxr_runtime_t *rt = inv->rt;
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
        rc = nxr__pool_acquire(inv->domain->pool, bytes * inv->threads, &scratch);
        if (rc != 0)
            goto out_free;
        unsigned char *block = nxr_buffer_data(scratch);
        for (unsigned i = 0; i < inv->threads; i++)
            ptrs[i] = block + (size_t)i * bytes;
    }
    struct runner r = {
        .exec = inv->exec, .span = inv->span, .foreign = nxr_provider_is_foreign(inv->p)};
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

/* The call on domain d: the provider rules decide how (see the file
 * comment). A refusal this function can explain writes why (else it stays
 * ""). */
static int run_on(nxr_ctx_t *ctx, struct nxr_domain *d, nxr_ctx_t *span, const struct kcall *k,
                  char *why, size_t whysz)
{
    nxr_runtime_t *rt = ctx->rt;
    struct nxr__exec *exec = &d->exec;
    const nxr_provider_t *p = nxr_provider_bundle_get(rt->providers, k->family);
    enum nxr_provider_placement placement = nxr_provider_placement(p);
    enum nxr__nesting nesting = nxr__exec_nesting(exec);
    if (nesting == NXR__NEST_OTHER)
        return NXR_EREENTRANT; /* a body of another domain: not this domain's CPUs */
    if (d->spec.admission == NXR_ADMISSION_CALLER_MANAGED &&
        placement == NXR_RUNS_ON_EXTERNAL_WORKERS) {
        snprintf(why, whysz,
                 "provider '%s' runs on threads of its own, which would escape caller-managed "
                 "domain %d",
                 nxr_provider_name(p), d->spec.id);
        return NXR_EPLACEMENT;
    }
    /* A span's call fans out over every member only through parallel_for;
     * a provider of its own threads runs on the first member. */
    if (placement != NXR_RUNS_ON_ENGINE_WORKERS)
        span = NULL;
    /* Nested in a body: one thread, the one we are on (one fan-out level). */
    unsigned budget = nesting == NXR__NEST_INLINE ? 1
                      : span != NULL              ? nxr_ctx_budget(span)
                                                  : d->spec.budget;
    /* "Whole" is the process's set, not the runtime's (opts.allowed_cpus may
     * narrow it): a provider's own threads were made under the process's
     * affinity, and another runtime of the process may own the rest. */
    bool whole = d->spec.cpus != NULL && hwloc_bitmap_isequal(d->spec.cpus, rt->topo.process);
    struct nxr__run_decision dec = nxr__provider_decide_now(p, budget, whole, rt->settings.policy);
    struct invocation inv = {
        .rt = rt, .domain = d, .exec = exec, .span = span, .k = k, .p = p, .threads = dec.threads};
    int rc;
    switch (dec.run) {
    case NXR_RUN_INLINE:
        /* One thread of the domain: the caller when it is on it, else a
         * worker (work never leaves the domain's CPUs). */
        return nxr__exec_call(exec, invoke, &inv);
    case NXR_RUN_DOMAIN:
        if (placement == NXR_RUNS_ON_ENGINE_WORKERS) {
            /* Its chunks enter the domain per region, through parallel_for. */
            inv.fan_out = true;
            return invoke(&inv);
        }
        /* Its own threads, confined because the domain is everything we may
         * use: hold the domain's permit around the call, made on the domain
         * (the caller, or a worker when the caller is off it). */
        if ((rc = nxr__exec_enter(exec)) != 0)
            return rc;
        rc = nxr__exec_call_admitted(exec, invoke, &inv);
        nxr__exec_leave(exec);
        return rc;
    case NXR_RUN_EXCLUSIVE:
        if (nesting != NXR__NEST_NONE) {
            snprintf(why, whysz,
                     "inside a body, a kernel that needs the process-wide exclusive permit "
                     "could wait on its own operation");
            return NXR_EREENTRANT;
        }
        /* Bounded by the holders of every permit; reported past the stall
         * threshold (executor/permits.c). */
        rc = nxr__exclusive_permit_acquire(rt->arbiter, exec,
                                           "admission of a kernel under the exclusive permit");
        if (rc != 0)
            return rc;
        /* Only a process-global count is set (and restored). A PER_CALL_BOUND
         * provider on external workers (a partial domain under this policy)
         * has no global count: its bound is call->threads alone, and asking
         * nxr__global_threads_run to set one would fail with -EINVAL. */
        if (nxr_provider_count_control(p) == NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
            inv.global_count = (int)dec.threads;
        /* The exclusive permit covers every domain: the call is made on
         * this one's CPUs (here, or on a worker) without its own permit. */
        rc = nxr__exec_call_admitted(exec, invoke, &inv);
        nxr__exclusive_permit_release(rt->arbiter);
        return rc;
    case NXR_RUN_REJECT:
    default:
        snprintf(why, whysz, "provider '%s' (%s x %s) cannot be confined to domain %d under the %s policy",
                 nxr_provider_name(p), nxr_count_control_name(nxr_provider_count_control(p)),
                 nxr_provider_placement_name(placement), d->spec.id,
                 rt->settings.policy == NXR_PROVIDER_STRICT ? "strict" : "exclusive");
        return dec.status != 0 ? dec.status : NXR_EPLACEMENT;
    }
}

static int run(nxr_ctx_t *ctx, const struct kcall *k)
{
    if (ctx == NULL)
        return -EINVAL;
    bool entered;
    int rc = nxr__ctx_enter(ctx, &entered);
    if (rc != 0)
        return nxr__ctx_fail(ctx, NULL, k->name, rc, NULL);
    struct nxr_domain *d = ctx->domain;
    nxr_ctx_t *span = NULL;
    if (ctx->span != NULL) {
        /* Inside a member's body: in place on that member, one thread.
         * Outside any body: split across the members (scratch from the
         * first member's pool). Inside another domain's body the call is
         * refused below, as on the first member. */
        int m = nxr__span_member_of_body(ctx->span);
        if (m >= 0)
            d = ctx->span->doms[m];
        else if (nxr__tls.depth == 0)
            span = ctx;
    }
    if (k->bad != 0) {
        rc = nxr__ctx_fail(ctx, d, k->name, k->bad, k->why);
    } else {
        if (ctx->placing) {
            struct nxr_place p;
            rc = nxr__place(ctx->rt, k->in, k->nin, &p, &d);
            nxr__place_count(ctx->rt, d, &p, rc);
            if ((rc == 0 || rc == NXR_EMIXED) && nxr__tls.depth == 0) {
                ctx->last_place = p; /* the driver's; bodies record nothing */
                ctx->placed = true;
            }
            if (rc == NXR_EMIXED)
                nxr__ctx_failf(ctx, d, k->name, rc,
                               "the inputs lie on %u domains (single-domain policy); rehome "
                               "them (nxr_mem_rehome) or use a context on one domain",
                               p.domains);
        }
        if (rc == 0) {
            char why[NXR__CTX_ERROR_BYTES];
            why[0] = '\0';
            rc = run_on(ctx, d, span, k, why, sizeof(why));
            nxr__ctx_fail(ctx, d, k->name, rc, why[0] != '\0' ? why : NULL);
        }
    }
    nxr__ctx_leave(ctx, entered);
    return rc;
}

/* ---- the public kernels: argument packing, checks and inputs --------------- */

static const nxr_provider_bundle_t *providers_of(const nxr_ctx_t *ctx)
{
    return ctx->rt != NULL ? ctx->rt->providers : NULL;
}

static void input(struct kcall *k, const void *ptr, size_t bytes)
{
    if (ptr != NULL && bytes > 0 && k->nin < sizeof(k->in) / sizeof(k->in[0]))
        k->in[k->nin++] = (struct nxr_mem_ref){.ptr = ptr, .bytes = bytes};
}

static size_t floats(size_t n)
{
    return n > SIZE_MAX / sizeof(float) ? SIZE_MAX : n * sizeof(float);
}

/* A, B and (when it is read) C of one GEMM, each `batch` items apart. */
static void gemm_inputs(struct kcall *k, const nxr_sgemm_args_t *g, size_t batch, size_t sa,
                        size_t sb, size_t sc)
{
    input(k, g->a, nxr__batch_bytes(nxr__sgemm_a_bytes(g), batch, sa));
    input(k, g->b, nxr__batch_bytes(nxr__sgemm_b_bytes(g), batch, sb));
    if (g->beta != 0.0f)
        input(k, g->c, nxr__batch_bytes(nxr__sgemm_c_bytes(g), batch, sc));
}

static int inv_sgemm(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *a)
{
    return nxr__bundle_sgemm(b, c, a);
}

int nxr_sgemm(nxr_ctx_t *ctx, const nxr_sgemm_args_t *args)
{
    if (ctx == NULL)
        return -EINVAL;
    struct kcall k = {.name = "nxr_sgemm", .family = NXR_FAMILY_GEMM, .invoke = inv_sgemm,
                      .args = args};
    k.bad = nxr__check_sgemm(args, k.why, sizeof(k.why));
    if (k.bad == 0) {
        k.scratch_bytes = nxr__bundle_sgemm_scratch(providers_of(ctx), args);
        gemm_inputs(&k, args, 1, 0, 0, 0);
    }
    return run(ctx, &k);
}

struct fused_args {
    const nxr_sgemm_args_t *gemm;
    const nxr_sgemm_epilogue_t *epilogue;
};

static int inv_sgemm_fused(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c,
                           const void *p)
{
    const struct fused_args *a = p;
    return nxr__bundle_sgemm_fused(b, c, a->gemm, a->epilogue);
}

int nxr_sgemm_fused(nxr_ctx_t *ctx, const nxr_sgemm_args_t *args,
                    const nxr_sgemm_epilogue_t *epilogue)
{
    bool none = epilogue == NULL ||
                (epilogue->bias == NULL && epilogue->activation == NXR_ACTIVATION_NONE);
    if (none)
        return nxr_sgemm(ctx, args);
    if (ctx == NULL)
        return -EINVAL;
    struct fused_args fa = {.gemm = args, .epilogue = epilogue};
    struct kcall k = {.name = "nxr_sgemm_fused", .family = NXR_FAMILY_GEMM,
                      .invoke = inv_sgemm_fused, .args = &fa};
    k.bad = nxr__check_sgemm(args, k.why, sizeof(k.why));
    if (k.bad == 0)
        k.bad = nxr__check_epilogue(args, epilogue, k.why, sizeof(k.why));
    if (k.bad == 0) {
        k.scratch_bytes = nxr__bundle_sgemm_scratch(providers_of(ctx), args);
        gemm_inputs(&k, args, 1, 0, 0, 0);
        if (args->m > 0 && args->n > 0)
            input(&k, epilogue->bias, floats(args->n));
    }
    return run(ctx, &k);
}

/* ---- against packed weights (runtime/nxr_weights.h) ----------------------- */

struct packed_call {
    const struct nxr__native_isa *isa;
    nxr_sgemm_args_t gemm; /* b: the copy's data */
    const struct nxr__packed_b *packed;
    const nxr_sgemm_epilogue_t *epilogue; /* NULL: none */
};

static int inv_sgemm_packed(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c,
                            const void *p)
{
    const struct packed_call *pc = p;
    (void)b; /* the weights' own ISA: the native provider's, checked at creation */
    return nxr__native_sgemm_packed(pc->isa, c, &pc->gemm, pc->packed, pc->epilogue);
}

/* The packed call's verdict: the copy for ctx's domain, then nxr_sgemm's
 * rules on the equivalent unpacked arguments (the copy standing in for B),
 * the epilogue's, and C against the whole copy. */
static void packed_prepare(nxr_ctx_t *ctx, struct kcall *k, struct packed_call *pc,
                           const nxr_sgemm_packed_args_t *args, const nxr_sgemm_epilogue_t *ep)
{
    if (args == NULL || args->w == NULL) {
        k->bad = -EINVAL;
        snprintf(k->why, sizeof k->why, "%s is NULL", args == NULL ? "args" : "args->w");
        return;
    }
    const nxr_weights_t *w = args->w;
    if (ctx->placing) {
        k->bad = -EINVAL;
        snprintf(k->why, sizeof k->why,
                 "a placing context has no domain to choose a copy by; use a context on a "
                 "domain that holds one");
        return;
    }
    const struct nxr__weights_copy *copy = nxr__weights_on(w, ctx->domain);
    if (copy == NULL) {
        k->bad = NXR_ENODOMAIN;
        snprintf(k->why, sizeof k->why, "the weights have no copy on domain %d",
                 ctx->domain->spec.id);
        return;
    }
    pc->isa = w->isa;
    pc->packed = &copy->view;
    pc->epilogue = ep != NULL && (ep->bias != NULL || ep->activation != NXR_ACTIVATION_NONE)
                       ? ep
                       : NULL;
    pc->gemm = (nxr_sgemm_args_t){
        .trans_a = args->trans_a, .trans_b = w->trans, .m = args->m, .n = w->n, .k = w->k,
        .alpha = args->alpha, .a = args->a, .lda = args->lda, .b = copy->data,
        .ldb = w->trans ? w->k : w->n, .beta = args->beta, .c = args->c, .ldc = args->ldc};
    /* The whole copy (padding included), named as such, before nxr_sgemm's
     * rules would call it B. */
    if (nxr__sgemm_reads_ab(&pc->gemm) && nxr__spans_overlap(pc->gemm.c,
                                                             nxr__sgemm_c_bytes(&pc->gemm),
                                                             copy->data, copy->bytes)) {
        k->bad = -EINVAL;
        snprintf(k->why, sizeof k->why, "c overlaps the packed weights");
        return;
    }
    k->bad = nxr__check_sgemm(&pc->gemm, k->why, sizeof k->why);
    if (k->bad == 0)
        k->bad = nxr__check_epilogue(&pc->gemm, pc->epilogue, k->why, sizeof k->why);
    if (k->bad == 0) {
        k->scratch_bytes =
            nxr__sgemm_scratch_for(w->isa, &pc->gemm, copy->view.panels ? &copy->view : NULL);
        gemm_inputs(k, &pc->gemm, 1, 0, 0, 0);
    }
}

int nxr_sgemm_packed(nxr_ctx_t *ctx, const nxr_sgemm_packed_args_t *args,
                     const nxr_sgemm_epilogue_t *epilogue)
{
    if (ctx == NULL)
        return -EINVAL;
    struct packed_call pc = {0};
    struct kcall k = {.name = "nxr_sgemm_packed", .family = NXR_FAMILY_GEMM,
                      .invoke = inv_sgemm_packed, .args = &pc};
    if (ctx->rt != NULL) /* else run() reports the orphaned context */
        packed_prepare(ctx, &k, &pc, args, epilogue);
    return run(ctx, &k);
}

static int inv_sgemm_batch(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c,
                           const void *a)
{
    return nxr__bundle_sgemm_batch(b, c, a);
}

int nxr_sgemm_batch(nxr_ctx_t *ctx, const nxr_sgemm_batch_args_t *args)
{
    if (ctx == NULL)
        return -EINVAL;
    struct kcall k = {.name = "nxr_sgemm_batch", .family = NXR_FAMILY_GEMM,
                      .invoke = inv_sgemm_batch, .args = args};
    k.bad = nxr__check_sgemm_batch(args, k.why, sizeof(k.why));
    if (k.bad == 0) {
        k.scratch_bytes = nxr__bundle_sgemm_scratch(providers_of(ctx), &args->gemm);
        gemm_inputs(&k, &args->gemm, args->batch, args->stride_a, args->stride_b, args->stride_c);
    }
    return run(ctx, &k);
}

struct ew_args {
    int op;
    size_t n;
    const float *x, *y;
    float *out;
    float s;
};

static const char *const xy_out[3] = {"x", "y", "out"};

/* An elementwise call's check and inputs. */
static void ew_prepare(struct kcall *k, const struct ew_args *a, bool two,
                       const char *const names[3])
{
    k->bad = nxr__check_vectors(a->n, a->x, a->y, two, a->out, names, k->why, sizeof(k->why));
    input(k, a->x, floats(a->n));
    if (two)
        input(k, a->y, floats(a->n));
}

static int inv_binary(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct ew_args *a = p;
    return nxr__bundle_binary(b, c, (enum nxr_binary_op)a->op, a->n, a->x, a->y, a->out);
}

int nxr_binary(nxr_ctx_t *ctx, enum nxr_binary_op op, size_t n, const float *x, const float *y,
               float *out)
{
    struct ew_args a = {.op = op, .n = n, .x = x, .y = y, .out = out};
    struct kcall k = {.name = "nxr_binary", .family = NXR_FAMILY_ELEMENTWISE,
                      .invoke = inv_binary, .args = &a};
    ew_prepare(&k, &a, true, xy_out);
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
    struct kcall k = {.name = "nxr_scale", .family = NXR_FAMILY_ELEMENTWISE,
                      .invoke = inv_scale, .args = &a};
    ew_prepare(&k, &a, false, xy_out);
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
    struct kcall k = {.name = "nxr_unary", .family = NXR_FAMILY_ELEMENTWISE,
                      .invoke = inv_unary, .args = &a};
    ew_prepare(&k, &a, false, xy_out);
    return run(ctx, &k);
}

static int inv_triad(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c, const void *p)
{
    const struct ew_args *a = p;
    return nxr__bundle_triad(b, c, a->n, a->out, a->x, a->y, a->s);
}

int nxr_triad(nxr_ctx_t *ctx, size_t n, float *a_out, const float *b_in, const float *c_in, float s)
{
    static const char *const names[3] = {"b", "c", "a"};
    struct ew_args a = {.n = n, .x = b_in, .y = c_in, .out = a_out, .s = s};
    struct kcall k = {.name = "nxr_triad", .family = NXR_FAMILY_ELEMENTWISE,
                      .invoke = inv_triad, .args = &a};
    ew_prepare(&k, &a, true, names);
    return run(ctx, &k);
}

struct rows_args {
    int op;
    size_t rows, cols;
    const float *x;
    size_t ldx;
    const float *gamma, *beta; /* binary_rows: gamma is the row */
    float eps;
    float *out;
    size_t ldo;
};

static int inv_binary_rows(const nxr_provider_bundle_t *b, const nxr_kernel_call_t *c,
                           const void *p)
{
    const struct rows_args *a = p;
    return nxr__bundle_binary_rows(b, c, (enum nxr_binary_op)a->op, a->rows, a->cols, a->x,
                                   a->ldx, a->gamma, a->out, a->ldo);
}

int nxr_binary_rows(nxr_ctx_t *ctx, enum nxr_binary_op op, size_t rows, size_t cols,
                    const float *x, size_t ldx, const float *row, float *out, size_t ldo)
{
    struct rows_args a = {.op = op, .rows = rows, .cols = cols, .x = x, .ldx = ldx, .gamma = row,
                          .out = out, .ldo = ldo};
    struct kcall k = {.name = "nxr_binary_rows", .family = NXR_FAMILY_ELEMENTWISE,
                      .invoke = inv_binary_rows, .args = &a};
    k.bad = nxr__check_binary_rows(rows, cols, x, ldx, row, out, ldo, k.why, sizeof(k.why));
    if (rows > 0 && cols > 0) {
        input(&k, x, nxr__matrix_bytes(rows, cols, ldx));
        input(&k, row, floats(cols));
    }
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

static int reduce(nxr_ctx_t *ctx, const char *name,
                  int (*inv)(const nxr_provider_bundle_t *, const nxr_kernel_call_t *,
                             const void *),
                  const struct reduce_args *a, const void *out, bool empty_ok)
{
    struct kcall k = {.name = name, .family = NXR_FAMILY_REDUCTION, .invoke = inv, .args = a};
    k.bad = nxr__check_reduction(a->n, a->x, out, empty_ok, k.why, sizeof(k.why));
    input(&k, a->x, floats(a->n));
    return run(ctx, &k);
}

int nxr_sum(nxr_ctx_t *ctx, size_t n, const float *x, float *out)
{
    struct reduce_args a = {.n = n, .x = x, .value = out};
    return reduce(ctx, "nxr_sum", inv_sum, &a, out, true);
}

int nxr_max(nxr_ctx_t *ctx, size_t n, const float *x, float *out)
{
    struct reduce_args a = {.n = n, .x = x, .value = out};
    return reduce(ctx, "nxr_max", inv_max, &a, out, false);
}

int nxr_argmax(nxr_ctx_t *ctx, size_t n, const float *x, size_t *out)
{
    struct reduce_args a = {.n = n, .x = x, .index = out};
    return reduce(ctx, "nxr_argmax", inv_argmax, &a, out, false);
}

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

/* A row kernel's check and inputs. */
static int rows_call(nxr_ctx_t *ctx, const char *name,
                     int (*inv)(const nxr_provider_bundle_t *, const nxr_kernel_call_t *,
                                const void *),
                     const struct rows_args *a)
{
    struct kcall k = {.name = name, .family = NXR_FAMILY_NORM, .invoke = inv, .args = a};
    k.bad = nxr__check_rows(a->rows, a->cols, a->x, a->ldx, a->gamma, a->beta, a->eps, a->out,
                            a->ldo, k.why, sizeof(k.why));
    if (a->rows > 0) {
        input(&k, a->x, nxr__matrix_bytes(a->rows, a->cols, a->ldx));
        input(&k, a->gamma, floats(a->cols));
        input(&k, a->beta, floats(a->cols));
    }
    return run(ctx, &k);
}

int nxr_softmax(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx, float *out,
                size_t ldo)
{
    struct rows_args a = {.rows = rows, .cols = cols, .x = x, .ldx = ldx, .out = out, .ldo = ldo};
    return rows_call(ctx, "nxr_softmax", inv_softmax, &a);
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
    return rows_call(ctx, "nxr_rmsnorm", inv_rmsnorm, &a);
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
    return rows_call(ctx, "nxr_layernorm", inv_layernorm, &a);
}
