/*
 * A host that runs nxr work on its OpenMP threads through the installed
 * adapter (<nxr/nxr_omp.h>, libnxr_omp): the OpenMP executor attached as a
 * caller-managed domain, one nxr_parallel_for over it, each index checked.
 * usage: omp_consumer VERSION. Prints "omp_consumer: ok" or FAILED lines.
 */
#include <nxr/nxr.h>
#include <nxr/nxr_omp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 10000u

static void body(void *arg, size_t begin, size_t end, unsigned worker)
{
    unsigned *visits = arg;
    (void)worker;
    for (size_t i = begin; i < end; i++)
        visits[i] += (unsigned)i % 7u + 1u;
}

int main(int argc, char **argv)
{
    if (argc != 2 || strcmp(nxr_version_string(), argv[1]) != 0) {
        fprintf(stderr, "omp_consumer: FAILED: library %s, package %s\n", nxr_version_string(),
                argc == 2 ? argv[1] : "(none)");
        return 1;
    }
    nxr_runtime_t *rt;
    int rc = nxr_runtime_create(NULL, &rt);
    if (rc != 0) {
        fprintf(stderr, "omp_consumer: FAILED nxr_runtime_create: %s\n", nxr_strerror(rc));
        return 1;
    }
    struct nxr_external_decl decl;
    nxr_external_decl_init(&decl); /* caller-managed: OpenMP places its own threads */
    decl.id = 100;
    rc = nxr_omp_executor_init(&decl.executor, 2);
    if (rc == 0)
        rc = nxr_runtime_attach(rt, &decl);
    nxr_ctx_t *ctx = NULL;
    if (rc == 0)
        rc = nxr_ctx_create(rt, 100, &ctx);
    unsigned *visits = calloc(N, sizeof(unsigned));
    if (rc == 0 && visits != NULL)
        rc = nxr_parallel_for(ctx, 0, N, 100, body, visits);
    size_t bad = 0;
    for (size_t i = 0; rc == 0 && i < N; i++)
        bad += visits[i] != (unsigned)i % 7u + 1u;
    free(visits);
    if (rc != 0 || bad != 0) {
        fprintf(stderr, "omp_consumer: FAILED: %s %s, %zu wrong indices\n", nxr_strerror(rc),
                nxr_last_error(), bad);
        nxr_ctx_destroy(ctx);
        nxr_runtime_destroy(rt);
        return 1;
    }
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    printf("omp_consumer: ok, nxr %s, parallel_for over %u indices on 2 OpenMP threads\n",
           nxr_version_string(), N);
    return 0;
}
