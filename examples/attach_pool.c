/*
 * A service that already has a thread pool (host_pool.c, next to this file) hands it to
 * nxr as a cooperative domain on the CPUs the pool runs on, then runs an nxr
 * loop on it. Run: bazel run //examples:attach_pool  (`-- --json` also prints
 * nxr_runtime_describe's JSON with the pool attached).
 * Outside the tree:
 *   cc attach_pool.c host_pool.c pool_executor.c $(pkg-config --cflags --libs nxr) -pthread
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t, sched_getaffinity */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_executor.h"

static void square(void *arg, size_t b, size_t e, unsigned worker)
{
    double *v = arg;
    (void)worker;
    for (size_t i = b; i < e; i++)
        v[i] = (double)i * (double)i;
}

int main(int argc, char **argv)
{
    bool json = argc > 1 && strcmp(argv[1], "--json") == 0;
    cpu_set_t cpus;
    sched_getaffinity(0, sizeof(cpus), &cpus);
    struct host_pool *pool = host_pool_start(2, &cpus); /* the service's own pool */

    /* --- attaching it to nxr: the whole integration ------------------------ */
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    if (nxr_runtime_create(NULL, &rt) != 0)
        return 1;
    hwloc_bitmap_t set = hwloc_bitmap_dup(nxr_runtime_allowed_cpus(rt));
    struct nxr_external_decl decl;
    nxr_external_decl_init(&decl);
    decl.id = 100;
    decl.admission = NXR_ADMISSION_COOPERATIVE; /* arbitrated on its CPU set */
    decl.cpus = set;
    pool_executor_init(&decl.executor, pool);
    int rc = nxr_runtime_attach(rt, &decl);
    if (rc == 0)
        rc = nxr_ctx_create(rt, 100, &ctx);
    /* ---------------------------------------------------------------------- */
    if (rc != 0) {
        fprintf(stderr, "attach: %s\n", nxr_strerror(rc));
        return 1;
    }
    double v[4096];
    nxr_parallel_for(ctx, 0, 4096, 256, square, v);
    if (json) {
        char *text;
        if (nxr_runtime_describe(rt, NXR_DESCRIBE_JSON, &text) != 0)
            return 1;
        fputs(text, stdout);
        free(text);
    } else {
        printf("v[4095] = %.0f, computed on the service's own pool\n", v[4095]);
    }
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt); /* drains, then releases the pool */
    hwloc_bitmap_free(set);
    host_pool_stop(pool);
    return 0;
}
