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
 * usual.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/internal/runtime.h"
#include "base/internal/sys.h"

#define CACHE_LINE 64
#define GROUP_MAX  64 /* domains in one group */

struct group_op {
    nxr_task_fn fn;
    void *arg;
    size_t count;
    _Alignas(CACHE_LINE) atomic_size_t next;
    _Alignas(CACHE_LINE) atomic_int status;
    atomic_uint pending; /* domain batches not finished; futex word */
};

/* What one domain's batch runs: the shared operation, as bodies of that
 * domain (so that loops inside run in place on its CPUs). */
struct group_part {
    struct group_op *g;
    const struct nxr__exec *exec;
};

/* One item per participant of a domain: claims tasks until none are left
 * or one failed. Tasks run as bodies (one fan-out level). */
static void group_item(void *p, size_t index)
{
    const struct group_part *part = p;
    struct group_op *g = part->g;
    struct nxr__exec_tls saved = nxr__body_begin(part->exec, (unsigned)index);
    for (;;) {
        /* Relaxed: the status only stops new claims; see nxr_run. */
        if (atomic_load_explicit(&g->status, memory_order_relaxed) != 0)
            break;
        size_t i = atomic_fetch_add_explicit(&g->next, 1, memory_order_relaxed);
        if (i >= g->count)
            break;
        int rc = g->fn(g->arg, i);
        int none = 0;
        if (rc != 0)
            atomic_compare_exchange_strong_explicit(&g->status, &none, rc, memory_order_relaxed,
                                                    memory_order_relaxed);
    }
    nxr__body_end(saved);
}

static void group_done(void *p)
{
    struct group_op *g = ((const struct group_part *)p)->g;
    /* Release pairs with the acquire load in nxr_run_across's wait. */
    if (atomic_fetch_sub_explicit(&g->pending, 1, memory_order_release) == 1)
        nxr__futex_wake(&g->pending, INT_MAX);
}

static int collect(nxr_runtime_t *rt, const int *ids, size_t n, struct nxr_domain **doms,
                   hwloc_const_bitmap_t *sets)
{
    for (size_t i = 0; i < n; i++) {
        const nxr_domain_t *d;
        int rc = nxr_runtime_domain(rt, ids[i], &d);
        if (rc != 0)
            return rc;
        for (size_t j = 0; j < i; j++) {
            if (doms[j] == d)
                return -EINVAL; /* listed twice */
        }
        if (d->spec.admission == NXR_ADMISSION_CALLER_MANAGED)
            return -EINVAL; /* no CPU set to arbitrate */
        doms[i] = (struct nxr_domain *)d;
        sets[i] = d->spec.cpus;
    }
    return 0;
}

int nxr_run_across(nxr_runtime_t *rt, const int *ids, size_t n, size_t count, nxr_task_fn fn,
                   void *arg)
{
    if (rt == NULL || ids == NULL || fn == NULL || n == 0 || n > GROUP_MAX)
        return -EINVAL;
    if (nxr__runtime_forked(rt))
        return NXR_EFORKED;
    struct nxr_domain *doms[GROUP_MAX];
    hwloc_const_bitmap_t sets[GROUP_MAX];
    int rc = collect(rt, ids, n, doms, sets);
    if (rc != 0)
        return rc;
    /* Inside a body this would enter executors again (and wait on a permit
     * the enclosing operation may be holding back). */
    if (nxr__tls.depth > 0)
        return NXR_EREENTRANT;
    if (count == 0)
        return 0;
    struct nxr__arbiter_request req;
    rc = nxr__arbiter_request_init_union(&req, rt->arbiter, sets, n);
    if (rc != 0)
        return rc;
    rc = nxr__arbiter_acquire(rt->arbiter, &req);
    if (rc != 0)
        goto out_fini;

    struct group_op g = {.fn = fn, .arg = arg, .count = count};
    atomic_init(&g.next, 0);
    atomic_init(&g.status, 0);
    atomic_init(&g.pending, (unsigned)n);
    struct group_part parts[GROUP_MAX];
    size_t started = 0;
    for (; started < n; started++) {
        parts[started] = (struct group_part){.g = &g, .exec = &doms[started]->exec};
        struct nxr_executor *ex = &doms[started]->exec.executor;
        if (ex->ops->retain != NULL)
            ex->ops->retain(ex->self);
        rc = ex->ops->submit(ex->self, group_item, &parts[started], doms[started]->spec.budget,
                             group_done, &parts[started]);
        if (rc != 0) {
            if (ex->ops->release != NULL)
                ex->ops->release(ex->self);
            /* Stop the claims; the batches already started finish. */
            int none = 0;
            atomic_compare_exchange_strong(&g.status, &none, rc);
            atomic_fetch_sub(&g.pending, (unsigned)(n - started));
            break;
        }
    }
    unsigned left;
    /* Acquire pairs with the release decrement in group_done. */
    while ((left = atomic_load_explicit(&g.pending, memory_order_acquire)) != 0)
        nxr__futex_wait(&g.pending, left);
    for (size_t i = 0; i < started; i++) {
        struct nxr_executor *ex = &doms[i]->exec.executor;
        if (ex->ops->release != NULL)
            ex->ops->release(ex->self);
    }
    nxr__arbiter_release(rt->arbiter, &req);
    rc = atomic_load_explicit(&g.status, memory_order_relaxed);
out_fini:
    nxr__arbiter_request_fini(&req);
    return rc;
}
