/*
 * A second nxr process for nxr_top_test.sh: creates a runtime (the
 * environment's settings: NXR_PEERS, XDG_RUNTIME_DIR), prints "ready PID"
 * once it is registered, then obeys one command per line of stdin:
 *   "busy": runs loops and tasks on its first domain until the next line
 *           arrives (so that it answers a reader's request: its counters
 *           move);
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
    while (fgets(line, sizeof(line), stdin) != NULL) {
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
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    return 0;
}
