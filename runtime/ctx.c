/*
 * Contexts: a runtime plus one domain, the handle work is run through.
 */
#include <errno.h>
#include <stdlib.h>

#include "runtime/internal/runtime.h"
#include "base/internal/sys.h"

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
    /* The domain is the runtime's; the context only borrows its exec. */
    ctx->exec = &((struct nxr_domain *)d)->exec;
    ctx->domain = d;
    ctx->runtime = rt;
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
