/*
 * The adapter that lets nxr run work on a host_pool: the nxr_executor
 * contract (install, submit, retain/release) over host_pool_post. This is
 * the glue a service writes once for the pool it already has.
 */
#ifndef NXR_EXAMPLES_POOL_EXECUTOR_H
#define NXR_EXAMPLES_POOL_EXECUTOR_H

#include "examples/host_pool.h"
#include "runtime/nxr.h"

/* Fills *out so that nxr runs work on `pool`. The pool must outlive the
 * last release nxr makes (retains/releases are counted in *refs). */
void pool_executor_init(struct nxr_executor *out, struct host_pool *pool);

/* Retains minus releases nxr has made on pools so far (all pools). */
long pool_executor_refs(void);

#endif /* NXR_EXAMPLES_POOL_EXECUTOR_H */
