/*
 * Loops and tasks through a context: the public calls of runtime/nxr_ctx.h.
 * Each checks the context and keeps the thread rule (nxr__ctx_enter), hands
 * the work to the domain's executor (executor/), which applies the
 * placement and nesting rules, and records why a call failed
 * (nxr_last_error). A span's loops go to runtime/span.c instead.
 */
#include <errno.h>

#include "base/internal/last_error.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/span.h"

/* nxr_parallel_for_opts, reporting as `call`. */
static int parallel_for(const char *call, nxr_ctx_t *ctx, size_t begin, size_t end,
                        const struct nxr_for_opts *opts, nxr_for_fn fn, void *arg)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    bool entered;
    int rc = nxr__ctx_enter(ctx, &entered);
    if (rc != 0)
        return nxr__ctx_fail(ctx, NULL, call, rc, NULL);
    const char *why = nxr__for_args_bad(begin, end, opts, fn);
    char span_why[NXR__LAST_ERROR_BYTES] = "";
    if (why != NULL)
        rc = -EINVAL;
    else if (ctx->span != NULL)
        rc = nxr__span_parallel_for(ctx, begin, end, opts, fn, arg, span_why, sizeof(span_why));
    else
        rc = nxr__exec_parallel_for(ctx->exec, begin, end, opts, fn, arg);
    nxr__ctx_fail(ctx, ctx->domain, call, rc, why != NULL ? why : span_why[0] ? span_why : NULL);
    nxr__ctx_leave(ctx, entered);
    return rc;
}

int nxr_parallel_for_opts(nxr_ctx_t *ctx, size_t begin, size_t end, const struct nxr_for_opts *opts,
                          nxr_for_fn fn, void *arg)
{
    return parallel_for(__func__, ctx, begin, end, opts, fn, arg);
}

int nxr_parallel_for(nxr_ctx_t *ctx, size_t begin, size_t end, size_t grain, nxr_for_fn fn,
                     void *arg)
{
    struct nxr_for_opts opts;
    nxr_for_opts_init(&opts);
    opts.grain = grain;
    return parallel_for(__func__, ctx, begin, end, &opts, fn, arg);
}

int nxr_parallel_reduce(nxr_ctx_t *ctx, size_t begin, size_t end, size_t grain, size_t elem_size,
                        const void *identity,
                        void (*map)(void *arg, size_t b, size_t e, void *partial),
                        void (*combine)(void *arg, void *result, const void *partial), void *arg,
                        void *result)
{
    static const char call[] = "nxr_parallel_reduce";
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    bool entered;
    int rc = nxr__ctx_enter(ctx, &entered);
    if (rc != 0)
        return nxr__ctx_fail(ctx, NULL, call, rc, NULL);
    const char *why = nxr__reduce_args_bad(begin, end, elem_size, identity, (const void *)map,
                                           (const void *)combine, result);
    char span_why[NXR__LAST_ERROR_BYTES] = "";
    if (why != NULL)
        rc = -EINVAL;
    else if (ctx->span != NULL)
        rc = nxr__span_parallel_reduce(ctx, begin, end, grain, elem_size, identity, map, combine,
                                       arg, result, span_why, sizeof(span_why));
    else
        rc = nxr__exec_parallel_reduce(ctx->exec, begin, end, grain, elem_size, identity, map,
                                       combine, arg, result);
    nxr__ctx_fail(ctx, ctx->domain, call, rc, why != NULL ? why : span_why[0] ? span_why : NULL);
    nxr__ctx_leave(ctx, entered);
    return rc;
}

int nxr_run(nxr_ctx_t *ctx, enum nxr_mode mode, size_t count, nxr_task_fn fn, void *arg)
{
    static const char call[] = "nxr_run";
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    bool entered;
    int rc = nxr__ctx_enter(ctx, &entered);
    if (rc != 0)
        return nxr__ctx_fail(ctx, NULL, call, rc, NULL);
    if (fn == NULL) {
        rc = nxr__ctx_fail(ctx, ctx->domain, call, -EINVAL, "fn is NULL");
    } else if (mode != NXR_MODE_SEQUENTIAL && mode != NXR_MODE_INNER && mode != NXR_MODE_OUTER) {
        rc = nxr__ctx_failf(ctx, ctx->domain, call, -EINVAL, "mode %d is not a mode", (int)mode);
    } else {
        rc = nxr__exec_run(ctx->exec, mode, count, fn, arg);
        /* nxr's own refusals explain themselves; a task's own error is
         * named as such (every failure leaves a detail). */
        if (rc == NXR_EREENTRANT || rc == NXR_EADMISSION || rc == -EBUSY)
            nxr__ctx_fail(ctx, ctx->domain, call, rc, NULL);
        else if (rc != 0)
            nxr__ctx_failf(ctx, ctx->domain, call, rc, "a task returned %d (%s)", rc,
                           nxr_strerror(rc));
    }
    nxr__ctx_leave(ctx, entered);
    return rc;
}

int nxr_submit(nxr_ctx_t *ctx, size_t count, nxr_task_fn fn, void *arg, nxr_job_t **out)
{
    static const char call[] = "nxr_submit";
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    bool entered;
    int rc = nxr__ctx_enter(ctx, &entered);
    if (rc != 0)
        return nxr__ctx_fail(ctx, NULL, call, rc, NULL);
    rc = fn == NULL ? -EINVAL : nxr__exec_submit(ctx->exec, count, fn, arg, out);
    nxr__ctx_fail(ctx, ctx->domain, call, rc, fn == NULL ? "fn is NULL" : NULL);
    nxr__ctx_leave(ctx, entered);
    return rc;
}
