/*
 * Multi-domain operations: tasks spread over several domains at once under
 * ONE permit for the union of their CPU sets. The arbiter grants the union
 * whole or queues it holding nothing, so two groups over the same domains in
 * different orders cannot deadlock, and no domain of the group starts before
 * all of them may.
 *
 * Here: the checks and the shared tasks. The executor runs them
 * (executor/permits.c, nxr__across_run: the permit, the dispatch to each
 * domain's executor, the wait), as it runs a span's loops and kernels.
 */
#include <errno.h>
#include <stdatomic.h>

#include "base/internal/last_error.h"
#include "executor/internal/permits.h"
#include "executor/internal/tasks.h"
#include "runtime/internal/span.h"

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
    struct nxr__tasks tasks;
    nxr__tasks_init(&tasks, fn, arg, count);
    struct group_part gparts[NXR__SPAN_MAX];
    struct nxr__across_part parts[NXR__SPAN_MAX];
    for (size_t i = 0; i < n; i++) {
        gparts[i] = (struct group_part){.tasks = &tasks, .exec = &doms[i]->exec};
        parts[i] = (struct nxr__across_part){.exec = &doms[i]->exec,
                                             .fn = group_item,
                                             .arg = &gparts[i],
                                             .count = nxr_domain_budget(doms[i])};
    }
    /* The permit's wait is bounded by the holders of overlapping permits
     * and reported past the stall threshold (executor/permits.c). */
    rc = nxr__across_run(&permit, parts, n, &tasks.status, "admission of nxr_run_across");
    /* A refused permit ran nothing (the tasks' status is still 0); a failed
     * submit stopped the tasks with its error, which the status holds. */
    if (rc != 0 && nxr__tasks_status(&tasks) == 0)
        nxr__fail(rc, __func__, "admission: %s", nxr_strerror(rc));
    else
        rc = nxr__tasks_status(&tasks);
    nxr__union_permit_fini(&permit);
    return rc;
}
