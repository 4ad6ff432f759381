/*
 * Admission fairness at the runtime level: a request that waits for an
 * overlapping domain's permit bounds how long that permit can be extended.
 * Once it is queued, new operations on the holding domain do not join the
 * held permit; they queue behind it. Counted, never timed: the tests read
 * the domain's join and deferral counters and the order in which bodies ran.
 *
 * Domains "0:%0;1:%1;9:%0,%1 shared" (the starvation probe, with
 * CPU ids from the allowed set): 9 overlaps both 0 and 1.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal/sys.h"
#include "base/strbuf.h"
#include "examples/host_pool.h"
#include "examples/pool_executor.h"
#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static struct nxr_test_runtime fx; /* the quiet runtime (tests/support/runtime.h) */

static void open_runtime(const char *tmpl)
{
    NXR_TEST_RUNTIME(&fx, tmpl, 0);
    rt = fx.rt;
}

static void teardown(void)
{
    nxr_runtime_destroy(rt);
    rt = NULL;
}

TestSuite(executor_admission, .fini = teardown, .timeout = 60);

static struct nxr__exec *exec_of(int id)
{
    nxr_domain_t *d;
    cr_assert_eq(nxr_runtime_domain(rt, id, &d), 0);
    return &((struct nxr_domain *)d)->exec;
}

static struct nxr__admission_stats stats_of(int id)
{
    struct nxr__admission_stats s;
    nxr__exec_admission_stats(exec_of(id), &s);
    return s;
}

static unsigned arbiter_waiters(void)
{
    struct nxr__arbiter_stats st;
    nxr__arbiter_stats(rt->arbiter, &st);
    return st.waiters;
}

/* Spins (yielding) until cond holds; the suite's timeout bounds it. */
#define AWAIT(cond)                                                                                \
    do {                                                                                           \
        while (!(cond))                                                                            \
            sched_yield();                                                                         \
    } while (0)

static atomic_uint order;   /* next sequence number for a body */
static atomic_int gate;     /* the gated task runs until this is 1 */
static atomic_int gated_in; /* the gated task has started */

static int gated_task(void *arg, size_t i)
{
    (void)arg, (void)i;
    atomic_store(&gated_in, 1);
    AWAIT(atomic_load(&gate) == 1);
    return 0;
}

static int stamp_task(void *arg, size_t i)
{
    (void)i;
    atomic_store((atomic_uint *)arg, atomic_fetch_add(&order, 1) + 1);
    return 0;
}

static void stamp_body(void *arg, size_t b, size_t e, unsigned w)
{
    (void)b, (void)e, (void)w;
    unsigned zero = 0, seq = atomic_fetch_add(&order, 1) + 1;
    atomic_compare_exchange_strong((atomic_uint *)arg, &zero, seq); /* the first chunk's */
}

struct loop_on {
    nxr_ctx_t *ctx;
    atomic_uint *stamp;
    int rc;
};

static void *loop_thread(void *p)
{
    struct loop_on *l = p;
    l->rc = nxr_parallel_for(l->ctx, 0, 2, 1, stamp_body, l->stamp);
    return NULL;
}

struct submit_on {
    nxr_ctx_t *ctx;
    atomic_uint *stamp;
    int rc;
};

static void *submit_thread(void *p)
{
    struct submit_on *s = p;
    nxr_job_t *job;
    s->rc = nxr_submit(s->ctx, 1, stamp_task, s->stamp, &job);
    if (s->rc == 0)
        s->rc = nxr_job_wait(job);
    return NULL;
}

/* Holds ctx's domain's permit with a gated batch; returns its job. */
static nxr_job_t *hold_domain(nxr_ctx_t *ctx)
{
    atomic_store(&gate, 0);
    atomic_store(&gated_in, 0);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 1, gated_task, NULL, &job), 0);
    AWAIT(atomic_load(&gated_in) == 1);
    return job;
}

Test(executor_admission, a_new_batch_joins_a_held_permit_when_nobody_waits)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("0:%0;1:%1;9:%0,%1 shared");
    nxr_ctx_t *ctx0;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx0), 0);
    nxr_job_t *held = hold_domain(ctx0);
    struct nxr__admission_stats before = stats_of(0);
    atomic_uint stamp = 0;
    nxr_job_t *job;
    /* Nothing waits for CPU %0: the batch joins at once (no wait, no thread). */
    cr_assert_eq(nxr_submit(ctx0, 1, stamp_task, &stamp, &job), 0);
    struct nxr__admission_stats after = stats_of(0);
    cr_expect_eq(after.joins, before.joins + 1, "joined the held permit");
    cr_expect_eq(after.deferrals, before.deferrals);
    cr_expect_eq(after.active, 2);
    atomic_store(&gate, 1);
    cr_expect_eq(nxr_job_wait(held), 0);
    cr_expect_eq(nxr_job_wait(job), 0);
    cr_expect_eq(atomic_load(&stamp), 1);
    nxr_ctx_destroy(ctx0);
}

Test(executor_admission, a_waiting_overlapping_request_stops_new_joins)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("0:%0;1:%1;9:%0,%1 shared");
    nxr_ctx_t *ctx0, *ctx0b, *ctx9;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx0), 0);
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx0b), 0);
    cr_assert_eq(nxr_ctx_create(rt, 9, &ctx9), 0);
    atomic_store(&order, 0);
    nxr_job_t *held = hold_domain(ctx0);

    /* Domain 9 asks for CPUs %0,%1 and queues behind domain 0's permit. */
    atomic_uint stamp9 = 0, stamp_late = 0;
    struct loop_on nine = {.ctx = ctx9, .stamp = &stamp9};
    pthread_t t9, tlate;
    pthread_create(&t9, NULL, loop_thread, &nine);
    AWAIT(arbiter_waiters() == 1);

    /* A later batch on domain 0 must queue behind 9, not join. */
    struct nxr__admission_stats before = stats_of(0);
    struct submit_on late = {.ctx = ctx0b, .stamp = &stamp_late};
    pthread_create(&tlate, NULL, submit_thread, &late);
    struct nxr__admission_stats now;
    do {
        sched_yield();
        now = stats_of(0);
    } while (now.joins + now.deferrals == before.joins + before.deferrals);
    cr_expect_eq(now.joins, before.joins, "a batch joined while domain 9 waited");
    cr_expect_eq(now.deferrals, before.deferrals + 1);
    cr_expect_eq(now.active, 1, "only the held batch is in flight");

    atomic_store(&gate, 1);
    cr_expect_eq(nxr_job_wait(held), 0);
    pthread_join(t9, NULL);
    pthread_join(tlate, NULL);
    cr_expect_eq(nine.rc, 0);
    cr_expect_eq(late.rc, 0);
    cr_expect_lt(atomic_load(&stamp9), atomic_load(&stamp_late),
                 "the later batch (%u) overtook domain 9 (%u)", atomic_load(&stamp_late),
                 atomic_load(&stamp9));
    nxr_ctx_destroy(ctx0);
    nxr_ctx_destroy(ctx0b);
    nxr_ctx_destroy(ctx9);
}

/*
 * The starvation probe: two threads keep a pipeline of batches in
 * flight on domain 0 while a third runs a loop on domain 9. The stream is
 * made gap-free, the worst case: a batch's task finishes only once a later
 * batch has been submitted (or the stream stops), so domain 0 always has an operation in flight while the
 * stream runs. Before the fix domain 9 waited exactly until the stream
 * stopped; now it is admitted while the stream runs and the stream goes on.
 */
#define STREAMS      2
#define DEPTH        4     /* batches in flight per stream thread */
#define STREAM_LIMIT 20000 /* batches per stream thread: a bound, not a goal */
#define AFTER        32    /* batches the stream must run after domain 9 */

static atomic_ulong submitted;   /* batches submitted, both streams */
static atomic_ulong stream_done; /* batches finished, both streams */
static atomic_int nine_finished; /* domain 9's loop returned */
static atomic_ulong done_at_nine; /* stream_done + 1 when 9's body ran */
static atomic_ulong after_nine;  /* batches finished after 9 returned */
static atomic_int exhausted;     /* a stream thread hit its limit */
static atomic_int stopping;      /* the stream is winding down */

static int stream_task(void *arg, size_t i)
{
    (void)i;
    unsigned long ticket = (unsigned long)(uintptr_t)arg;
    /* Gap-free: hold the permit until a later batch is in (see above). A
     * submission returns whether it joined or was queued behind domain 9,
     * so this needs no look at the implementation's counters. */
    while (atomic_load(&submitted) <= ticket + 1 && !atomic_load(&stopping))
        sched_yield();
    return 0;
}

static void *stream(void *p)
{
    nxr_ctx_t *ctx = p;
    nxr_job_t *ring[DEPTH] = {0};
    unsigned long n = 0;
    for (; n < STREAM_LIMIT; n++) {
        if (atomic_load(&nine_finished) && atomic_load(&after_nine) >= AFTER)
            break;
        nxr_job_t **slot = &ring[n % DEPTH];
        if (*slot != NULL) {
            cr_assert_eq(nxr_job_wait(*slot), 0);
            atomic_fetch_add(&stream_done, 1);
            if (atomic_load(&nine_finished))
                atomic_fetch_add(&after_nine, 1);
        }
        unsigned long ticket = atomic_fetch_add(&submitted, 0);
        cr_assert_eq(nxr_submit(ctx, 1, stream_task, (void *)(uintptr_t)ticket, slot), 0);
        atomic_fetch_add(&submitted, 1);
    }
    if (n == STREAM_LIMIT)
        atomic_store(&exhausted, 1);
    atomic_store(&stopping, 1);
    for (unsigned i = 0; i < DEPTH; i++) {
        if (ring[i] != NULL)
            cr_assert_eq(nxr_job_wait(ring[i]), 0);
    }
    return NULL;
}

static void nine_body(void *arg, size_t b, size_t e, unsigned w)
{
    (void)arg, (void)b, (void)e, (void)w;
    unsigned long zero = 0;
    atomic_compare_exchange_strong(&done_at_nine, &zero, atomic_load(&stream_done) + 1);
}

Test(executor_admission, starvation_probe_admits_domain9_while_the_stream_runs)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("0:%0;1:%1;9:%0,%1 shared");
    nxr_ctx_t *streams[STREAMS], *ctx9;
    for (int i = 0; i < STREAMS; i++)
        cr_assert_eq(nxr_ctx_create(rt, 0, &streams[i]), 0);
    cr_assert_eq(nxr_ctx_create(rt, 9, &ctx9), 0);
    pthread_t t[STREAMS];
    for (int i = 0; i < STREAMS; i++)
        pthread_create(&t[i], NULL, stream, streams[i]);
    AWAIT(atomic_load(&stream_done) >= 64); /* the stream is under way */
    struct nxr__admission_stats before = stats_of(0);

    /* Domain 9's loop, from this thread. */
    unsigned long start = atomic_load(&stream_done);
    cr_assert_eq(nxr_parallel_for(ctx9, 0, 2, 1, nine_body, NULL), 0);
    atomic_store(&nine_finished, 1);
    for (int i = 0; i < STREAMS; i++)
        pthread_join(t[i], NULL);
    struct nxr__admission_stats after = stats_of(0);

    unsigned long at_nine = atomic_load(&done_at_nine) - 1;
    printf("starvation probe: domain 9 admitted after %lu stream batches finished since its "
           "call (%lu in flight at most: %d threads x %d), stream %s: %lu batches in all, "
           "%lu after domain 9; domain 0: %llu joins, %llu deferred behind an overlapping "
           "request\n",
           at_nine - start, (unsigned long)STREAMS * DEPTH, STREAMS, DEPTH,
           atomic_load(&exhausted) ? "ran out (domain 9 waited for its end)" : "still running",
           atomic_load(&stream_done), atomic_load(&after_nine),
           (unsigned long long)(after.joins - before.joins),
           (unsigned long long)(after.deferrals - before.deferrals));
    cr_expect_eq(atomic_load(&exhausted), 0,
                 "domain 9 was admitted only after the stream ran out of batches");
    cr_expect_geq(atomic_load(&after_nine), AFTER, "the stream stopped with domain 9");
    cr_expect_gt(after.deferrals, before.deferrals, "no batch queued behind domain 9");
    for (int i = 0; i < STREAMS; i++)
        nxr_ctx_destroy(streams[i]);
    nxr_ctx_destroy(ctx9);
}

/*
 * The deadlock shape: a task of J1 (domain 0, holding the permit)
 * waits until another thread's nxr_submit on domain 0 has returned, while
 * domain 9 queues for CPUs that overlap domain 0's. The submission must
 * return (it is queued behind domain 9, not refused and not made to wait
 * for domain 0 to go idle, which needs J1 to end), and its batch must still
 * run after domain 9 (the starvation bound). The task's wait is bounded so
 * that the old rule fails here instead of hanging.
 */
#define SHAPE_BOUND_MS 10000

static atomic_int second_returned; /* the second nxr_submit returned */
static atomic_int saw_second;      /* J1's task saw it before its bound */

static int waits_for_second_submit(void *arg, size_t i)
{
    (void)arg, (void)i;
    atomic_store(&gated_in, 1);
    nxr_test_wait_at_least(&second_returned, 1, SHAPE_BOUND_MS);
    atomic_store(&saw_second, atomic_load(&second_returned));
    return 0;
}

struct second_submit {
    nxr_ctx_t *ctx;
    atomic_uint *stamp;
    nxr_job_t *job;
    int rc;
};

static void *second_submit_thread(void *p)
{
    struct second_submit *s = p;
    s->rc = nxr_submit(s->ctx, 1, stamp_task, s->stamp, &s->job);
    atomic_store(&second_returned, 1);
    return NULL;
}

Test(executor_admission, a_task_may_wait_for_a_submission_while_an_overlapping_request_waits)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("0:%0;1:%1;9:%0,%1 shared");
    nxr_ctx_t *ctx0, *ctx0b, *ctx9;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx0), 0);
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx0b), 0);
    cr_assert_eq(nxr_ctx_create(rt, 9, &ctx9), 0);
    atomic_store(&order, 0);
    atomic_store(&gated_in, 0);
    atomic_store(&second_returned, 0);
    atomic_store(&saw_second, 0);
    nxr_job_t *j1;
    cr_assert_eq(nxr_submit(ctx0, 1, waits_for_second_submit, NULL, &j1), 0);
    AWAIT(atomic_load(&gated_in) == 1);

    atomic_uint stamp9 = 0, stamp_second = 0;
    struct loop_on nine = {.ctx = ctx9, .stamp = &stamp9};
    pthread_t t9, t2;
    pthread_create(&t9, NULL, loop_thread, &nine);
    AWAIT(arbiter_waiters() == 1);

    struct second_submit second = {.ctx = ctx0b, .stamp = &stamp_second};
    pthread_create(&t2, NULL, second_submit_thread, &second);
    cr_expect_eq(nxr_job_wait(j1), 0);
    pthread_join(t2, NULL);
    pthread_join(t9, NULL);
    cr_expect_eq(atomic_load(&saw_second), 1,
                 "the second nxr_submit did not return while J1's task waited for it");
    cr_assert_eq(second.rc, 0);
    cr_expect_eq(nxr_job_wait(second.job), 0);
    cr_expect_eq(nine.rc, 0);
    cr_expect_lt(atomic_load(&stamp9), atomic_load(&stamp_second),
                 "the second batch (%u) overtook domain 9 (%u)", atomic_load(&stamp_second),
                 atomic_load(&stamp9));
    nxr_ctx_destroy(ctx0);
    nxr_ctx_destroy(ctx0b);
    nxr_ctx_destroy(ctx9);
}

/*
 * A deferred batch that can never be admitted fails instead of waiting: the
 * domain's executor refuses the item that would wait for the permit (its
 * allocation fails), so the batch ends with that status, its task not run,
 * and the domain is left idle with nothing deferred.
 */
static atomic_int ran_refused;

static int mark_ran(void *arg, size_t i)
{
    (void)arg, (void)i;
    atomic_store(&ran_refused, 1);
    return 0;
}

Test(executor_admission, a_deferred_batch_whose_wait_cannot_start_fails_with_its_status)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("0:%0;1:%1;9:%0,%1 shared");
    nxr_ctx_t *ctx0, *ctx9;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx0), 0);
    cr_assert_eq(nxr_ctx_create(rt, 9, &ctx9), 0);
    /* Domain 9 holds CPUs %0,%1: domain 0 can neither join nor acquire. */
    nxr_job_t *held = hold_domain(ctx9);
    atomic_store(&ran_refused, 0);
    /* Allocation 1: the job; 2: the team's batch for the acquiring item. */
    nxr__fault_arm(NXR_FAULT_ALLOC, 2);
    nxr_job_t *job;
    int rc = nxr_submit(ctx0, 1, mark_ran, NULL, &job);
    nxr__fault_arm(NXR_FAULT_ALLOC, 0);
    cr_assert_eq(rc, 0, "the submission itself succeeds (deferred): %s", nxr_strerror(rc));
    cr_expect_eq(nxr_job_wait(job), -ENOMEM);
    cr_expect_eq(atomic_load(&ran_refused), 0, "the refused batch's task ran");
    struct nxr__admission_stats st = stats_of(0);
    cr_expect_eq(st.deferred, 0);
    cr_expect_eq(st.active, 0);
    cr_expect(!st.acquiring);
    atomic_store(&gate, 1);
    cr_expect_eq(nxr_job_wait(held), 0);
    /* The domain still works afterwards. */
    cr_expect_eq(nxr_submit(ctx0, 1, mark_ran, NULL, &job), 0);
    cr_expect_eq(nxr_job_wait(job), 0);
    cr_expect_eq(atomic_load(&ran_refused), 1);
    nxr_ctx_destroy(ctx0);
    nxr_ctx_destroy(ctx9);
}

/*
 * Deferred batches keep their place: once the permit comes back for them,
 * a batch whose nxr_submit returned after theirs did must not start before
 * them. The window is the hand-over (the deferred batches taken under the
 * lock, handed to the executor after it). A cooperative domain's executor
 * (a one-thread host pool, wrapped) makes the window visible: when it is
 * handed the deferred batch, it first has another thread submit a batch to
 * the domain and return. Run on the pool's one thread in the order the
 * pool got them, the deferred batch must run first. Before the hand-over
 * kept joins off, the later batch joined the permit and was handed over
 * first; a task waiting (through its submitters) for the earlier one then
 * waited for a batch queued behind itself (the starvation probe hung so).
 */
static struct nxr_executor pool_inner;  /* the host pool's executor */
static atomic_int submits_to_intercept; /* 0: none; n: the nth submit from now */
static nxr_ctx_t *late_ctx;             /* where the intercepting submit goes */
static atomic_uint late_stamp;
static nxr_job_t *late_job;
static int late_rc = 1;

/* Set: before its submit, the intercepting thread submits a batch here
 * and waits until that batch's domain queues in the arbiter. */
static nxr_ctx_t *overlap_ctx;
static atomic_uint overlap_stamp;
static nxr_job_t *overlap_job;
static int overlap_rc = 1;
static struct nxr__admission_stats during; /* domain 100's, mid-hand-over */
static char during_who[512];               /* a stall line's holders, mid-hand-over */

static void *late_submit_thread(void *p)
{
    (void)p;
    during = stats_of(100);
    struct nxr__strbuf sb = {0};
    char *who = NULL;
    nxr__runtime_stall_who(rt, exec_of(100), &sb);
    if (nxr__strbuf_take(&sb, &who) == 0)
        snprintf(during_who, sizeof during_who, "%s", who);
    free(who);
    if (overlap_ctx != NULL) {
        overlap_rc = nxr_submit(overlap_ctx, 1, stamp_task, &overlap_stamp, &overlap_job);
        if (overlap_rc != 0)
            return NULL;
        AWAIT(arbiter_waiters() == 1);
    }
    late_rc = nxr_submit(late_ctx, 1, stamp_task, &late_stamp, &late_job);
    return NULL;
}

static int wrapped_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    (void)self;
    return pool_inner.ops->install(pool_inner.self, fn, arg, count);
}

static int wrapped_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                          void *done_arg)
{
    (void)self;
    if (atomic_load(&submits_to_intercept) > 0 && atomic_fetch_sub(&submits_to_intercept, 1) == 1) {
        /* Another thread's nxr_submit, made and returned (it never waits
         * for admission) before this batch reaches the pool. */
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, late_submit_thread, NULL), 0);
        pthread_join(t, NULL);
    }
    return pool_inner.ops->submit(pool_inner.self, fn, arg, count, done, done_arg);
}

static void wrapped_retain(void *self)
{
    (void)self;
    pool_inner.ops->retain(pool_inner.self);
}

static void wrapped_release(void *self)
{
    (void)self;
    pool_inner.ops->release(pool_inner.self);
}

static const struct nxr_executor_ops wrapped_ops = {.install = wrapped_install,
                                                    .submit = wrapped_submit,
                                                    .retain = wrapped_retain,
                                                    .release = wrapped_release};

/* The scene above; with `overlap`, domain 9 queues again during the
 * hand-over, before the later batch is submitted. */
static void hand_over_scene(bool overlap)
{
    open_runtime("9:%0"); /* the overlapping request's domain */
    cpu_set_t pin;
    CPU_ZERO(&pin);
    CPU_SET(nxr_test_cpu(0), &pin);
    struct host_pool *pool = host_pool_start(1, &pin);
    cr_assert_not_null(pool);
    pool_executor_init(&pool_inner, pool);
    struct nxr_external_decl decl;
    nxr_external_decl_init(&decl);
    decl.id = 100;
    decl.admission = NXR_ADMISSION_COOPERATIVE;
    hwloc_bitmap_t cpus = nxr_test_cpus(0, 1);
    decl.cpus = cpus;
    decl.budget = 1;
    decl.executor = pool_inner;
    decl.executor.ops = &wrapped_ops;
    cr_assert_eq(nxr_runtime_attach(rt, &decl), 0, "%s", nxr_last_error());
    hwloc_bitmap_free(cpus);
    nxr_ctx_t *ctx100, *ctx9;
    cr_assert_eq(nxr_ctx_create(rt, 100, &ctx100), 0);
    cr_assert_eq(nxr_ctx_create(rt, 100, &late_ctx), 0);
    cr_assert_eq(nxr_ctx_create(rt, 9, &ctx9), 0);
    atomic_store(&order, 0);
    atomic_store(&late_stamp, 0);
    atomic_store(&overlap_stamp, 0);
    atomic_store(&submits_to_intercept, 0);
    late_rc = overlap_rc = 1;
    overlap_ctx = overlap ? ctx9 : NULL;

    /* Domain 100 holds the permit; domain 9 queues for it. */
    nxr_job_t *held = hold_domain(ctx100);
    /* A batch, not a loop: a one-CPU loop from a caller inside the
     * domain (taskset -c N) would run inline, without the permit. */
    atomic_uint stamp9 = 0, stamp_deferred = 0;
    nxr_job_t *nine;
    cr_assert_eq(nxr_submit(ctx9, 1, stamp_task, &stamp9, &nine), 0);
    AWAIT(arbiter_waiters() == 1);

    /* Deferred behind domain 9. */
    nxr_job_t *deferred;
    cr_assert_eq(nxr_submit(ctx100, 1, stamp_task, &stamp_deferred, &deferred), 0);
    cr_assert_eq(stats_of(100).deferred, 1);
    /* The pool is handed, from now: the item that takes the permit back
     * (when the held batch ends), then the deferred batch: intercept it. */
    atomic_store(&submits_to_intercept, 2);
    atomic_store(&gate, 1);
    cr_expect_eq(nxr_job_wait(held), 0);
    cr_expect_eq(nxr_job_wait(nine), 0);
    cr_expect_eq(nxr_job_wait(deferred), 0);
    cr_assert_eq(atomic_load(&submits_to_intercept), 0, "the deferred batch was not intercepted");
    cr_assert_eq(late_rc, 0, "%s", nxr_strerror(late_rc));
    /* Mid-hand-over the domain reports the deferred batch in flight, and
     * no region (its hold is no operation). */
    cr_expect(during.acquiring);
    cr_expect_eq(during.batches, 1);
    cr_expect_eq(during.active, during.batches, "%u in flight, %u of them batches", during.active,
                 during.batches);
    /* ...and a stall line names it as holding the permit, not as
     * acquiring it. */
    cr_expect_not_null(strstr(during_who, "held by: domain 100 (1 batch(es), 0 region(s) in "
                                          "flight, handing deferred batches over)"),
                       "%s", during_who);
    cr_expect_null(strstr(during_who, "acquiring the permit"), "%s", during_who);
    cr_expect_eq(nxr_job_wait(late_job), 0);
    cr_expect_lt(atomic_load(&stamp9), atomic_load(&stamp_deferred));
    cr_expect_lt(atomic_load(&stamp_deferred), atomic_load(&late_stamp),
                 "the batch submitted later (%u) started before the deferred one (%u)",
                 atomic_load(&late_stamp), atomic_load(&stamp_deferred));
    if (overlap) {
        cr_assert_eq(overlap_rc, 0, "%s", nxr_strerror(overlap_rc));
        cr_expect_eq(nxr_job_wait(overlap_job), 0);
        cr_expect_lt(atomic_load(&overlap_stamp), atomic_load(&late_stamp),
                     "the batch submitted after domain 9 queued (%u) ran on the permit "
                     "domain 9 waited for (9: %u)",
                     atomic_load(&late_stamp), atomic_load(&overlap_stamp));
    }
    nxr_ctx_destroy(ctx100);
    nxr_ctx_destroy(late_ctx);
    nxr_ctx_destroy(ctx9);
    nxr_runtime_destroy(rt); /* before the pool: its last release */
    rt = NULL;
    host_pool_stop(pool);
}

Test(executor_admission, deferred_batches_start_before_a_batch_submitted_after_them)
{
    hand_over_scene(false);
}

/*
 * The hand-over takes the batches deferred while it runs, as joins would
 * have been admitted, but not once an overlapping request waits: those
 * wait for the next permit, behind it (the starvation bound).
 */
Test(executor_admission, the_hand_over_admits_nothing_new_once_an_overlapping_request_waits)
{
    hand_over_scene(true);
}
