/*
 * The counter blocks' reading side and the per-thread home
 * (executor/internal/counters.h).
 */
#include "executor/internal/counters.h"

#include <string.h>

#include "executor/internal/exec.h"
#include "executor/internal/team.h"

_Thread_local struct nxr__counter_home nxr__counter_home;

void nxr__counters_add_to(const struct nxr__counters *block, uint64_t sum[NXR__COUNT_N])
{
    for (int c = 0; c < NXR__COUNT_N; c++) {
        /* Relaxed: a monotonic count read for a snapshot. */
        sum[c] +=
            atomic_load_explicit(&((struct nxr__counters *)block)->v[c], memory_order_relaxed);
    }
}

void nxr__exec_counters(const struct nxr__exec *exec, uint64_t sum[NXR__COUNT_N])
{
    memset(sum, 0, NXR__COUNT_N * sizeof(sum[0]));
    nxr__counters_add_to(&exec->counters, sum);
    if (exec->team != NULL)
        nxr__team_counters_add_to(exec->team, sum);
}
