/*
 * Work under a permit wider than one domain's own (executor/admission.c owns
 * that one), and the choice of permit for a call on one domain. The
 * executor decides here, so runtime/ never takes a permit or calls an
 * executor operation itself:
 *  - across: work over several domains at once under ONE permit for the
 *    union of their CPU sets (nxr_run_across, a span's loops and kernels):
 *    the permit is taken, every domain's part handed to its executor, the
 *    caller waits for all of them, the permit is given back;
 *  - a call on one domain under the permit the caller names (one thread of
 *    the domain, the domain's permit around the call, or the process-wide
 *    exclusive permit: a provider whose threads cannot be confined).
 *
 * Every permit wait is bounded by the holders of overlapping permits (their
 * operations end; the arbiter serves overlapping waiters in arrival order)
 * and reported by the stall reporter (executor/internal/stall.h) once past
 * the threshold, naming the domain it waits for, then waits on in the same
 * queue position. No nxr lock may be held; the caller is outside any body
 * (a body's operation may hold what the wait needs).
 */
#ifndef NXR_EXECUTOR_INTERNAL_PERMITS_H
#define NXR_EXECUTOR_INTERNAL_PERMITS_H

#include <stdatomic.h>
#include <stddef.h>

#include "domains/internal/arbiter.h"
#include "executor/internal/exec.h"

/* ---- across several domains ----------------------------------------------------- */

/* One request over the union of several domains' sets, prepared once
 * (a span keeps it for its life) and acquired whole or not at all, so two
 * groups over the same domains in different orders cannot deadlock. */
struct nxr__union_permit {
    struct nxr__arbiter *arbiter;
    struct nxr__arbiter_request request;
};

/* Prepares u for the union of sets[0..n) on arbiter a; errors as
 * nxr__arbiter_request_init_union (then u holds nothing to finalise). */
int nxr__union_permit_init(struct nxr__union_permit *u, struct nxr__arbiter *a,
                           const hwloc_const_bitmap_t *sets, size_t n);
/* Frees u's request; u must not be held. A zeroed u is a no-op. */
void nxr__union_permit_fini(struct nxr__union_permit *u);

/* One domain's part of a multi-domain operation: `count` items of fn on
 * exec's executor (count 0: the domain sits this operation out). */
struct nxr__across_part {
    struct nxr__exec *exec;
    nxr_item_fn fn;
    void *arg;
    size_t count;
};

/*
 * Runs every part on its domain's executor at once, under the union permit
 * u (prepared over the parts' sets, not held), and returns when all
 * finished and u is released. The caller is outside any body. Waiting for
 * u is reported as "<what>" on parts[0].exec (the first member's domain).
 * Straight to each executor's submit: a domain's own permit would overlap
 * the union already held; concurrent operations on those domains wait for
 * their permits as usual.
 *
 * Returns 0, what the arbiter returns (nothing ran), or the first submit's
 * failure: the parts already started still run to the end (their items are
 * not recalled); `*stop` (may be NULL) is set to the error first so that
 * items which check it start nothing new. The wait is bounded by the items
 * themselves: each part's done callback counts down once, after its last
 * item, on whatever thread ran it.
 */
int nxr__across_run(struct nxr__union_permit *u, struct nxr__across_part *parts, size_t n,
                    atomic_int *stop, const char *what);

/* ---- one call on one domain, under the permit it needs ------------------------------ */

enum nxr__call_permit {
    /* One thread of the domain (nxr__exec_call): the caller when it is on
     * the domain or inside a body of it, else a worker under the domain's
     * permit. */
    NXR__PERMIT_ONE_THREAD,
    /* The domain's permit held around the call (threads of the callee's
     * own, confined because the domain is everything nxr may use); the call
     * is made on the domain (the caller, or a worker when it is off it). */
    NXR__PERMIT_DOMAIN,
    /* The process-wide exclusive permit of `arbiter` (every other permit,
     * of every runtime in the process, released first): nothing else runs.
     * The call is made on the domain's CPUs without its own permit. The
     * caller is outside any body (NXR_EREENTRANT otherwise: it could wait on
     * its own operation). Waiting is reported as "<what>" on exec. */
    NXR__PERMIT_EXCLUSIVE,
};

/*
 * fn(arg) once on exec's domain, under `permit` (arbiter and what are for
 * NXR__PERMIT_EXCLUSIVE only; NULL otherwise). Returns fn's status,
 * NXR_EREENTRANT (a body of another domain, or the exclusive permit from
 * inside a body), or an admission, arbiter or executor error (fn did not
 * run). Blocks until fn returned.
 */
int nxr__exec_call_under(struct nxr__exec *exec, enum nxr__call_permit permit,
                         struct nxr__arbiter *arbiter, const char *what, int (*fn)(void *arg),
                         void *arg);

#endif /* NXR_EXECUTOR_INTERNAL_PERMITS_H */
