/*
 * The runtime's budgets and the CPU quota they fit into (docs/contracts.md,
 * "What the process can really get"). Reading the cgroup files is
 * domains/cpu_quota.c's; fitting the budgets is domains/plan.c's; which
 * quota applies, and when the budgets move, is decided here.
 *
 * At creation (nxr__runtime_fit_quota): the settings say auto, ignore or a
 * count, and the plan's budgets are fitted into that quota before any team
 * starts.
 *
 * While the runtime serves: budgets that follow a CPU quota changed since
 * (nxr_runtime_refresh_budget, runtime/nxr_stats.h). Kubernetes resizes a
 * pod's CPU limit in place; a team sized to the old limit is then
 * throttled in lockstep. Under NXR_CPU_QUOTA=auto the cgroup files are read again and the
 * budgets fitted into the new limit by the creation rule
 * (nxr__plan_fit_cpus, over the budgets the runtime was created with), so
 * a budget moves between 1 and its creation budget (the workers started;
 * never above the allowed set). Each operation reads its domain's budget
 * once (nxr__exec_budget): a lower one takes effect from the next
 * operation, one in flight finishes as it started.
 *
 * The host calls the refresh, or NXR_QUOTA_FOLLOW_MS=N starts a follower
 * thread that calls it every N ms (a few small file reads each time) until
 * the runtime is destroyed. Off by default: it is one more thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/internal/last_error.h"
#include "base/internal/lock_rank.h"
#include "base/internal/sys.h"
#include "runtime/internal/runtime.h"
#include "runtime/nxr_stats.h"

/* ---- the quota at creation ------------------------------------------------------ */

void nxr__runtime_fit_quota(nxr_runtime_t *rt, struct nxr__plan *plan)
{
    struct nxr__cpu_quota *q = &rt->quota;
    const struct nxr__settings *s = &rt->settings;
    memset(q, 0, sizeof(*q)); /* a quota from the settings names no cgroup */
    if (s->cpu_quota == NXR_CPU_QUOTA_IGNORE) {
        q->cpus = 0;
        q->status = 0;
        snprintf(q->source, sizeof(q->source), "ignored (%s)", s->cpu_quota_from);
    } else if (s->cpu_quota > 0) {
        q->cpus = (unsigned)s->cpu_quota;
        q->status = 0;
        snprintf(q->source, sizeof(q->source), "%s -> %u CPU%s", s->cpu_quota_from, q->cpus,
                 q->cpus == 1 ? "" : "s");
    } else {
        /* The tightest limit the readable files set (none when no file
         * could be read: nxr then runs as it did before quotas were read);
         * a file that could not be used is said beside it in
         * nxr_runtime_describe. */
        (void)nxr__cpu_quota_read(s->cgroup_root, q);
    }
    nxr__plan_fit_cpus(plan, q->cpus);
}

unsigned nxr_runtime_cpu_quota(const nxr_runtime_t *rt, const char **source)
{
    if (rt == NULL) {
        if (source != NULL)
            *source = NULL;
        return 0;
    }
    if (source != NULL)
        *source = rt->quota.source;
    return rt->quota.cpus;
}

/* ---- budgets that follow a changed quota ------------------------------------------ */

void nxr__runtime_quota_now(const nxr_runtime_t *rt, struct nxr__cpu_quota *out)
{
    nxr__lock(&((nxr_runtime_t *)rt)->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    *out = rt->quota_now;
    nxr__unlock(&((nxr_runtime_t *)rt)->quota_lock, NXR__RANK_RUNTIME_QUOTA);
}

/* The budgets of rt's team domains fitted into cpus (0: their creation
 * budgets), written to want[i] per domain (0: not a team domain, left as
 * it is). domains_lock held. 0 or -ENOMEM. */
static int fit(const nxr_runtime_t *rt, unsigned cpus, unsigned *want)
{
    struct nxr__domain_spec *specs = calloc(rt->domain_count, sizeof(*specs));
    size_t *index = calloc(rt->domain_count, sizeof(*index));
    if (specs == NULL || index == NULL) {
        free(specs);
        free(index);
        return -ENOMEM;
    }
    struct nxr__plan plan = {.domains = specs, .count = 0};
    for (size_t i = 0; i < rt->domain_count; i++) {
        const struct nxr_domain *d = rt->domains[i];
        want[i] = 0;
        if (d->team == NULL || d->spec.cpus == NULL || !d->admission_ready)
            continue;                /* a host's executor sizes itself */
        specs[plan.count] = d->spec; /* shallow: fit reads cpus, writes budget */
        index[plan.count++] = i;
    }
    nxr__plan_fit_cpus(&plan, cpus);
    for (size_t k = 0; k < plan.count; k++)
        want[index[k]] = specs[k].budget;
    free(specs);
    free(index);
    return 0;
}

/* The refresh itself: 0, or -ENOMEM with the budgets as they were (why in
 * what, for the caller's detail). */
static int refresh(nxr_runtime_t *rt, char *what, size_t whatsz)
{
    struct nxr__cpu_quota *q = malloc(sizeof(*q));
    if (q == NULL) {
        snprintf(what, whatsz, "the quota's record");
        return -ENOMEM;
    }
    (void)nxr__cpu_quota_read(rt->settings.cgroup_root, q); /* unreadable: none, said */

    nxr__lock(&rt->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    unsigned *want = calloc(rt->domain_count ? rt->domain_count : 1, sizeof(*want));
    int rc = want == NULL ? -ENOMEM : fit(rt, q->cpus, want);
    if (rc != 0) {
        snprintf(what, whatsz, "fitting %zu domain(s)", rt->domain_count);
        nxr__unlock(&rt->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
        free(want);
        free(q);
        return rc;
    }
    char moved[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < rt->domain_count; i++) {
        struct nxr__exec *exec = &rt->domains[i]->exec;
        unsigned before = want[i] == 0 ? 0 : nxr__exec_budget(exec);
        if (want[i] == 0 || want[i] == before)
            continue;
        /* Relaxed: each operation reads it once (nxr__exec_budget). */
        atomic_store_explicit(&exec->budget_now, want[i], memory_order_relaxed);
        int n = snprintf(moved + used, sizeof(moved) - used, "%sdomain %d %u -> %u",
                         used ? ", " : "", exec->spec->id, before, want[i]);
        if (n > 0 && (size_t)n < sizeof(moved) - used)
            used += (size_t)n;
    }
    nxr__unlock(&rt->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    free(want);

    nxr__lock(&rt->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    if (used > 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        rt->budget_changes++;
        rt->budget_changed_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
        snprintf(rt->budget_why, sizeof(rt->budget_why), "%s, as the CPU quota is now %s", moved,
                 q->source);
    }
    rt->quota_now = *q;
    nxr__unlock(&rt->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    free(q);
    return 0;
}

int nxr_runtime_refresh_budget(nxr_runtime_t *rt)
{
    nxr__call_begin();
    if (rt == NULL)
        return nxr__fail(-EINVAL, __func__, "rt is NULL");
    if (nxr__runtime_forked(rt))
        return nxr__fail(NXR_EFORKED, __func__,
                         "the runtime was created before this process forked");
    if (rt->settings.cpu_quota != NXR_CPU_QUOTA_AUTO)
        return 0; /* a quota from a setting (or ignored) does not move */
    char what[96];
    int rc = refresh(rt, what, sizeof(what));
    return rc == 0 ? 0 : nxr__fail(rc, __func__, "%s: %s", what, nxr_strerror(rc));
}

/* ---- the follower: the same refresh every NXR_QUOTA_FOLLOW_MS ------------ */

static void *follow(void *p)
{
    nxr_runtime_t *rt = p;
    nxr__lock(&rt->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    while (!rt->quota_stop) {
        struct timespec at;
        clock_gettime(CLOCK_MONOTONIC, &at);
        uint64_t ns = (uint64_t)at.tv_nsec + (uint64_t)rt->settings.quota_follow_ms * 1000000u;
        at.tv_sec += (time_t)(ns / 1000000000u);
        at.tv_nsec = (long)(ns % 1000000000u);
        /* The period, or until destroy says stop. */
        while (!rt->quota_stop && pthread_cond_clockwait(&rt->quota_wake, &rt->quota_lock,
                                                         CLOCK_MONOTONIC, &at) != ETIMEDOUT)
            ;
        if (rt->quota_stop)
            break;
        nxr__unlock(&rt->quota_lock,
                    NXR__RANK_RUNTIME_QUOTA); /* refresh takes domains_lock, then this one */
        char what[96];
        (void)refresh(rt, what, sizeof(what)); /* out of memory: the next period tries again */
        /* Relaxed: a count the tests wait on. */
        atomic_fetch_add_explicit(&rt->quota_refreshes, 1, memory_order_relaxed);
        nxr__lock(&rt->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    }
    nxr__unlock(&rt->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    return NULL;
}

int nxr__runtime_quota_follow_start(nxr_runtime_t *rt)
{
    atomic_init(&rt->quota_refreshes, 0);
    if (rt->settings.quota_follow_ms == 0 || rt->settings.cpu_quota != NXR_CPU_QUOTA_AUTO)
        return 0;
    int rc = nxr__cond_init(&rt->quota_wake);
    if (rc != 0)
        return rc;
    rt->quota_stop = false;
    rc = nxr__thread_create(&rt->quota_follower, follow, rt);
    if (rc != 0) {
        pthread_cond_destroy(&rt->quota_wake);
        return rc;
    }
    rt->quota_following = true;
    return 0;
}

void nxr__runtime_quota_follow_stop(nxr_runtime_t *rt)
{
    if (!rt->quota_following)
        return;
    nxr__lock(&rt->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    rt->quota_stop = true;
    pthread_cond_signal(&rt->quota_wake);
    nxr__unlock(&rt->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    pthread_join(rt->quota_follower, NULL);
    pthread_cond_destroy(&rt->quota_wake);
    rt->quota_following = false;
}
