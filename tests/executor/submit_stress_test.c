/*
 * Submit/wait stress of admission, plain C so that it runs under
 * ThreadSanitizer: the arbiter's stress, one level up. Many service threads
 * submit batches to every domain at once -- two managed one-CPU domains, a
 * shared managed domain over both, and a cooperative domain (a host pool
 * attached on the second CPU) -- waiting for, detaching or pipelining each
 * job (a ring of jobs in flight per thread). Some tasks submit to another
 * domain from inside a task, which the nesting rules refuse at once
 * (NXR_EREENTRANT), never with a wait.
 *
 * It checks what admission promises, not only that nothing crashed:
 *   - no overlap: a task of domain D never runs while a task of a domain
 *     overlapping D runs (per-domain "in a task" counters, seq_cst, read at
 *     every task start);
 *   - exactly once: every task of every accepted batch runs once (tasks
 *     after a batch's first error may be skipped, and are counted apart),
 *     and nested submissions run exactly as often as they were accepted;
 *   - no starvation: every thread finishes its rounds on every domain,
 *     including the shared one that overlaps all the others (a hang is the
 *     failure; Bazel's timeout bounds it);
 *   - at the end no permit is held and no request waits.
 * CPU ids come from the allowed set; with fewer than two CPUs it skips.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "examples/pool_executor.h"
#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/check.h"
#include "tests/support/runtime.h"

#define THREADS 8
#define ROUNDS  250
#define DEPTH   4 /* pipelined jobs in flight per thread */
#define NDOM    4

static nxr_runtime_t *rt;
static const int ids[NDOM] = {0, 1, 7, 100};
static nxr_ctx_t *ctxs[THREADS][NDOM];
static bool overlap[NDOM][NDOM]; /* CPU sets intersect (d != e) */
static atomic_int in_task[NDOM]; /* tasks of each domain running now */
static atomic_ulong overlaps_seen;

static atomic_ulong tasks_run;       /* batch tasks that ran */
static atomic_ulong tasks_expected;  /* tasks of batches that cannot fail */
static atomic_ulong tasks_failing;   /* tasks of batches with a failing task */
static atomic_ulong nested_run;      /* tasks of nested submissions that ran */
static atomic_ulong nested_accepted; /* tasks of accepted nested submissions */

struct batch_state {
    atomic_uint hits[32];
    size_t count;
    unsigned dom;
    int fail_at;     /* index whose task fails, or -1 */
    int other;       /* a domain to submit to from inside a task, or -1 */
    nxr_ctx_t *octx; /* its context (the same thread's) */
};

static void enter_task(unsigned d)
{
    atomic_fetch_add(&in_task[d], 1); /* seq_cst: see the file comment */
    for (unsigned e = 0; e < NDOM; e++) {
        if (overlap[d][e] && atomic_load(&in_task[e]) > 0) {
            atomic_fetch_add(&overlaps_seen, 1);
            CHECK(false, "a task of domain %d ran while one of domain %d ran", ids[d], ids[e]);
        }
    }
}

static void leave_task(unsigned d)
{
    atomic_fetch_sub(&in_task[d], 1);
}

static int nested_task(void *arg, size_t index)
{
    unsigned d = (unsigned)(uintptr_t)arg;
    (void)index;
    enter_task(d);
    atomic_fetch_add_explicit(&nested_run, 1, memory_order_relaxed);
    leave_task(d);
    return 0;
}

static int task(void *arg, size_t index)
{
    struct batch_state *b = arg;
    enter_task(b->dom);
    atomic_fetch_add_explicit(&b->hits[index], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&tasks_run, 1, memory_order_relaxed);
    if (b->other >= 0 && index == 0) {
        /* From inside a task: refused at once, never a wait. */
        int rc = nxr_submit(b->octx, 2, nested_task, (void *)(uintptr_t)b->other, NULL);
        CHECK(rc == NXR_EREENTRANT, "nested submit: %s", nxr_strerror(rc));
        if (rc == 0)
            atomic_fetch_add_explicit(&nested_accepted, 2, memory_order_relaxed);
    }
    leave_task(b->dom);
    return (int)index == b->fail_at ? -EIO : 0;
}

static void check_batch(const struct batch_state *b)
{
    for (size_t i = 0; i < b->count; i++) {
        unsigned h = atomic_load(&b->hits[i]);
        if (b->fail_at < 0 || (int)i == b->fail_at)
            CHECK(h == 1, "domain %d task %zu ran %u times", ids[b->dom], i, h);
        else
            CHECK(h <= 1, "domain %d task %zu ran %u times", ids[b->dom], i, h);
    }
}

struct service_result {
    struct batch_state *detached; /* ROUNDS slots, checked after destroy */
    unsigned long per_domain[NDOM];
};

static void *service(void *arg)
{
    unsigned id = (unsigned)(size_t)arg;
    unsigned seed = id * 2654435761u + 17;
    struct service_result *res = calloc(1, sizeof(*res));
    /* Detached and pipelined batches live until checked. */
    res->detached = calloc(ROUNDS, sizeof(*res->detached));
    struct {
        nxr_job_t *job;
        struct batch_state *b;
    } ring[DEPTH] = {0};
    unsigned ring_next = 0;
    for (int round = 0; round < ROUNDS; round++) {
        unsigned d = (unsigned)rand_r(&seed) % NDOM;
        /* 0 wait now, 1 detach now, 2 detach later, 3 pipeline */
        unsigned how = (unsigned)rand_r(&seed) % 4;
        struct batch_state local;
        struct batch_state *b = how == 0 ? &local : &res->detached[round];
        *b = (struct batch_state){
            .count = 1 + (size_t)rand_r(&seed) % 32, .dom = d, .fail_at = -1, .other = -1};
        for (size_t i = 0; i < b->count; i++)
            atomic_init(&b->hits[i], 0);
        if (rand_r(&seed) % 4 == 0)
            b->fail_at = (int)((unsigned)rand_r(&seed) % b->count);
        if (rand_r(&seed) % 5 == 0) {
            b->other = (int)((d + 1) % NDOM);
            b->octx = ctxs[id][b->other];
        }
        if (how == 3 && ring[ring_next].job != NULL) {
            int want = ring[ring_next].b->fail_at >= 0 ? -EIO : 0;
            int rc = nxr_job_wait(ring[ring_next].job);
            CHECK(rc == want, "pipelined job status %d, want %d", rc, want);
            check_batch(ring[ring_next].b);
            ring[ring_next].job = NULL;
        }
        nxr_job_t *job = NULL;
        int rc = nxr_submit(ctxs[id][d], b->count, task, b, how == 1 ? NULL : &job);
        CHECK(rc == 0, "submit to domain %d: %s", ids[d], nxr_strerror(rc));
        if (rc != 0) {
            b->count = 0;
            continue;
        }
        res->per_domain[d]++;
        atomic_fetch_add_explicit(b->fail_at >= 0 ? &tasks_failing : &tasks_expected, b->count,
                                  memory_order_relaxed);
        if (how == 2) {
            nxr_job_detach(job);
        } else if (how == 3) {
            ring[ring_next].job = job;
            ring[ring_next].b = b;
            ring_next = (ring_next + 1) % DEPTH;
        } else if (how == 0) {
            rc = nxr_job_wait(job);
            int want = b->fail_at >= 0 ? -EIO : 0;
            CHECK(rc == want, "job status %d, want %d", rc, want);
            check_batch(b);
        }
    }
    for (unsigned i = 0; i < DEPTH; i++) {
        if (ring[i].job != NULL) {
            int want = ring[i].b->fail_at >= 0 ? -EIO : 0;
            CHECK(nxr_job_wait(ring[i].job) == want, "pipelined job status");
        }
    }
    return res;
}

int main(void)
{
    if (nxr_test_cpu_count() < 2) {
        printf("submit stress: skipped: needs 2 allowed CPUs, the process has %d\n",
               nxr_test_cpu_count());
        printf("0 passed, 0 failed, 1 skipped\n");
        return 0;
    }
    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, "0:%0;1:%1;7:%0,%1 shared", 0);
    fx.opts.spin = 64;
    int rc = nxr_test_runtime_open(&fx);
    if (rc != 0) {
        fprintf(stderr, "create: %s: %s\n", nxr_strerror(rc), fx.err);
        return 1;
    }
    rt = fx.rt;
    /* The cooperative domain: a host pool of two threads on the second CPU. */
    cpu_set_t pool_cpus;
    CPU_ZERO(&pool_cpus);
    CPU_SET(nxr_test_cpu(1), &pool_cpus);
    struct host_pool *pool = host_pool_start(2, &pool_cpus);
    hwloc_bitmap_t coop = nxr_test_cpus(1, 1);
    struct nxr_external_decl decl;
    nxr_external_decl_init(&decl);
    decl.id = 100;
    decl.admission = NXR_ADMISSION_COOPERATIVE;
    decl.cpus = coop;
    decl.budget = 1;
    pool_executor_init(&decl.executor, pool);
    rc = nxr_runtime_attach(rt, &decl);
    hwloc_bitmap_free(coop);
    if (rc != 0) {
        fprintf(stderr, "attach: %s: %s\n", nxr_strerror(rc), nxr_last_error());
        return 1;
    }
    nxr_domain_t *doms[NDOM];
    for (unsigned d = 0; d < NDOM; d++)
        CHECK(nxr_runtime_domain(rt, ids[d], &doms[d]) == 0, "domain %d", ids[d]);
    for (unsigned d = 0; d < NDOM; d++) {
        atomic_init(&in_task[d], 0);
        for (unsigned e = 0; e < NDOM; e++)
            overlap[d][e] = d != e && hwloc_bitmap_intersects(nxr_domain_cpuset(doms[d]),
                                                              nxr_domain_cpuset(doms[e]));
    }
    for (size_t t = 0; t < THREADS; t++) {
        for (size_t d = 0; d < NDOM; d++)
            CHECK(nxr_ctx_create(rt, ids[d], &ctxs[t][d]) == 0, "ctx");
    }
    pthread_t threads[THREADS];
    struct service_result *res[THREADS];
    for (size_t i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, service, (void *)i);
    for (size_t i = 0; i < THREADS; i++)
        pthread_join(threads[i], (void **)&res[i]);
    for (size_t d = 0; d < rt->domain_count; d++)
        nxr__exec_drain(&rt->domains[d]->exec);
    struct nxr__arbiter_stats st;
    nxr__arbiter_stats(rt->arbiter, &st);
    CHECK(st.holders == 0 && st.waiters == 0 && !st.exclusive_held, "arbiter idle");
    unsigned long long joins = 0, deferrals = 0;
    for (size_t d = 0; d < rt->domain_count; d++) {
        struct nxr__admission_stats as;
        nxr__exec_admission_stats(&rt->domains[d]->exec, &as);
        joins += as.joins;
        deferrals += as.deferrals;
    }
    unsigned long waits = st.waits, grants = st.grants;
    for (size_t t = 0; t < THREADS; t++) {
        for (size_t d = 0; d < NDOM; d++)
            nxr_ctx_destroy(ctxs[t][d]);
    }
    nxr_test_runtime_close(&fx);
    host_pool_stop(pool);
    CHECK(pool_executor_refs() == 0, "the pool is still retained");

    unsigned long per_domain[NDOM] = {0};
    for (size_t t = 0; t < THREADS; t++) {
        for (int r = 0; r < ROUNDS; r++) {
            if (res[t]->detached[r].count > 0)
                check_batch(&res[t]->detached[r]);
        }
        for (unsigned d = 0; d < NDOM; d++)
            per_domain[d] += res[t]->per_domain[d];
        free(res[t]->detached);
        free(res[t]);
    }
    unsigned long ran = atomic_load(&tasks_run), expected = atomic_load(&tasks_expected),
                  failing = atomic_load(&tasks_failing);
    CHECK(ran >= expected && ran <= expected + failing, "%lu tasks ran; %lu must, %lu more may",
          ran, expected, failing);
    CHECK(atomic_load(&nested_run) == atomic_load(&nested_accepted),
          "%lu nested tasks ran, %lu accepted", atomic_load(&nested_run),
          atomic_load(&nested_accepted));
    for (unsigned d = 0; d < NDOM; d++)
        CHECK(per_domain[d] > 0, "domain %d never admitted a batch", ids[d]);
    unsigned failed = nxr_test_check_failures();
    printf("submit stress: %d threads x %d rounds over 4 domains (2 managed, 1 shared, 1 "
           "cooperative), batches per domain %lu/%lu/%lu/%lu: %lu tasks, %lu nested, "
           "%lu overlaps, %lu permits granted, %lu waited, %llu joins, %llu deferred: %s\n",
           THREADS, ROUNDS, per_domain[0], per_domain[1], per_domain[2], per_domain[3], ran,
           atomic_load(&nested_run), atomic_load(&overlaps_seen), grants, waits, joins, deferrals,
           failed ? "FAILED" : "ok");
    printf("%u passed, %u failed\n", failed ? 0u : 1u, failed ? 1u : 0u);
    return failed ? 1 : 0;
}
