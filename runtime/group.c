/*
 * Multi-domain operations: tasks spread over several domains at once under
 * ONE permit for the union of their CPU sets. The arbiter grants the union
 * whole or queues it holding nothing, so two groups over the same domains in
 * different orders cannot deadlock, and no domain of the group starts before
 * all of them may.
 *
 * While the union permit is held, the group dispatches straight to each
 * domain's executor (its own permit would overlap the union it already
 * holds); concurrent operations on those domains wait for their permits as
 * usual. That dispatch (nxr__across_run) is also what a span's loops and
 * kernels run through (runtime/span.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/internal/span.h"
#include "executor/internal/contract.h"
#include "executor/internal/permits.h"
#include "executor/internal/tasks.h"
#include "base/internal/last_error.h"
#include "base/internal/sys.h"

/* What nxr__across_run waits on: the parts not finished (a futex word). */
struct across_wait {
    atomic_uint pending;
};

/* What one domain's batch runs: the shared operation, as bodies of that
 * domain (so that loops inside run in place on its CPUs). */
struct group_part {
    struct nxr__tasks *tasks;
    const struct nxr__exec *exec;
};

/* One item per participant of a domain: claims tasks until none are left
 * or one failed. Tasks run as bodies (one fan-out level). */
static void group_item(void *p, size_t index)
{
    const struct group_part *part = p;
    nxr__tasks_run(part->tasks, part->exec, (unsigned)index);
}

static void across_done(void *p)
{
    struct across_wait *w = p;
    /* Release pairs with the acquire load in nxr__across_run's wait. */
    if (atomic_fetch_sub_explicit(&w->pending, 1, memory_order_release) == 1)
        nxr__futex_wake(&w->pending, INT_MAX);
}

static int collect(nxr_runtime_t *rt, const int *ids, size_t n, struct nxr_domain **doms,
                   hwloc_const_bitmap_t *sets)
{
    static const char call[] = "nxr_run_across";
    for (size_t i = 0; i < n; i++) {
        nxr_domain_t *d;
        int rc = nxr_runtime_domain(rt, ids[i], &d);
        if (rc != 0)
            return nxr__fail(rc, call, "ids[%zu] = %d is no domain", i, ids[i]);
        for (size_t j = 0; j < i; j++) {
            if (doms[j] == d)
                return nxr__fail(-EINVAL, call, "domain %d is listed twice (at %zu)", ids[i], i);
        }
        if (d->spec.admission == NXR_ADMISSION_CALLER_MANAGED)
            return nxr__fail(-EINVAL, call,
                             "domain %d is caller-managed: it has no CPU set to arbitrate", ids[i]);
        doms[i] = (struct nxr_domain *)d;
        sets[i] = d->spec.cpus;
    }
    return 0;
}

int nxr__across_run(struct nxr__across_part *parts, size_t n, atomic_int *stop)
{
    struct across_wait w;
    size_t live = 0;
    for (size_t i = 0; i < n; i++)
        live += parts[i].count > 0;
    atomic_init(&w.pending, (unsigned)live);
    int rc = 0;
    size_t started = 0;
    for (; started < n; started++) {
        struct nxr__across_part *p = &parts[started];
        if (p->count == 0)
            continue;
        struct nxr_executor *ex = &p->domain->exec.executor;
        nxr__executor_retain(ex);
        rc = ex->ops->submit(ex->self, p->fn, p->arg, p->count, across_done, &w);
        if (rc != 0) {
            nxr__executor_release(ex);
            /* Stop the claims; the parts already started finish. */
            if (stop != NULL)
                nxr__record_first_error(stop, rc);
            size_t rest = 0;
            for (size_t j = started; j < n; j++)
                rest += parts[j].count > 0;
            atomic_fetch_sub(&w.pending, (unsigned)rest);
            break;
        }
    }
    unsigned left;
    /* Bounded by the parts' items: each started part's done callback
     * decrements once after its last item. Acquire pairs with the release
     * decrement in across_done, so the items' writes are visible here. */
    while ((left = atomic_load_explicit(&w.pending, memory_order_acquire)) != 0)
        nxr__futex_wait(&w.pending, left);
    for (size_t i = 0; i < started; i++) {
        if (parts[i].count == 0)
            continue;
        nxr__executor_release(&parts[i].domain->exec.executor);
    }
    return rc;
}

int nxr_run_across(nxr_runtime_t *rt, const int *ids, size_t n, size_t count, nxr_task_fn fn,
                   void *arg)
{
    nxr__call_begin();
    if (rt == NULL || ids == NULL || fn == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL",
                         rt == NULL    ? "rt"
                         : ids == NULL ? "ids"
                                       : "fn");
    if (n == 0 || n > NXR__SPAN_MAX)
        return nxr__fail(-EINVAL, __func__, "n is %zu, not 1..%d", n, NXR__SPAN_MAX);
    if (nxr__runtime_forked(rt))
        return nxr__fail(NXR_EFORKED, __func__,
                         "the runtime was created before this process forked");
    struct nxr_domain *doms[NXR__SPAN_MAX];
    hwloc_const_bitmap_t sets[NXR__SPAN_MAX];
    int rc = collect(rt, ids, n, doms, sets);
    if (rc != 0)
        return rc;
    /* Inside a body this would enter executors again (and wait on a permit
     * the enclosing operation may be holding back). */
    if (nxr__tls.depth > 0)
        return nxr__fail(NXR_EREENTRANT, __func__,
                         "called inside a body: it would enter executors again (nesting table, "
                         "executor/nxr_executor.h)");
    if (count == 0)
        return 0;
    struct nxr__union_permit permit;
    rc = nxr__union_permit_init(&permit, rt->arbiter, sets, n);
    if (rc != 0)
        return nxr__fail(rc, __func__, "the permit for the domains' union: %s", nxr_strerror(rc));
    /* Bounded by the holders of overlapping permits; reported past the
     * stall threshold (executor/permits.c). */
    rc = nxr__union_permit_acquire(&permit, &doms[0]->exec, "admission of nxr_run_across");
    if (rc != 0) {
        nxr__fail(rc, __func__, "admission: %s", nxr_strerror(rc));
        goto out_fini;
    }

    struct nxr__tasks tasks;
    nxr__tasks_init(&tasks, fn, arg, count);
    struct group_part gparts[NXR__SPAN_MAX];
    struct nxr__across_part parts[NXR__SPAN_MAX];
    for (size_t i = 0; i < n; i++) {
        gparts[i] = (struct group_part){.tasks = &tasks, .exec = &doms[i]->exec};
        parts[i] = (struct nxr__across_part){.domain = doms[i],
                                             .fn = group_item,
                                             .arg = &gparts[i],
                                             .count = nxr_domain_budget(doms[i])};
    }
    nxr__across_run(parts, n, &tasks.status);
    nxr__union_permit_release(&permit);
    rc = nxr__tasks_status(&tasks);
out_fini:
    nxr__union_permit_fini(&permit);
    return rc;
}
