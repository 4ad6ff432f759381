/*
 * The executor contract (executor/nxr_executor.h) as nxr keeps it, in one
 * place: what makes an executor acceptable, and the optional reference nxr
 * holds on it (once while a domain is attached, once per operation in
 * flight). Every retain and release of an executor goes through here.
 *
 * Threads: any. Never blocks beyond what the executor's own retain/release
 * do (the contract says: they do not block).
 */
#ifndef NXR_EXECUTOR_INTERNAL_CONTRACT_H
#define NXR_EXECUTOR_INTERNAL_CONTRACT_H

#include "executor/nxr_executor.h"

/* NULL when ex keeps the contract, else the rule it breaks, as a phrase
 * ("has no submit operation") for the caller's detail. ex is the caller's
 * (an attached executor): it must be owned by the caller. */
const char *nxr__executor_broken_rule(const struct nxr_executor *ex);

/* Take / give back one reference (no-ops for an executor without them). */
void nxr__executor_retain(const struct nxr_executor *ex);
void nxr__executor_release(const struct nxr_executor *ex);

#endif /* NXR_EXECUTOR_INTERNAL_CONTRACT_H */
