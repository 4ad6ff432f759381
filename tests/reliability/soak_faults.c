/* The soak's injectors (see soak_faults.h). */
#include "tests/reliability/soak_faults.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* The native provider's table and self: white-box, so that the wrapper
 * computes exactly what the native provider would. */
#include "kernels/internal/provider.h"

void soak_gate_open(struct soak_gate *g, long period)
{
    atomic_store_explicit(&g->calls, 0, memory_order_relaxed);
    /* Release: a caller that sees the period also sees the reset count. */
    atomic_store_explicit(&g->period, period, memory_order_release);
}

void soak_gate_close(struct soak_gate *g)
{
    atomic_store_explicit(&g->period, 0, memory_order_release);
}

bool soak_gate_fail(struct soak_gate *g)
{
    /* Acquire pairs with the release in soak_gate_open. */
    long period = atomic_load_explicit(&g->period, memory_order_acquire);
    if (period <= 0)
        return false;
    /* Relaxed: hands out distinct call numbers. */
    long n = atomic_fetch_add_explicit(&g->calls, 1, memory_order_relaxed) + 1;
    return n % period == 0;
}

/* ---- the provider ------------------------------------------------------ */

static bool provider_fails(struct soak_provider *p)
{
    if (!soak_gate_fail(p->gate))
        return false;
    atomic_fetch_add_explicit(&p->failed, 1, memory_order_relaxed);
    return true;
}

static size_t wrap_sgemm_scratch(void *self, const struct nxr_sgemm_args *args)
{
    struct soak_provider *p = self;
    const struct nxr_gemm_ops *ops = p->native->gemm;
    return ops->sgemm_scratch != NULL ? ops->sgemm_scratch(p->native->self, args) : 0;
}

static int wrap_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *args)
{
    struct soak_provider *p = self;
    if (provider_fails(p))
        return p->error;
    return p->native->gemm->sgemm(p->native->self, call, args);
}

static int wrap_sgemm_batch(void *self, const struct nxr_kernel_call *call,
                            const struct nxr_sgemm_batch_args *args)
{
    struct soak_provider *p = self;
    if (provider_fails(p))
        return p->error;
    return p->native->gemm->sgemm_batch(p->native->self, call, args);
}

static const struct nxr_gemm_ops wrap_gemm = {
    .sgemm_scratch = wrap_sgemm_scratch,
    .sgemm = wrap_sgemm,
    .sgemm_batch = wrap_sgemm_batch,
};

int soak_provider_create(struct soak_provider *p, struct soak_gate *gate, int error,
                         nxr_provider_t **out)
{
    memset(p, 0, sizeof(*p));
    p->gate = gate;
    p->error = error;
    atomic_init(&p->failed, 0);
    int rc = nxr_provider_native_create(NXR_FAMILY_GEMM, &p->native);
    if (rc != 0)
        return rc;
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "soak-flaky-gemm";
    d.family = NXR_FAMILY_GEMM;
    d.count = NXR_COUNT_PER_CALL_BOUND;
    d.runs_on = NXR_RUNS_ON_ENGINE_WORKERS;
    d.gemm = &wrap_gemm;
    d.self = p;
    rc = nxr_provider_create(&d, out);
    if (rc != 0) {
        nxr_provider_destroy(p->native);
        p->native = NULL;
    }
    return rc;
}

void soak_provider_release(struct soak_provider *p)
{
    nxr_provider_destroy(p->native);
    p->native = NULL;
}

/* ---- the executor ------------------------------------------------------ */

static int x_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    struct soak_executor *x = self;
    if (soak_gate_fail(x->gate)) {
        atomic_fetch_add_explicit(&x->failed_installs, 1, memory_order_relaxed);
        return x->error;
    }
    return x->inner.ops->install(x->inner.self, fn, arg, count);
}

/* A synchronous submission's latch. */
struct latch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
};

static void latch_open(void *p)
{
    struct latch *l = p;
    pthread_mutex_lock(&l->lock);
    l->done = true;
    /* Signal under the lock: the waiter destroys the latch once it sees
     * done, which it can only read after this unlock. */
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

static int x_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                    void *done_arg)
{
    struct soak_executor *x = self;
    if (soak_gate_fail(x->gate)) {
        atomic_fetch_add_explicit(&x->failed_items, (long)count, memory_order_relaxed);
        return x->error;
    }
    if (!x->synchronous)
        return x->inner.ops->submit(x->inner.self, fn, arg, count, done, done_arg);
    struct latch l = {.done = false};
    pthread_mutex_init(&l.lock, NULL);
    pthread_cond_init(&l.cond, NULL);
    int rc = x->inner.ops->submit(x->inner.self, fn, arg, count, latch_open, &l);
    if (rc == 0) {
        pthread_mutex_lock(&l.lock);
        while (!l.done)
            pthread_cond_wait(&l.cond, &l.lock);
        pthread_mutex_unlock(&l.lock);
    }
    pthread_cond_destroy(&l.cond);
    pthread_mutex_destroy(&l.lock);
    if (rc == 0)
        done(done_arg); /* every item finished: before submit returns, as promised */
    return rc;
}

static void x_retain(void *self)
{
    struct soak_executor *x = self;
    if (x->inner.ops->retain != NULL)
        x->inner.ops->retain(x->inner.self);
}

static void x_release(void *self)
{
    struct soak_executor *x = self;
    if (x->inner.ops->release != NULL)
        x->inner.ops->release(x->inner.self);
}

static const struct nxr_executor_ops x_ops = {
    .install = x_install,
    .submit = x_submit,
    .retain = x_retain,
    .release = x_release,
};

void soak_executor_wrap(struct soak_executor *x, struct nxr_executor *inout,
                        struct soak_gate *gate, int error, bool synchronous)
{
    x->inner = *inout;
    x->gate = gate;
    x->error = error;
    x->synchronous = synchronous;
    atomic_init(&x->failed_installs, 0);
    atomic_init(&x->failed_items, 0);
    *inout = (struct nxr_executor){
        .ops = &x_ops,
        .self = x,
        .workers = x->inner.workers,
        .flags = x->inner.flags,
        .owner = x->inner.owner,
    };
}
