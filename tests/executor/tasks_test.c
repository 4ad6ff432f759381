/*
 * Tasks: nxr_run in each mode, re-entry from a worker, asynchronous submit
 * with wait/detach, first-error-wins, and draining at runtime destruction.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static nxr_ctx_t *ctx;

static void open_runtime(const char *domains)
{
    static struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, domains, 0); /* a template of tests/support/cpus.h, or NULL */
    rt = fx.rt;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
}

static void teardown(void)
{
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    ctx = NULL;
    rt = NULL;
}

TestSuite(executor_tasks, .fini = teardown, .timeout = 30);

static bool on_worker(void)
{
    return nxr_test_worker_domain() >= 0;
}

struct record {
    atomic_uint ran;
    atomic_uint on_workers;
    atomic_uint order_violations;
    atomic_size_t last;
    int fail_at; /* index whose task returns -EIO; -1 none */
};

static int record_task(void *p, size_t index)
{
    struct record *r = p;
    if (on_worker())
        atomic_fetch_add(&r->on_workers, 1);
    size_t last = atomic_exchange(&r->last, index + 1);
    if (last != index)
        atomic_fetch_add(&r->order_violations, 1);
    atomic_fetch_add(&r->ran, 1);
    return (int)index == r->fail_at ? -EIO : 0;
}

Test(executor_tasks, sequential_runs_in_order_on_the_caller)
{
    open_runtime(NULL);
    /* A caller inside the domain runs SEQUENTIAL itself (outside it, one
     * worker does: tests/runtime/work_placement_test.c). */
    cr_assert_eq(nxr_test_pin(nxr_domain_cpuset(nxr_ctx_domain(ctx))), 0);
    struct record r = {.fail_at = -1};
    cr_assert_eq(nxr_run(ctx, NXR_MODE_SEQUENTIAL, 50, record_task, &r), 0);
    cr_expect_eq(atomic_load(&r.ran), 50);
    cr_expect_eq(atomic_load(&r.on_workers), 0);
    cr_expect_eq(atomic_load(&r.order_violations), 0);
}

Test(executor_tasks, sequential_stops_at_the_first_error)
{
    open_runtime(NULL);
    struct record r = {.fail_at = 3};
    cr_assert_eq(nxr_run(ctx, NXR_MODE_SEQUENTIAL, 50, record_task, &r), -EIO);
    cr_expect_eq(atomic_load(&r.ran), 4);
}

struct inner_probe {
    nxr_ctx_t *ctx;
    atomic_uint worker_chunks;
    atomic_uint tasks_on_workers;
    atomic_uint chunks_off_task_thread; /* a loop chunk not on its task's thread */
    bool hold_caller; /* the caller's chunks wait for a worker's (bounded) */
};

static __thread pid_t task_tid;

static bool a_worker_took_a_chunk(void *p)
{
    return atomic_load(&((struct inner_probe *)p)->worker_chunks) != 0;
}

static void note_chunk(void *p, size_t b, size_t e, unsigned w)
{
    struct inner_probe *ip = p;
    (void)b, (void)e, (void)w;
    bool worker = on_worker();
    if (worker)
        atomic_fetch_add(&ip->worker_chunks, 1);
    if ((pid_t)syscall(SYS_gettid) != task_tid)
        atomic_fetch_add(&ip->chunks_off_task_thread, 1);
    /* A region does not wait for a worker that is not awake yet (the caller
     * claims its share too); when asked, hold the caller's chunks (bounded)
     * until a worker took one, so the loop shows that workers take part. */
    if (ip->hold_caller && !worker)
        nxr_test_wait_until(a_worker_took_a_chunk, ip, 5000);
}

static int inner_task(void *p, size_t index)
{
    struct inner_probe *ip = p;
    (void)index;
    if (on_worker())
        atomic_fetch_add(&ip->tasks_on_workers, 1);
    task_tid = (pid_t)syscall(SYS_gettid);
    return nxr_parallel_for(ip->ctx, 0, 64, 1, note_chunk, ip);
}

Test(executor_tasks, inner_tasks_run_on_the_caller_and_their_loops_fan_out)
{
    open_runtime("0:%0,%1");
    struct inner_probe ip = {.ctx = ctx, .hold_caller = true};
    cr_assert_eq(nxr_run(ctx, NXR_MODE_INNER, 3, inner_task, &ip), 0);
    cr_expect_eq(atomic_load(&ip.tasks_on_workers), 0);
    cr_expect_gt(atomic_load(&ip.worker_chunks), 0, "the loops used the domain's workers");
}

struct rendezvous {
    nxr_ctx_t *ctx;
    atomic_int arrived;
    atomic_uint met;
    struct inner_probe ip;
};

/* Tasks 0 and 1 wait (bounded) for each other: they can only meet if two
 * threads run tasks at once. Every task also runs a nested loop. */
static int meet_task(void *p, size_t index)
{
    struct rendezvous *rv = p;
    if (index < 2) {
        atomic_fetch_add(&rv->arrived, 1);
        nxr_test_wait_at_least(&rv->arrived, 2, 5000);
        if (atomic_load(&rv->arrived) >= 2)
            atomic_fetch_add(&rv->met, 1);
    }
    return inner_task(&rv->ip, index);
}

/* Nested loops are checked where they run (each chunk on its task's own
 * thread) and by the team's own dispatch count (one region: the OUTER run
 * itself), not by counting threads, which a nested dispatch would not add. */
Test(executor_tasks, outer_tasks_fan_out_and_nest_sequentially)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("0:%0,%1");
    struct nxr__team *team = ctx->domain->team;
    uint64_t regions = nxr__team_regions(team);
    struct rendezvous rv = {.ctx = ctx, .ip = {.ctx = ctx}};
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, 40, meet_task, &rv), 0);
    cr_expect_eq(atomic_load(&rv.met), 2, "two tasks ran at the same time");
    cr_expect_gt(atomic_load(&rv.ip.tasks_on_workers), 0, "tasks ran on workers");
    cr_expect_eq(atomic_load(&rv.ip.chunks_off_task_thread), 0,
                 "a nested loop's chunk left its task's thread");
    cr_expect_eq(nxr__team_regions(team) - regions, 1u, "nested loops dispatched regions");
    cr_expect_eq(nxr__team_nested_regions(team), 0u);
}

Test(executor_tasks, outer_reports_the_error_and_skips_the_rest)
{
    open_runtime(NULL);
    struct record r = {.fail_at = 0};
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, 100000, record_task, &r), -EIO);
    cr_expect_lt(atomic_load(&r.ran), 100000, "tasks after the error were skipped");
}

struct reentry {
    nxr_ctx_t *ctx;
    atomic_int run_rc, submit_rc, wait_rc;
    nxr_job_t *job;
};

static int noop_task(void *p, size_t i)
{
    (void)p, (void)i;
    return 0;
}

static int reenter_task(void *p, size_t index)
{
    struct reentry *re = p;
    (void)index;
    if (!on_worker())
        return 0; /* the caller's share, if it takes part: not a re-entry */
    atomic_store(&re->run_rc, nxr_run(re->ctx, NXR_MODE_OUTER, 4, noop_task, NULL));
    nxr_job_t *job = NULL;
    atomic_store(&re->submit_rc, nxr_submit(re->ctx, 1, noop_task, NULL, &job));
    atomic_store(&re->wait_rc, nxr_job_wait(re->job));
    return 0;
}

Test(executor_tasks, entering_from_an_own_worker_is_ereentrant)
{
    /* Domain 0 is the second CPU alone and the test thread may also run on
     * the first, so the task runs on the worker. */
    open_runtime("0:%1");
    struct reentry re = {.ctx = ctx};
    cr_assert_eq(nxr_submit(ctx, 1, noop_task, NULL, &re.job), 0);
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, 1, reenter_task, &re), 0);
    cr_expect_eq(atomic_load(&re.run_rc), NXR_EREENTRANT);
    cr_expect_eq(atomic_load(&re.submit_rc), NXR_EREENTRANT);
    cr_expect_eq(atomic_load(&re.wait_rc), NXR_EREENTRANT, "the handle is kept");
    /* The domain still works, and the kept handle can still be waited on. */
    cr_expect_eq(nxr_job_wait(re.job), 0);
    struct record r = {.fail_at = -1};
    cr_expect_eq(nxr_run(ctx, NXR_MODE_OUTER, 10, record_task, &r), 0);
    cr_expect_eq(atomic_load(&r.ran), 10);
}

Test(executor_tasks, submit_wait_returns_the_job_status)
{
    open_runtime(NULL);
    struct record ok = {.fail_at = -1}, bad = {.fail_at = 5};
    nxr_job_t *a, *b;
    cr_assert_eq(nxr_submit(ctx, 20, record_task, &ok, &a), 0);
    cr_assert_eq(nxr_submit(ctx, 1000, record_task, &bad, &b), 0);
    cr_expect_eq(nxr_job_wait(a), 0);
    cr_expect_eq(atomic_load(&ok.ran), 20, "every task's effect is visible after wait");
    cr_expect_eq(nxr_job_wait(b), -EIO);
    cr_expect_lt(atomic_load(&bad.ran), 1000, "tasks after the first error were skipped");
}

Test(executor_tasks, zero_tasks_complete_at_once)
{
    open_runtime(NULL);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 0, noop_task, NULL, &job), 0);
    cr_expect_eq(nxr_job_wait(job), 0);
}

/* Tasks that hold until the gate opens: the test decides when work ends. */
struct gated {
    atomic_int open;
    atomic_uint done;
    atomic_int destroyer; /* tid of the thread that destroys the runtime */
};

static int gated_task(void *p, size_t index)
{
    struct gated *g = p;
    (void)index;
    while (atomic_load(&g->open) == 0)
        sched_yield();
    atomic_fetch_add(&g->done, 1);
    return 0;
}

/* Opens the gate once the destroying thread is asleep in the kernel (in
 * the drain, waiting for these very jobs): ordered by state, not by time. */
static void *open_when_destroy_waits(void *p)
{
    struct gated *g = p;
    while (atomic_load(&g->destroyer) == 0)
        sched_yield();
    nxr_test_wait_asleep((pid_t)atomic_load(&g->destroyer), NULL, NULL, 10000);
    atomic_store(&g->open, 1);
    return NULL;
}

Test(executor_tasks, detached_jobs_finish_and_destroy_drains_them)
{
    open_runtime(NULL);
    static struct gated g; /* outlives the runtime on purpose */
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 30, gated_task, &g, &job), 0);
    nxr_job_detach(job); /* never blocks */
    cr_assert_eq(nxr_submit(ctx, 30, gated_task, &g, NULL), 0);
    cr_expect_eq(atomic_load(&g.done), 0, "submit returned before the work was done");
    pthread_t opener;
    pthread_create(&opener, NULL, open_when_destroy_waits, &g);
    atomic_store(&g.destroyer, (int)syscall(SYS_gettid));
    teardown();
    cr_expect_eq(atomic_load(&g.done), 60, "destroy drained every job");
    pthread_join(opener, NULL);
}

Test(executor_tasks, bad_arguments)
{
    open_runtime(NULL);
    nxr_job_t *job = (nxr_job_t *)1;
    cr_expect_eq(nxr_submit(NULL, 1, noop_task, NULL, &job), -EINVAL);
    cr_expect_null(job);
    cr_expect_eq(nxr_submit(ctx, 1, NULL, NULL, NULL), -EINVAL);
    cr_expect_eq(nxr_run(ctx, (enum nxr_mode)9, 1, noop_task, NULL), -EINVAL);
    cr_expect_eq(nxr_run(NULL, NXR_MODE_OUTER, 1, noop_task, NULL), -EINVAL);
    cr_expect_eq(nxr_job_wait(NULL), -EINVAL);
    nxr_job_detach(NULL);
    nxr_ctx_t *c = (nxr_ctx_t *)1;
    cr_expect_eq(nxr_ctx_create(rt, 42, &c), NXR_ENODOMAIN);
    cr_expect_null(c);
    cr_expect_eq(nxr_ctx_create(NULL, 0, &c), -EINVAL);
}

static void touch(void *p, size_t b, size_t e, unsigned w)
{
    (void)p, (void)b, (void)e, (void)w;
}

struct parked_probe {
    struct nxr__team *team;
    unsigned worker;
};

static bool worker_parked(void *p)
{
    struct parked_probe *pp = p;
    return nxr__team_worker_parked(pp->team, pp->worker);
}

Test(executor_tasks, an_idle_team_is_parked)
{
    /* Idle means no CPU: every worker parked on its futex, asleep in the
     * kernel (which runs no sleeping thread), once the spin window passed.
     * Waited for by state; a team that kept spinning never gets there. */
    open_runtime(NULL);
    cr_assert_eq(nxr_parallel_for(ctx, 0, 1000, 1, touch, NULL), 0);
    struct nxr__team *team = rt->domains[0]->team;
    for (unsigned i = 0; i < nxr__team_size(team); i++) {
        struct parked_probe pp = {.team = team, .worker = i};
        cr_expect(nxr_test_wait_asleep(nxr__team_worker_tid(team, i), worker_parked, &pp, 10000),
                  "worker %u is still running (state %c)", i,
                  nxr_test_thread_state(nxr__team_worker_tid(team, i)));
    }
}
