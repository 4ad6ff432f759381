/*
 * host_pool as an nxr_executor (see pool_executor.h). One allocation per
 * install or submit holds the batch and one pool task per participant or
 * item, so a batch is either posted whole or (no memory) not at all.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t, CPU_SET, pthread affinity */
#endif
#include "pool_executor.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

static atomic_long refs;

struct batch;

struct slot {
    struct host_pool_task task; /* first: run() gets it back as the slot */
    struct batch *b;
    size_t index;
};

/* A count-down latch for one install or submit. */
struct batch {
    atomic_size_t left;
    nxr_region_fn region;
    nxr_item_fn item;
    void *arg;
    unsigned count;
    nxr_done_fn done; /* submit: called by the last item; install: NULL */
    void *done_arg;
    pthread_mutex_t lock;
    pthread_cond_t finished;
    bool over;
    struct slot slots[];
};

static void finish(struct batch *b)
{
    /* acq_rel: the last one out sees every other slot's writes. */
    if (atomic_fetch_sub_explicit(&b->left, 1, memory_order_acq_rel) != 1)
        return;
    if (b->done != NULL) { /* submit: nobody waits on the latch */
        nxr_done_fn done = b->done;
        void *done_arg = b->done_arg;
        free(b);
        done(done_arg);
        return;
    }
    pthread_mutex_lock(&b->lock);
    b->over = true;
    pthread_cond_signal(&b->finished);
    pthread_mutex_unlock(&b->lock);
}

static void run_slot(struct host_pool_task *t)
{
    struct slot *s = (struct slot *)t;
    struct batch *b = s->b;
    if (b->region != NULL)
        b->region(b->arg, (unsigned)s->index, b->count);
    else
        b->item(b->arg, s->index);
    finish(b);
}

static struct batch *batch_alloc(size_t count)
{
    struct batch *b = calloc(1, sizeof(*b) + count * sizeof(struct slot));
    if (b == NULL)
        return NULL;
    atomic_init(&b->left, count);
    for (size_t i = 0; i < count; i++)
        b->slots[i] = (struct slot){.task = {.run = run_slot}, .b = b, .index = i};
    return b;
}

static void post_all(struct host_pool *pool, struct batch *b, size_t count)
{
    for (size_t i = 0; i < count; i++)
        host_pool_post(pool, &b->slots[i].task);
}

static int pool_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    struct batch *b = batch_alloc(count);
    if (b == NULL)
        return -ENOMEM;
    b->region = fn;
    b->arg = arg;
    b->count = count;
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->finished, NULL);
    post_all(self, b, count);
    pthread_mutex_lock(&b->lock);
    while (!b->over)
        pthread_cond_wait(&b->finished, &b->lock);
    pthread_mutex_unlock(&b->lock);
    pthread_cond_destroy(&b->finished);
    pthread_mutex_destroy(&b->lock);
    free(b);
    return 0;
}

static int pool_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                       void *done_arg)
{
    if (count == 0) {
        done(done_arg);
        return 0;
    }
    struct batch *b = batch_alloc(count);
    if (b == NULL)
        return -ENOMEM;
    b->item = fn;
    b->arg = arg;
    b->done = done;
    b->done_arg = done_arg;
    post_all(self, b, count);
    return 0;
}

static void pool_retain(void *self)
{
    (void)self;
    atomic_fetch_add(&refs, 1);
}

static void pool_release(void *self)
{
    (void)self;
    atomic_fetch_sub(&refs, 1);
}

static const struct nxr_executor_ops pool_ops = {
    .install = pool_install,
    .submit = pool_submit,
    .retain = pool_retain,
    .release = pool_release,
};

void pool_executor_init(struct nxr_executor *out, struct host_pool *pool)
{
    *out = (struct nxr_executor){
        .ops = &pool_ops,
        .self = pool,
        .workers = host_pool_threads(pool),
        .flags = NXR_EXECUTOR_FANOUT,
        /* .owner left unset on purpose: an executor that does not say is
         * the caller's (tests/tools/nxr_info_test.sh checks nxr reports so). */
    };
}

long pool_executor_refs(void)
{
    return atomic_load(&refs);
}
