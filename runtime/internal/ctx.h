/*
 * The context object: a runtime plus one of its domains (or, for a placing
 * context, a runtime whose kernel calls each choose their domain), the
 * one-driving-thread rule (runtime/nxr_ctx.h) and the context's step
 * memory. Owned by the runtime package; the executor below sees
 * only the domain's struct nxr__exec.
 */
#ifndef NXR_INTERNAL_CTX_H
#define NXR_INTERNAL_CTX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/internal/last_error.h"
#include "executor/internal/exec.h"
#include "runtime/nxr.h"

/* Step memory on one domain (nxr_ctx_alloc*): a scope created at first use. */
struct nxr__ctx_scope {
    const struct nxr_domain *domain;
    nxr_scope_t *scope;
};

struct nxr_ctx {
    unsigned magic; /* NXR__HANDLE_LIVE until destroyed (base/internal/sys.h) */
    /* The fork generation it was made in: inherited through fork, every call
     * is NXR_EFORKED without a look at rt (which the child may have freed). */
    unsigned long fork_gen;
    /* NULL once orphaned: the runtime was destroyed while the context was
     * open (reported then); every later call is NXR_EBROKEN, destroy frees. */
    nxr_runtime_t *rt;
    /* The context's domain (the runtime's; borrowed). A routing context has
     * the runtime's default domain here, for its loops, tasks and memory. */
    struct nxr_domain *domain;
    struct nxr__exec *exec; /* &domain->exec */
    bool placing;           /* NXR_DOMAIN_AUTO: kernel calls place themselves */
    /* A member of a span (runtime/span.c): the span's, not the caller's,
     * so not counted among the contexts its caller has open. */
    bool member;
    /* A span over several domains (runtime/span.c), owned; NULL for a
     * context on one domain (a one-domain span is such a context). domain
     * is then the span's first member, for its memory and tasks. */
    struct nxr__span *span;
    /* The runtime's list of open contexts (under rt->ctx_lock). */
    struct nxr_ctx *prev, *next;
    /* The driving thread (checked builds): a token of the thread inside a
     * call on this context (0: none) and how deeply it is inside (a kernel
     * that fans out through the context's loops enters twice). depth is
     * written by the driver only. */
    atomic_uintptr_t driver;
    unsigned driver_depth;
    /* Driver-only state (the thread rule makes it single-threaded). */
    struct nxr__ctx_scope *scopes; /* step memory, one scope per domain used */
    size_t nscopes;
    struct nxr_route last_place; /* routing contexts: the last kernel call's */
    bool placed;                 /* last_place is set */
};

/*
 * One call on a context, opened and closed by the one pair every context
 * entry point uses (loops, tasks, kernels, steps, span kernels, shards,
 * binding, step memory):
 *   open:  the handle check, the fork and orphan checks (NXR_EFORKED, then
 *          NXR_EBROKEN once the runtime is gone) and in checked builds the
 *          one-driving-thread rule (a violation aborts naming the context);
 *   close: the failure's detail recorded (nxr__ctx_fail on the domain the
 *          call ran on, with `why` when the caller wrote one) and the
 *          driving ended.
 * A call from inside a body (a worker or a participant running some
 * operation) is not a second driver: it runs in place or is refused by the
 * nesting rules. The public function still begins with nxr__call_begin()
 * and checks ctx for NULL itself (the error channel's rule).
 */
struct nxr__ctx_call {
    nxr_ctx_t *ctx;
    const char *name; /* the public call, for the detail */
    bool entered;     /* the driving to end at close (checked builds) */
    /* Why the call failed when the status alone does not say: written by
     * the call's own checks; "" leaves the status's meaning to close. */
    char why[NXR__LAST_ERROR_BYTES];
};

/* Opens call `name` on ctx (not NULL). 0; or the status, its detail
 * recorded and the call already closed (the caller returns the status). */
int nxr__ctx_call_open(struct nxr__ctx_call *c, nxr_ctx_t *ctx, const char *name);

/* Closes c: records rc's detail on domain d (c->why when set; nothing for
 * 0), ends the driving. Returns rc. */
int nxr__ctx_call_close(struct nxr__ctx_call *c, const struct nxr_domain *d, int rc);

/* nxr__ctx_call_close with a formatted reason (written to c->why). */
int nxr__ctx_call_closef(struct nxr__ctx_call *c, const struct nxr_domain *d, int rc,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * Records the detail of a failed call: "<call>: <why>" when why is not
 * NULL, else "<call>: " and what the status means in this context (the
 * domain, the nesting, the admission). Returns rc. The detail goes to the
 * calling thread's slot (nxr_last_error): the driver's, or inside a body
 * the participant's own, since several participants of one operation may
 * fail at once.
 */
int nxr__ctx_fail(nxr_ctx_t *ctx, const struct nxr_domain *d, const char *call, int rc,
                  const char *why);

/* nxr__ctx_fail with a formatted reason. */
int nxr__ctx_failf(nxr_ctx_t *ctx, const struct nxr_domain *d, const char *call, int rc,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* nxr_ctx_create for a span's member context (member set: the span is the
 * one context its caller opened). */
int nxr__ctx_create_member(nxr_runtime_t *rt, int domain_id, nxr_ctx_t **out);

/* The context's step memory on domain d, created at first use: 0 and *out,
 * -ENOMEM. Driver only. */
int nxr__ctx_scope(nxr_ctx_t *ctx, struct nxr_domain *d, nxr_scope_t **out);

/* Unlinks and orphans every open context of rt (runtime destroy), freeing
 * their step memory first (its buffers belong to pools about to go).
 * Returns how many there were and writes per-domain counts into `report`. */
size_t nxr__ctx_orphan_all(nxr_runtime_t *rt, char *report, size_t size);

#endif /* NXR_INTERNAL_CTX_H */
