/*
 * Service threads on their domain: nxr_ctx_bind confines the calling thread
 * to a context's domain CPU set the way a worker is confined (set, read
 * back, compared), and nxr_thread_binding_restore puts the thread's old
 * mask back.
 *
 * The old mask is kept raw (the kernel's cpu_set_t, whatever CPUs it names),
 * not as a topology bitmap: restoring must give back exactly what the
 * thread had, including CPUs nxr's topology may not list. After every change
 * the executor's per-thread placement answer is dropped
 * (nxr__exec_caller_forget), so the next operation sees the new mask.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/internal/last_error.h"
#include "base/internal/sys.h"
#include "domains/internal/cpuset.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"

struct nxr_thread_binding {
    struct nxr__cpumask old; /* the thread's mask before nxr_ctx_bind */
    pthread_t thread;        /* the thread that bound (and may restore) */
};

/* Sets the calling thread's mask to cpus and checks that it reads back as
 * exactly cpus. 0, NXR_EPLACEMENT or -ENOMEM. */
static int confine(hwloc_const_bitmap_t cpus)
{
    struct nxr__cpumask mask;
    int rc = nxr__cpumask_from_bitmap(&mask, cpus);
    if (rc != 0)
        return rc;
    rc = nxr__setaffinity_self(mask.set, mask.size);
    nxr__cpumask_free(&mask);
    if (rc != 0)
        return NXR_EPLACEMENT;
    hwloc_bitmap_t now = nxr__cpuset_alloc();
    if (now == NULL)
        return -ENOMEM;
    rc = nxr__affinity_self(now);
    if (rc == 0 && !hwloc_bitmap_isequal(now, cpus))
        rc = NXR_EPLACEMENT; /* narrowed by a cpuset, or not applied */
    else if (rc != 0 && rc != -ENOMEM)
        rc = NXR_EPLACEMENT;
    hwloc_bitmap_free(now);
    return rc;
}

int nxr_ctx_bind(nxr_ctx_t *ctx, nxr_thread_binding_t **previous)
{
    static const char call[] = "nxr_ctx_bind";
    nxr__call_begin();
    if (previous == NULL)
        return nxr__fail(-EINVAL, call, "previous is NULL");
    *previous = NULL;
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, call);
    if (rc != 0)
        return rc;
    const struct nxr_domain *d = ctx->domain;
    if (ctx->placing)
        return nxr__ctx_call_closef(&c, d, -EINVAL,
                                    "a routing context has no one domain to bind to");
    if (nxr__tls.depth > 0)
        return nxr__ctx_call_closef(&c, d, NXR_EREENTRANT,
                                    "inside a body the thread belongs to an executor; its mask "
                                    "is not the caller's to change");
    hwloc_const_bitmap_t cpus = nxr_domain_cpuset(d);
    if (cpus == NULL)
        return nxr__ctx_call_closef(&c, d, NXR_EPLACEMENT,
                                    "caller-managed domain %d declares no CPU set to bind to",
                                    d->spec.id);
    struct nxr_thread_binding *b = nxr__calloc(1, sizeof(*b));
    if (b == NULL)
        return nxr__ctx_call_close(&c, d, -ENOMEM);
    b->thread = pthread_self();
    rc = nxr__cpumask_alloc(&b->old, 0);
    if (rc == 0)
        rc = nxr__getaffinity_self(b->old.set, b->old.size);
    if (rc != 0) {
        snprintf(c.why, sizeof(c.why), "the thread's current mask could not be read");
        goto out_free;
    }
    rc = confine(cpus);
    if (rc != 0) {
        /* Back to exactly what it was; nothing of the failed attempt stays. */
        (void)nxr__setaffinity_self(b->old.set, b->old.size);
        nxr__exec_caller_forget();
        snprintf(c.why, sizeof(c.why),
                 "the thread's mask could not be set to domain %d's CPUs, or read back "
                 "differently (a cpuset narrower than the domain?)",
                 d->spec.id);
        goto out_free;
    }
    nxr__exec_caller_forget();
    *previous = b;
    return nxr__ctx_call_close(&c, d, 0);

out_free:
    nxr__cpumask_free(&b->old);
    free(b);
    return nxr__ctx_call_close(&c, d, rc);
}

int nxr_thread_binding_restore(nxr_thread_binding_t *previous)
{
    nxr__call_begin();
    if (previous == NULL)
        return 0;
    if (!pthread_equal(previous->thread, pthread_self())) /* it would change another's mask */
        return nxr__fail(-EINVAL, __func__,
                         "previous was made by another thread: only the thread that bound may "
                         "restore (the handle is kept)");
    int rc = nxr__setaffinity_self(previous->old.set, previous->old.size);
    nxr__exec_caller_forget();
    if (rc != 0)
        return nxr__fail(rc, __func__,
                         "the old mask could not be set again: %s (the handle is "
                         "kept)",
                         nxr_strerror(rc));
    nxr__cpumask_free(&previous->old);
    free(previous);
    return 0;
}
