/*
 * The runtime's CPU quota: which one applies (the settings say auto, ignore
 * or a count) and the plan's budgets fitted into it, before any team starts
 * (docs/contracts.md, "What the process can really get"). Reading the
 * cgroup files is domains/cpu_quota.c's; fitting the budgets is
 * domains/plan.c's.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/internal/runtime.h"

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
