/*
 * nxr providers, the run rules: where one call of a classified
 * provider may run, as a pure function of the classification and the
 * situation (domain budget, whether the domain is the whole allowed set,
 * the runtime's provider policy, the provider's current process-global
 * thread count). Pure so that every rule is unit-tested with fake
 * providers; the runtime evaluates it per call, reading the global count
 * just before.
 *
 * The rules (docs/contracts.md, "Arbitration and admission" and
 * "Providers"):
 *  - PER_CALL_BOUND x ENGINE_WORKERS (native): budget 1 runs inline; more
 *    runs on the domain's workers under the domain's permit.
 *  - SEQUENTIAL or CLAMP_TO_ONE x CALLING_THREAD: inline, one thread,
 *    whatever the budget (the budget is an upper bound).
 *  - PER_CALL_BOUND x EXTERNAL_WORKERS (a library with a true per-call
 *    setter): budget 1 inline; budget > 1 runs with the domain's permit
 *    only when the domain is the whole allowed set (its workers cannot
 *    leave it); otherwise the strict policy rejects it (NXR_EPLACEMENT) and
 *    process-exclusive mode runs it under the exclusive permit.
 *  - GLOBAL_OR_UNCONTROLLED x EXTERNAL_WORKERS (parallel OpenBLAS):
 *    strict: runs inline on the calling worker only when the global count
 *    is already 1; with a count above one it is NXR_EPLACEMENT unless the
 *    domain is the whole allowed set and the count fits the budget (then
 *    it runs at that count under the domain's permit; nxr changes nothing).
 *    Process-exclusive: every call holds the exclusive permit, sets the
 *    count to the budget and restores the previous count before releasing.
 *  - any other pair is NXR_EPROVIDER; a budget of 0 is NXR_EBUDGET.
 */
#ifndef NXR_KERNELS_INTERNAL_RULES_H
#define NXR_KERNELS_INTERNAL_RULES_H

#include <stdbool.h>

#include "kernels/nxr_provider.h"

enum nxr__run {
    /* On the calling worker, one thread, no permit beyond what the caller
     * holds, no global state touched. */
    NXR_RUN_INLINE = 0,
    /* Under the domain's permit with up to `threads` threads: the domain's
     * workers (ENGINE_WORKERS), or a provider whose own threads cannot
     * leave the domain because the domain is the whole allowed set. */
    NXR_RUN_DOMAIN = 1,
    /* Take the process-wide exclusive permit, set the provider's global
     * count to `threads`, call, restore the previous count, release. */
    NXR_RUN_EXCLUSIVE = 2,
    /* Do not call: status says why. */
    NXR_RUN_REJECT = 3,
};

struct nxr__run_situation {
    unsigned budget;        /* the domain's thread budget */
    bool whole_allowed_set; /* the domain's CPU set is the process's allowed set */
    enum nxr_provider_policy policy;
    int global_threads; /* the provider's global count now; <= 0: unknown */
};

struct nxr__run_decision {
    enum nxr__run run;
    unsigned threads; /* threads the call may use (0 when rejected) */
    int status;       /* 0, or NXR_EPLACEMENT / NXR_EPROVIDER / NXR_EBUDGET when rejected */
};

struct nxr__run_decision nxr__provider_decide(enum nxr_count_control count,
                                              enum nxr_provider_runs_on runs_on,
                                              const struct nxr__run_situation *s);

/* The same for a provider, reading its global count now (GLOBAL providers). */
struct nxr__run_decision nxr__provider_decide_now(const nxr_provider_t *p, unsigned budget,
                                                  bool whole_allowed_set,
                                                  enum nxr_provider_policy policy);

const char *nxr__run_name(enum nxr__run run);

#endif /* NXR_KERNELS_INTERNAL_RULES_H */
