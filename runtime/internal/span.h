/*
 * Spans (runtime/span.c): a span's own layout and its loops, and the limit
 * nxr_run_across (runtime/group.c) shares. Both run their work through the
 * executor's nxr__across_run (executor/internal/permits.h: one permit for
 * the union of the domains' CPU sets, each domain's part on its executor).
 */
#ifndef NXR_INTERNAL_SPAN_H
#define NXR_INTERNAL_SPAN_H

#include <stddef.h>

#include "executor/internal/permits.h"
#include "runtime/internal/runtime.h"

#define NXR__SPAN_MAX 64 /* domains in one span or group */

/* A span's own state (a context over several domains): the member domains
 * in the order the caller listed them, their budgets' prefix sums (the
 * shares), one plain context per member (for the kernels its bodies call in
 * place) and the permit request for the union, prepared once. */
struct nxr__span {
    size_t n;
    struct nxr_domain *doms[NXR__SPAN_MAX];
    unsigned prefix[NXR__SPAN_MAX + 1]; /* prefix[i]: budgets of members < i */
    nxr_ctx_t *member[NXR__SPAN_MAX];
    struct nxr__union_permit permit; /* executor/internal/permits.h */
};

/*
 * Splits `units` into n consecutive shares proportional to `prefix` (prefix
 * sums of the weights, prefix[n] > 0): share i is [bounds[i], bounds[i+1]),
 * bounds[0] = 0, bounds[n] = units, each floor(units * prefix[i] /
 * prefix[n]) computed without overflow. Pure; the same answer for the same
 * input, so a loop and a shard made from one split agree row for row.
 */
void nxr__span_split(size_t units, const unsigned *prefix, size_t n, size_t *bounds);

/* The member index of the domain whose exec runs the calling thread's
 * enclosing body, or -1 when that domain is not in the span. */
int nxr__span_member_of_body(const struct nxr__span *s);

/* A span's loop (runtime/span.c), for runtime/ctx_work.c: the contract of
 * nxr_parallel_for_opts over the members (and so, as its loop runner, of
 * nxr_parallel_reduce); a refusal's reason goes to why ("" when the status
 * explains itself). */
int nxr__span_parallel_for(nxr_ctx_t *ctx, size_t begin, size_t end,
                           const struct nxr_for_opts *opts, nxr_for_fn fn, void *arg, char *why,
                           size_t whysz);

/* The span's loop over units [0, bounds[n]) with member i taking exactly
 * [bounds[i], bounds[i+1]), split over its team in contiguous ranges (one fn
 * call per participant). Inside a body, as a span's loop: in place on a
 * member's body, else NXR_EREENTRANT with why. */
int nxr__span_for_parts(nxr_ctx_t *ctx, const size_t *bounds, nxr_for_fn fn, void *arg, char *why,
                        size_t whysz);

/* Frees a span's state (its member contexts, its request). NULL: no-op. */
void nxr__span_free(struct nxr__span *s);

#endif /* NXR_INTERNAL_SPAN_H */
