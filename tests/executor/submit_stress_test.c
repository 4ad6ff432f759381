/*
 * Submit/wait stress, plain C so that it runs under ThreadSanitizer: many
 * service threads submit batches to every domain at once -- two disjoint
 * domains and a shared one overlapping both, so the arbiter keeps the shared
 * domain's batches apart from the others' -- and wait for or detach each
 * job at random. Some tasks submit to another domain from inside a task,
 * which the nesting rules refuse (NXR_EREENTRANT) without waiting. Every task of every accepted
 * batch must run exactly once, every waited job must report its own status,
 * and when the runtime is destroyed every detached job has run and no
 * permit is held. Bounded: a fixed number of rounds per thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/internal/runtime.h"

#define THREADS 8
#define ROUNDS  250

static atomic_uint failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            atomic_fetch_add(&failures, 1);                                                        \
        }                                                                                          \
    } while (0)

static nxr_runtime_t *rt;
static const int ids[] = {0, 1, 7};
static nxr_ctx_t *ctxs[THREADS][3];

static atomic_ulong tasks_run;       /* by every task */
static atomic_ulong tasks_submitted; /* by every accepted batch */

struct batch_state {
    atomic_uint hits[32];
    size_t count;
    int fail_at;      /* index whose task fails, or -1 */
    nxr_ctx_t *other; /* a context to submit to from inside a task, or NULL */
};

static int nested_noop(void *arg, size_t index)
{
    (void)arg, (void)index;
    atomic_fetch_add_explicit(&tasks_run, 1, memory_order_relaxed);
    return 0;
}

static int task(void *arg, size_t index)
{
    struct batch_state *b = arg;
    atomic_fetch_add_explicit(&b->hits[index], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&tasks_run, 1, memory_order_relaxed);
    if (b->other != NULL && index == 0) {
        /* From inside a task: refused at once, never a wait. */
        int rc = nxr_submit(b->other, 2, nested_noop, NULL, NULL);
        CHECK(rc == NXR_EREENTRANT, "nested submit: %s", nxr_strerror(rc));
        if (rc == 0)
            atomic_fetch_add_explicit(&tasks_submitted, 2, memory_order_relaxed);
    }
    return (int)index == b->fail_at ? -EIO : 0;
}

static void *service(void *arg)
{
    unsigned id = (unsigned)(size_t)arg;
    unsigned seed = id * 2654435761u + 17;
    /* Detached batches live until the runtime is destroyed. */
    struct batch_state *detached = calloc(ROUNDS, sizeof(*detached));
    for (int round = 0; round < ROUNDS; round++) {
        unsigned d = (unsigned)rand_r(&seed) % 3;
        unsigned how = (unsigned)rand_r(&seed) % 3; /* 0 wait, 1 detach now, 2 detach later */
        struct batch_state local;
        struct batch_state *b = how == 0 ? &local : &detached[round];
        *b = (struct batch_state){.count = 1 + (size_t)rand_r(&seed) % 32, .fail_at = -1};
        for (size_t i = 0; i < b->count; i++)
            atomic_init(&b->hits[i], 0);
        if (rand_r(&seed) % 4 == 0)
            b->fail_at = (int)((unsigned)rand_r(&seed) % b->count);
        if (rand_r(&seed) % 5 == 0)
            b->other = ctxs[id][(d + 1) % 3];
        nxr_job_t *job = NULL;
        int rc = nxr_submit(ctxs[id][d], b->count, task, b, how == 1 ? NULL : &job);
        CHECK(rc == 0, "submit to domain %d: %s", ids[d], nxr_strerror(rc));
        if (rc != 0)
            continue;
        atomic_fetch_add_explicit(&tasks_submitted, b->count, memory_order_relaxed);
        if (how == 2) {
            nxr_job_detach(job);
        } else if (how == 0) {
            rc = nxr_job_wait(job);
            int want = b->fail_at >= 0 ? -EIO : 0;
            CHECK(rc == want, "job status %d, want %d", rc, want);
            if (b->fail_at < 0) {
                for (size_t i = 0; i < b->count; i++)
                    CHECK(atomic_load(&b->hits[i]) == 1, "task %zu ran %u times", i,
                          atomic_load(&b->hits[i]));
            }
        }
    }
    return detached;
}

int main(void)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.spin = 64;
    o.domains = "0:0;1:1;7:0-1 shared";
    int rc = nxr_runtime_create(&rt, &o);
    if (rc != 0) {
        fprintf(stderr, "create: %s\n", nxr_strerror(rc));
        return 1;
    }
    for (size_t t = 0; t < THREADS; t++) {
        for (size_t d = 0; d < 3; d++)
            CHECK(nxr_ctx_create(&ctxs[t][d], rt, ids[d]) == 0, "ctx");
    }
    pthread_t threads[THREADS];
    void *detached[THREADS];
    for (size_t i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, service, (void *)i);
    for (size_t i = 0; i < THREADS; i++)
        pthread_join(threads[i], &detached[i]);
    for (size_t d = 0; d < rt->domain_count; d++)
        nxr__exec_drain(&rt->domains[d]->exec);
    struct nxr__arbiter_stats st;
    nxr__arbiter_stats(rt->arbiter, &st);
    CHECK(st.holders == 0 && st.waiters == 0 && !st.exclusive_held, "arbiter idle");
    unsigned long waits = st.waits, grants = st.grants;
    for (size_t t = 0; t < THREADS; t++) {
        for (size_t d = 0; d < 3; d++)
            nxr_ctx_destroy(ctxs[t][d]);
    }
    nxr_runtime_destroy(rt);
    /* Tasks skipped after a batch's first error are the only ones not run. */
    unsigned long ran = atomic_load(&tasks_run), submitted = atomic_load(&tasks_submitted);
    CHECK(ran <= submitted, "%lu tasks ran, %lu submitted", ran, submitted);
    for (size_t t = 0; t < THREADS; t++) {
        struct batch_state *b = detached[t];
        for (int r = 0; r < ROUNDS; r++) {
            for (size_t i = 0; i < b[r].count && b[r].fail_at < 0; i++)
                CHECK(atomic_load(&b[r].hits[i]) == 1, "detached task ran %u times",
                      atomic_load(&b[r].hits[i]));
        }
        free(b);
    }
    unsigned failed = atomic_load(&failures);
    printf("submit stress: %d threads x %d rounds over 3 domains (one shared): %lu tasks, "
           "%lu permits granted, %lu waited: %s\n",
           THREADS, ROUNDS, ran, grants, waits, failed ? "FAILED" : "ok");
    printf("%u passed, %u failed\n", failed ? 0u : 1u, failed ? 1u : 0u);
    return failed ? 1 : 0;
}
