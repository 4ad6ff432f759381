/*
 * A context's step memory (nxr_ctx_alloc, nxr_ctx_alloc_for) and its last
 * placement: the memory side of "outputs of a context's operations are
 * allocated on its domain".
 */
#include <errno.h>

#include "base/internal/last_error.h"
#include "base/internal/sys.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/route.h"
#include "runtime/internal/runtime.h"

/* Allocates on d for the driver of call c (the reason of a refusal to
 * c->why). */
static int alloc_on(struct nxr__ctx_call *c, struct nxr_domain *d, size_t size, void **out)
{
    if (nxr__tls.depth > 0)
        return nxr__ctx_call_closef(
            c, d, NXR_EREENTRANT,
            "step memory is the driver's; inside a body use a scope of its own");
    nxr_scope_t *s;
    int rc = nxr__ctx_scope(c->ctx, d, &s);
    if (rc == 0)
        rc = nxr_scope_alloc(s, size, out);
    return nxr__ctx_call_close(c, d, rc);
}

int nxr_ctx_alloc(nxr_ctx_t *ctx, size_t size, void **out)
{
    static const char call[] = "nxr_ctx_alloc";
    nxr__call_begin();
    if (out == NULL || ctx == NULL) {
        if (out != NULL)
            *out = NULL;
        return nxr__fail(-EINVAL, call, "%s is NULL", out == NULL ? "out" : "ctx");
    }
    *out = NULL;
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, call);
    if (rc != 0)
        return rc;
    if (size == 0)
        return nxr__ctx_call_closef(&c, ctx->domain, -EINVAL, "size is 0");
    return alloc_on(&c, ctx->domain, size, out);
}

int nxr_ctx_alloc_for(nxr_ctx_t *ctx, const struct nxr_mem_ref *inputs, size_t n, size_t size,
                      void **out)
{
    static const char call[] = "nxr_ctx_alloc_for";
    nxr__call_begin();
    if (out == NULL || ctx == NULL) {
        if (out != NULL)
            *out = NULL;
        return nxr__fail(-EINVAL, call, "%s is NULL", out == NULL ? "out" : "ctx");
    }
    *out = NULL;
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, call);
    if (rc != 0)
        return rc;
    if (size == 0 || (inputs == NULL && n > 0))
        return nxr__ctx_call_closef(&c, ctx->domain, -EINVAL, "%s",
                                    size == 0 ? "size is 0" : "inputs is NULL with n > 0");
    struct nxr_domain *d = ctx->domain;
    struct nxr_route p;
    if (ctx->placing)
        rc = nxr__place(ctx->rt, inputs, n, &p, &d);
    if (rc == NXR_EMIXED)
        return nxr__ctx_call_closef(
            &c, d, rc, "the inputs lie on %u domains (single-domain policy)", p.domains);
    if (rc != 0)
        return nxr__ctx_call_close(&c, d, rc);
    return alloc_on(&c, d, size, out);
}

int nxr_ctx_last_route(const nxr_ctx_t *ctx, struct nxr_route *out)
{
    nxr__call_begin();
    if (ctx == NULL || out == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", ctx == NULL ? "ctx" : "out");
    NXR__HANDLE_CHECK(ctx, "context");
    if (nxr__forked_since(ctx->fork_gen))
        return nxr__fail(NXR_EFORKED, __func__,
                         "the context was created before this process forked");
    if (ctx->rt == NULL)
        return nxr__fail(NXR_EBROKEN, __func__,
                         "the context's runtime was destroyed before the context");
    if (!ctx->placing) {
        *out = (struct nxr_route){.domain_id = ctx->domain->spec.id,
                                  .reason = NXR_ROUTE_REASON_EXPLICIT};
        return 0;
    }
    if (!ctx->placed)
        return nxr__fail(-ENOENT, __func__, "the routing context has made no kernel call yet");
    *out = ctx->last_place;
    return 0;
}
