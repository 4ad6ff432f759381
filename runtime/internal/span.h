/*
 * Work over several domains under one permit for the union of their CPU
 * sets: the mechanism nxr_run_across (runtime/group.c) and spans
 * (runtime/span.c) share, and the span's own layout.
 *
 * The union permit is asked for once (granted whole, or queued holding
 * nothing: no lock-order deadlock between overlapping multi-domain
 * requests), then each domain's executor gets its part straight through
 * `submit` (its own permit would overlap the union already held), and the
 * caller waits until every part finished.
 */
#ifndef NXR_INTERNAL_SPAN_H
#define NXR_INTERNAL_SPAN_H

#include <stdatomic.h>
#include <stddef.h>

#include "executor/internal/permits.h"
#include "runtime/internal/runtime.h"

#define NXR__SPAN_MAX 64 /* domains in one span or group */

/* One domain's part of a multi-domain operation: `count` items of fn on
 * its executor (count 0: the domain sits this operation out). */
struct nxr__across_part {
    struct nxr_domain *domain;
    nxr_item_fn fn;
    void *arg;
    size_t count;
};

/*
 * Runs every part on its domain's executor at once and returns when all
 * finished. The caller holds the union permit (nxr__union_permit_acquire
 * over the parts' sets) and is outside any body. When a submit
 * fails, the parts already started still run to the end (their items are
 * not recalled); `*stop` (may be NULL) is set to the error first so that
 * items which check it start nothing new, and the error is returned.
 * The wait is bounded by the items themselves: each part's done callback
 * counts down once, after its last item, on whatever thread ran it.
 */
int nxr__across_run(struct nxr__across_part *parts, size_t n, atomic_int *stop);

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

/* A span's loops (runtime/span.c), for runtime/ctx_work.c: the contracts
 * of nxr_parallel_for_opts and nxr_parallel_reduce over the members; a
 * refusal's reason goes to why ("" when the status explains itself). */
int nxr__span_parallel_for(nxr_ctx_t *ctx, size_t begin, size_t end,
                           const struct nxr_for_opts *opts, nxr_for_fn fn, void *arg, char *why,
                           size_t whysz);
int nxr__span_parallel_reduce(nxr_ctx_t *ctx, size_t begin, size_t end, size_t grain,
                              size_t elem_size, const void *identity,
                              void (*map)(void *arg, size_t b, size_t e, void *partial),
                              void (*combine)(void *arg, void *result, const void *partial),
                              void *arg, void *result, char *why, size_t whysz);

/* The span's loop over units [0, bounds[n]) with member i taking exactly
 * [bounds[i], bounds[i+1]), split over its team in contiguous ranges (one fn
 * call per participant). Driver only, outside any body. */
int nxr__span_for_parts(nxr_ctx_t *ctx, const size_t *bounds, nxr_for_fn fn, void *arg);

/* Frees a span's state (its member contexts, its request). NULL: no-op. */
void nxr__span_free(struct nxr__span *s);

#endif /* NXR_INTERNAL_SPAN_H */
