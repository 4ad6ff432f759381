/*
 * The context object: a runtime plus one of its domains, and the one-
 * driving-thread rule (runtime/nxr_ctx.h). Owned by the runtime package;
 * the executor below sees only the domain's struct nxr__exec.
 */
#ifndef NXR_INTERNAL_CTX_H
#define NXR_INTERNAL_CTX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "executor/internal/exec.h"
#include "runtime/nxr.h"

struct nxr_ctx {
    unsigned magic; /* NXR__HANDLE_LIVE until destroyed (base/internal/sys.h) */
    nxr_runtime_t *rt;
    struct nxr_domain *domain; /* the runtime's; the context only borrows it */
    struct nxr__exec *exec;    /* &domain->exec */
    /* The driving thread (checked builds): a token of the thread inside a
     * call on this context (0: none) and how deeply it is inside (a kernel
     * that fans out through the context's loops enters twice). depth is
     * written by the driver only. */
    atomic_uintptr_t driver;
    unsigned driver_depth;
};

/*
 * Every public call on a context brackets its work with these: the handle
 * check, and in checked builds the one-driving-thread rule. A call from
 * inside a body (a worker or a participant running some operation) is not a
 * second driver: it runs in place or is refused by the nesting rules. enter
 * returns
 * whether leave has something to undo. A violation aborts with a message
 * naming the context.
 */
bool nxr__ctx_enter(nxr_ctx_t *ctx);
void nxr__ctx_leave(nxr_ctx_t *ctx, bool entered);

#endif /* NXR_INTERNAL_CTX_H */
