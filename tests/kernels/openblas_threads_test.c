/*
 * No threads nobody asked for: a process that links nxr and never creates
 * an OpenBLAS provider or probes OpenBLAS runs no OpenBLAS thread, however
 * much it computes (kernels/openblas.c loads the library only when asked;
 * linked, its constructor started its pool before main). Threads are
 * counted in /proc/self/task: every one but this thread must be an nxr
 * worker ("nxr-d<id>-w<i>", executor/team.c), and libopenblas must not be
 * mapped at all. Then the probe loads it, reports it (what `nxr info`
 * shows), and, with the pthreads build on two or more CPUs, its threads
 * appear in the same count: proof that the count sees them.
 *
 * Plain C (no Criterion: its runner must not add threads of its own).
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/nxr.h"
#include "tests/support/check.h"
#include "tests/support/runtime.h"

/* Threads of this process that are neither this one nor nxr workers. */
static int foreign_threads(void)
{
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL)
        return -1;
    const long self = syscall(SYS_gettid);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.' || atol(e->d_name) == self)
            continue;
        char path[320], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue; /* exited meanwhile */
        if (fgets(comm, sizeof comm, f) == NULL)
            comm[0] = '\0';
        fclose(f);
        if (strncmp(comm, "nxr-", 4) != 0)
            n++;
    }
    closedir(dir);
    return n;
}

static bool mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;
    while (f != NULL && !found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, name) != NULL;
    if (f != NULL)
        fclose(f);
    return found;
}

int main(void)
{
    CHECK(foreign_threads() == 0, "%d threads before any nxr call", foreign_threads());
    CHECK(!mapped("libopenblas"), "OpenBLAS is mapped before any nxr call");

    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, NULL, NXR_TEST_CTX);
    int rc = nxr_test_runtime_open(&fx);
    CHECK(rc == 0, "runtime: %s: %s", nxr_strerror(rc), fx.err);
    if (rc != 0)
        return 1;
    nxr_ctx_t *ctx = fx.ctx;
    enum { N = 256 };
    float *a = calloc(N * N, sizeof(float)), *b = calloc(N * N, sizeof(float)),
          *c = calloc(N * N, sizeof(float));
    struct nxr_sgemm_args g = {
        .m = N, .n = N, .k = N, .alpha = 1, .a = a, .lda = N, .b = b, .ldb = N, .c = c, .ldc = N};
    for (int i = 0; i < 8; i++)
        CHECK(nxr_sgemm(ctx, &g) == 0, "sgemm: %s", nxr_last_error());
    g.m = 1; /* the small-shape path too */
    CHECK(nxr_sgemm(ctx, &g) == 0, "sgemm m=1: %s", nxr_last_error());
    CHECK(foreign_threads() == 0, "%d foreign threads while computing", foreign_threads());
    CHECK(!mapped("libopenblas"), "OpenBLAS was loaded by a process that never asked for it");
    nxr_test_runtime_close(&fx);

    /* Asked for: the probe loads and reports it. */
    struct nxr_openblas_info info;
    nxr_openblas_probe(&info);
    if (!info.present) {
        printf("no OpenBLAS on this system (%s): the report half did not run\n", info.diagnostic);
    } else {
        CHECK(mapped("libopenblas"), "the probe reported an OpenBLAS it did not load");
        CHECK(info.core[0] != '\0', "no core name");
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (info.threading == NXR_OPENBLAS_PTHREADS && info.threads > 1 && cpus > 1)
            CHECK(foreign_threads() >= 1,
                  "OpenBLAS (%d threads) loaded, yet the count sees no thread of it", info.threads);
    }
    free(a);
    free(b);
    free(c);
    unsigned failures = nxr_test_check_failures();
    printf("%u failed checks\n", failures);
    return failures == 0 ? 0 : 1;
}
