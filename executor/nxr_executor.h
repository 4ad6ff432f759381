/*
 * nxr executors: how work runs in a domain.
 *
 * The executor contract (struct nxr_executor) is the one interface between
 * nxr and the threads that run work: the built-in team of a managed domain
 * implements it, and so does any host pool a caller attaches. It has two
 * calls, `install` (a synchronous fork-join region) and `submit` (indexed
 * items, asynchronous), plus optional retain/release so nxr can hold the
 * executor for as long as any of its work may run.
 *
 * On top of it, a context (nxr_ctx_t, created in runtime/nxr.h) offers:
 *  - nxr_parallel_for / nxr_parallel_reduce: one loop over the domain (INNER);
 *  - nxr_run: n independent tasks in a chosen mode (SEQUENTIAL, INNER, OUTER);
 *  - nxr_submit / nxr_job_wait / nxr_job_detach: asynchronous tasks.
 *
 * One fan-out level: code already running inside a task or loop body (on any
 * nxr worker, or on a caller taking part in a region) that calls
 * nxr_parallel_for runs the loop sequentially in place; it never starts a
 * nested region. Entering a domain's executor (nxr_run, nxr_submit,
 * nxr_job_wait) from one of that domain's own workers is NXR_EREENTRANT.
 */
#ifndef NXR_EXECUTOR_H
#define NXR_EXECUTOR_H

#include <stddef.h>

#include "base/nxr_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The executor contract --------------------------------------------- */

/* A region body: called once per participant p in [0, count). Participants
 * may run concurrently or one after another; a body never waits for another
 * participant (no barriers), so an executor with fewer threads than count is
 * still correct. */
typedef void (*nxr_region_fn)(void *arg, unsigned participant, unsigned count);

/* An item body: called once per index in [0, count), in any order, on any of
 * the executor's threads. */
typedef void (*nxr_item_fn)(void *arg, size_t index);

/* Called once, from any thread, after every item of a submission finished. */
typedef void (*nxr_done_fn)(void *arg);

enum nxr_executor_flags {
    /* install can run participants on more than one thread. */
    NXR_EXECUTOR_FANOUT = 1u << 0,
    /* install may be called from the executor's own threads (a pool that runs
     * nested work in place). nxr's team is not re-entrant. */
    NXR_EXECUTOR_REENTRANT = 1u << 1,
};

/* Who owns an executor's threads. The zero value is the caller: an executor
 * that does not say (a zero-initialised struct, nxr_external_decl_init) is
 * the caller's, which is what every attached executor is. Only nxr's own
 * team says NXR; nxr_runtime_attach rejects an executor that claims it. */
enum nxr_executor_owner {
    NXR_EXECUTOR_OWNED_BY_CALLER = 0, /* nxr never creates, repins or stops them */
    NXR_EXECUTOR_OWNED_BY_NXR = 1,    /* nxr created the threads and stops them */
};

struct nxr_executor_ops {
    /* Runs fn for participants [0, count) and returns when all finished.
     * count <= workers + 1. Returns 0 or a negative status. Required. */
    int (*install)(void *self, nxr_region_fn fn, void *arg, unsigned count);
    /* Starts fn for items [0, count) and calls done(done_arg) after the
     * last item finished. Returns at once, or, for a pool with no queue of
     * its own, after running the items (done is then called before it
     * returns). 0, or a negative status when nothing was started (done is
     * then not called). Required. */
    int (*submit)(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                  void *done_arg);
    /* Optional: nxr starts using self (retain) and stops (release). */
    void (*retain)(void *self);
    void (*release)(void *self);
};

struct nxr_executor {
    const struct nxr_executor_ops *ops;
    void *self;
    unsigned workers; /* threads the executor runs work on, >= 1 */
    unsigned flags;   /* nxr_executor_flags */
    enum nxr_executor_owner owner;
};

/* ---- Contexts: running work in a domain ------------------------------------ */

typedef struct nxr_ctx nxr_ctx_t;

/* A loop body over [begin, end). `worker` is the participant index, below
 * nxr_ctx_budget(ctx): an index for per-worker scratch, stable for the call. */
typedef void (*nxr_for_fn)(void *arg, size_t begin, size_t end, unsigned worker);

/* A task: index in [0, count); returns 0 or a negative status. */
typedef int (*nxr_task_fn)(void *arg, size_t index);

/* The grain nxr_parallel_for uses when given 0: loops shorter than this run
 * on the calling thread. Meant for cheap bodies; pass 1 for heavy ones. */
#define NXR_GRAIN_DEFAULT 1024

enum nxr_schedule {
    /* Each participant takes one contiguous share of the chunks (one call). */
    NXR_SCHEDULE_STATIC = 0,
    /* Participants claim chunks one at a time from a shared counter. */
    NXR_SCHEDULE_DYNAMIC = 1,
};

struct nxr_for_opts {
    size_t grain; /* iterations per chunk; 0: NXR_GRAIN_DEFAULT */
    enum nxr_schedule schedule;
    unsigned max_threads; /* 0: the context's budget */
};

NXR_API void nxr_for_opts_init(struct nxr_for_opts *opts);

/*
 * Runs fn over [begin, end) in chunks of `grain` (0: NXR_GRAIN_DEFAULT),
 * static schedule. When the range fits in one chunk, or the caller is already
 * inside a task or loop body, fn runs on the calling thread over the whole
 * range and the team is not touched. Otherwise the
 * domain's workers run the chunks; the caller takes part only when its
 * affinity lies inside the domain's CPU set (so work never leaves the
 * socket), else it waits. Blocks until every chunk ran.
 * Before the region the domain's permit is taken (waiting while an
 * overlapping domain runs) and released after; a caller-managed domain's
 * guard instead, NXR_EADMISSION if it is already active.
 * Returns 0, -EINVAL (NULL ctx/fn, begin > end), NXR_EADMISSION, or the
 * executor's error.
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
 * Returns 0, -EINVAL or -ENOMEM (partials for more than 64 participants, or
 * larger than 256 bytes each, are heap-allocated).
 */
NXR_API int nxr_parallel_reduce(nxr_ctx_t *ctx, size_t begin, size_t end, size_t grain,
                                size_t elem_size, const void *identity,
                                void (*map)(void *arg, size_t b, size_t e, void *partial),
                                void (*combine)(void *arg, void *result, const void *partial),
                                void *arg, void *result);

enum nxr_mode {
    /* Every task on the calling thread, in index order; loops inside run
     * sequentially. Takes no permit and touches no team. */
    NXR_MODE_SEQUENTIAL = 0,
    /* Tasks one after another on the calling thread; each may fan out once
     * through nxr_parallel_for over the domain's workers. */
    NXR_MODE_INNER = 1,
    /* Tasks fan out over the domain's workers, each sequential inside. */
    NXR_MODE_OUTER = 2,
};

/*
 * Runs tasks [0, count) in `mode` and returns when all finished. The first
 * task error (lowest index is not guaranteed in OUTER) is returned; tasks not
 * yet started when it occurs are skipped. Returns 0, the task's error,
 * -EINVAL, or NXR_EREENTRANT when called from one of the domain's own workers.
 */
NXR_API int nxr_run(nxr_ctx_t *ctx, enum nxr_mode mode, size_t count, nxr_task_fn fn, void *arg);

typedef struct nxr_job nxr_job_t;

/*
 * Submits tasks [0, count) to run asynchronously on the domain's executor
 * (OUTER: each task sequential inside). With out != NULL the caller gets a
 * handle to pass to exactly one of nxr_job_wait or nxr_job_detach; with out
 * == NULL the job is detached at once. The first task error wins; tasks of the
 * batch not yet started when it occurs are skipped. Runtime destruction
 * drains every submitted job first.
 * Admission happens here: the call may wait until the domain's permit is
 * granted (an overlapping domain is running); from inside another
 * operation's body it never waits and returns -EBUSY instead.
 * Returns 0, -EINVAL, -ENOMEM, -EBUSY, NXR_EREENTRANT (from the domain's own
 * worker), NXR_EADMISSION (a caller-managed domain already active).
 */
NXR_API int nxr_submit(nxr_ctx_t *ctx, size_t count, nxr_task_fn fn, void *arg, nxr_job_t **out);

/* Blocks until the job finished, releases the handle and returns the job's
 * status (0 or its first task error). NXR_EREENTRANT (the handle is kept)
 * when called from a worker of the job's domain, which could never finish. */
NXR_API int nxr_job_wait(nxr_job_t *job);

/* Gives the handle up without waiting; the job still runs to completion.
 * Never blocks. NULL is a no-op. */
NXR_API void nxr_job_detach(nxr_job_t *job);

#ifdef __cplusplus
}
#endif

#endif /* NXR_EXECUTOR_H */
