/*
 * The OpenMP adapter (see nxr_omp.h). OpenMP may hand a parallel region fewer
 * threads than asked (OMP_DYNAMIC, thread limits), so each OpenMP thread runs
 * every participant index congruent to its own: all `count` participants run
 * whatever the team size, as the contract requires.
 */
#include "executor/nxr_omp.h"

#include <errno.h>
#include <omp.h>
#include <stdint.h>

static int omp_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    (void)self;
#pragma omp parallel num_threads(count)
    {
        unsigned n = (unsigned)omp_get_num_threads();
        for (unsigned p = (unsigned)omp_get_thread_num(); p < count; p += n)
            fn(arg, p, count);
    }
    return 0;
}

static int omp_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                      void *done_arg)
{
    int threads = (int)(intptr_t)self;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t i = 0; i < count; i++)
        fn(arg, i);
    done(done_arg);
    return 0;
}

static const struct nxr_executor_ops omp_ops = {
    .install = omp_install,
    .submit = omp_submit,
    .retain = NULL, /* the OpenMP runtime lives as long as the process */
    .release = NULL,
};

int nxr_omp_executor_init(struct nxr_executor *out, int threads)
{
    if (out == NULL || threads < 0)
        return -EINVAL;
    if (threads == 0)
        threads = omp_get_max_threads();
    *out = (struct nxr_executor){
        .ops = &omp_ops,
        .self = (void *)(intptr_t)threads,
        .workers = (unsigned)threads,
        .flags = NXR_EXECUTOR_FANOUT,
        .owner = NXR_EXECUTOR_OWNED_BY_CALLER,
    };
    return 0;
}
