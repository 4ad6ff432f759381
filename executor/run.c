/*
 * Tasks on a domain: nxr__exec_run (synchronous, in a chosen mode),
 * nxr__exec_call (one function on the domain), nxr__exec_region (a region
 * under the domain's permit: every region nxr installs), and
 * nxr__exec_submit with its job handles (asynchronous, OUTER). Runs and jobs record the first task
 * error and skip the tasks that have not started when it occurs.
 *
 * A job handle is reference-counted: one reference for the caller's handle,
 * one for the executor's done callback. Whichever lets go last frees it, so
 * detaching never blocks and a waiter never touches freed memory.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/internal/last_error.h"
#include "base/internal/fork.h"
#include "executor/internal/exec.h"
#include "executor/internal/tasks.h"
#include "base/internal/sys.h"

/* Runs one task of exec's domain with the body marker set. */
static int run_task(const struct nxr__exec *exec, nxr_task_fn fn, void *arg, size_t index,
                    unsigned participant)
{
    struct nxr__exec_tls saved = nxr__body_begin(exec, participant);
    int rc = fn(arg, index);
    nxr__body_end(saved);
    return rc;
}

/* OUTER: every participant of the region claims tasks (executor/tasks.c). */
struct outer {
    const struct nxr__exec *exec;
    struct nxr__tasks tasks;
};

static void outer_body(void *p, unsigned participant, unsigned count)
{
    struct outer *o = p;
    (void)count;
    nxr__tasks_run(&o->tasks, o->exec, participant);
}

/* SEQUENTIAL: every task in order on this thread, as bodies of exec. */
struct sequence {
    const struct nxr__exec *exec;
    nxr_task_fn fn;
    void *arg;
    size_t count;
    unsigned participant;
};

static int run_sequence(void *p)
{
    const struct sequence *q = p;
    size_t i = 0;
    int rc = 0;
    while (i < q->count && rc == 0)
        rc = run_task(q->exec, q->fn, q->arg, i++, q->participant);
    nxr__exec_count(q->exec, NXR__COUNT_TASKS, i);
    return rc;
}

/* A one-participant region: runs the call's fn on whoever the executor
 * picks (a worker, for a caller outside the domain), as a body. */
struct one_call {
    const struct nxr__exec *exec;
    int (*fn)(void *arg);
    void *arg;
    int status;
};

static void one_call_body(void *p, unsigned participant, unsigned count)
{
    struct one_call *c = p;
    (void)count;
    struct nxr__exec_tls saved = nxr__body_begin(c->exec, participant);
    c->status = c->fn(c->arg);
    nxr__body_end(saved);
}

int nxr__exec_call_admitted(struct nxr__exec *exec, int (*fn)(void *arg), void *arg)
{
    switch (nxr__exec_nesting(exec)) {
    case NXR__NEST_INLINE:
        return fn(arg); /* already a body of this domain: in place */
    case NXR__NEST_OTHER:
        return NXR_EREENTRANT;
    case NXR__NEST_NONE:
        break;
    }
    if (nxr__exec_caller_inside(exec)) {
        struct nxr__exec_tls saved = nxr__exec_alone_begin(exec);
        int rc = fn(arg);
        nxr__exec_alone_end(exec, saved);
        return rc;
    }
    struct one_call c = {.exec = exec, .fn = fn, .arg = arg, .status = 0};
    int rc = exec->executor.ops->install(exec->executor.self, one_call_body, &c, 1);
    /* The region's join orders the body's write of status before this read. */
    return rc != 0 ? rc : c.status;
}

int nxr__exec_region(struct nxr__exec *exec, nxr_region_fn fn, void *arg, unsigned participants)
{
    int rc = nxr__exec_enter(exec); /* the permit (or guard), held for the region */
    if (rc != 0)
        return rc;
    rc = exec->executor.ops->install(exec->executor.self, fn, arg, participants);
    nxr__exec_leave(exec);
    return rc;
}

int nxr__exec_call(struct nxr__exec *exec, int (*fn)(void *arg), void *arg)
{
    /* On this thread (in place, or a caller inside the domain): no permit,
     * one thread of the domain's own. */
    if (nxr__exec_nesting(exec) != NXR__NEST_NONE || nxr__exec_caller_inside(exec))
        return nxr__exec_call_admitted(exec, fn, arg);
    int rc = nxr__exec_enter(exec);
    if (rc != 0)
        return rc;
    rc = nxr__exec_call_admitted(exec, fn, arg);
    nxr__exec_leave(exec);
    return rc;
}

int nxr__exec_run(struct nxr__exec *exec, enum nxr_mode mode, size_t count, nxr_task_fn fn,
                  void *arg)
{
    if (fn == NULL)
        return -EINVAL;
    enum nxr__nesting nesting = nxr__exec_nesting(exec);
    if (nesting == NXR__NEST_OTHER)
        return NXR_EREENTRANT;
    switch (mode) {
    case NXR_MODE_SEQUENTIAL: {
        if (count == 0)
            return 0;
        struct sequence q = {.exec = exec,
                             .fn = fn,
                             .arg = arg,
                             .count = count,
                             .participant = nesting == NXR__NEST_INLINE ? nxr__tls.participant : 0};
        return nxr__exec_call(exec, run_sequence, &q);
    }
    case NXR_MODE_INNER:
        /* The tasks are the caller's own code, run in order on the caller
         * (no marker: their loops and kernels fan out over the domain, or
         * run in place when the caller is already inside a body). */
        size_t i = 0;
        int rc = 0;
        while (i < count && rc == 0)
            rc = fn(arg, i++);
        nxr__exec_count(exec, NXR__COUNT_TASKS, i);
        return rc;
    case NXR_MODE_OUTER:
        break;
    default:
        return -EINVAL;
    }
    /* Fanning tasks out from inside a body would enter an executor again. */
    if (nesting == NXR__NEST_INLINE)
        return NXR_EREENTRANT;
    if (count == 0)
        return 0;
    unsigned budget = nxr__exec_budget(exec);
    unsigned n = count < budget ? (unsigned)count : budget;
    if (n == 1) {
        struct sequence q = {.exec = exec, .fn = fn, .arg = arg, .count = count};
        return nxr__exec_call(exec, run_sequence, &q);
    }
    struct outer o = {.exec = exec};
    nxr__tasks_init(&o.tasks, fn, arg, count);
    int rc = nxr__exec_region(exec, outer_body, &o, n);
    return rc != 0 ? rc : nxr__tasks_status(&o.tasks);
}

struct nxr_job {
    struct nxr__deferred deferred; /* how admission holds it, if it must */
    unsigned long fork_gen;        /* base/internal/fork.h: inherited, every call is NXR_EFORKED */
    nxr_task_fn fn;
    void *arg;
    struct nxr__exec *exec;
    atomic_int status;
    atomic_uint finished; /* futex word: 0 running, 1 finished */
    atomic_uint refs;
};

static void job_release(struct nxr_job *job)
{
    /* acq_rel: the last releaser sees every write made through the other
     * reference before it frees. */
    if (atomic_fetch_sub_explicit(&job->refs, 1, memory_order_acq_rel) == 1)
        free(job);
}

static void job_item(void *p, size_t index)
{
    struct nxr_job *job = p;
    if (atomic_load_explicit(&job->status, memory_order_relaxed) != 0)
        return; /* first error wins: skip what has not started */
    int rc = run_task(job->exec, job->fn, job->arg, index, 0);
    nxr__exec_count(job->exec, NXR__COUNT_TASKS, 1);
    if (rc != 0)
        nxr__record_first_error(&job->status, rc);
}

static void job_done(void *p)
{
    struct nxr_job *job = p;
    nxr__exec_leave_batch(job->exec); /* before waiters wake: a drained domain is idle */
    /* Release pairs with the acquire load in nxr_job_wait. */
    atomic_store_explicit(&job->finished, 1, memory_order_release);
    nxr__futex_wake(&job->finished, INT_MAX);
    job_release(job);
}

/* The batch never ran (admission could not get it the permit): its status
 * is the reason; waiters wake as after job_done. Not admitted, so no leave. */
static void job_fail(void *p, int rc)
{
    struct nxr_job *job = p;
    nxr__record_first_error(&job->status, rc);
    /* Release pairs with the acquire load in nxr_job_wait. */
    atomic_store_explicit(&job->finished, 1, memory_order_release);
    nxr__futex_wake(&job->finished, INT_MAX);
    job_release(job);
}

int nxr__exec_submit(struct nxr__exec *exec, size_t count, nxr_task_fn fn, void *arg,
                     nxr_job_t **out)
{
    if (out != NULL)
        *out = NULL;
    if (fn == NULL)
        return -EINVAL;
    /* From inside any body: submitting enters an executor again (and a
     * batch on a foreign domain would have to be waited for from here). */
    if (nxr__tls.depth > 0)
        return NXR_EREENTRANT;
    struct nxr_job *job = nxr__malloc(sizeof(*job));
    if (job == NULL)
        return -ENOMEM;
    job->fork_gen = nxr__fork_generation();
    job->fn = fn;
    job->arg = arg;
    job->exec = exec;
    atomic_init(&job->status, 0);
    atomic_init(&job->finished, 0);
    atomic_init(&job->refs, out != NULL ? 2 : 1);
    job->deferred = (struct nxr__deferred){.fn = job_item,
                                           .arg = job,
                                           .count = count,
                                           .done = job_done,
                                           .done_arg = job,
                                           .fail = job_fail};
    /* Admitted here (or, deferred, by admission once the permit comes), left
     * in job_done: the batch holds the domain's permit (or guard) from its
     * admission to its last task. Never a wait (executor/admission.c). */
    int rc = nxr__exec_enter_batch(exec, &job->deferred);
    if (rc == NXR__DEFERRED) {
        /* Admission owns the executor's reference now; the job may even be
         * finished (and, detached, freed) already: only its address is used. */
        if (out != NULL)
            *out = job;
        return 0;
    }
    if (rc != 0) {
        free(job);
        return rc;
    }
    rc = exec->executor.ops->submit(exec->executor.self, job_item, job, count, job_done, job);
    if (rc != 0) {
        nxr__exec_leave_batch(exec);
        free(job);
        return rc;
    }
    if (out != NULL)
        *out = job;
    return 0;
}

int nxr_job_wait(nxr_job_t *job)
{
    nxr__call_begin();
    if (job == NULL)
        return nxr__fail(-EINVAL, __func__, "job is NULL");
    if (nxr__forked_since(job->fork_gen)) {
        /* Its tasks ran, or were to run, on the parent's workers: nothing
         * here will ever finish it. The caller's reference goes (the
         * workers' one is never released in this process: the job leaks). */
        job_release(job);
        return nxr__fail(NXR_EFORKED, __func__,
                         "the job was submitted before this process forked: it never finishes "
                         "here");
    }
    if (nxr__tls.depth > 0) /* could wait for the very worker it runs on */
        return nxr__fail(NXR_EREENTRANT, __func__,
                         "called inside a body: it could wait for the worker it runs on (the "
                         "job is kept)");
    /* Acquire pairs with the release store in job_done: the tasks' writes
     * and the status are visible once finished reads 1. Bounded by the
     * job's tasks (and, deferred, by its admission); past the stall
     * threshold it reports once and waits on (executor/internal/stall.h). */
    uint64_t start = 0, at = 0;
    while (atomic_load_explicit(&job->finished, memory_order_acquire) == 0) {
        if (start == 0) {
            start = nxr__now_ns();
            at = nxr__stall_deadline(job->exec->stall, start);
        }
        if (at == 0) {
            nxr__futex_wait(&job->finished, 0);
        } else if (!nxr__futex_wait_until(&job->finished, 0, at) &&
                   atomic_load_explicit(&job->finished, memory_order_acquire) == 0) {
            nxr__stall_report(job->exec->stall, job->exec, "nxr_job_wait", nxr__now_ns() - start);
            at = 0;
        }
    }
    int rc = atomic_load_explicit(&job->status, memory_order_relaxed);
    job_release(job);
    return rc == 0 ? 0 : nxr__fail(rc, __func__, "a task of the job failed: %s", nxr_strerror(rc));
}

void nxr_job_detach(nxr_job_t *job)
{
    if (job != NULL)
        job_release(job);
}
