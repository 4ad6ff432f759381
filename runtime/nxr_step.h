/*
 * nxr steps: a sequence of kernels and loops (a decoder layer, a whole
 * token) run as one region on a context's domain, instead of one region
 * per operation (docs/contracts.md, "Steps").
 *
 * Usage. Build the step once: nxr_step_create, then add operations in order
 * with nxr_step_add_sgemm_packed and nxr_step_add_loop, and put
 * nxr_step_add_barrier between an operation and the ones that read what it
 * writes. Run it as often as needed with nxr_step_run(ctx, step): the
 * arguments (pointers included) were taken by value when added, the data
 * they point at is read when the step runs, so a loop's `arg` may point at
 * state the caller updates between runs (decode's position). The weights
 * and buffers named must outlive every run; a run does not change the step
 * (each keeps its own state), and the step must not be changed or
 * destroyed while it runs.
 *
 * How it runs. One region with the domain's budget of participants. Every
 * participant goes through the operations in order and takes chunks of
 * each (a loop's chunks of `grain` iterations; a product's units, as its
 * kernel cuts them) until none are left; at a barrier it waits until every
 * chunk before the barrier has completed. Operations between two barriers
 * may run at the same time, in any order. A participant waits only for
 * chunks some thread has already taken and is running, never for one that
 * has not started, so a step finishes with a single awake thread (the
 * contract's rule for regions: a worker that does not wake is never waited
 * for). The result is bit for bit what the same operations called one by
 * one (nxr_sgemm_packed, nxr_parallel_for) give, and the domain's counters
 * (runtime/nxr_stats.h) count each product as that call would: a GEMM
 * kernel call and its packed bytes.
 *
 * When to use one: many small operations per request on one domain (a
 * decode step at small dimensions), where a region per operation costs as
 * much as the operation. A single large kernel gains nothing.
 *
 * Loop bodies run as bodies of the domain: a context call inside one
 * (nxr_rmsnorm, nxr_sgemm, ...) runs in place on that thread (the nesting
 * table, docs/contracts.md).
 */
#ifndef NXR_STEP_H
#define NXR_STEP_H

#include <stddef.h>

#include "base/nxr_fwd.h"
#include "base/nxr_status.h"
#include "executor/nxr_executor.h"
#include "runtime/nxr_weights.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An empty step. 0, -EINVAL (out NULL), -ENOMEM. */
NXR_API int nxr_step_create(nxr_step_t **out);

/* NULL is a no-op. Not while the step runs. */
NXR_API void nxr_step_destroy(nxr_step_t *step);

/*
 * Adds C = alpha op(A) op(W) + beta C against packed weights (as
 * nxr_sgemm_packed; epilogue NULL: none, else copied). The product must read
 * its operands: m >= 1 and alpha != 0 (a product that only scales C is no
 * step operation: -EINVAL). The rest of nxr_sgemm_packed's rules are checked
 * by nxr_step_run against the context's domain (the copy of the weights it
 * reads). 0, -EINVAL (step or args NULL, args->w NULL, m 0, alpha 0),
 * -ENOMEM; on failure the step is unchanged.
 */
NXR_API int nxr_step_add_sgemm_packed(nxr_step_t *step, const struct nxr_sgemm_packed_args *args,
                                      const struct nxr_sgemm_epilogue *epilogue);

/*
 * Adds fn(arg, b, e, participant) over [begin, end) in chunks of `grain`
 * iterations (0: one chunk per participant), as nxr_parallel_for. An empty
 * range adds an operation with no chunks. 0, -EINVAL (step or fn NULL,
 * begin > end), -ENOMEM; on failure the step is unchanged.
 */
NXR_API int nxr_step_add_loop(nxr_step_t *step, size_t begin, size_t end, size_t grain,
                              nxr_for_fn fn, void *arg);

/* Every operation added after it starts once every one added before it has
 * completed. 0, -EINVAL (step NULL), -ENOMEM. */
NXR_API int nxr_step_add_barrier(nxr_step_t *step);

/*
 * Runs the step on ctx's domain and returns when every operation has
 * completed. Nothing runs unless every operation's arguments hold on that
 * domain: -EINVAL (ctx or step NULL; a routing or span context; an
 * operation's arguments, named by its index in the error detail),
 * NXR_ENODOMAIN (weights with no copy on the domain), then the errors of
 * nxr_parallel_for (admission, NXR_EREENTRANT inside a body of another
 * domain). Inside a body of ctx's own domain the step runs in place, on
 * that thread alone. -ENOMEM when per-participant scratch cannot be had.
 */
NXR_API int nxr_step_run(nxr_ctx_t *ctx, const nxr_step_t *step);

#ifdef __cplusplus
}
#endif

#endif /* NXR_STEP_H */
