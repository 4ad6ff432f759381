/*
 * Kernel calls through a context: the provider rules (runs_on x count control) applied per
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
 * The call engine: every public kernel (runtime/kernel_wrappers.c) packs
 * its arguments and an invoker (the bundle's dispatch for that op) into a
 * `struct nxr__kcall` (runtime/internal/kernel_call.h), with the verdict of
 * the contract's argument check (kernels/internal/args.h) and the inputs a
 * routing context weighs; nxr__kcall_run() does the rest, so the logic
 * exists once:
 * the thread rule, the argument verdict (-EINVAL with its reason in the
 * context's error detail), the domain (the context's, or the one its inputs
 * choose: runtime/route.c), then where the call runs:
 *  - a one-thread decision (INLINE) goes through nxr__exec_call: the calling
 *    thread when it is on the domain, else one of the domain's workers;
 *  - an ENGINE_WORKERS provider granted several threads is called on the
 *    calling thread with call->parallel_for set, and every chunk of its work
 *    goes through the domain's executor (workers, plus the caller only when
 *    it is inside the domain);
 *  - a provider with its own threads runs under the domain's permit (whole
 *    allowed set) or the exclusive permit, as the rules say; the executor
 *    takes the permit named and makes the call on the domain
 *    (nxr__exec_call_under, executor/permits.c). Its own threads
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
#include "executor/internal/permits.h"
#include "kernels/internal/provider.h"
#include "kernels/internal/rules.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/kernel_call.h"
#include "runtime/internal/route.h"
#include "runtime/internal/runtime.h"
#include "runtime/internal/span.h"

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
    struct nxr_fpenv before;
    nxr_fpenv_get(&before);
    c->fn(c->arg, begin, end, worker);
    /* nxr_fpenv_check restores `before` on this thread when it differs.
     * Relaxed: the status is read after the region joined. */
    if (nxr_fpenv_check(&before) != 0)
        atomic_store_explicit(&c->runner->fpenv_status, NXR_EFPENV, memory_order_relaxed);
}

static int runner_parallel_for(const struct nxr_kernel_call *call, size_t n, size_t grain, nxr_for_fn fn,
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
        char why[NXR__LAST_ERROR_BYTES];
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
    const struct nxr__kcall *k;
    const nxr_provider_t *p;
    unsigned threads;
    bool fan_out;     /* give the provider call->parallel_for */
    int global_count; /* > 0: run with the provider's global count set to it */
};

struct provider_call {
    const nxr_provider_bundle_t *bundle;
    const struct nxr_kernel_call *call;
    const struct nxr__kcall *k;
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
    struct nxr_kernel_call call = {
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
static int run_on(nxr_ctx_t *ctx, struct nxr_domain *d, nxr_ctx_t *span, const struct nxr__kcall *k,
                  char *why, size_t whysz)
{
    nxr_runtime_t *rt = ctx->rt;
    struct nxr__exec *exec = &d->exec;
    const nxr_provider_t *p = nxr_provider_bundle_get(rt->providers, k->family);
    enum nxr_provider_runs_on runs_on = nxr_provider_runs_on(p);
    enum nxr__nesting nesting = nxr__exec_nesting(exec);
    if (nesting == NXR__NEST_OTHER)
        return NXR_EREENTRANT; /* a body of another domain: not this domain's CPUs */
    if (d->spec.admission == NXR_ADMISSION_CALLER_MANAGED &&
        runs_on == NXR_RUNS_ON_EXTERNAL_WORKERS) {
        snprintf(why, whysz,
                 "provider '%s' runs on threads of its own, which would escape caller-managed "
                 "domain %d",
                 nxr_provider_name(p), d->spec.id);
        return NXR_EPLACEMENT;
    }
    nxr__exec_count(exec, (enum nxr__counter)(NXR__COUNT_KERNEL_CALLS + k->family), 1);
    if (k->weight_bytes != 0)
        nxr__exec_count(exec, NXR__COUNT_WEIGHT_BYTES, k->weight_bytes);
    /* A span's call fans out over every member only through parallel_for;
     * a provider of its own threads runs on the first member. */
    if (runs_on != NXR_RUNS_ON_ENGINE_WORKERS)
        span = NULL;
    /* Nested in a body: one thread, the one we are on (one fan-out level). */
    unsigned budget = nesting == NXR__NEST_INLINE ? 1
                      : span != NULL              ? nxr_ctx_budget(span)
                                                  : nxr__exec_budget(exec);
    /* "Whole" is the process's set, not the runtime's (opts.allowed_cpus may
     * narrow it): a provider's own threads were made under the process's
     * affinity, and another runtime of the process may own the rest. */
    bool whole = d->spec.cpus != NULL && hwloc_bitmap_isequal(d->spec.cpus, rt->topo.process);
    struct nxr__run_decision dec = nxr__provider_decide_now(p, budget, whole, rt->settings.policy);
    struct invocation inv = {
        .rt = rt, .domain = d, .exec = exec, .span = span, .k = k, .p = p, .threads = dec.threads};
    switch (dec.run) {
    case NXR_RUN_INLINE:
        /* One thread of the domain: the caller when it is on it, else a
         * worker (work never leaves the domain's CPUs). */
        return nxr__exec_call_under(exec, NXR__PERMIT_ONE_THREAD, NULL, NULL, invoke, &inv);
    case NXR_RUN_DOMAIN:
        if (runs_on == NXR_RUNS_ON_ENGINE_WORKERS) {
            /* Its chunks enter the domain per region, through parallel_for. */
            inv.fan_out = true;
            return invoke(&inv);
        }
        /* Its own threads, confined because the domain is everything we may
         * use: under the domain's permit. */
        return nxr__exec_call_under(exec, NXR__PERMIT_DOMAIN, NULL, NULL, invoke, &inv);
    case NXR_RUN_EXCLUSIVE:
        if (nesting != NXR__NEST_NONE) {
            snprintf(why, whysz,
                     "inside a body, a kernel that needs the process-wide exclusive permit "
                     "could wait on its own operation");
            return NXR_EREENTRANT;
        }
        /* Only a process-global count is set (and restored). A PER_CALL_BOUND
         * provider on external workers (a partial domain under this policy)
         * has no global count: its bound is call->threads alone, and asking
         * nxr__global_threads_run to set one would fail with -EINVAL. */
        if (nxr_provider_count_control(p) == NXR_COUNT_GLOBAL_OR_UNCONTROLLED)
            inv.global_count = (int)dec.threads;
        /* Nothing else runs meanwhile; the wait is bounded by the holders of
         * every permit and reported past the stall threshold. */
        return nxr__exec_call_under(exec, NXR__PERMIT_EXCLUSIVE, rt->arbiter,
                                    "admission of a kernel under the exclusive permit", invoke,
                                    &inv);
    case NXR_RUN_REJECT:
    default:
        snprintf(why, whysz,
                 "provider '%s' (%s x %s) cannot be confined to domain %d under the %s policy",
                 nxr_provider_name(p), nxr_count_control_name(nxr_provider_count_control(p)),
                 nxr_provider_runs_on_name(runs_on), d->spec.id,
                 rt->settings.policy == NXR_PROVIDER_STRICT ? "strict" : "exclusive");
        return dec.status != 0 ? dec.status : NXR_EPLACEMENT;
    }
}

int nxr__kcall_run(nxr_ctx_t *ctx, const struct nxr__kcall *k)
{
    if (ctx == NULL)
        return -EINVAL;
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, k->name);
    if (rc != 0)
        return rc;
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
    if (k->bad != 0)
        return nxr__ctx_call_closef(&c, d, k->bad, "%s", k->why);
    if (ctx->placing) {
        struct nxr_route p;
        rc = nxr__place(ctx->rt, k->in, k->nin, &p, &d);
        nxr__place_count(ctx->rt, d, &p, rc);
        if ((rc == 0 || rc == NXR_EMIXED) && nxr__tls.depth == 0) {
            ctx->last_place = p; /* the driver's; bodies record nothing */
            ctx->placed = true;
        }
        if (rc == NXR_EMIXED)
            return nxr__ctx_call_closef(&c, d, rc,
                                        "the inputs lie on %u domains (single-domain policy); "
                                        "rehome them (nxr_mem_rehome) or use a context on one "
                                        "domain",
                                        p.domains);
        if (rc != 0)
            return nxr__ctx_call_close(&c, d, rc);
    }
    return nxr__ctx_call_close(&c, d, run_on(ctx, d, span, k, c.why, sizeof(c.why)));
}
