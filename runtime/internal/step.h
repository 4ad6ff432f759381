/*
 * Steps, internals (runtime/step.c): a prepared run of a step, so that a
 * test can run it as a region of a team of its choosing (more participants
 * than the machine has CPUs, a worker held before it claims) and compare
 * the bits with nxr_step_run's.
 */
#ifndef NXR_RUNTIME_INTERNAL_STEP_H
#define NXR_RUNTIME_INTERNAL_STEP_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/nxr_ctx.h"
#include "runtime/nxr_step.h"

struct nxr__step_run;

/* Checks the step's operations on ctx's domain and prepares one run for
 * `participants` (>= 1) slots; in_place: the caller is a body of the
 * domain and runs the step alone. 0 and *out; -EINVAL/NXR_ENODOMAIN with
 * why (an operation's arguments), -ENOMEM; nothing held on failure. */
int nxr__step_run_prepare(nxr_ctx_t *ctx, const nxr_step_t *step, unsigned participants,
                          bool in_place, struct nxr__step_run **out, char *why, size_t whysz);

/* The region body (nxr_region_fn) for arg = a prepared run: install it
 * with exactly the participants it was prepared for. */
void nxr__step_region(void *arg, unsigned participant, unsigned count);

/* The first failure of the run's operations (0 if none), once it ran. */
int nxr__step_run_status(const struct nxr__step_run *r);

/* Releases the run (its scratch back to the pool). NULL is a no-op. */
void nxr__step_run_free(struct nxr__step_run *r);

#endif /* NXR_RUNTIME_INTERNAL_STEP_H */
