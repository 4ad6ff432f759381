/*
 * The built-in team as an nxr_executor: the contract's two calls mapped onto
 * the team's fork-join region and its submission FIFO.
 *
 * The one decision made here is whether the calling thread takes part in a
 * region: only when its whole affinity lies inside the domain's CPU set.
 * A caller allowed elsewhere would run its share off the socket, so it waits
 * instead and every participant is a worker.
 */
#include <errno.h>
#include <stdio.h>

#include "executor/internal/exec.h"
#include "base/internal/sys.h"

static int team_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    struct nxr__exec *exec = self;
    if (count == 0)
        return 0;
    bool joins = nxr__exec_caller_inside(exec);
    unsigned workers = nxr__team_size(exec->team);
    if (count > workers + (joins ? 1u : 0u))
        return -EINVAL;
    nxr__team_run(exec->team, fn, arg, count, joins);
    return 0;
}

static int team_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                       void *done_arg)
{
    struct nxr__exec *exec = self;
    return nxr__team_submit(exec->team, fn, arg, count, done, done_arg);
}

static const struct nxr_executor_ops team_ops = {
    .install = team_install,
    .submit = team_submit,
    /* The team lives exactly as long as its domain: nothing to count. */
    .retain = NULL,
    .release = NULL,
};

/* The team's dispatcher has waited past the stall threshold (team.c). */
static void region_stalled(void *p, unsigned left, uint64_t waited_ns)
{
    struct nxr__exec *exec = p;
    char what[96];
    snprintf(what, sizeof(what), "a region (%u slot(s) still running)", left);
    nxr__stall_report(exec->stall, exec, what, waited_ns);
}

void nxr__exec_use_team(struct nxr__exec *exec, struct nxr__team *team)
{
    exec->team = team;
    if (exec->stall != NULL)
        nxr__team_set_stall(team, exec->stall->after_ns, region_stalled, exec);
    exec->executor = (struct nxr_executor){
        .ops = &team_ops,
        .self = exec,
        .workers = nxr__team_size(team),
        .flags = NXR_EXECUTOR_FANOUT,
        .owner = NXR_EXECUTOR_OWNED_BY_NXR,
    };
}
