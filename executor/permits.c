/*
 * Work under a permit wider than one domain's own, and the permit a call on
 * one domain runs under (executor/internal/permits.h): the arbiter's
 * reporting waits, with the stall reporter of the domain named, and the
 * dispatch each permit allows.
 */
#include "executor/internal/permits.h"

#include <limits.h>

#include "base/internal/sys.h"
#include "executor/internal/stall.h"
#include "executor/internal/tasks.h"

struct permit_stall {
    const struct nxr__exec *exec;
    const char *what;
};

/* Called once on the waiting thread, without the arbiter's mutex. */
static void report(void *p, uint64_t waited_ns)
{
    const struct permit_stall *s = p;
    nxr__stall_report(s->exec->stall, s->exec, s->what, waited_ns);
}

/* ---- across several domains ----------------------------------------------------- */

int nxr__union_permit_init(struct nxr__union_permit *u, struct nxr__arbiter *a,
                           const hwloc_const_bitmap_t *sets, size_t n)
{
    u->arbiter = a;
    return nxr__arbiter_request_init_union(&u->request, a, sets, n);
}

void nxr__union_permit_fini(struct nxr__union_permit *u)
{
    nxr__arbiter_request_fini(&u->request);
}

/* What nxr__across_run waits on: the parts not finished (a futex word). */
struct across_wait {
    atomic_uint pending;
};

static void across_done(void *p)
{
    struct across_wait *w = p;
    /* Release pairs with the acquire load in dispatch's wait. */
    if (atomic_fetch_sub_explicit(&w->pending, 1, memory_order_release) == 1)
        nxr__futex_wake(&w->pending, INT_MAX);
}

/* Every part straight to its executor (the union permit is held), then the
 * wait for all of them. */
static int dispatch(struct nxr__across_part *parts, size_t n, atomic_int *stop)
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
        struct nxr_executor *ex = &p->exec->executor;
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
        nxr__executor_release(&parts[i].exec->executor);
    }
    return rc;
}

int nxr__across_run(struct nxr__union_permit *u, struct nxr__across_part *parts, size_t n,
                    atomic_int *stop, const char *what)
{
    struct permit_stall s = {.exec = parts[0].exec, .what = what};
    int rc = nxr__arbiter_acquire_reporting(
        u->arbiter, &u->request, nxr__stall_deadline(s.exec->stall, nxr__now_ns()), report, &s);
    if (rc != 0)
        return rc;
    rc = dispatch(parts, n, stop);
    nxr__arbiter_release(u->arbiter, &u->request);
    return rc;
}

/* ---- one call on one domain, under the permit it needs ------------------------------ */

/* The exclusive permit around the call: bounded by the holders of every
 * permit, reported past the stall threshold. */
static int call_exclusive(struct nxr__exec *exec, struct nxr__arbiter *a, const char *what,
                          int (*fn)(void *arg), void *arg)
{
    if (nxr__tls.depth > 0)
        return NXR_EREENTRANT; /* it could wait on its own operation */
    struct permit_stall s = {.exec = exec, .what = what};
    int rc = nxr__arbiter_acquire_exclusive_reporting(
        a, nxr__stall_deadline(exec->stall, nxr__now_ns()), report, &s);
    if (rc != 0)
        return rc;
    /* The exclusive permit covers every domain: the call is made on this
     * one's CPUs (here, or on a worker) without its own permit. */
    rc = nxr__exec_call_admitted(exec, fn, arg);
    nxr__arbiter_release_exclusive(a);
    return rc;
}

int nxr__exec_call_under(struct nxr__exec *exec, enum nxr__call_permit permit,
                         struct nxr__arbiter *arbiter, const char *what, int (*fn)(void *arg),
                         void *arg)
{
    int rc;
    switch (permit) {
    case NXR__PERMIT_DOMAIN:
        if ((rc = nxr__exec_enter(exec)) != 0)
            return rc;
        rc = nxr__exec_call_admitted(exec, fn, arg);
        nxr__exec_leave(exec);
        return rc;
    case NXR__PERMIT_EXCLUSIVE:
        return call_exclusive(exec, arbiter, what, fn, arg);
    case NXR__PERMIT_ONE_THREAD:
    default:
        return nxr__exec_call(exec, fn, arg);
    }
}
