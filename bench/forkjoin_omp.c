/*
 * bench/forkjoin's OpenMP contender (see forkjoin_peer.h): one region is
 * `#pragma omp parallel for schedule(static)` over the chunks, with as many
 * threads as chunks up to the budget (nxr's participant count). Built twice:
 * by gcc against libgomp (forkjoin_gomp) and by clang against LLVM's libomp
 * (forkjoin_libomp); each runtime keeps its own defaults (spin policy,
 * blocktime), the benchmark only sets OMP_PROC_BIND/OMP_PLACES.
 */
#include <omp.h>

#include "bench/forkjoin_peer.h"

static volatile uint64_t sink;

static void omp_region(void *ctx, unsigned chunks, uint64_t iters)
{
    unsigned threads = *(const unsigned *)ctx;
    int n = (int)(chunks < threads ? chunks : threads);
#pragma omp parallel for num_threads(n) schedule(static)
    for (int i = 0; i < (int)chunks; i++)
        sink = fj_work(iters);
}

int main(int argc, char **argv)
{
    struct fj_args a;
    if (fj_parse(argc, argv, &a) != 0)
        return 2;
    fj_run(&a, omp_region, &a.threads);
    return 0;
}
