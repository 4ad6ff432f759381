/*
 * The adapter that lets nxr run work on a host_pool: the nxr_executor
 * contract (install, submit, retain/release) over host_pool_post. This is
 * the glue a service writes once for the pool it already has; attach the
 * result as a COOPERATIVE domain on the CPUs the pool is pinned to (nxr
 * cannot verify them: placement is "declared").
 *
 * Host code on the installed API only (<nxr/nxr.h>), beside the example that
 * shows it (attach_pool.c); the demo's `--executor pool` (service/attach.c)
 * and the tests of external executors use it too (examples/BUILD.bazel).
 */
#ifndef NXR_EXAMPLES_POOL_EXECUTOR_H
#define NXR_EXAMPLES_POOL_EXECUTOR_H

#include <nxr/nxr.h>

#include "host_pool.h"

/* Fills *out so that nxr runs work on `pool`. The pool must outlive the
 * last release nxr makes (retains/releases are counted, see below). Every
 * participant and item runs on the pool's threads, never on the caller.
 * install and submit return -ENOMEM (nothing posted) when the batch cannot
 * be allocated. */
void pool_executor_init(struct nxr_executor *out, struct host_pool *pool);

/* Retains minus releases nxr has made on pools so far (all pools). */
long pool_executor_refs(void);

#endif /* NXR_EXAMPLES_POOL_EXECUTOR_H */
