/*
 * The task-claim loop: `count` tasks shared by every participant that runs
 * nxr__tasks_run on them, each task run exactly once, the first error
 * recorded and no task started after it. The one loop behind OUTER runs
 * (executor/run.c) and multi-domain operations (runtime/group.c).
 *
 * Threads: any number of participants at once, on any domains; init and
 * status are called by the thread that owns the operation, before the
 * participants start and after they all finished. Never blocks.
 */
#ifndef NXR_EXECUTOR_INTERNAL_TASKS_H
#define NXR_EXECUTOR_INTERNAL_TASKS_H

#include <stdatomic.h>
#include <stddef.h>

#include "base/internal/build.h"
#include "executor/internal/exec.h"

struct nxr__tasks {
    nxr_task_fn fn;
    void *arg;
    size_t count;
    /* Every participant's claims hit `next`; `status` is read per claim and
     * written once: apart, so a claim does not invalidate the status line. */
    _Alignas(NXR__CACHE_LINE) atomic_size_t next;
    _Alignas(NXR__CACHE_LINE) atomic_int status;
};

void nxr__tasks_init(struct nxr__tasks *t, nxr_task_fn fn, void *arg, size_t count);

/* Claims and runs tasks of t until none is left or one failed, as bodies of
 * exec (participant `participant`: one fan-out level, loops inside run in
 * place). */
void nxr__tasks_run(struct nxr__tasks *t, const struct nxr__exec *exec, unsigned participant);

/* Records rc (non-zero) as t's error unless one was recorded; tasks not yet
 * claimed are then skipped. */
void nxr__tasks_fail(struct nxr__tasks *t, int rc);

/* Records rc as the first error in *status if none was recorded yet: the
 * rule every task-running operation (runs, jobs, groups) keeps. */
void nxr__record_first_error(atomic_int *status, int rc);

/* The first error, or 0; read after every participant finished. */
int nxr__tasks_status(const struct nxr__tasks *t);

#endif /* NXR_EXECUTOR_INTERNAL_TASKS_H */
