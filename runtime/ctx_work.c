/*
 * Loops and tasks through a context: the public calls of runtime/nxr_ctx.h.
 * Each checks the context and keeps the thread rule (nxr__ctx_enter), then
 * hands the work to the domain's executor (executor/), which applies the
 * placement and nesting rules.
 */
#include <errno.h>

#include "runtime/internal/ctx.h"

int nxr_parallel_for_opts(nxr_ctx_t *ctx, size_t begin, size_t end, const struct nxr_for_opts *opts,
                          nxr_for_fn fn, void *arg)
{
    if (ctx == NULL)
        return -EINVAL;
    bool entered = nxr__ctx_enter(ctx);
    int rc = nxr__exec_parallel_for(ctx->exec, begin, end, opts, fn, arg);
    nxr__ctx_leave(ctx, entered);
    return rc;
}

int nxr_parallel_for(nxr_ctx_t *ctx, size_t begin, size_t end, size_t grain, nxr_for_fn fn,
                     void *arg)
{
    struct nxr_for_opts opts;
    nxr_for_opts_init(&opts);
    opts.grain = grain;
    return nxr_parallel_for_opts(ctx, begin, end, &opts, fn, arg);
}

int nxr_parallel_reduce(nxr_ctx_t *ctx, size_t begin, size_t end, size_t grain, size_t elem_size,
                        const void *identity,
                        void (*map)(void *arg, size_t b, size_t e, void *partial),
                        void (*combine)(void *arg, void *result, const void *partial), void *arg,
                        void *result)
{
    if (ctx == NULL)
        return -EINVAL;
    bool entered = nxr__ctx_enter(ctx);
    int rc = nxr__exec_parallel_reduce(ctx->exec, begin, end, grain, elem_size, identity, map,
                                       combine, arg, result);
    nxr__ctx_leave(ctx, entered);
    return rc;
}

int nxr_run(nxr_ctx_t *ctx, enum nxr_mode mode, size_t count, nxr_task_fn fn, void *arg)
{
    if (ctx == NULL)
        return -EINVAL;
    bool entered = nxr__ctx_enter(ctx);
    int rc = nxr__exec_run(ctx->exec, mode, count, fn, arg);
    nxr__ctx_leave(ctx, entered);
    return rc;
}

int nxr_submit(nxr_ctx_t *ctx, size_t count, nxr_task_fn fn, void *arg, nxr_job_t **out)
{
    if (out != NULL)
        *out = NULL;
    if (ctx == NULL)
        return -EINVAL;
    bool entered = nxr__ctx_enter(ctx);
    int rc = nxr__exec_submit(ctx->exec, count, fn, arg, out);
    nxr__ctx_leave(ctx, entered);
    return rc;
}
