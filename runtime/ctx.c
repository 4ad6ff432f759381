/*
 * Contexts: a runtime plus one domain, the handle work is run through, and
 * the one-driving-thread rule (checked builds).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/internal/sys.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"

int nxr_ctx_create(nxr_ctx_t **out, nxr_runtime_t *rt, int domain_id)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (rt == NULL)
        return -EINVAL;
    NXR__HANDLE_CHECK(rt, "runtime");
    const nxr_domain_t *d;
    int rc = nxr_runtime_domain(rt, domain_id, &d);
    if (rc != 0)
        return rc;
    nxr_ctx_t *ctx = nxr__calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return -ENOMEM;
    ctx->magic = NXR__HANDLE_LIVE;
    ctx->rt = rt;
    ctx->domain = (struct nxr_domain *)d; /* the runtime's; immutable once published */
    ctx->exec = &ctx->domain->exec;
    atomic_init(&ctx->driver, 0);
    *out = ctx;
    return 0;
}

void nxr_ctx_destroy(nxr_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    NXR__HANDLE_CHECK(ctx, "context");
    nxr__handle_retire(&ctx->magic, ctx);
}

const nxr_domain_t *nxr_ctx_domain(const nxr_ctx_t *ctx)
{
    NXR__HANDLE_CHECK(ctx, "context");
    return ctx->domain;
}

unsigned nxr_ctx_budget(const nxr_ctx_t *ctx)
{
    NXR__HANDLE_CHECK(ctx, "context");
    return ctx->exec->budget;
}

#if defined(NXR_CHECKED) && NXR_CHECKED
/* Its address is the calling thread's token: unique among live threads. */
static _Thread_local char driver_token;

static void __attribute__((noreturn)) two_drivers(const nxr_ctx_t *ctx)
{
    fprintf(stderr,
            "nxr: context %p (domain %d) is driven by two threads at once: a context is "
            "driven by one thread at a time; open one context per thread (runtime/nxr_ctx.h)\n",
            (const void *)ctx, ctx->exec->domain_id);
    abort();
}

bool nxr__ctx_enter(nxr_ctx_t *ctx)
{
    NXR__HANDLE_CHECK(ctx, "context");
    /* A call from inside a body belongs to the enclosing operation: it runs
     * in place or is refused (the nesting table), never as a second driver. */
    if (nxr__tls.depth > 0)
        return false;
    uintptr_t me = (uintptr_t)&driver_token, none = 0;
    /* Acquire: pairs with the release in leave, so the previous driver's
     * depth write is visible before this thread counts its own. */
    if (!atomic_compare_exchange_strong_explicit(&ctx->driver, &none, me, memory_order_acquire,
                                                 memory_order_relaxed) &&
        none != me)
        two_drivers(ctx);
    ctx->driver_depth++;
    return true;
}

void nxr__ctx_leave(nxr_ctx_t *ctx, bool entered)
{
    if (entered && --ctx->driver_depth == 0)
        atomic_store_explicit(&ctx->driver, 0, memory_order_release);
}
#else
bool nxr__ctx_enter(nxr_ctx_t *ctx)
{
    (void)ctx;
    return false;
}

void nxr__ctx_leave(nxr_ctx_t *ctx, bool entered)
{
    (void)ctx;
    (void)entered;
}
#endif
