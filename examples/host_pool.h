/*
 * A plain pthread pool, written the way a service might already have one.
 * It knows nothing about nxr: it runs closures on N threads that it pins
 * itself. examples/attach_pool.c shows how such a pool becomes an nxr domain;
 * the tests use it as "the service's existing pool".
 */
#ifndef NXR_EXAMPLES_HOST_POOL_H
#define NXR_EXAMPLES_HOST_POOL_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

struct host_pool;

/* Starts `threads` threads, each pinned to `cpus` (NULL: not pinned). */
struct host_pool *host_pool_start(unsigned threads, const cpu_set_t *cpus);

/* Runs every queued closure, then stops and joins the threads. */
void host_pool_stop(struct host_pool *pool);

/* Queues fn(arg) to run on one of the pool's threads. 0 or -ENOMEM. */
int host_pool_post(struct host_pool *pool, void (*fn)(void *), void *arg);

/* True when the calling thread is one of the pool's threads. */
bool host_pool_is_own_thread(const struct host_pool *pool);

unsigned host_pool_threads(const struct host_pool *pool);

#endif /* NXR_EXAMPLES_HOST_POOL_H */
