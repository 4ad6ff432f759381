/*
 * nxr contexts: the handle a service thread runs work through. A context is
 * a runtime plus one domain (runtime/nxr.h); everything run through it
 * (loops, tasks, kernels in runtime/nxr_ctx_kernels.h) runs on that domain's
 * CPUs, whatever its size or the domain's budget, and wherever the calling
 * thread is: the calling thread runs work itself only when its affinity lies
 * inside the domain's CPU set; otherwise the domain's workers do, and the
 * caller waits.
 *
 * The thread rule. A context is driven by one thread at a time: calls on one
 * context must not overlap in time (a thread may of course call again from
 * inside its own call's bodies, see the nesting table in
 * executor/nxr_executor.h). Contexts are cheap (one small allocation, no
 * thread), so a service opens one per service thread per domain. Checked
 * builds (-DNXR_CHECKED=1) detect two threads inside one context and abort
 * with a message naming it; other builds do not check.
 *
 * Several contexts on one domain may be driven at the same time by their own
 * threads. Their loops and tasks share the domain's team: regions on one
 * domain run one after another (each uses the whole team), and submitted
 * batches queue on the same workers. To serve many small requests on one
 * domain at once, submit them as tasks (nxr_submit, or nxr_run OUTER): each
 * task runs on one worker, and the loops and kernels it calls run
 * sequentially inside it. Keep nxr_parallel_for and INNER kernels for
 * requests big enough to use the whole domain.
 *
 * Tasks, loops and jobs started through a context stay valid after the
 * context is destroyed (they belong to the domain); the runtime must outlive
 * every context (nxr_runtime_destroy reports contexts still open).
 */
#ifndef NXR_CTX_H
#define NXR_CTX_H

#include <stddef.h>

#include "base/nxr_status.h"
#include "executor/nxr_executor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nxr_runtime nxr_runtime_t;
typedef struct nxr_domain nxr_domain_t;
typedef struct nxr_ctx nxr_ctx_t;

/*
 * Opens a context on domain `domain_id` (an id from nxr_domain_id). Any
 * number of contexts may share a domain. Returns 0 and *out, -EINVAL,
 * NXR_ENODOMAIN or -ENOMEM. Any thread; never blocks.
 */
NXR_API int nxr_ctx_create(nxr_ctx_t **out, nxr_runtime_t *rt, int domain_id);

/* Closes a context; its submitted jobs keep running. NULL is a no-op. Not
 * while a call on it is in progress. */
NXR_API void nxr_ctx_destroy(nxr_ctx_t *ctx);

NXR_API const nxr_domain_t *nxr_ctx_domain(const nxr_ctx_t *ctx);

/* The most participants one operation of this context may use. */
NXR_API unsigned nxr_ctx_budget(const nxr_ctx_t *ctx);

/*
 * Runs fn over [begin, end) in chunks of `grain` (0: NXR_GRAIN_DEFAULT),
 * static schedule. Work that fits one thread (one chunk, or a budget of
 * one) runs on the calling thread when that thread is inside the domain
 * (no permit, no hand-off), else on one of the domain's workers. Otherwise
 * min(chunks, budget) participants run it: the domain's workers, plus the
 * caller when it is inside the domain. Blocks until every chunk ran.
 * Before a region the domain's permit is taken (waiting while an
 * overlapping domain runs) and released after; a caller-managed domain's
 * guard instead, NXR_EADMISSION if it is already active.
 * From inside a body: see the nesting table in executor/nxr_executor.h.
 * Returns 0, -EINVAL (NULL ctx/fn, begin > end, a bad schedule),
 * NXR_EADMISSION, NXR_EREENTRANT or the executor's error.
 */
NXR_API int nxr_parallel_for(nxr_ctx_t *ctx, size_t begin, size_t end, size_t grain, nxr_for_fn fn,
                             void *arg);

/* nxr_parallel_for with a schedule and a thread cap. opts NULL: defaults. */
NXR_API int nxr_parallel_for_opts(nxr_ctx_t *ctx, size_t begin, size_t end,
                                  const struct nxr_for_opts *opts, nxr_for_fn fn, void *arg);

/*
 * A reduction over [begin, end): map(arg, b, e, partial) folds a range into
 * one of nxr_ctx_budget(ctx) per-participant partials (each starts as a copy
 * of `identity`, elem_size bytes), then combine(arg, result, partial) folds
 * them into *result (which starts as identity) in participant order. With the
 * static schedule the result is deterministic for a given budget.
 * Returns 0, -EINVAL, -ENOMEM (partials for more than 64 participants, or
 * larger than 256 bytes each, are heap-allocated) or nxr_parallel_for's
 * errors.
 */
NXR_API int nxr_parallel_reduce(nxr_ctx_t *ctx, size_t begin, size_t end, size_t grain,
                                size_t elem_size, const void *identity,
                                void (*map)(void *arg, size_t b, size_t e, void *partial),
                                void (*combine)(void *arg, void *result, const void *partial),
                                void *arg, void *result);

/*
 * Runs tasks [0, count) in `mode` (enum nxr_mode) and returns when all
 * finished. The first task error (lowest index is not guaranteed in OUTER)
 * is returned; tasks not yet started when it occurs are skipped. Returns 0,
 * the task's error, -EINVAL, NXR_EREENTRANT (see the nesting table),
 * NXR_EADMISSION or the executor's error.
 */
NXR_API int nxr_run(nxr_ctx_t *ctx, enum nxr_mode mode, size_t count, nxr_task_fn fn, void *arg);

/*
 * Submits tasks [0, count) to run asynchronously on the domain's workers
 * (OUTER: each task sequential inside). With out != NULL the caller gets a
 * handle to pass to exactly one of nxr_job_wait or nxr_job_detach; with out
 * == NULL the job is detached at once. The first task error wins; tasks of the
 * batch not yet started when it occurs are skipped. Runtime destruction
 * drains every submitted job first.
 * Admission happens here: the call may wait until the domain's permit is
 * granted (an overlapping domain is running).
 * Returns 0, -EINVAL, -ENOMEM, NXR_EREENTRANT (from inside any body),
 * NXR_EADMISSION (a caller-managed domain already active) or the executor's
 * error; on failure *out is NULL and nothing runs.
 */
NXR_API int nxr_submit(nxr_ctx_t *ctx, size_t count, nxr_task_fn fn, void *arg, nxr_job_t **out);

#ifdef __cplusplus
}
#endif

#endif /* NXR_CTX_H */
