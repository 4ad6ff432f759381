/*
 * nxr providers, the run rules (see kernels/internal/rules.h for the
 * table they implement). Pure functions, except that decide_now reads the
 * provider's global count (through the count gate, global_count.c).
 */
#include "kernels/internal/rules.h"

#include "kernels/internal/provider.h"

static struct nxr__run_decision run(enum nxr__run r, unsigned threads)
{
    return (struct nxr__run_decision){.run = r, .threads = threads, .status = 0};
}

static struct nxr__run_decision reject(int status)
{
    return (struct nxr__run_decision){.run = NXR_RUN_REJECT, .threads = 0, .status = status};
}

bool nxr__classification_valid(enum nxr_count_control count, enum nxr_provider_runs_on runs_on)
{
    switch (count) {
    case NXR_COUNT_PER_CALL_BOUND:
        /* More than one thread needs workers: the engine's or its own. */
        return runs_on == NXR_RUNS_ON_ENGINE_WORKERS || runs_on == NXR_RUNS_ON_EXTERNAL_WORKERS;
    case NXR_COUNT_SEQUENTIAL:
    case NXR_COUNT_CLAMP_TO_ONE:
        /* One thread is the calling thread; there are no workers. */
        return runs_on == NXR_RUNS_ON_CALLING_THREAD;
    case NXR_COUNT_GLOBAL_OR_UNCONTROLLED:
        /* A count nxr does not bound cannot live on the engine's workers
         * or on the calling thread alone. */
        return runs_on == NXR_RUNS_ON_EXTERNAL_WORKERS;
    }
    return false;
}

struct nxr__run_decision nxr__provider_decide(enum nxr_count_control count,
                                              enum nxr_provider_runs_on runs_on,
                                              const struct nxr__run_situation *s)
{
    if (!nxr__classification_valid(count, runs_on))
        return reject(NXR_EPROVIDER);
    if (s->budget == 0)
        return reject(NXR_EBUDGET);

    switch (count) {
    case NXR_COUNT_SEQUENTIAL:
    case NXR_COUNT_CLAMP_TO_ONE:
        return run(NXR_RUN_INLINE, 1);

    case NXR_COUNT_PER_CALL_BOUND:
        if (s->budget == 1)
            return run(NXR_RUN_INLINE, 1);
        if (runs_on == NXR_RUNS_ON_ENGINE_WORKERS || s->whole_allowed_set)
            return run(NXR_RUN_DOMAIN, s->budget);
        if (s->policy == NXR_PROVIDER_PROCESS_EXCLUSIVE)
            return run(NXR_RUN_EXCLUSIVE, s->budget);
        return reject(NXR_EPLACEMENT);

    case NXR_COUNT_GLOBAL_OR_UNCONTROLLED:
        if (s->policy == NXR_PROVIDER_PROCESS_EXCLUSIVE)
            return run(NXR_RUN_EXCLUSIVE, s->budget);
        /* Strict: nxr never changes the count here; it only reads it. */
        if (s->global_threads == 1)
            return run(NXR_RUN_INLINE, 1);
        if (s->global_threads > 1 && s->whole_allowed_set &&
            (unsigned)s->global_threads <= s->budget)
            return run(NXR_RUN_DOMAIN, (unsigned)s->global_threads);
        /* A count above one in a partial domain (its workers would leave
         * it), above the budget, or unknown. */
        return reject(NXR_EPLACEMENT);
    }
    return reject(NXR_EPROVIDER);
}

struct nxr__run_decision nxr__provider_decide_now(const nxr_provider_t *p, unsigned budget,
                                                  bool whole_allowed_set,
                                                  enum nxr_provider_policy policy)
{
    struct nxr__run_situation s = {
        .budget = budget,
        .whole_allowed_set = whole_allowed_set,
        .policy = policy,
        .global_threads = 0,
    };
    if (p->global_threads != NULL)
        s.global_threads = nxr__global_threads_get(p); /* the resting count */
    return nxr__provider_decide(p->count, p->runs_on, &s);
}

const char *nxr__run_name(enum nxr__run r)
{
    switch (r) {
    case NXR_RUN_INLINE:
        return "inline";
    case NXR_RUN_DOMAIN:
        return "domain";
    case NXR_RUN_EXCLUSIVE:
        return "exclusive";
    case NXR_RUN_REJECT:
        return "reject";
    }
    return "?";
}
