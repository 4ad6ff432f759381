/*
 * Routing by the inputs' bytes, internals (runtime/nxr_route.h has the rule): the
 * resolver the routing contexts and nxr_runtime_route share, and its
 * counters.
 */
#ifndef NXR_INTERNAL_ROUTE_H
#define NXR_INTERNAL_ROUTE_H

#include "runtime/nxr.h"

struct nxr_domain;

/*
 * The rule over n inputs: 0 with *out and *domain; NXR_EMIXED (single-domain
 * policy; *out and *domain hold what most-bytes would choose); -ENOMEM (more
 * than a handful of inputs and no memory for their ids); NXR_ENODOMAIN
 * never in practice (the registry names only rt's domains).
 */
int nxr__place(const nxr_runtime_t *rt, const struct nxr_mem_ref *inputs, size_t n,
               struct nxr_route *out, struct nxr_domain **domain);

/* Counts a routing context's call: placed on d for p->reason (rc 0), or
 * refused (rc NXR_EMIXED). Other statuses count nothing. */
void nxr__place_count(nxr_runtime_t *rt, struct nxr_domain *d, const struct nxr_route *p, int rc);

#endif /* NXR_INTERNAL_ROUTE_H */
