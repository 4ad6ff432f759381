/*
 * Executor stress, without Criterion so that it also runs under
 * ThreadSanitizer (Criterion's process arena cannot start under TSan).
 *
 * Several service threads hammer every domain at once: parallel loops with
 * both schedules, OUTER runs, submissions that are waited for or detached at
 * random, and nested loops inside tasks. Loops on the two-CPU domain are
 * regions of several slots that the calling thread joins (it claims what no
 * awake worker has), the others are regions the caller waits for. Every index must be visited
 * exactly once, every waited job must report its own status, and destroying the runtime must drain
 * the detached ones. Bounded: a fixed number of rounds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/nxr.h"
#include "tests/support/cpus.h"
#include "tests/support/check.h"
#include "tests/support/runtime.h"

#define THREADS 6
#define ROUNDS  300
#define N       257

static nxr_runtime_t *rt;
static atomic_ulong detached_done;
static unsigned long detached_submitted[THREADS];

struct loop_state {
    atomic_uint hits[N];
    nxr_ctx_t *ctx;
};

static void visit(void *p, size_t b, size_t e, unsigned worker)
{
    struct loop_state *s = p;
    (void)worker;
    for (size_t i = b; i < e; i++)
        atomic_fetch_add_explicit(&s->hits[i], 1, memory_order_relaxed);
}

static int nested_task(void *p, size_t index)
{
    struct loop_state *s = p;
    (void)index;
    return nxr_parallel_for(s->ctx, 0, N, 16, visit, s);
}

static int failing_task(void *p, size_t index)
{
    (void)p;
    return index == 3 ? -EIO : 0;
}

static int counting_task(void *p, size_t index)
{
    (void)p, (void)index;
    atomic_fetch_add_explicit(&detached_done, 1, memory_order_relaxed);
    return 0;
}

static void *service(void *arg)
{
    unsigned id = (unsigned)(size_t)arg;
    unsigned seed = id * 7919u + 1;
    size_t domains = nxr_runtime_domain_count(rt);
    for (int round = 0; round < ROUNDS; round++) {
        nxr_domain_t *d = nxr_runtime_domain_at(rt, (size_t)rand_r(&seed) % domains);
        nxr_ctx_t *ctx;
        CHECK(nxr_ctx_create(rt, nxr_domain_id(d), &ctx) == 0, "ctx");
        struct loop_state *s = calloc(1, sizeof(*s));
        s->ctx = ctx;
        struct nxr_for_opts o;
        nxr_for_opts_init(&o);
        o.grain = 1 + (size_t)rand_r(&seed) % 40;
        o.schedule = rand_r(&seed) % 2 ? NXR_SCHEDULE_DYNAMIC : NXR_SCHEDULE_STATIC;
        CHECK(nxr_parallel_for_opts(ctx, 0, N, &o, visit, s) == 0, "loop");
        unsigned tasks = 1 + (unsigned)rand_r(&seed) % 4;
        CHECK(nxr_run(ctx, NXR_MODE_OUTER, tasks, nested_task, s) == 0, "outer");
        for (size_t i = 0; i < N; i++)
            CHECK(atomic_load(&s->hits[i]) == 1 + tasks, "index %zu hit %u times, want %u", i,
                  atomic_load(&s->hits[i]), 1 + tasks);
        free(s);

        nxr_job_t *job;
        CHECK(nxr_submit(ctx, 8, failing_task, NULL, &job) == 0, "submit");
        CHECK(nxr_job_wait(job) == -EIO, "first error");
        unsigned count = 1 + (unsigned)rand_r(&seed) % 16;
        if (rand_r(&seed) % 2) {
            CHECK(nxr_submit(ctx, count, counting_task, NULL, NULL) == 0, "detached");
        } else {
            CHECK(nxr_submit(ctx, count, counting_task, NULL, &job) == 0, "submit");
            nxr_job_detach(job);
        }
        detached_submitted[id] += count;
        nxr_ctx_destroy(ctx);
    }
    return NULL;
}

int main(void)
{
    if (nxr_test_cpu_count() < 2) {
        printf("stress: skipped: needs 2 allowed CPUs, the process has %d\n", nxr_test_cpu_count());
        printf("0 passed, 0 failed, 1 skipped\n");
        return 0;
    }
    /* Two one-CPU domains, so services cross between them, and a shared one
     * over both CPUs (two workers, a budget of two) whose loops are
     * multi-slot regions with the calling thread taking part: on a 2-CPU
     * machine every unpinned service thread lies inside it. It overlaps the
     * other two, so arbitration, joins and deferred batches run too. */
    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, "0:%0;1:%1;2:%0,%1 shared", 0);
    int rc = nxr_test_runtime_open(&fx);
    if (rc != 0) {
        fprintf(stderr, "create: %s: %s\n", nxr_strerror(rc), fx.err);
        return 1;
    }
    rt = fx.rt;
    pthread_t threads[THREADS];
    for (size_t i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, service, (void *)i);
    for (size_t i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    nxr_test_runtime_close(&fx);
    unsigned long want = 0;
    for (size_t i = 0; i < THREADS; i++)
        want += detached_submitted[i];
    CHECK(atomic_load(&detached_done) == want, "drained %lu of %lu detached tasks",
          atomic_load(&detached_done), want);
    unsigned failed = nxr_test_check_failures();
    printf("executor stress: %d threads x %d rounds: %s\n", THREADS, ROUNDS,
           failed ? "FAILED" : "ok");
    printf("%u passed, %u failed\n", failed ? 0u : 1u, failed ? 1u : 0u);
    return failed ? 1 : 0;
}
