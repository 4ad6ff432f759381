/*
 * nxr routing: which domain a call runs on when the caller did not name
 * one, chosen by its inputs' bytes (a route; "placement" is only where a
 * domain's threads run, runtime/nxr.h). The resolver below is the one rule,
 * shared by routing contexts (nxr_ctx_create with NXR_DOMAIN_AUTO,
 * runtime/nxr_ctx.h), whose kernel calls route themselves, and by callers that want to know the
 * answer first (to allocate a call's outputs where it will run).
 *
 * The rule. Each input is attributed to the domain whose memory holds its
 * first byte (nxr_mem_domain, runtime/nxr_memory.h); an input nxr did not
 * allocate (the host's heap, a stack, a mapped file) has no domain and does
 * not count. Under the default policy, NXR_ROUTE_MOST_BYTES, the call
 * runs on the domain holding the most input bytes; a tie goes to the lowest
 * domain id; when no input counts, the runtime's default domain (the lowest
 * id among the domains the runtime was created with) is used. The opt-in
 * policy NXR_ROUTE_SINGLE_DOMAIN refuses a call whose counted inputs lie
 * on more than one domain (NXR_EMIXED) instead of reading remote memory.
 *
 * Inputs are never copied or moved: a call routed to one domain reads the
 * others' memory where it lies (remote NUMA reads). Rehoming is explicit
 * (nxr_mem_rehome). The choice depends only on the inputs and the policy,
 * so memory allocated for a call's outputs with the same inputs
 * (nxr_ctx_alloc_for) lands on the domain the call then runs on; counting
 * those outputs as inputs later (C of a GEMM with beta != 0) only adds to
 * that domain.
 *
 * Observability: every routed call is counted per domain and reason, and
 * every refusal per runtime, in nxr_runtime_describe (its "placement"
 * section, a name kept from 0.x for the output's readers) and `nxr info`;
 * a routing context remembers its last call's route (nxr_ctx_last_route).
 */
#ifndef NXR_ROUTE_H
#define NXR_ROUTE_H

#include <stddef.h>

#include "base/nxr_fwd.h"
#include "base/nxr_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How calls without an explicit domain are routed (opts.route_policy,
 * NXR_ROUTE=most-bytes|single-domain). */
enum nxr_route_policy {
    NXR_ROUTE_DEFAULT = 0,       /* unset: NXR_ROUTE, else most-bytes */
    NXR_ROUTE_MOST_BYTES = 1,    /* the domain with the most input bytes */
    NXR_ROUTE_SINGLE_DOMAIN = 2, /* the same, but inputs on two domains: NXR_EMIXED */
};

/* One input of a call: its first byte and how many bytes it spans. */
struct nxr_mem_ref {
    const void *ptr;
    size_t bytes;
};

enum nxr_route_reason {
    /* The context names its domain (not a routing context). */
    NXR_ROUTE_REASON_EXPLICIT = 0,
    /* One domain held strictly the most counted input bytes. */
    NXR_ROUTE_REASON_MOST_BYTES = 1,
    /* Several domains held the most; the lowest id won. */
    NXR_ROUTE_REASON_TIE = 2,
    /* No input had a domain: the runtime's default domain. */
    NXR_ROUTE_REASON_DEFAULT = 3,
};

/* "explicit", "most-bytes", "tie", "default" ("unknown" otherwise). */
NXR_API const char *nxr_route_reason_name(enum nxr_route_reason reason);

/* "most-bytes", "single-domain" ("unknown" otherwise). */
NXR_API const char *nxr_route_policy_name(enum nxr_route_policy policy);

/* Where a call runs and why. */
struct nxr_route {
    int domain_id;
    enum nxr_route_reason reason;
    size_t domain_bytes;  /* input bytes on the chosen domain */
    size_t counted_bytes; /* input bytes on any domain (unknown ones excluded) */
    unsigned domains;     /* distinct domains among the counted inputs */
};

/*
 * Applies the rule above to n inputs (n may be 0; a NULL ptr or 0 bytes does
 * not count) under rt's policy. Returns 0 and *out, NXR_EMIXED (single-domain
 * policy, inputs on several domains: *out still describes what the
 * most-bytes rule would have chosen) or -EINVAL (NULL rt or out, NULL inputs
 * with n > 0). Counts nothing (only calls that run are counted). Any thread;
 * one registry lookup per input.
 */
NXR_API int nxr_runtime_route(const nxr_runtime_t *rt, const struct nxr_mem_ref *inputs, size_t n,
                              struct nxr_route *out);

#ifdef __cplusplus
}
#endif

#endif /* NXR_ROUTE_H */
