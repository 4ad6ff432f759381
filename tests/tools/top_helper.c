/*
 * A second nxr process for nxr_top_test.sh: creates a runtime (the
 * environment's settings: NXR_PEERS, XDG_RUNTIME_DIR), prints "ready PID"
 * once it is registered, then obeys one command per line of stdin:
 *   "busy": runs loops and tasks on its first domain until the next line
 *           arrives (so that it answers a reader's request: its counters
 *           move);
 *   "attach": attaches a caller-managed executor (one that runs everything
 *           on the calling thread) as domain ATTACHED_ID, after creation,
 *           and prints "attached ID";
 *   "busy-attached": runs tasks on that domain alone until the next line
 *           arrives (its operations answer the reader's request);
 *   EOF:    destroys the runtime and exits 0.
 * The test orders everything through this pipe: no sleeps.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/nxr.h"

static void body(void *arg, size_t begin, size_t end, unsigned worker)
{
    volatile double *sink = arg;
    (void)worker;
    for (size_t i = begin; i < end; i++)
        *sink += (double)i * 0.5;
}

static int task(void *arg, size_t index)
{
    volatile double *sink = arg;
    *sink += (double)index;
    return 0;
}

/* The domain a host adds after creation ("attach"). */
#define ATTACHED_ID 41

/* A host's pool reduced to the calling thread: every participant and item
 * runs in the call. */
static int inline_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    (void)self;
    for (unsigned p = 0; p < count; p++)
        fn(arg, p, count);
    return 0;
}

static int inline_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                         void *done_arg)
{
    (void)self;
    for (size_t i = 0; i < count; i++)
        fn(arg, i);
    if (done != NULL)
        done(done_arg);
    return 0;
}

static const struct nxr_executor_ops inline_ops = {
    .install = inline_install,
    .submit = inline_submit,
};

static nxr_ctx_t *attach_inline(nxr_runtime_t *rt)
{
    struct nxr_external_decl decl;
    nxr_external_decl_init(&decl);
    decl.id = ATTACHED_ID;
    decl.executor.ops = &inline_ops;
    decl.executor.workers = 1;
    nxr_ctx_t *ctx;
    if (nxr_runtime_attach(rt, &decl) != 0 || nxr_ctx_create(rt, ATTACHED_ID, &ctx) != 0) {
        fprintf(stderr, "top_helper: attach: %s\n", nxr_last_error());
        return NULL;
    }
    return ctx;
}

static bool line_waiting(void)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

int main(void)
{
    struct nxr_runtime_opts opts;
    nxr_runtime_opts_init(&opts);
    nxr_runtime_t *rt;
    int rc = nxr_runtime_create(&opts, &rt);
    if (rc != 0) {
        fprintf(stderr, "top_helper: %s: %s\n", nxr_strerror(rc), nxr_last_error());
        return 1;
    }
    nxr_ctx_t *ctx;
    rc = nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, 0)), &ctx);
    if (rc != 0) {
        fprintf(stderr, "top_helper: nxr_ctx_create: %s\n", nxr_last_error());
        return 1;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    double sink = 0;
    nxr_ctx_t *attached = NULL;
    while (fgets(line, sizeof(line), stdin) != NULL) {
        if (strcmp(line, "attach\n") == 0 && attached == NULL) {
            if ((attached = attach_inline(rt)) == NULL)
                return 1;
            printf("attached %d\n", ATTACHED_ID);
            fflush(stdout);
            continue;
        }
        if (strcmp(line, "busy-attached\n") == 0 && attached != NULL) {
            printf("busy-attached\n");
            fflush(stdout);
            while (!line_waiting())
                (void)nxr_run(attached, NXR_MODE_SEQUENTIAL, 4, task, (void *)&sink);
            continue;
        }
        if (strcmp(line, "busy\n") != 0)
            continue;
        printf("busy\n");
        fflush(stdout);
        /* A loop (a region, or the caller's alone under a one-CPU budget)
         * and tasks (counted on every path). */
        while (!line_waiting()) {
            (void)nxr_parallel_for(ctx, 0, 4096, 64, body, (void *)&sink);
            (void)nxr_run(ctx, NXR_MODE_SEQUENTIAL, 4, task, (void *)&sink);
        }
    }
    if (attached != NULL)
        nxr_ctx_destroy(attached);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    return 0;
}
