/*
 * The task-claim loop (executor/internal/tasks.h): a shared counter hands
 * out task indices, the first error stops new claims.
 */
#include "executor/internal/tasks.h"

void nxr__tasks_init(struct nxr__tasks *t, nxr_task_fn fn, void *arg, size_t count)
{
    t->fn = fn;
    t->arg = arg;
    t->count = count;
    atomic_init(&t->next, 0);
    atomic_init(&t->status, 0);
}

void nxr__record_first_error(atomic_int *status, int rc)
{
    int none = 0;
    /* Relaxed: the status is read only after the operation completed (a
     * region's join, a job's finished flag, a group's pending count), which
     * orders it. */
    atomic_compare_exchange_strong_explicit(status, &none, rc, memory_order_relaxed,
                                            memory_order_relaxed);
}

void nxr__tasks_fail(struct nxr__tasks *t, int rc)
{
    nxr__record_first_error(&t->status, rc);
}

void nxr__tasks_run(struct nxr__tasks *t, const struct nxr__exec *exec, unsigned participant)
{
    struct nxr__exec_tls saved = nxr__body_begin(exec, participant);
    size_t ran = 0;
    for (;;) {
        /* Relaxed: the status only stops new claims (first error wins). */
        if (atomic_load_explicit(&t->status, memory_order_relaxed) != 0)
            break;
        /* Relaxed: hands out distinct indices; what a task writes is ordered
         * by the operation's completion, not by this counter. */
        size_t i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
        if (i >= t->count)
            break;
        int rc = t->fn(t->arg, i);
        ran++;
        if (rc != 0)
            nxr__tasks_fail(t, rc);
    }
    nxr__body_end(saved);
    /* Once per participant, not per task (executor/internal/counters.h). */
    if (ran != 0)
        nxr__exec_count(exec, NXR__COUNT_TASKS, ran);
}

int nxr__tasks_status(const struct nxr__tasks *t)
{
    return atomic_load_explicit(&t->status, memory_order_relaxed);
}
