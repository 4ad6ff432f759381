/*
 * The union and exclusive permits (executor/internal/permits.h): the
 * arbiter's reporting waits, with the stall reporter of the domain named.
 */
#include "executor/internal/permits.h"

#include "base/internal/sys.h"
#include "executor/internal/stall.h"

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

int nxr__union_permit_acquire(struct nxr__union_permit *u, const struct nxr__exec *first,
                              const char *what)
{
    struct permit_stall s = {.exec = first, .what = what};
    return nxr__arbiter_acquire_reporting(
        u->arbiter, &u->request, nxr__stall_deadline(first->stall, nxr__now_ns()), report, &s);
}

void nxr__union_permit_release(struct nxr__union_permit *u)
{
    nxr__arbiter_release(u->arbiter, &u->request);
}

int nxr__exclusive_permit_acquire(struct nxr__arbiter *a, const struct nxr__exec *exec,
                                  const char *what)
{
    struct permit_stall s = {.exec = exec, .what = what};
    return nxr__arbiter_acquire_exclusive_reporting(
        a, nxr__stall_deadline(exec->stall, nxr__now_ns()), report, &s);
}

void nxr__exclusive_permit_release(struct nxr__arbiter *a)
{
    nxr__arbiter_release_exclusive(a);
}
