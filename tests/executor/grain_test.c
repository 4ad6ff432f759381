/*
 * Grain 0 and the cost hint (executor/parallel_for.c, nxr__for_shape): grain
 * 0 splits a loop evenly over the participants, like OpenMP's static
 * schedule, so a heavy loop of few iterations (288 matmul rows) never runs
 * on one thread; the cost hint is what keeps cheap work on one thread.
 *
 * The executor is a team of four workers on whatever CPUs the process has
 * (one under `taskset -c 1`), so budgets of 2, 3 and 4 are teams larger than
 * the machine. Participants are counted by the `worker` index each call
 * gets (a participant is a slot: one thread may run several), so nothing
 * here depends on which thread woke first, and nothing waits on time.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "runtime/internal/runtime.h"

#define TEAM 4

static struct nxr__team *team;

static void make_team(void)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            hwloc_bitmap_set(cpus, (unsigned)c);
    struct nxr__team_opts o = {.domain_id = 0, .size = TEAM, .spin = 0};
    char err[256];
    cr_assert_eq(nxr__team_create(&team, cpus, &o, err, sizeof err), 0, "%s", err);
    hwloc_bitmap_free(cpus);
}

static void drop_team(void)
{
    nxr__team_destroy(team);
    team = NULL;
}

TestSuite(executor_grain, .init = make_team, .fini = drop_team, .timeout = 60);

static int team_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    (void)self;
    nxr__team_run(team, fn, arg, count, false);
    return 0;
}

static int no_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                     void *done_arg)
{
    (void)self, (void)fn, (void)arg, (void)count, (void)done, (void)done_arg;
    return -ENOSYS;
}

static const struct nxr_executor_ops team_ops = {.install = team_install, .submit = no_submit};

/* A caller-managed domain of `budget` over the team: no CPU set, so the
 * test thread is never "inside" and every loop is a region (a loop of one
 * participant is a region of one). */
static void exec_init(struct nxr__exec *exec, struct nxr__domain_spec *spec, unsigned budget)
{
    memset(exec, 0, sizeof(*exec));
    *spec = (struct nxr__domain_spec){.budget = budget, .admission = NXR_ADMISSION_CALLER_MANAGED};
    exec->spec = spec;
    exec->executor = (struct nxr_executor){.ops = &team_ops,
                                           .workers = TEAM,
                                           .flags = NXR_EXECUTOR_FANOUT,
                                           .owner = NXR_EXECUTOR_OWNED_BY_CALLER};
    cr_assert_eq(nxr__exec_admission_init(exec, NULL), 0);
}

#define MAX_CALLS 64

/* What the loop's calls were: which participants, how many iterations each. */
struct seen {
    atomic_uint calls;
    atomic_uint participants; /* bit w: participant w ran a chunk */
    atomic_size_t iterations[TEAM];
    atomic_uint bad;
};

static void note(void *p, size_t b, size_t e, unsigned worker)
{
    struct seen *s = p;
    atomic_fetch_add(&s->calls, 1);
    if (worker >= TEAM || e <= b) {
        atomic_fetch_add(&s->bad, 1);
        return;
    }
    atomic_fetch_or(&s->participants, 1u << worker);
    atomic_fetch_add(&s->iterations[worker], e - b);
}

static unsigned popcount(unsigned x)
{
    unsigned n = 0;
    for (; x != 0; x &= x - 1)
        n++;
    return n;
}

static void run(unsigned budget, const struct nxr_for_opts *o, size_t len, struct seen *s)
{
    struct nxr__exec exec;
    struct nxr__domain_spec spec;
    exec_init(&exec, &spec, budget);
    memset(s, 0, sizeof(*s));
    cr_assert_eq(nxr__exec_parallel_for(&exec, 0, len, o, note, s), 0);
    nxr__exec_admission_fini(&exec);
    cr_assert_eq(atomic_load(&s->bad), 0, "a call out of range");
}

Test(executor_grain, grain_0_splits_a_heavy_loop_evenly_over_every_participant)
{
    /* 288 rows (a matmul's), grain 0: 0.x made it one chunk of 1024 and
     * ran it on one participant. */
    for (unsigned budget = 2; budget <= TEAM; budget++) {
        struct seen s;
        run(budget, NULL, 288, &s);
        cr_expect_eq(popcount(atomic_load(&s.participants)), budget,
                     "budget %u: %u participants ran chunks", budget,
                     popcount(atomic_load(&s.participants)));
        cr_expect_eq(atomic_load(&s.calls), budget, "static: one call per participant");
        for (unsigned w = 0; w < budget; w++)
            cr_expect_eq(atomic_load(&s.iterations[w]), 288 / budget,
                         "budget %u: participant %u ran %zu iterations, want %u", budget, w,
                         atomic_load(&s.iterations[w]), 288 / budget);
    }
}

Test(executor_grain, grain_0_shares_differ_by_at_most_one_iteration)
{
    /* 6 attention heads over 4 participants: 2, 2, 1, 1 (ceil(6/4) = 2 per
     * chunk gives 3 chunks: 2, 2, 2 on three participants; either way no
     * participant waits on one that got twice its share). */
    struct seen s;
    run(4, NULL, 6, &s);
    size_t lo = SIZE_MAX, hi = 0;
    for (unsigned w = 0; w < TEAM; w++) {
        size_t it = atomic_load(&s.iterations[w]);
        if (((atomic_load(&s.participants) >> w) & 1u) == 0)
            continue;
        lo = it < lo ? it : lo;
        hi = it > hi ? it : hi;
    }
    cr_expect_geq(popcount(atomic_load(&s.participants)), 3);
    cr_expect_leq(hi - lo, 1, "shares from %zu to %zu iterations", lo, hi);
    /* Fewer iterations than participants: one each. */
    run(4, NULL, 2, &s);
    cr_expect_eq(popcount(atomic_load(&s.participants)), 2);
}

Test(executor_grain, grain_0_dynamic_hands_out_four_chunks_per_participant)
{
    struct nxr_for_opts o;
    nxr_for_opts_init(&o);
    o.schedule = NXR_SCHEDULE_DYNAMIC;
    struct seen s;
    run(3, &o, 288, &s);
    cr_expect_eq(atomic_load(&s.calls), 12, "288 / (3 * 4) = 24 iterations a chunk");
    size_t total = 0;
    for (unsigned w = 0; w < TEAM; w++)
        total += atomic_load(&s.iterations[w]);
    cr_expect_eq(total, 288);
}

Test(executor_grain, a_thread_cap_still_splits_evenly)
{
    struct nxr_for_opts o;
    nxr_for_opts_init(&o);
    o.max_threads = 3;
    struct seen s;
    run(4, &o, 288, &s);
    cr_expect_eq(atomic_load(&s.participants), 0x7u);
    for (unsigned w = 0; w < 3; w++)
        cr_expect_eq(atomic_load(&s.iterations[w]), 96);
}

Test(executor_grain, the_cost_hint_caps_participants_by_work)
{
    struct nxr_for_opts o;
    nxr_for_opts_init(&o);
    struct seen s;
    /* 288 iterations of 1 ns: 288 ns in all, under one share: one
     * participant, one call. */
    o.cost_ns = 1.0;
    run(4, &o, 288, &s);
    cr_expect_eq(atomic_load(&s.calls), 1);
    cr_expect_eq(atomic_load(&s.participants), 0x1u);
    /* Exactly two shares of work (2 * NXR_FOR_SHARE_NS): two participants. */
    o.cost_ns = 2.0 * NXR_FOR_SHARE_NS / 288.0;
    run(4, &o, 288, &s);
    cr_expect_eq(popcount(atomic_load(&s.participants)), 2);
    cr_expect_eq(atomic_load(&s.iterations[0]), 144);
    /* A heavy body (a 288-wide matmul row, ~50 us): the whole budget. */
    o.cost_ns = 50000.0;
    run(4, &o, 288, &s);
    cr_expect_eq(popcount(atomic_load(&s.participants)), 4);
    /* With a grain of its own the hint still caps the participants. */
    o.grain = 8;
    o.cost_ns = 1.0;
    run(4, &o, 288, &s);
    cr_expect_eq(atomic_load(&s.participants), 0x1u);
    cr_expect_eq(atomic_load(&s.calls), 1, "static: the one participant's share is one call");
}

Test(executor_grain, a_negative_or_nan_cost_is_einval_and_runs_nothing)
{
    struct nxr__exec exec;
    struct nxr__domain_spec spec;
    exec_init(&exec, &spec, 2);
    struct nxr_for_opts o;
    nxr_for_opts_init(&o);
    struct seen s;
    memset(&s, 0, sizeof s);
    o.cost_ns = -1.0;
    cr_expect_eq(nxr__exec_parallel_for(&exec, 0, 10, &o, note, &s), -EINVAL);
    o.cost_ns = NAN;
    cr_expect_eq(nxr__exec_parallel_for(&exec, 0, 10, &o, note, &s), -EINVAL);
    cr_expect_eq(atomic_load(&s.calls), 0);
    nxr__exec_admission_fini(&exec);
}

/* ---- reductions: grain 0 is 64 blocks, whatever the budget ---------------- */

struct blocks {
    atomic_uint maps;
    atomic_uint participants_seen;
};

static void count_map(void *arg, size_t b, size_t e, void *partial)
{
    struct blocks *k = arg;
    atomic_fetch_add(&k->maps, 1);
    *(unsigned long long *)partial += e - b;
}

static void add(void *arg, void *result, const void *partial)
{
    (void)arg;
    *(unsigned long long *)result += *(const unsigned long long *)partial;
}

Test(executor_grain, reduce_grain_0_is_not_one_block)
{
    unsigned long long zero = 0;
    static const size_t lens[] = {288, 6, 100000};
    static const unsigned want[] = {58, 6, 64}; /* ceil(288/64) = 5 a block: 58 blocks */
    for (unsigned budget = 1; budget <= TEAM; budget++) {
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            struct nxr__exec exec;
            struct nxr__domain_spec spec;
            exec_init(&exec, &spec, budget);
            struct blocks k;
            memset(&k, 0, sizeof k);
            unsigned long long r = 0;
            cr_assert_eq(nxr__exec_parallel_reduce(&exec, 0, lens[i], 0, sizeof r, &zero,
                                                   count_map, add, &k, &r),
                         0);
            nxr__exec_admission_fini(&exec);
            cr_expect_eq(r, lens[i]);
            cr_expect_eq(atomic_load(&k.maps), want[i], "len %zu budget %u: %u blocks", lens[i],
                         budget, atomic_load(&k.maps));
        }
    }
}
