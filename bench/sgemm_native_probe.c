/*
 * Single-thread SGEMM probe: nxr's native kernels (every ISA this CPU runs)
 * against cblas_sgemm with OpenBLAS's count set to 1 (restored at exit), on
 * square row-major problems. Prints the median of R timed runs per size in
 * GFLOP/s and the ratio native/OpenBLAS. Not the parallel benchmark.
 *
 *   bazel run -c opt //bench:sgemm_native_probe -- [--json] [--short] [n ...]
 * (default 512). Environment: PROBE_REPS (default 15). --short (CI's bench
 * stage): 3 rounds, n = 128 unless sizes are given.
 */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/timing.h"
#include "kernels/internal/native.h"

/* One timed run of each contender per round, rounds interleaved, so load
 * from other processes hits every contender alike; medians per contender. */
struct contender {
    const struct nxr__native_isa *isa; /* NULL: OpenBLAS */
    struct nxr__sgemm_job job;
    void *scratch;
    double t[64];
};

static void run_once(struct contender *c, const struct nxr_sgemm_args *g)
{
    if (c->isa == NULL)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)g->n, (int)g->k,
                    g->alpha, g->a, (int)g->lda, g->b, (int)g->ldb, g->beta, g->c, (int)g->ldc);
    else
        nxr__sgemm_chunk(&c->job, 0, nxr__sgemm_plan_tiles(&c->job.plan), 0);
}

int main(int argc, char **argv)
{
    int reps = getenv("PROBE_REPS") ? atoi(getenv("PROBE_REPS")) : 15;
    if (reps < 1 || reps > 64)
        reps = 15;
    bool json = false, short_run = false;
    size_t sizes[32];
    int nsizes = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--short") == 0)
            short_run = true;
        else if (argv[i][0] >= '1' && argv[i][0] <= '9' && nsizes < 32)
            sizes[nsizes++] = (size_t)atol(argv[i]);
        else {
            fprintf(stderr, "usage: sgemm_native_probe [--json] [--short] [n ...]\n");
            return 2;
        }
    }
    if (short_run) { /* CI's bench stage: one small size, three rounds */
        reps = 3;
        if (nsizes == 0)
            sizes[nsizes++] = 128;
    }
    if (nsizes == 0)
        sizes[nsizes++] = 512;
    const int previous = openblas_get_num_threads();
    openblas_set_num_threads(1);
    if (json)
        printf("{\"openblas_core\":\"%s\",\"reps\":%d,\"sizes\":[", openblas_get_corename(), reps);
    else
        printf("openblas: %s, core %s (count %d -> 1 for this probe)\n", openblas_get_config(),
               openblas_get_corename(), previous);
    const struct nxr__native_isa *isas[3] = {nxr__native_isa_avx512(), nxr__native_isa_avx2(),
                                             nxr__native_isa_portable()};
    for (int s = 0; s < nsizes; ++s) {
        const size_t n = sizes[s];
        float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b);
        float *c = malloc(n * n * sizeof *c);
        for (size_t i = 0; i < n * n; ++i) {
            a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
            b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
            c[i] = 0.0f;
        }
        struct nxr_sgemm_args g = {.m = n,
                              .n = n,
                              .k = n,
                              .alpha = 1.0f,
                              .a = a,
                              .lda = n,
                              .b = b,
                              .ldb = n,
                              .beta = 0.0f,
                              .c = c,
                              .ldc = n};
        const double flop = 2.0 * (double)n * (double)n * (double)n;
        struct contender cs[4] = {{.isa = NULL}};
        size_t nc = 1;
        for (int i = 0; i < 3; ++i)
            if (isas[i] != NULL)
                cs[nc++].isa = isas[i];
        for (size_t i = 1; i < nc; ++i) {
            if (nxr__sgemm_plan_init(&cs[i].job.plan, cs[i].isa, &g, 1) != 0)
                abort();
            cs[i].scratch = aligned_alloc(64, (cs[i].job.plan.scratch_bytes + 63) / 64 * 64);
        }
        void *scr[4];
        for (size_t i = 0; i < nc; ++i) {
            scr[i] = cs[i].scratch;
            cs[i].job.scratch = &scr[i];
            run_once(&cs[i], &g); /* warm: page faults, OpenBLAS's buffers */
        }
        for (int r = 0; r < reps; ++r)
            for (size_t i = 0; i < nc; ++i) {
                const double t0 = bench_now();
                run_once(&cs[i], &g);
                cs[i].t[r] = bench_now() - t0;
            }
        const double tob = bench_median(cs[0].t, reps);
        if (json)
            printf("%s{\"n\":%zu,\"openblas_gflops\":%.2f,\"native\":[", s ? "," : "", n,
                   flop / tob * 1e-9);
        else
            printf("n=%zu  openblas(1 thread) %.1f GFLOP/s (median of %d)\n", n, flop / tob * 1e-9,
                   reps);
        for (size_t i = 1; i < nc; ++i) {
            const double tn = bench_median(cs[i].t, reps);
            if (json)
                printf("%s{\"isa\":\"%s\",\"gflops\":%.2f,\"vs_openblas\":%.4f}", i > 1 ? "," : "",
                       cs[i].isa->name, flop / tn * 1e-9, tob / tn);
            else
                printf("n=%zu  native-%-8s %.1f GFLOP/s  ratio native/openblas %.2f\n", n,
                       cs[i].isa->name, flop / tn * 1e-9, tob / tn);
            free(cs[i].scratch);
        }
        if (json)
            printf("]}");
        free(a);
        free(b);
        free(c);
    }
    if (json)
        printf("]}\n");
    openblas_set_num_threads(previous);
    return 0;
}
