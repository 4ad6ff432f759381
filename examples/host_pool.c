/* A plain pthread pool (see host_pool.h): one mutex, one FIFO, N threads. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t, CPU_SET, pthread affinity */
#endif
#include "host_pool.h"

#include <stdlib.h>

struct host_pool {
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct host_pool_task *head, *tail;
    bool stopping;
    unsigned n;
    pthread_t *threads;
    cpu_set_t cpus;
    bool pinned;
};

static _Thread_local const struct host_pool *current;

static void *pool_thread(void *p)
{
    struct host_pool *pool = p;
    current = pool;
    if (pool->pinned)
        pthread_setaffinity_np(pthread_self(), sizeof(pool->cpus), &pool->cpus);
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (pool->head == NULL && !pool->stopping)
            pthread_cond_wait(&pool->work, &pool->lock);
        struct host_pool_task *t = pool->head;
        if (t == NULL)
            break; /* stopping and drained */
        pool->head = t->next;
        if (pool->head == NULL)
            pool->tail = NULL;
        pthread_mutex_unlock(&pool->lock);
        t->run(t); /* may free t: not touched after this */
        pthread_mutex_lock(&pool->lock);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

struct host_pool *host_pool_start(unsigned threads, const cpu_set_t *cpus)
{
    return host_pool_start_with(threads, cpus, NULL);
}

struct host_pool *host_pool_start_with(unsigned threads, const cpu_set_t *cpus,
                                       host_pool_create_fn create)
{
    if (create == NULL)
        create = pthread_create;
    if (threads == 0)
        return NULL;
    struct host_pool *pool = calloc(1, sizeof(*pool));
    if (pool == NULL)
        return NULL;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work, NULL);
    pool->threads = calloc(threads, sizeof(*pool->threads));
    if (cpus != NULL) {
        pool->cpus = *cpus;
        pool->pinned = true;
    }
    for (unsigned i = 0; pool->threads != NULL && i < threads; i++) {
        if (create(&pool->threads[i], NULL, pool_thread, pool) != 0)
            break;
        pool->n++;
    }
    if (pool->n != threads) {
        host_pool_stop(pool);
        return NULL;
    }
    return pool;
}

void host_pool_stop(struct host_pool *pool)
{
    if (pool == NULL)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->lock);
    for (unsigned i = 0; i < pool->n; i++)
        pthread_join(pool->threads[i], NULL);
    free(pool->threads);
    pthread_cond_destroy(&pool->work);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

void host_pool_post(struct host_pool *pool, struct host_pool_task *task)
{
    task->next = NULL;
    pthread_mutex_lock(&pool->lock);
    if (pool->tail != NULL)
        pool->tail->next = task;
    else
        pool->head = task;
    pool->tail = task;
    pthread_cond_signal(&pool->work);
    pthread_mutex_unlock(&pool->lock);
}

bool host_pool_is_own_thread(const struct host_pool *pool)
{
    return current == pool;
}

unsigned host_pool_threads(const struct host_pool *pool)
{
    return pool->n;
}
