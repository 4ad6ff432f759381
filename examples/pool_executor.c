/*
 * host_pool as an nxr_executor (see pool_executor.h). Every participant and
 * item runs on the pool's own threads, never on the caller: the pool's
 * declared CPU set is where nxr's work runs.
 */
#include "examples/pool_executor.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

static atomic_long refs;

/* A count-down latch for one install or submit. */
struct batch {
    atomic_uint left;
    nxr_region_fn region;
    nxr_item_fn item;
    void *arg;
    unsigned count;
    nxr_done_fn done; /* submit: called by the last item; install: NULL */
    void *done_arg;
    pthread_mutex_t lock;
    pthread_cond_t finished;
    bool over;
};

struct slot {
    struct batch *b;
    size_t index;
};

static void finish(struct batch *b)
{
    if (atomic_fetch_sub(&b->left, 1) != 1)
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

static void run_slot(void *p)
{
    struct slot *s = p;
    struct batch *b = s->b;
    if (b->region != NULL)
        b->region(b->arg, (unsigned)s->index, b->count);
    else
        b->item(b->arg, s->index);
    free(s);
    finish(b);
}

static int post_all(struct host_pool *pool, struct batch *b, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        struct slot *s = malloc(sizeof(*s));
        if (s == NULL)
            abort(); /* an example: a real service would unwind */
        s->b = b;
        s->index = i;
        if (host_pool_post(pool, run_slot, s) != 0)
            abort();
    }
    return 0;
}

static int pool_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    struct batch b = {.region = fn, .arg = arg, .count = count};
    atomic_init(&b.left, count);
    pthread_mutex_init(&b.lock, NULL);
    pthread_cond_init(&b.finished, NULL);
    post_all(self, &b, count);
    pthread_mutex_lock(&b.lock);
    while (!b.over)
        pthread_cond_wait(&b.finished, &b.lock);
    pthread_mutex_unlock(&b.lock);
    pthread_cond_destroy(&b.finished);
    pthread_mutex_destroy(&b.lock);
    return 0;
}

static int pool_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                       void *done_arg)
{
    if (count == 0) {
        done(done_arg);
        return 0;
    }
    struct batch *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return -ENOMEM;
    b->item = fn;
    b->arg = arg;
    b->done = done;
    b->done_arg = done_arg;
    atomic_init(&b->left, (unsigned)count);
    return post_all(self, b, count);
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
