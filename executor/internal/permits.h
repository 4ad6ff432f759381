/*
 * The permits nxr takes beyond one domain's own (executor/admission.c owns
 * that one): the permit for the union of several domains' CPU sets (a group,
 * nxr_run_across, or a span) and the process-wide exclusive permit (a
 * provider whose threads cannot be confined to one domain). With admission,
 * these are every arbiter call outside domains/: runtime/ asks here.
 *
 * Every acquire is a wait bounded by the holders of overlapping permits
 * (their operations end; the arbiter serves overlapping waiters in arrival
 * order) and reported by the stall reporter (executor/internal/stall.h) once
 * past the threshold, naming the domain it waits for, then waits on in the
 * same queue position. No nxr lock may be held; the caller is outside any
 * body (a body's operation may hold what the wait needs).
 */
#ifndef NXR_EXECUTOR_INTERNAL_PERMITS_H
#define NXR_EXECUTOR_INTERNAL_PERMITS_H

#include <stddef.h>

#include "domains/internal/arbiter.h"
#include "executor/internal/exec.h"

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

/* Blocks until the union is granted; a stall is reported as "<what>" on
 * `first` (the first member's exec). 0, or what the arbiter returns. */
int nxr__union_permit_acquire(struct nxr__union_permit *u, const struct nxr__exec *first,
                              const char *what);
void nxr__union_permit_release(struct nxr__union_permit *u);

/* Blocks until the process-wide exclusive permit of arbiter a is granted
 * (every other permit, of every runtime in the process, released first); a
 * stall is reported as "<what>" on `exec` (the domain the call is for).
 * 0, or what the arbiter returns. */
int nxr__exclusive_permit_acquire(struct nxr__arbiter *a, const struct nxr__exec *exec,
                                  const char *what);
void nxr__exclusive_permit_release(struct nxr__arbiter *a);

#endif /* NXR_EXECUTOR_INTERNAL_PERMITS_H */
