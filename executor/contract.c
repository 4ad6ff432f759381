/*
 * The executor contract: validation and the reference nxr holds
 * (executor/internal/contract.h).
 */
#include "executor/internal/contract.h"

#include <stddef.h>

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
