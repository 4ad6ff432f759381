/*
 * Who starts a published region (executor/team.c): a region is started
 * within one task boundary whatever the task queue holds, and every worker
 * a region needs is woken, busy or parked, down the whole wake tree. Teams
 * of 3 and 4 workers run on any CPUs (nxr__team_create accepts more workers
 * than CPUs), so the tree's second level runs on a 2-CPU machine too.
 *
 * No sleeps: workers are held in tasks that wait for a state the test can
 * read (the dispatcher asleep after it published, a region finished), with
 * a bound so that a broken team fails the test instead of hanging it.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

#define BOUND_MS 20000 /* rendezvous bound: a broken test fails, never hangs */

static pid_t tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static struct nxr__team *make_team(unsigned size, unsigned spin)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            hwloc_bitmap_set(cpus, (unsigned)c);
    struct nxr__team_opts o = {.domain_id = 0, .size = size, .spin = spin};
    struct nxr__team *team;
    char err[256];
    cr_assert_eq(nxr__team_create(&team, cpus, &o, err, sizeof err), 0, "%s", err);
    hwloc_bitmap_free(cpus);
    return team;
}

/* ---- a region behind an endless chain of tasks --------------------------- */

/*
 * Each task queues its successor before it returns, so the team's FIFO is
 * never empty while the chain runs: a worker that drains the queue before
 * it looks at the job word again never gets to the region. The chain stops
 * when the region ran, or after CHAIN_CAP tasks (the bound that keeps the
 * old behaviour a failure instead of a hang).
 */
#define CHAIN_CAP 2000

static struct nxr__team *chain_team;
static pid_t dispatcher_tid;
static atomic_int chain_started;     /* tasks started */
static atomic_int region_ran;        /* the region's body ran */
static atomic_int started_at_region; /* chain_started when it did */
static atomic_int chain_broken;      /* a task's own check failed */

static bool dispatcher_waits(void *p)
{
    (void)p;
    /* Counted before the publish; asleep after it means parked on the
     * region's completion (nobody else takes the team's run lock). */
    return nxr__team_regions(chain_team) >= 1;
}

static void chain_task(void *arg, size_t i)
{
    (void)arg, (void)i;
    int n = atomic_fetch_add(&chain_started, 1) + 1;
    /* The first task: until the region is published. (Flags, not asserts:
     * this runs on a worker.) */
    if (n == 1 && !nxr_test_wait_asleep(dispatcher_tid, dispatcher_waits, NULL, BOUND_MS))
        atomic_store(&chain_broken, 1);
    if (!atomic_load(&region_ran) && n < CHAIN_CAP &&
        nxr__team_submit(chain_team, chain_task, NULL, 1, NULL, NULL) != 0)
        atomic_store(&chain_broken, 1);
}

static void note_region(void *arg, unsigned slot, unsigned count)
{
    (void)arg, (void)slot, (void)count;
    atomic_store(&started_at_region, atomic_load(&chain_started));
    atomic_store(&region_ran, 1);
}

Test(executor_team_wake, a_region_starts_at_the_next_task_boundary, .timeout = 60)
{
    chain_team = make_team(1, NXR__TEAM_SPIN_ADAPTIVE);
    dispatcher_tid = tid();
    atomic_store(&chain_started, 0);
    atomic_store(&region_ran, 0);
    atomic_store(&chain_broken, 0);
    cr_assert_eq(nxr__team_submit(chain_team, chain_task, NULL, 1, NULL, NULL), 0);
    nxr_test_wait_at_least(&chain_started, 1, BOUND_MS);
    /* The worker is in the chain's first task; the caller does not join. */
    nxr__team_run(chain_team, note_region, NULL, 1, false);
    nxr__team_drain(chain_team);
    cr_expect_eq(atomic_load(&chain_broken), 0, "the chain's rendezvous or submit failed");
    cr_expect_eq(atomic_load(&started_at_region), 1,
                 "the region ran after %d tasks of the chain (1 was running when it was "
                 "published)",
                 atomic_load(&started_at_region));
    nxr__team_destroy(chain_team);
}

/* ---- busy workers: their share of the wake tree still wakes -------------- */

/* Tasks that hold the worker running them until the region finished. */
static atomic_int busy_in;      /* tasks holding a worker */
static atomic_int region_done;  /* the region returned */
static atomic_int gave_up;      /* a task's bound ran out first */
static atomic_int region_slots; /* slot calls of the region */

static void busy_task(void *arg, size_t i)
{
    (void)arg, (void)i;
    atomic_fetch_add(&busy_in, 1);
    nxr_test_wait_at_least(&region_done, 1, BOUND_MS);
    if (!atomic_load(&region_done))
        atomic_store(&gave_up, 1);
}

static void count_slot(void *arg, unsigned slot, unsigned count)
{
    (void)arg, (void)slot, (void)count;
    atomic_fetch_add(&region_slots, 1);
}

static void check_region_with_busy_workers(unsigned size, unsigned busy, unsigned spin)
{
    struct nxr__team *team = make_team(size, spin);
    atomic_store(&busy_in, 0);
    atomic_store(&region_done, 0);
    atomic_store(&gave_up, 0);
    atomic_store(&region_slots, 0);
    cr_assert_eq(nxr__team_submit(team, busy_task, NULL, busy, NULL, NULL), 0);
    nxr_test_wait_at_least(&busy_in, (int)busy, BOUND_MS);
    cr_assert_eq(atomic_load(&busy_in), (int)busy, "the busy tasks never all started");
    /* Every worker takes part, the caller does not: the region needs the
     * workers that are not busy, wherever they sit in the tree. */
    nxr__team_run(team, count_slot, NULL, size, false);
    atomic_store(&region_done, 1);
    nxr__team_drain(team);
    cr_expect_eq(atomic_load(&region_slots), (int)size);
    cr_expect_eq(atomic_load(&gave_up), 0,
                 "%u-worker team: the region waited for the %u busy workers' tasks (the "
                 "workers they were to wake stayed parked)",
                 size, busy);
    nxr__team_destroy(team);
}

Test(executor_team_wake, two_busy_workers_of_four_do_not_hold_a_region_back, .timeout = 90)
{
    check_region_with_busy_workers(4, 2, 0);
}

Test(executor_team_wake, two_busy_workers_of_three_do_not_hold_a_region_back, .timeout = 90)
{
    check_region_with_busy_workers(3, 2, 0);
}

Test(executor_team_wake, busy_workers_with_the_adaptive_policy, .timeout = 90)
{
    check_region_with_busy_workers(4, 2, NXR__TEAM_SPIN_ADAPTIVE);
}

/* ---- the wake tree: every participant sees the region ------------------- */

/* The claim hook runs on each participant that saw a region, before it
 * claims: counted per worker for the region under test. */
struct seen_log {
    atomic_uint gen;   /* the region under test; 0 before it */
    atomic_int saw[8]; /* per worker: saw it */
    atomic_int total;
    struct nxr__team_claim_hook hook;
};

static void log_seen(void *arg, unsigned worker, uint32_t gen)
{
    struct seen_log *l = arg;
    if (worker < 8 && atomic_exchange(&l->saw[worker], 1) == 0)
        atomic_fetch_add(&l->total, 1);
    (void)gen;
}

static void noop_slot(void *arg, unsigned slot, unsigned count)
{
    (void)arg, (void)slot, (void)count;
}

static struct seen_log seen;

static bool all_saw(void *p)
{
    return atomic_load(&seen.total) >= *(int *)p;
}

static void check_every_participant_woken(unsigned size, bool caller_joins)
{
    /* spin 0: every worker parks at once, so each must be woken. */
    struct nxr__team *team = make_team(size, 0);
    memset(&seen, 0, sizeof seen);
    seen.hook = (struct nxr__team_claim_hook){.fn = log_seen, .arg = &seen};
    nxr__team_set_claim_hook(team, &seen.hook);
    unsigned n = size + (caller_joins ? 1u : 0u);
    nxr__team_run(team, noop_slot, NULL, n, caller_joins);
    int want = (int)size;
    /* The region may be over before the deepest workers arrive; woken, they
     * still see it (and find its slots claimed). Never woken, they never do. */
    cr_expect(nxr_test_wait_until(all_saw, &want, BOUND_MS),
              "%u-worker team (caller %s): %d of %u workers saw the region", size,
              caller_joins ? "joins" : "waits", atomic_load(&seen.total), size);
    nxr__team_set_claim_hook(team, NULL);
    nxr__team_destroy(team);
}

Test(executor_team_wake, a_three_worker_region_wakes_every_worker, .timeout = 60)
{
    check_every_participant_woken(3, false);
}

Test(executor_team_wake, a_four_worker_region_wakes_every_worker, .timeout = 60)
{
    check_every_participant_woken(4, false);
}

Test(executor_team_wake, a_joining_caller_region_wakes_every_worker, .timeout = 60)
{
    check_every_participant_woken(4, true);
}

/* ---- the same through the public API ------------------------------------ */

/*
 * The probe, made deterministic: domain 0 (one CPU, one worker)
 * holds one batch of CHAIN_CAP tasks; the test thread, outside the domain,
 * runs a one-chunk loop on it while the worker is in the batch's first
 * task, which waits until the loop's region is published. The loop must run
 * after that task, not after the whole batch.
 */
static struct nxr__team *api_team;
static atomic_int api_started;
static atomic_int api_at_loop;
static atomic_int api_broken;

static bool api_published(void *p)
{
    (void)p;
    return nxr__team_regions(api_team) >= 1;
}

static int api_task(void *arg, size_t i)
{
    (void)arg;
    atomic_fetch_add(&api_started, 1);
    if (i == 0 && !nxr_test_wait_asleep(dispatcher_tid, api_published, NULL, BOUND_MS))
        atomic_store(&api_broken, 1);
    return 0;
}

static void api_chunk(void *arg, size_t b, size_t e, unsigned w)
{
    (void)arg, (void)b, (void)e, (void)w;
    atomic_store(&api_at_loop, atomic_load(&api_started));
}

Test(executor_team_wake, a_loop_from_outside_runs_between_a_batchs_tasks, .timeout = 60)
{
    NXR_TEST_NEED_CPUS(2);
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, "0:%0", 0);
    nxr_runtime_t *rt = fx.rt;
    nxr_domain_t *d;
    cr_assert_eq(nxr_runtime_domain(rt, 0, &d), 0);
    api_team = ((const struct nxr_domain *)d)->team;
    cr_assert_eq(nxr__team_size(api_team), 1);
    hwloc_bitmap_t outside = nxr_test_cpus(1, 1);
    cr_assert_eq(nxr_test_pin(outside), 0);
    hwloc_bitmap_free(outside);
    dispatcher_tid = tid();
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, CHAIN_CAP, api_task, NULL, &job), 0);
    nxr_test_wait_at_least(&api_started, 1, BOUND_MS);
    cr_assert_eq(nxr_parallel_for(ctx, 0, 1, 1, api_chunk, NULL), 0);
    cr_assert_eq(nxr_job_wait(job), 0);
    cr_expect_eq(atomic_load(&api_broken), 0, "the first task never saw the loop published");
    cr_expect_eq(atomic_load(&api_at_loop), 1,
                 "the loop ran after %d of the batch's %d tasks had started (1 was running "
                 "when it was published)",
                 atomic_load(&api_at_loop), CHAIN_CAP);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}
