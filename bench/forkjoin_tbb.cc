/*
 * bench/forkjoin's oneTBB contender (see forkjoin_peer.h): one region is
 * tbb::parallel_for over the chunks inside a task_arena of the budget's
 * size, entered from the calling thread (which takes part, as nxr's caller
 * does). oneTBB's defaults otherwise (auto partitioner, its own spin).
 */
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include "bench/forkjoin_peer.h"

static volatile uint64_t sink;

static void tbb_region(void *ctx, unsigned chunks, uint64_t iters)
{
    auto *arena = static_cast<tbb::task_arena *>(ctx);
    arena->execute([&] {
        tbb::parallel_for(0u, chunks, [&](unsigned) { sink = fj_work(iters); });
    });
}

int main(int argc, char **argv)
{
    struct fj_args a;
    if (fj_parse(argc, argv, &a) != 0)
        return 2;
    tbb::task_arena arena(static_cast<int>(a.threads));
    arena.initialize();
    fj_run(&a, tbb_region, &arena);
    return 0;
}
