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
 * domain at once, run each as a task: each task runs on one worker, and the
 * loops and kernels it calls run sequentially inside it, with its memory in
 * a scope of its own. Client threads that each hold one request submit it
 * (nxr_submit, then nxr_job_wait): the requests queue on the workers and run
 * side by side. A thread holding many requests at once runs them as one
 * batch (nxr_run OUTER with count = the requests); one nxr_run per request
 * from several threads does not overlap them, since a call for one task
 * from outside the domain is a one-worker region and regions take turns.
 * Keep nxr_parallel_for and INNER kernels for requests big enough to use
 * the whole domain: with several clients those take turns too.
 * The service benchmark (docs/guide.md, "Benchmarks") measures the two
 * shapes against each other.
 *
 * Tasks, loops and jobs started through a context stay valid after the
 * context is destroyed (they belong to the domain); the runtime must outlive
 * every context (nxr_runtime_destroy reports contexts still open).
 *
 * After fork(), in the child, every fallible call on a context created
 * before the fork returns NXR_EFORKED at once (nxr_last_error says
 * why); nxr_ctx_destroy only frees the context itself.
 *
 * State a context keeps for its driver (the thread rule makes it safe):
 * step memory (nxr_ctx_alloc, until nxr_ctx_reset) and, for a routing
 * context, the last kernel call's route (nxr_ctx_last_route). A failed
 * call's detail is the calling thread's (nxr_last_error).
 *
 * A routing context (nxr_ctx_create with NXR_DOMAIN_AUTO) is the runtime-
 * level form: each kernel call on it runs on the domain its inputs choose
 * (runtime/nxr_route.h); its loops, tasks and nxr_ctx_alloc, which have no
 * inputs, use the runtime's default domain.
 *
 * Service threads. nxr_ctx_bind confines the calling thread to the
 * context's domain (then its small work runs on it, without a hand-off);
 * a thread placed by its launcher (taskset, numactl, MPI) finds its domain
 * with nxr_runtime_domain_here and opens a context there with
 * nxr_ctx_create_here.
 */
#ifndef NXR_CTX_H
#define NXR_CTX_H

#include <stddef.h>

#include "base/nxr_fwd.h"
#include "base/nxr_status.h"
#include "executor/nxr_executor.h"
#include "runtime/nxr_route.h"

#ifdef __cplusplus
extern "C" {
#endif

/* nxr_runtime_t and nxr_domain_t: runtime/nxr_route.h. */

/* nxr_ctx_create's domain id for a routing context (see above). */
#define NXR_DOMAIN_AUTO (-1)

/*
 * Opens a context on domain `domain_id` (an id from nxr_domain_id), or a
 * routing context (NXR_DOMAIN_AUTO). Any number of contexts may share a
 * domain. Returns 0 and *out, -EINVAL, NXR_ENODOMAIN or -ENOMEM. Any
 * thread; takes the runtime's context-list lock, never blocks otherwise.
 */
NXR_API int nxr_ctx_create(nxr_runtime_t *rt, int domain_id, nxr_ctx_t **out);

/*
 * Opens a context on the calling thread's domain (nxr_runtime_domain_here in
 * runtime/nxr.h): for a thread placed by taskset, numactl or MPI. Returns 0
 * and *out, or nxr_runtime_domain_here's and nxr_ctx_create's errors.
 */
NXR_API int nxr_ctx_create_here(nxr_runtime_t *rt, nxr_ctx_t **out);

/* Closes a context: frees its step memory; its submitted jobs keep
 * running. NULL is a no-op. Not while a call on it is in progress. After
 * its runtime was destroyed (a caller bug, reported then) it only frees
 * the context. */
NXR_API void nxr_ctx_destroy(nxr_ctx_t *ctx);

/* The context's domain (a routing context: the runtime's default domain;
 * NULL for NULL). */
NXR_API nxr_domain_t *nxr_ctx_domain(const nxr_ctx_t *ctx);

/* The most participants one operation of this context may use (0 for NULL). */
NXR_API unsigned nxr_ctx_budget(const nxr_ctx_t *ctx);

/*
 * Deprecated in 1.0, kept for one release: returns nxr_last_error()
 * (base/nxr_status.h), the calling thread's last failed call's detail,
 * whatever ctx is. Before 1.0 the detail was kept per context; it is now
 * per thread, which is what it already was inside bodies.
 */
NXR_API const char *nxr_ctx_last_error(const nxr_ctx_t *ctx);

/* ---- memory for a context's work ---------------------------------------- */

/*
 * Step memory: `size` bytes (64-byte aligned) on the context's domain (a
 * routing context: the default domain), valid until nxr_ctx_reset or
 * nxr_ctx_destroy. It comes from a scope the context creates on first use
 * (alloc/nxr_alloc.h: bump allocation from pool chunks, nothing allocated
 * in a steady state of same-shaped steps; checked builds catch a use after
 * reset). Outputs of a request go here; long-lived data belongs in
 * nxr_domain_malloc or pool buffers (runtime/nxr_memory.h). Driver only
 * (the thread rule); from inside a body, allocate from a scope of your own.
 * Returns 0 and *out, -EINVAL (NULL argument, size 0), NXR_EREENTRANT
 * (inside a body), NXR_EBROKEN, -ENOMEM, NXR_EPLACEMENT.
 */
NXR_API int nxr_ctx_alloc(nxr_ctx_t *ctx, size_t size, void **out);

/*
 * Step memory for the outputs of a call with these inputs: on the domain a
 * kernel call on ctx with them runs on (the context's own domain, or for a
 * routing context the domain runtime/nxr_route.h chooses). Returns what
 * nxr_ctx_alloc does, and NXR_EMIXED under the single-domain policy.
 */
NXR_API int nxr_ctx_alloc_for(nxr_ctx_t *ctx, const struct nxr_mem_ref *inputs, size_t n,
                              size_t size, void **out);

/* Ends a step: every allocation of nxr_ctx_alloc* dies; the memory is kept
 * for the next step. NULL is a no-op. Driver only. */
NXR_API void nxr_ctx_reset(nxr_ctx_t *ctx);

/*
 * The route of the last kernel call on ctx: for a routing context the
 * domain and reason its inputs gave (-ENOENT before its first call; calls
 * made inside a body are not recorded, as several may run at once); for a
 * context on a domain, that domain with NXR_ROUTE_REASON_EXPLICIT. 0, -EINVAL,
 * -ENOENT or NXR_EBROKEN. Driver only.
 */
NXR_API int nxr_ctx_last_route(const nxr_ctx_t *ctx, struct nxr_route *out);

/* ---- service threads on their domain -------------------------------------- */

/* The calling thread's previous affinity, kept by nxr_ctx_bind. */

/*
 * Confines the calling thread to the context's domain CPU set, like a
 * worker: the mask is set, read back and compared (sched_getaffinity); on a
 * mismatch the old mask is put back and the call fails. From then on the
 * thread is inside the domain, so small work on the domain runs on it (no
 * permit, no hand-off) and it takes part in the domain's regions. Returns 0
 * and *previous, a handle holding the mask the thread had, for
 * nxr_thread_binding_restore. Errors: -EINVAL (NULL argument, a routing
 * context), NXR_EPLACEMENT (a caller-managed domain, which declares no CPU
 * set; or the mask could not be set or did not read back as the domain's,
 * e.g. a cgroup cpuset narrower than the domain), NXR_EREENTRANT (inside a
 * body: that thread belongs to an executor), NXR_EBROKEN, -ENOMEM; on
 * failure *previous is NULL and the mask is unchanged. Any thread may bind
 * itself; it changes only the calling thread.
 */
NXR_API int nxr_ctx_bind(nxr_ctx_t *ctx, nxr_thread_binding_t **previous);

/*
 * Puts back the mask `previous` holds and frees the handle. NULL is a no-op
 * (returns 0). Must be called by the thread that bound: from another thread
 * it is -EINVAL and the handle is kept. When the old mask cannot be set
 * again (the process's allowed set shrank meanwhile) it returns that error
 * (a negative errno) and keeps the handle.
 */
NXR_API int nxr_thread_binding_restore(nxr_thread_binding_t *previous);

/*
 * Runs fn over [begin, end) in chunks of `grain`, static schedule. Grain 0
 * splits the range evenly over the budget's participants, one chunk each,
 * like OpenMP's schedule(static) (executor/nxr_executor.h); a cheap loop
 * that should stay on one thread passes a grain of its own or a cost hint
 * (nxr_parallel_for_opts, opts.cost_ns). Work that fits one thread (one
 * chunk, or a budget of one) runs on the calling thread when that thread
 * is inside the domain (no permit, no hand-off), else on one of the
 * domain's workers. Otherwise
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

/* nxr_parallel_for with a schedule, a thread cap and a cost hint (struct
 * nxr_for_opts in executor/nxr_executor.h). opts NULL: defaults. -EINVAL
 * also for a bad schedule or a negative or NaN cost_ns. */
NXR_API int nxr_parallel_for_opts(nxr_ctx_t *ctx, size_t begin, size_t end,
                                  const struct nxr_for_opts *opts, nxr_for_fn fn, void *arg);

/*
 * A reduction over [begin, end) in blocks: blocks of `grain` iterations (0:
 * ceil(len / 64), 64 blocks whatever the budget), made a whole multiple of grain coarser when there
 * would be more than 1024; the last block may be shorter. Each block is
 * folded by exactly one call map(arg, b, e, partial) into its own partial
 * (a copy of `identity`, elem_size bytes), then combine(arg, result,
 * partial) folds the partials into *result (which starts as identity) in
 * block order on the calling thread. The blocks depend only on begin, end
 * and grain, so the result is bit-identical to that serial fold whatever
 * the budget and whichever thread ran which block.
 * Returns 0, -EINVAL, -ENOMEM (partials of more than 16 KiB in all are
 * heap-allocated) or nxr_parallel_for's errors.
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
 * Admission happens here, and never waits: the batch joins the permit the
 * domain holds (unless an overlapping domain waits for it), takes a free
 * one, or, when an overlapping domain holds or waits for those CPUs, is
 * queued to start once the domain's permit is granted again, behind that
 * domain (the call returns at once; the job's tasks start later). So a task
 * may wait for another thread's nxr_submit to return, on any domain; a
 * task must not wait for another operation of an overlapping domain to
 * finish (docs/contracts.md). A deferred batch that can never be admitted
 * (the executor refuses the item that waits for the permit, -ENOMEM) ends
 * with that status in nxr_job_wait, its tasks not run.
 * Returns 0, -EINVAL, -ENOMEM, NXR_EREENTRANT (from inside any body),
 * NXR_EADMISSION (a caller-managed domain already active) or the executor's
 * error; on failure *out is NULL and nothing runs.
 */
NXR_API int nxr_submit(nxr_ctx_t *ctx, size_t count, nxr_task_fn fn, void *arg, nxr_job_t **out);

#ifdef __cplusplus
}
#endif

#endif /* NXR_CTX_H */
