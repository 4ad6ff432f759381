/*
 * Loops and tasks through a context: the public calls of runtime/nxr_ctx.h.
 * Each opens the call (nxr__ctx_call_open: the context checks and the
 * thread rule), hands the work to the domain's executor (executor/), which
 * applies the placement and nesting rules, or for a span to its loop over
 * the members (runtime/span.c), and closes the call with why it failed
 * (nxr_last_error).
 */
#include <errno.h>
#include <stdio.h>

#include "base/internal/last_error.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/span.h"

/* A context's loop, the span-or-domain branch in one place: over a span's
 * members (its refusal's reason to c->why), else on the domain. The loop
 * runner of both the context's loops and its reductions. */
static int ctx_loop(void *self, size_t begin, size_t end, const struct nxr_for_opts *opts,
                    nxr_for_fn fn, void *arg)
{
    struct nxr__ctx_call *c = self;
    if (c->ctx->span != NULL)
        return nxr__span_parallel_for(c->ctx, begin, end, opts, fn, arg, c->why, sizeof(c->why));
    return nxr__exec_parallel_for(c->ctx->exec, begin, end, opts, fn, arg);
}

/* nxr_parallel_for_opts, reporting as `call`. */
static int parallel_for(const char *call, nxr_ctx_t *ctx, size_t begin, size_t end,
                        const struct nxr_for_opts *opts, nxr_for_fn fn, void *arg)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, call);
    if (rc != 0)
        return rc;
    const char *why = nxr__for_args_bad(begin, end, opts, fn);
    if (why != NULL)
        return nxr__ctx_call_closef(&c, ctx->domain, -EINVAL, "%s", why);
    return nxr__ctx_call_close(&c, ctx->domain, ctx_loop(&c, begin, end, opts, fn, arg));
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
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, call);
    if (rc != 0)
        return rc;
    const char *why = nxr__reduce_args_bad(begin, end, elem_size, identity, (const void *)map,
                                           (const void *)combine, result);
    if (why != NULL)
        return nxr__ctx_call_closef(&c, ctx->domain, -EINVAL, "%s", why);
    /* The same blocks whichever loop runs them: a span folds to the bits
     * of a domain (executor/internal/exec.h, nxr__reduce_blocks). */
    rc = nxr__reduce_blocks(ctx_loop, &c, begin, end, grain, elem_size, identity, map, combine, arg,
                            result);
    return nxr__ctx_call_close(&c, ctx->domain, rc);
}

int nxr_run(nxr_ctx_t *ctx, enum nxr_mode mode, size_t count, nxr_task_fn fn, void *arg)
{
    static const char call[] = "nxr_run";
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, call);
    if (rc != 0)
        return rc;
    if (fn == NULL)
        return nxr__ctx_call_closef(&c, ctx->domain, -EINVAL, "fn is NULL");
    if (mode != NXR_MODE_SEQUENTIAL && mode != NXR_MODE_INNER && mode != NXR_MODE_OUTER)
        return nxr__ctx_call_closef(&c, ctx->domain, -EINVAL, "mode %d is not a mode", (int)mode);
    rc = nxr__exec_run(ctx->exec, mode, count, fn, arg);
    /* nxr's own refusals explain themselves; a task's own error is named
     * as such (every failure leaves a detail). */
    if (rc != 0 && rc != NXR_EREENTRANT && rc != NXR_EADMISSION && rc != -EBUSY)
        snprintf(c.why, sizeof(c.why), "a task returned %d (%s)", rc, nxr_strerror(rc));
    return nxr__ctx_call_close(&c, ctx->domain, rc);
}

int nxr_submit(nxr_ctx_t *ctx, size_t count, nxr_task_fn fn, void *arg, nxr_job_t **out)
{
    static const char call[] = "nxr_submit";
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, call);
    if (rc != 0)
        return rc;
    if (fn == NULL)
        return nxr__ctx_call_closef(&c, ctx->domain, -EINVAL, "fn is NULL");
    return nxr__ctx_call_close(&c, ctx->domain, nxr__exec_submit(ctx->exec, count, fn, arg, out));
}
