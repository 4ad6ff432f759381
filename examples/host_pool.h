/*
 * A plain pthread pool, written the way a service might already have one.
 * It knows nothing about nxr: it runs tasks on N threads that it pins
 * itself. pool_executor.h (next to it) turns it into an nxr executor (the demo's
 * `--executor pool`, examples/attach_pool.c); the tests use it as "the
 * service's existing pool".
 *
 * Tasks are intrusive (the caller owns their storage), so posting never
 * allocates and never fails.
 */
#ifndef NXR_EXAMPLES_HOST_POOL_H
#define NXR_EXAMPLES_HOST_POOL_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

struct host_pool;

/* One unit of work; the caller owns it until run(task) starts. */
struct host_pool_task {
    void (*run)(struct host_pool_task *task);
    struct host_pool_task *next; /* the pool's; do not touch while queued */
};

/* Starts `threads` (>= 1) threads, each pinned to `cpus` (NULL: not pinned;
 * a pin that fails leaves the thread where it was). Returns the pool, or
 * NULL (no memory, or a thread could not start: then none is left). */
struct host_pool *host_pool_start(unsigned threads, const cpu_set_t *cpus);

/* pthread_create's shape. */
typedef int (*host_pool_create_fn)(pthread_t *thread, const pthread_attr_t *attr,
                                   void *(*fn)(void *), void *arg);

/* host_pool_start with the thread creation the host uses (its own wrapper,
 * or a test's that fails on purpose); NULL: pthread_create. */
struct host_pool *host_pool_start_with(unsigned threads, const cpu_set_t *cpus,
                                       host_pool_create_fn create);

/* Runs every queued task, then stops and joins the threads. NULL is a
 * no-op. Not from one of the pool's own threads. */
void host_pool_stop(struct host_pool *pool);

/* Queues task to run on one of the pool's threads (FIFO). Any thread. */
void host_pool_post(struct host_pool *pool, struct host_pool_task *task);

/* True when the calling thread is one of the pool's threads. */
bool host_pool_is_own_thread(const struct host_pool *pool);

unsigned host_pool_threads(const struct host_pool *pool);

#endif /* NXR_EXAMPLES_HOST_POOL_H */
