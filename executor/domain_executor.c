/*
 * A domain's executor: the contract (executor/nxr_executor.h) as nxr keeps
 * it, in one place. Every domain's work goes through one nxr_executor:
 *  - a caller's (an attached host pool): what makes it acceptable, and the
 *    optional reference nxr holds on it (once while a domain is attached,
 *    once per operation in flight): every retain and release of an
 *    executor goes through here, and never blocks beyond what the
 *    executor's own retain/release do (the contract says: they do not);
 *  - the built-in team's: the contract's two calls mapped onto the team's
 *    fork-join region and its submission FIFO.
 *
 * The one decision made for the team: whether the calling thread takes
 * part in a region, only when its whole affinity lies inside the domain's
 * CPU set. A caller allowed elsewhere would run its share off the socket,
 * so it waits instead and every participant is a worker.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "base/internal/sys.h"
#include "executor/internal/exec.h"

/* ---- a caller's executor ------------------------------------------------------- */

const char *nxr__executor_broken_rule(const struct nxr_executor *ex)
{
    if (ex->ops == NULL || ex->ops->install == NULL)
        return "has no install operation";
    if (ex->ops->submit == NULL)
        return "has no submit operation";
    if (ex->workers == 0)
        return "declares zero workers";
    if ((ex->ops->retain == NULL) != (ex->ops->release == NULL))
        return "has retain without release, or release without retain";
    if (ex->owner != NXR_EXECUTOR_OWNED_BY_CALLER)
        return "claims to be owned by nxr (an attached executor is the caller's)";
    return NULL;
}

void nxr__executor_retain(const struct nxr_executor *ex)
{
    if (ex->ops->retain != NULL)
        ex->ops->retain(ex->self);
}

void nxr__executor_release(const struct nxr_executor *ex)
{
    if (ex->ops->release != NULL)
        ex->ops->release(ex->self);
}

void nxr__exec_use_attached(struct nxr__exec *exec, const struct nxr_executor *ex)
{
    exec->executor = *ex;
    exec->executor_held = false;
}

void nxr__exec_hold_executor(struct nxr__exec *exec)
{
    nxr__executor_retain(&exec->executor);
    exec->executor_held = true;
}

void nxr__exec_drop_executor(struct nxr__exec *exec)
{
    if (!exec->executor_held)
        return;
    exec->executor_held = false;
    nxr__executor_release(&exec->executor);
}

/* ---- the built-in team's --------------------------------------------------------- */

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
