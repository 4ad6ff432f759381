/*
 * Admission: who may run on a domain's executor, and when.
 *
 * MANAGED and COOPERATIVE domains take part in overlap arbitration: while
 * any operation of the domain is in flight the runtime holds one permit for
 * the domain's CPU set (the arbiter keeps overlapping sets apart). The
 * permit belongs to the domain, not to a thread: the first operation to enter
 * acquires it, later ones join, the last to leave releases it. That is what
 * lets a batch be admitted by the submitting thread and finished by a worker.
 *
 * Fairness. A join is allowed only while no request that overlaps the
 * domain's set waits in the arbiter. Once one waits, new operations do not
 * join: they wait for the permit to be released and then acquire it anew,
 * which queues them behind that request (the arbiter is FIFO among
 * overlapping requests). So a waiting request bounds how long a held permit
 * can be extended: by the operations already in flight when it queued, never
 * by ones that arrive after it. Without this, a stream of overlapping
 * submissions keeps `active` above zero and starves an overlapping domain
 * for as long as the stream lasts, whatever the arbiter's own policy.
 *
 * CALLER_MANAGED domains never enter the arbiter. Their guard admits one
 * operation at a time; a second entry, from any thread (the caller pool's own
 * workers included), is NXR_EADMISSION. The guard clears on every exit path
 * because leave is paired with every successful enter.
 *
 * Lock order: exec->lock may be held while releasing a permit (the arbiter's
 * mutex is a leaf); no lock is held while acquiring one.
 */
#include <errno.h>

#include "base/internal/sys.h"
#include "executor/internal/exec.h"

static atomic_ullong exec_serials;

int nxr__exec_admission_init(struct nxr__exec *exec, struct nxr__arbiter *arbiter)
{
    /* Relaxed: only uniqueness matters. */
    exec->serial = atomic_fetch_add_explicit(&exec_serials, 1, memory_order_relaxed) + 1;
    int rc = nxr__mutex_init(&exec->lock);
    if (rc != 0)
        return rc;
    if ((rc = nxr__cond_init(&exec->changed)) != 0) {
        pthread_mutex_destroy(&exec->lock);
        return rc;
    }
    atomic_init(&exec->guard, 0);
    exec->active = 0;
    exec->acquiring = false;
    exec->joins = 0;
    exec->deferrals = 0;
    exec->arbiter = NULL;
    if (exec->admission == NXR_ADMISSION_CALLER_MANAGED)
        return 0;
    rc = nxr__arbiter_request_init(&exec->request, arbiter, exec->cpus);
    if (rc != 0) {
        pthread_cond_destroy(&exec->changed);
        pthread_mutex_destroy(&exec->lock);
        return rc;
    }
    exec->arbiter = arbiter;
    return 0;
}

void nxr__exec_admission_fini(struct nxr__exec *exec)
{
    if (exec->arbiter != NULL)
        nxr__arbiter_request_fini(&exec->request);
    exec->arbiter = NULL;
    pthread_cond_destroy(&exec->changed);
    pthread_mutex_destroy(&exec->lock);
}

static void retain(const struct nxr__exec *exec)
{
    if (exec->executor.ops->retain != NULL)
        exec->executor.ops->retain(exec->executor.self);
}

static void release(const struct nxr__exec *exec)
{
    if (exec->executor.ops->release != NULL)
        exec->executor.ops->release(exec->executor.self);
}

static int enter_guarded(struct nxr__exec *exec)
{
    unsigned idle = 0;
    /* acq_rel: acquire pairs with the release in leave (the previous
     * operation's effects are visible); release publishes the claim. */
    if (!atomic_compare_exchange_strong_explicit(&exec->guard, &idle, 1, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return NXR_EADMISSION;
    pthread_mutex_lock(&exec->lock);
    exec->active++;
    pthread_mutex_unlock(&exec->lock);
    return 0;
}

static int enter_arbitrated(struct nxr__exec *exec)
{
    bool deferred = false;
    pthread_mutex_lock(&exec->lock);
    for (;;) {
        if (exec->acquiring) {
            pthread_cond_wait(&exec->changed, &exec->lock);
            continue;
        }
        if (exec->active == 0)
            break; /* acquire the permit below */
        /* The domain holds its permit already: join it, unless an
         * overlapping request is waiting for it (see Fairness above). The
         * arbiter's mutex is a leaf, so asking under exec->lock is safe. */
        if (!nxr__arbiter_contended(exec->arbiter, &exec->request)) {
            exec->active++;
            exec->joins++;
            pthread_mutex_unlock(&exec->lock);
            return 0;
        }
        if (!deferred) {
            deferred = true;
            exec->deferrals++;
        }
        /* Woken when the last operation leaves (or one enters or fails). */
        pthread_cond_wait(&exec->changed, &exec->lock);
    }
    exec->acquiring = true;
    pthread_mutex_unlock(&exec->lock);
    int rc = nxr__arbiter_acquire(exec->arbiter, &exec->request);
    pthread_mutex_lock(&exec->lock);
    exec->acquiring = false;
    if (rc == 0)
        exec->active = 1;
    pthread_cond_broadcast(&exec->changed);
    pthread_mutex_unlock(&exec->lock);
    return rc;
}

int nxr__exec_enter(struct nxr__exec *exec)
{
    /* A body never waits for a permit: it could wait for one the operation
     * it belongs to keeps from being granted. The nesting rules refuse
     * every call that would admit from a body (nxr_executor.h) before it
     * gets here; this keeps that true for any future caller. */
    if (nxr__tls.depth > 0)
        return NXR_EREENTRANT;
    int rc = exec->arbiter != NULL ? enter_arbitrated(exec) : enter_guarded(exec);
    if (rc == 0)
        retain(exec);
    return rc;
}

void nxr__exec_leave(struct nxr__exec *exec)
{
    release(exec);
    pthread_mutex_lock(&exec->lock);
    if (--exec->active == 0) {
        if (exec->arbiter != NULL)
            nxr__arbiter_release(exec->arbiter, &exec->request);
        else
            atomic_store_explicit(&exec->guard, 0, memory_order_release);
        pthread_cond_broadcast(&exec->changed);
    }
    pthread_mutex_unlock(&exec->lock);
}

void nxr__exec_admission_stats(struct nxr__exec *exec, struct nxr__admission_stats *out)
{
    pthread_mutex_lock(&exec->lock);
    *out = (struct nxr__admission_stats){
        .joins = exec->joins, .deferrals = exec->deferrals, .active = exec->active};
    pthread_mutex_unlock(&exec->lock);
}

bool nxr__exec_drain(struct nxr__exec *exec)
{
    bool waited = false;
    pthread_mutex_lock(&exec->lock);
    while (exec->active > 0 || exec->acquiring) {
        waited = true;
        pthread_cond_wait(&exec->changed, &exec->lock);
    }
    pthread_mutex_unlock(&exec->lock);
    return waited;
}
