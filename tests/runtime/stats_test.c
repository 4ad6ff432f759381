/*
 * nxr_runtime_stats (runtime/nxr_stats.h): the counters add up over a known
 * workload. Tasks counted equal tasks run, whoever ran them (the caller, a
 * worker, a job's items), on teams of 1 to 4 workers over at most 2 CPUs
 * (two domains sharing both CPUs: more workers than the machine has);
 * one region per fanned-out run; one kernel call per call, in its family;
 * an admission wait counted once, with its time; a caller's older, smaller
 * struct is written no further than its size; budgets refreshed to a
 * changing quota while loops run and stats are read (for TSan). No timing:
 * the events are ordered by a gate and the arbiter's waiter count.
 */
#include <criterion/criterion.h>
#include <time.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/fsfixture.h"
#include "tests/support/runtime.h"

static struct nxr_test_runtime fx;

static void teardown(void)
{
    nxr_test_runtime_close(&fx);
}

TestSuite(runtime_stats, .fini = teardown, .timeout = 60);

#define MAX_DOMAINS 8

static struct nxr_domain_stats domains[MAX_DOMAINS];

static struct nxr_runtime_stats read_stats(void)
{
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, domains, MAX_DOMAINS);
    cr_assert_eq(nxr_runtime_stats(fx.rt, &s), 0, "%s", nxr_last_error());
    cr_assert_eq(s.version, NXR_STATS_VERSION);
    cr_assert_eq(s.domain_count, nxr_runtime_domain_count(fx.rt));
    return s;
}

static struct nxr_domain_stats domain_at(size_t i)
{
    (void)read_stats();
    return domains[i];
}

static atomic_ulong ran; /* tasks the test's bodies ran */

static int count_task(void *arg, size_t i)
{
    (void)arg, (void)i;
    atomic_fetch_add(&ran, 1);
    return 0;
}

/* Runs a known workload on domain i and checks the counters moved by it. */
static void workload_adds_up(size_t i)
{
    nxr_domain_t *d = nxr_runtime_domain_at(fx.rt, i);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(fx.rt, nxr_domain_id(d), &ctx), 0);
    struct nxr_domain_stats before = domain_at(i);
    cr_expect_eq(before.id, nxr_domain_id(d));
    cr_expect_eq(before.workers, nxr_domain_workers(d));
    cr_expect_eq(before.budget, nxr_domain_budget(d));

    atomic_store(&ran, 0);
    const size_t outer = 97, sequential = 5, inner = 3, submitted = 41;
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, outer, count_task, NULL), 0);
    struct nxr_domain_stats mid = domain_at(i);
    cr_expect_eq(mid.tasks - before.tasks, outer, "OUTER: %llu counted, %zu run",
                 (unsigned long long)(mid.tasks - before.tasks), outer);
    if (nxr_domain_budget(d) >= 2)
        cr_expect_eq(mid.regions - before.regions, 1, "one region for one fanned-out run");

    cr_assert_eq(nxr_run(ctx, NXR_MODE_SEQUENTIAL, sequential, count_task, NULL), 0);
    cr_assert_eq(nxr_run(ctx, NXR_MODE_INNER, inner, count_task, NULL), 0);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, submitted, count_task, NULL, &job), 0);
    cr_assert_eq(nxr_job_wait(job), 0);
    float x[64], y[64];
    for (int k = 0; k < 64; k++)
        x[k] = (float)k;
    cr_assert_eq(nxr_scale(ctx, 64, x, 2.0f, y), 0);

    struct nxr_domain_stats after = domain_at(i);
    unsigned long total = outer + sequential + inner + submitted;
    cr_expect_eq(atomic_load(&ran), total);
    cr_expect_eq(after.tasks - before.tasks, total, "domain %d: %llu tasks counted, %lu run",
                 after.id, (unsigned long long)(after.tasks - before.tasks), total);
    cr_expect_eq(after.kernel_calls[NXR_FAMILY_ELEMENTWISE] -
                     before.kernel_calls[NXR_FAMILY_ELEMENTWISE],
                 1, "one elementwise call");
    cr_expect_eq(after.kernel_calls[NXR_FAMILY_GEMM], before.kernel_calls[NXR_FAMILY_GEMM]);
    cr_expect_geq(after.parks, after.wakes, "a wake ends a park");
    cr_expect_geq(after.regions, mid.regions);
    nxr_ctx_destroy(ctx);
}

/* Every domain of the layout; the other domains' task counts do not move. */
static void layout_adds_up(const char *tmpl)
{
    NXR_TEST_RUNTIME(&fx, tmpl, 0);
    size_t n = nxr_runtime_domain_count(fx.rt);
    cr_assert_leq(n, MAX_DOMAINS);
    for (size_t i = 0; i < n; i++) {
        struct nxr_runtime_stats s = read_stats();
        uint64_t others_before = 0;
        for (size_t j = 0; j < n; j++)
            others_before += j == i ? 0 : domains[j].tasks;
        (void)s;
        workload_adds_up(i);
        (void)read_stats();
        uint64_t others_after = 0;
        for (size_t j = 0; j < n; j++)
            others_after += j == i ? 0 : domains[j].tasks;
        cr_expect_eq(others_after, others_before, "domain %zu's tasks counted elsewhere", i);
    }
}

Test(runtime_stats, tasks_add_up_on_one_worker)
{
    layout_adds_up("0:%0");
}

Test(runtime_stats, tasks_add_up_on_two_workers)
{
    NXR_TEST_NEED_CPUS(2);
    layout_adds_up("0:%0,%1");
}

Test(runtime_stats, tasks_add_up_on_three_workers_over_two_cpus)
{
    NXR_TEST_NEED_CPUS(2);
    layout_adds_up("0:%0,%1;1:%0 shared");
}

Test(runtime_stats, tasks_add_up_on_four_workers_over_two_cpus)
{
    NXR_TEST_NEED_CPUS(2);
    layout_adds_up("0:%0,%1;1:%0,%1 shared");
}

/* A task that lasts until the monotonic clock (the counters' clock) has
 * moved: the worker's busy time then spans at least one of its ticks, even
 * where the clock is coarse (a VM without a usable TSC). Bounded by the
 * clock's resolution; no duration is chosen. */
static int tick_task(void *arg, size_t i)
{
    (void)arg, (void)i;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while (t.tv_sec == t0.tv_sec && t.tv_nsec == t0.tv_nsec);
    atomic_fetch_add(&ran, 1);
    return 0;
}

/* Workers that run the tasks count them in their own blocks: a domain the
 * caller is outside of runs every task on its worker, and the worker's time
 * running them is busy time. */
Test(runtime_stats, a_worker_counts_its_tasks_and_busy_time)
{
    NXR_TEST_NEED_CPUS(2);
    NXR_TEST_RUNTIME(&fx, "0:%0", 0);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(fx.rt, 0, &ctx), 0);
    struct nxr_domain_stats before = domain_at(0);
    atomic_store(&ran, 0);
    cr_assert_eq(nxr_run(ctx, NXR_MODE_SEQUENTIAL, 10, tick_task, NULL), 0);
    struct nxr_domain_stats after = domain_at(0);
    cr_expect_eq(after.tasks - before.tasks, 10);
    cr_expect_eq(after.regions - before.regions, 1, "the caller is off the domain: one region");
    /* A worker adds a region's busy time just after its last slot, which
     * is also what lets the caller return: a read right after may miss it
     * (the 4-node VM did). The domain's one worker runs a second region
     * only after it has counted the first, so after that the time is in. */
    cr_assert_eq(nxr_run(ctx, NXR_MODE_SEQUENTIAL, 1, count_task, NULL), 0);
    after = domain_at(0);
    cr_expect_gt(after.busy_ns, before.busy_ns, "the worker ran the region");
    nxr_ctx_destroy(ctx);
}

/* Waits for the clock (the counters' clock) to move past now: then a
 * stretch that began before this call and ends after it spans a tick. */
static void await_tick(void)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while (t.tv_sec == t0.tv_sec && t.tv_nsec == t0.tv_nsec);
}

static struct nxr__team *spin_team;

/* A slot that spans a clock tick, then tells its worker to park at once
 * when it waits next (so the test sees when its counting is done). */
static int tick_then_park_task(void *arg, size_t i)
{
    tick_task(arg, i);
    nxr__team_set_spin(spin_team, 0);
    return 0;
}

/* A worker that was spinning when work came charges the time before it to
 * spin and the work to busy (team.c reads the clock once after a region's
 * slot and splits the stretch at the region's publish; before a queued
 * item it closes the spin first). The spin and the work each span a clock
 * tick, so each counter must grow; the worker's park right after its
 * counting orders the read. No duration is chosen. */
static void spin_then_work_is_counted_apart(bool as_item)
{
    NXR_TEST_NEED_CPUS(2);
    NXR_TEST_RUNTIME(&fx, "0:%0", 0);
    nxr_domain_t *d = nxr_runtime_domain_at(fx.rt, 0);
    spin_team = ((const struct nxr_domain *)d)->team;
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(fx.rt, 0, &ctx), 0);
    /* A fixed spin bound no test outlasts: after a region the worker spins
     * until the next work, never parks. */
    nxr__team_set_spin(spin_team, NXR__TEAM_SPIN_ADAPTIVE - 1);
    struct nxr_domain_stats s0 = domain_at(0);
    cr_assert_eq(nxr_run(ctx, NXR_MODE_SEQUENTIAL, 1, tick_task, NULL), 0);
    /* Its busy time is counted just after the slot; from then it spins. */
    while (domain_at(0).busy_ns == s0.busy_ns)
        sched_yield();
    await_tick();
    struct nxr_domain_stats s1 = domain_at(0);
    if (as_item) {
        nxr_job_t *job;
        cr_assert_eq(nxr_submit(ctx, 1, tick_then_park_task, NULL, &job), 0);
        cr_assert_eq(nxr_job_wait(job), 0);
    } else {
        cr_assert_eq(nxr_run(ctx, NXR_MODE_SEQUENTIAL, 1, tick_then_park_task, NULL), 0);
    }
    while (!nxr__team_worker_parked(spin_team, 0))
        sched_yield();
    struct nxr_domain_stats s2 = domain_at(0);
    cr_expect_gt(s2.spin_ns, s1.spin_ns, "the wait before the work is spin (%llu -> %llu)",
                 (unsigned long long)s1.spin_ns, (unsigned long long)s2.spin_ns);
    cr_expect_gt(s2.busy_ns, s1.busy_ns, "the work is busy (%llu -> %llu)",
                 (unsigned long long)s1.busy_ns, (unsigned long long)s2.busy_ns);
    nxr_ctx_destroy(ctx);
}

Test(runtime_stats, a_spin_that_finds_a_region_is_spin_and_its_slot_busy)
{
    spin_then_work_is_counted_apart(false);
}

Test(runtime_stats, a_spin_that_finds_an_item_is_spin_and_the_item_busy)
{
    spin_then_work_is_counted_apart(true);
}

/* ---- admission waits ---------------------------------------------------- */

static atomic_int gate, gated_in;

static int gated_task(void *arg, size_t i)
{
    (void)arg, (void)i;
    atomic_store(&gated_in, 1);
    while (atomic_load(&gate) == 0)
        sched_yield();
    return 0;
}

static unsigned arbiter_waiters(void)
{
    struct nxr__arbiter_stats st;
    nxr__arbiter_stats(fx.rt->arbiter, &st);
    return st.waiters;
}

struct run_on {
    nxr_ctx_t *ctx;
    int rc;
    atomic_int done;
};

static void *run_thread(void *p)
{
    struct run_on *r = p;
    r->rc = nxr_run(r->ctx, NXR_MODE_OUTER, 4, count_task, NULL);
    atomic_store(&r->done, 1);
    return NULL;
}

Test(runtime_stats, an_admission_wait_is_counted_once_with_its_time)
{
    /* Two CPUs: the waiting caller must be off domain 9's CPU, or its
     * one-participant run would take the CPU in place (no admission). */
    NXR_TEST_NEED_CPUS(2);
    NXR_TEST_RUNTIME(&fx, "0:%0;9:%0 shared", 0);
    nxr_ctx_t *ctx0, *ctx9;
    cr_assert_eq(nxr_ctx_create(fx.rt, 0, &ctx0), 0);
    cr_assert_eq(nxr_ctx_create(fx.rt, 9, &ctx9), 0);
    nxr_domain_t *d9;
    cr_assert_eq(nxr_runtime_domain(fx.rt, 9, &d9), 0);
    size_t i9 = 0;
    while (nxr_runtime_domain_at(fx.rt, i9) != d9)
        i9++;
    struct nxr_domain_stats before = domain_at(i9);
    cr_expect_eq(before.admission_waits, 0);

    /* Domain 0 holds CPU %0 with a gated batch; domain 9 queues for it. */
    nxr_job_t *held;
    cr_assert_eq(nxr_submit(ctx0, 1, gated_task, NULL, &held), 0);
    while (atomic_load(&gated_in) == 0)
        sched_yield();
    struct run_on nine = {.ctx = ctx9};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, run_thread, &nine), 0);
    /* Until it queues (or, wrongly, ran without waiting: then the count
     * below says so instead of a hang). */
    while (arbiter_waiters() == 0 && !atomic_load(&nine.done))
        sched_yield();
    atomic_store(&gate, 1);
    cr_expect_eq(nxr_job_wait(held), 0);
    pthread_join(t, NULL);
    cr_expect_eq(nine.rc, 0);

    struct nxr_domain_stats after = domain_at(i9);
    cr_expect_eq(after.admission_waits, 1, "one wait: %llu",
                 (unsigned long long)after.admission_waits);
    cr_expect_gt(after.admission_wait_ns, 0);
    cr_expect_eq(after.admission_wait_max_ns, after.admission_wait_ns,
                 "the only wait is the longest");
    /* The runs that did not wait count none. */
    cr_assert_eq(nxr_run(ctx9, NXR_MODE_OUTER, 4, count_task, NULL), 0);
    cr_expect_eq(domain_at(i9).admission_waits, 1);
    nxr_ctx_destroy(ctx0);
    nxr_ctx_destroy(ctx9);
}

/* ---- the struct's growth rule ------------------------------------------- */

Test(runtime_stats, an_older_smaller_struct_is_written_no_further_than_its_size)
{
    NXR_TEST_RUNTIME(&fx, "0:%0", NXR_TEST_PARK);
    /* A struct followed by bytes nxr must not touch (as a newer header's
     * fields would be for an older library), an array longer than
     * domain_cap, and a size below the first version's: refused, nothing
     * written. */
    struct {
        struct nxr_runtime_stats s;
        unsigned char canary[16];
    } big;
    memset(&big, 0xA5, sizeof(big));
    big.s.size = sizeof(big.s);
    big.s.domain_size = sizeof(struct nxr_domain_stats);
    big.s.domains = NULL;
    big.s.domain_cap = 0;
    cr_assert_eq(nxr_runtime_stats(fx.rt, &big.s), 0);
    for (size_t k = 0; k < sizeof(big.canary); k++)
        cr_expect_eq(big.canary[k], 0xA5, "byte %zu past the struct written", k);
    cr_expect_eq(big.s.domain_count, 1);

    struct {
        struct nxr_domain_stats d[2];
    } arr;
    memset(&arr, 0xA5, sizeof(arr));
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, arr.d, 1);
    cr_assert_eq(nxr_runtime_stats(fx.rt, &s), 0);
    unsigned char *second = (unsigned char *)&arr.d[1];
    for (size_t k = 0; k < sizeof(arr.d[1]); k++)
        cr_expect_eq(second[k], 0xA5, "entry past domain_cap written at byte %zu", k);
    cr_expect_eq(arr.d[0].id, 0);

    struct nxr_runtime_stats tiny;
    memset(&tiny, 0x5A, sizeof(tiny));
    tiny.size = 8;
    cr_expect_eq(nxr_runtime_stats(fx.rt, &tiny), -EINVAL);
    cr_expect_eq(tiny.version, 0x5A5A5A5Au, "a refused call wrote the struct");
    cr_expect_eq(nxr_runtime_stats(NULL, &s), -EINVAL);
    cr_expect_eq(nxr_runtime_stats(fx.rt, NULL), -EINVAL);
    nxr_runtime_stats_init(&s, NULL, 3);
    cr_expect_eq(nxr_runtime_stats(fx.rt, &s), -EINVAL, "domains NULL with a capacity");
}

/* ---- budgets refreshed while the domain serves --------------------------- */

static atomic_int refreshing;

static void touch(void *arg, size_t b, size_t e, unsigned participant)
{
    (void)arg, (void)b, (void)e, (void)participant;
}

static void *serve_loops(void *p)
{
    nxr_ctx_t *ctx = p;
    while (atomic_load(&refreshing)) {
        if (nxr_parallel_for(ctx, 0, 8, 1, touch, NULL) != 0)
            return (void *)1;
        struct nxr_runtime_stats s;
        nxr_runtime_stats_init(&s, NULL, 0);
        if (nxr_runtime_stats(fx.rt, &s) != 0)
            return (void *)1;
    }
    return NULL;
}

Test(runtime_stats, budgets_refreshed_while_loops_run)
{
    NXR_TEST_NEED_CPUS(2);
    char root[512];
    cr_assert_eq(nxr_test_fixture_dir(root, sizeof(root)), 0);
    cr_assert_eq(nxr_test_fixture_write(root, "proc/self/cgroup", "0::/job\n"), 0);
    cr_assert_eq(nxr_test_fixture_write(root, "proc/self/mountinfo",
                                        "30 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
                 0);
    cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.max", "max 100000\n"), 0);
    nxr_test_runtime_opts(&fx, "0:%0,%1", 0);
    fx.opts.cgroup_root = root; /* ignore_env: NXR_CPU_QUOTA stays auto */
    NXR_TEST_RUNTIME_OPEN(&fx);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(fx.rt, 0, &ctx), 0);
    atomic_store(&refreshing, 1);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, serve_loops, ctx), 0);
    const int rounds = 40;
    for (int i = 0; i < rounds; i++) {
        cr_assert_eq(nxr_test_fixture_write(root, "sys/fs/cgroup/job/cpu.max",
                                            i % 2 ? "max 100000\n" : "100000 100000\n"),
                     0);
        cr_assert_eq(nxr_runtime_refresh_budget(fx.rt), 0, "%s", nxr_last_error());
        cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(fx.rt, 0)), i % 2 ? 2u : 1u);
    }
    atomic_store(&refreshing, 0);
    void *failed;
    pthread_join(t, &failed);
    cr_expect_null(failed, "a loop or a stats read failed while budgets moved");
    struct nxr_runtime_stats s = read_stats();
    cr_expect_eq(s.budget_changes, (uint64_t)rounds);
    nxr_ctx_destroy(ctx);
    nxr_test_runtime_close(&fx);
    nxr_test_fixture_remove(root);
}

/* ---- weights streamed -------------------------------------------------- */

/* Each packed GEMV/GEMM call counts its copy's bytes once on its domain;
 * an unpacked GEMM counts none (its B is not known to be weights). */
Test(runtime_stats, a_packed_call_counts_its_weights_bytes)
{
    NXR_TEST_RUNTIME(&fx, "0:%0", NXR_TEST_PARK);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(fx.rt, 0, &ctx), 0);
    enum { K = 64, N = 48, M = 2 };
    static float w[K * N], a[M * K], c[M * N];
    for (int i = 0; i < K * N; i++)
        w[i] = (float)(i % 7) * 0.25f;
    for (int i = 0; i < M * K; i++)
        a[i] = 1.0f;
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.k = K;
    d.n = N;
    d.w = w;
    d.ldw = N;
    int id = 0;
    d.domain_ids = &id;
    d.domain_count = 1;
    nxr_weights_t *pw;
    cr_assert_eq(nxr_weights_create(fx.rt, &d, &pw), 0, "%s", nxr_last_error());
    const void *data;
    size_t bytes = 0;
    cr_assert_eq(nxr_weights_copy(pw, nxr_runtime_domain_at(fx.rt, 0), &data, &bytes), 0);
    cr_assert_geq(bytes, (size_t)K * N * sizeof(float));

    struct nxr_domain_stats before = domain_at(0);
    struct nxr_sgemm_packed_args pa = {
        .m = M, .alpha = 1.0f, .a = a, .lda = K, .w = pw, .beta = 0.0f, .c = c, .ldc = N};
    for (int call = 0; call < 3; call++)
        cr_assert_eq(nxr_sgemm_packed(ctx, &pa, NULL), 0, "%s", nxr_last_error());
    struct nxr_sgemm_args ua = {.m = M,
                                .n = N,
                                .k = K,
                                .alpha = 1.0f,
                                .a = a,
                                .lda = K,
                                .b = w,
                                .ldb = N,
                                .beta = 0.0f,
                                .c = c,
                                .ldc = N};
    cr_assert_eq(nxr_sgemm(ctx, &ua), 0, "%s", nxr_last_error());
    struct nxr_domain_stats after = domain_at(0);
    cr_expect_eq(after.weight_bytes - before.weight_bytes, 3 * (uint64_t)bytes,
                 "3 calls of a %zu-byte copy: %llu counted", bytes,
                 (unsigned long long)(after.weight_bytes - before.weight_bytes));
    cr_expect_eq(after.kernel_calls[NXR_FAMILY_GEMM] - before.kernel_calls[NXR_FAMILY_GEMM], 4);
    nxr_weights_destroy(pw);
    nxr_ctx_destroy(ctx);
}
