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
 * Also here: the shapes of work (loop and task bodies, schedules, modes, job
 * handles) and the nesting rules below. The calls that run work through a
 * context are in runtime/nxr_ctx.h.
 *
 * Nesting. A body is a loop chunk or a task while it runs, on any
 * participant: an nxr worker, a host pool's thread, or a calling thread
 * that takes part in a region. A call made from inside a body gives the
 * same answer whichever participant runs it; it depends only on the call
 * and on the domain D whose operation the body belongs to:
 *
 *   call made inside a body of D       | on a context of D     | on another domain's context
 *   -----------------------------------+-----------------------+----------------------------
 *   nxr_parallel_for(_opts), _reduce   | in place, this thread | NXR_EREENTRANT
 *   kernels (nxr_sgemm, nxr_binary...) | in place, one thread  | NXR_EREENTRANT
 *   nxr_run SEQUENTIAL or INNER        | in place, this thread | NXR_EREENTRANT
 *   nxr_run OUTER                      | NXR_EREENTRANT        | NXR_EREENTRANT
 *   nxr_submit                         | NXR_EREENTRANT        | NXR_EREENTRANT
 *   a kernel that needs the process-   | NXR_EREENTRANT        | NXR_EREENTRANT
 *   wide exclusive permit              |                       |
 *   nxr_job_wait (any job)             | NXR_EREENTRANT, the handle is kept
 *   nxr_run_across (any domains)       | NXR_EREENTRANT
 *   a loop on a span (runtime/nxr_span.h) | in place if D is a member, else NXR_EREENTRANT
 *   nxr_span_linear on a span          | in place if D is a member, else NXR_EREENTRANT
 *   nxr_step_run (runtime/nxr_step.h)  | in place, this thread | NXR_EREENTRANT
 *   nxr_runtime_destroy (any runtime)  | refused, reported as NXR_EREENTRANT (void)
 *
 * "In place" is one fan-out level: the call runs sequentially on the
 * body's thread, as the body's participant, and never starts a nested team.
 * Everything marked NXR_EREENTRANT would enter an executor again (and could
 * wait for the very thread it runs on) or would run one domain's work on
 * another domain's CPUs; it is refused before anything starts.
 */
#ifndef NXR_EXECUTOR_H
#define NXR_EXECUTOR_H

#include <stddef.h>

#include "base/nxr_fwd.h"
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

/* ---- What work looks like ------------------------------------------------ */

/* A loop body over [begin, end). `worker` is the participant index, below
 * the context's budget: an index for per-worker scratch, stable for the
 * call. */
typedef void (*nxr_for_fn)(void *arg, size_t begin, size_t end, unsigned worker);

/* A task: index in [0, count); returns 0 or a negative status. */
typedef int (*nxr_task_fn)(void *arg, size_t index);

/*
 * Grain 0 (the default) splits the range evenly over the participants, as
 * OpenMP's schedule(static) does: with a budget of n, n chunks of
 * ceil(len / n) iterations, one per participant (about four per participant
 * for NXR_SCHEDULE_DYNAMIC, so a slow one can be balanced). So a heavy loop
 * of few iterations (288 matmul rows, 6 attention heads) uses the whole
 * budget. What keeps a cheap loop on one thread is the cost hint below, or
 * a grain of your own.
 *
 * NXR_GRAIN_DEFAULT is 0.x's meaning of grain 0 (loops shorter than 1024
 * iterations ran on one thread); nxr no longer uses it, it stays so that
 * code naming it still builds.
 */
#define NXR_GRAIN_DEFAULT 1024

/*
 * The small-work rule's unit: a participant is worth waking for about this
 * much work (a region's fixed cost is a few microseconds at most, so a
 * share this large keeps it under a tenth). With a cost hint, a loop gets
 * at most floor(len * cost_ns / NXR_FOR_SHARE_NS) participants,
 * at least one; a loop left with one participant runs on the calling
 * thread when that thread is inside the domain.
 */
#define NXR_FOR_SHARE_NS 10000.0

enum nxr_schedule {
    /* Each participant takes one contiguous share of the chunks (one call). */
    NXR_SCHEDULE_STATIC = 0,
    /* Participants claim chunks one at a time from a shared counter. */
    NXR_SCHEDULE_DYNAMIC = 1,
};

struct nxr_for_opts {
    size_t grain; /* iterations per chunk; 0: an even split over the participants */
    enum nxr_schedule schedule;
    unsigned max_threads; /* 0: the context's budget */
    /* The small-work rule's hint: estimated nanoseconds one iteration
     * takes (like the cost per unit Eigen's and ONNX Runtime's parallel-for
     * take). 0: unknown, no cap (the default); negative or NaN: -EINVAL. */
    double cost_ns;
};

/* grain 0 (an even split), static schedule, no thread cap, no cost hint. */
NXR_API void nxr_for_opts_init(struct nxr_for_opts *opts);

enum nxr_mode {
    /* Every task on one thread of the domain, in index order (the calling
     * thread when it is inside the domain, else one worker); loops and
     * kernels inside run sequentially. Takes no permit when it runs on the
     * calling thread. */
    NXR_MODE_SEQUENTIAL = 0,
    /* Tasks one after another on the calling thread; each may fan out once
     * through the context's loops and kernels over the domain's workers. */
    NXR_MODE_INNER = 1,
    /* Tasks fan out over the domain's workers, each sequential inside. */
    NXR_MODE_OUTER = 2,
};

/* An asynchronous batch of tasks (nxr_submit in runtime/nxr_ctx.h). */

/* Blocks until the job finished, releases the handle and returns the job's
 * status (0 or its first task error). NXR_EREENTRANT (the handle is kept)
 * when called from inside any task or loop body: waiting there could wait
 * for the very worker it runs on. -EINVAL for NULL. In a child of fork()
 * for a job submitted before the fork: NXR_EFORKED at once (its tasks were
 * the parent's workers' to run; the handle is released). */
NXR_API int nxr_job_wait(nxr_job_t *job);

/* Gives the handle up without waiting; the job still runs to completion.
 * Never blocks. NULL is a no-op. */
NXR_API void nxr_job_detach(nxr_job_t *job);

#ifdef __cplusplus
}
#endif

#endif /* NXR_EXECUTOR_H */
