/*
 * bench/mpi_allreduce: what handing MPI the pool buffer itself
 * (nxr_buffer_export, MPI_IN_PLACE) saves over a staging copy, in one run.
 *
 *   bazel build //bench:mpi_allreduce
 *   mpirun -np 2 --bind-to core bazel-bin/bench/mpi_allreduce [--json] [--short]
 *
 * Cases, per size (64 KiB, 4 MiB, 32 MiB of floats), on each rank's domain:
 *   in_place  MPI_Allreduce(MPI_IN_PLACE, ptr, ...) on the exported pool
 *             buffer;
 *   staged    copy the buffer into a separate (already touched) host array,
 *             allreduce that in place, copy the result back: what a library
 *             without a zero-copy export does.
 * Each sample times REPS operations of one case; samples alternate the order
 * of the two cases, and the figure is the median over SAMPLES samples of the
 * mean time per operation (rank 0's clock, after a barrier). --short (CI's
 * bench stage): 64 and 256 KiB, 10 operations a sample. The ratio is
 * staged over in_place: above 1 is what the export saves.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/timing.h"
#include "runtime/nxr.h"

#define SAMPLES 9

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds per operation for `reps` operations of one case. */
static double time_case(bool staged, float *buf, float *staging, size_t n, int reps)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int r = 0; r < reps; r++) {
        if (staged) {
            memcpy(staging, buf, n * sizeof(float));
            MPI_Allreduce(MPI_IN_PLACE, staging, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            memcpy(buf, staging, n * sizeof(float));
        } else {
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    double t = (bench_now() - t0) / reps;
    /* Every rank reports the slowest: a collective ends when all have. */
    double worst;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bool json = false, short_run = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--short") == 0)
            short_run = true; /* CI's bench stage: two small sizes, few reps */
        else {
            if (rank == 0)
                fprintf(stderr, "usage: mpi_allreduce [--json] [--short]\n");
            MPI_Finalize();
            return 2;
        }
    }
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    if (nxr_runtime_create(NULL, &rt) != 0 ||
        nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, 0)), &ctx) != 0) {
        fprintf(stderr, "mpi_allreduce: rank %d: no runtime\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    nxr_domain_t *d = nxr_ctx_domain(ctx);
    const size_t full_sizes[] = {16 << 10, 1 << 20, 8 << 20}; /* floats: 64 KiB, 4 MiB, 32 MiB */
    const size_t short_sizes[] = {16 << 10, 64 << 10};        /* 64 KiB, 256 KiB */
    const size_t *sizes = short_run ? short_sizes : full_sizes;
    const size_t nsizes = short_run ? sizeof short_sizes / sizeof short_sizes[0]
                                    : sizeof full_sizes / sizeof full_sizes[0];
    if (rank == 0)
        printf(json ? "{\"ranks\":%d,\"cases\":["
                    : "mpi_allreduce: %d ranks; seconds per op, "
                      "median of %d samples\n",
               size, SAMPLES);
    for (size_t k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        nxr_buffer_t *b;
        void *ptr;
        size_t len;
        float *staging = malloc(n * sizeof(float));
        if (staging == NULL || nxr_buffer_acquire(d, n * sizeof(float), &b) != 0 ||
            nxr_buffer_export(b, &ptr, &len) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        float *buf = ptr;
        for (size_t i = 0; i < n; i++)
            buf[i] = staging[i] = 0.0f; /* both touched before timing */
        int reps = short_run ? 10 : n >= (1u << 20) ? 5 : 200;
        double in_place[SAMPLES], staged[SAMPLES];
        for (int s = 0; s < SAMPLES; s++) {
            bool staged_first = s % 2 == 1;
            if (staged_first)
                staged[s] = time_case(true, buf, staging, n, reps);
            in_place[s] = time_case(false, buf, staging, n, reps);
            if (!staged_first)
                staged[s] = time_case(true, buf, staging, n, reps);
        }
        qsort(in_place, SAMPLES, sizeof(double), cmp);
        qsort(staged, SAMPLES, sizeof(double), cmp);
        double a = in_place[SAMPLES / 2], c = staged[SAMPLES / 2];
        if (rank == 0) {
            if (json)
                printf("%s{\"bytes\":%zu,\"in_place_s\":%.3e,\"staged_s\":%.3e,\"ratio\":%.3f}",
                       k ? "," : "", n * sizeof(float), a, c, c / a);
            else
                printf("  %8zu KiB: in place %.3e s, staged %.3e s, staged/in place %.2f\n",
                       n * sizeof(float) >> 10, a, c, c / a);
        }
        nxr_buffer_release(b);
        free(staging);
    }
    if (rank == 0 && json)
        printf("]}\n");
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    MPI_Finalize();
    return 0;
}
