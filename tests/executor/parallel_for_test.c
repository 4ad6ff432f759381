/*
 * nxr_parallel_for and nxr_parallel_reduce: every index exactly once, chunks
 * only on threads confined to the domain, one fan-out level.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static nxr_ctx_t *ctx;

static void open_domains(const char *domains, int id)
{
    static struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, domains, 0); /* a template of tests/support/cpus.h, or NULL */
    rt = fx.rt;
    cr_assert_eq(nxr_ctx_create(rt, id, &ctx), 0);
}

static void teardown(void)
{
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    ctx = NULL;
    rt = NULL;
}

TestSuite(executor_parallel_for, .fini = teardown, .timeout = 30);

struct coverage {
    atomic_uint *hits;
    size_t base;
    atomic_uint bad_worker;
    unsigned budget;
};

static void count_hits(void *p, size_t b, size_t e, unsigned worker)
{
    struct coverage *c = p;
    if (worker >= c->budget)
        atomic_fetch_add(&c->bad_worker, 1);
    for (size_t i = b; i < e; i++)
        atomic_fetch_add_explicit(&c->hits[i - c->base], 1, memory_order_relaxed);
}

static void check_coverage(enum nxr_schedule schedule)
{
    static const size_t ranges[][2] = {{0, 0},   {0, 1},    {5, 6},   {0, 2},
                                       {3, 100}, {0, 1000}, {7, 4103}};
    static const size_t grains[] = {0, 1, 2, 3, 7, 64, 1000, 5000};
    for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
        for (size_t g = 0; g < sizeof(grains) / sizeof(grains[0]); g++) {
            size_t b = ranges[r][0], e = ranges[r][1];
            atomic_uint *hits = calloc(e - b + 1, sizeof(*hits));
            struct coverage c = {.hits = hits, .base = b, .budget = nxr_ctx_budget(ctx)};
            struct nxr_for_opts o;
            nxr_for_opts_init(&o);
            o.grain = grains[g];
            o.schedule = schedule;
            cr_assert_eq(nxr_parallel_for_opts(ctx, b, e, &o, count_hits, &c), 0);
            for (size_t i = 0; i < e - b; i++)
                cr_assert_eq(atomic_load(&hits[i]), 1,
                             "[%zu,%zu) grain %zu: index %zu ran %u times", b, e, grains[g], b + i,
                             atomic_load(&hits[i]));
            cr_assert_eq(atomic_load(&c.bad_worker), 0);
            free(hits);
        }
    }
}

Test(executor_parallel_for, static_schedule_covers_every_index_once)
{
    open_domains(NULL, 0);
    check_coverage(NXR_SCHEDULE_STATIC);
}

Test(executor_parallel_for, dynamic_schedule_covers_every_index_once)
{
    open_domains(NULL, 0);
    check_coverage(NXR_SCHEDULE_DYNAMIC);
}

struct placement {
    hwloc_const_bitmap_t domain;
    atomic_uint outside;
    atomic_uint chunks;
};

static void check_placement(void *p, size_t b, size_t e, unsigned worker)
{
    struct placement *pl = p;
    (void)b, (void)e, (void)worker;
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    nxr_test_thread_affinity((pid_t)syscall(SYS_gettid), mine);
    if (!hwloc_bitmap_isincluded(mine, pl->domain))
        atomic_fetch_add(&pl->outside, 1);
    atomic_fetch_add(&pl->chunks, 1);
    hwloc_bitmap_free(mine);
}

Test(executor_parallel_for, chunks_run_only_inside_the_domain_set)
{
    /* The caller may run on both CPUs; domain 1 is the second alone, so the
     * caller must not take part and every chunk runs on the domain's worker. */
    open_domains("0:%0;1:%1", 1);
    struct placement pl = {.domain = nxr_domain_cpuset(nxr_ctx_domain(ctx))};
    cr_assert_eq(nxr_parallel_for(ctx, 0, 64, 1, check_placement, &pl), 0);
    cr_expect_eq(atomic_load(&pl.chunks), 1, "budget 1: one participant, one static share");
    cr_expect_eq(atomic_load(&pl.outside), 0);

    /* Default domain over the caller's whole set: the caller joins, still inside. */
    teardown();
    open_domains(NULL, 0);
    pl = (struct placement){.domain = nxr_domain_cpuset(nxr_ctx_domain(ctx))};
    cr_assert_eq(nxr_parallel_for(ctx, 0, 64, 1, check_placement, &pl), 0);
    cr_expect_eq(atomic_load(&pl.outside), 0);
}

struct nest {
    nxr_ctx_t *ctx;
    atomic_uint mismatched_thread;
    atomic_uint inner_calls;
};

static __thread pid_t outer_tid;

static void inner_body(void *p, size_t b, size_t e, unsigned worker)
{
    struct nest *n = p;
    (void)b, (void)e, (void)worker;
    if ((pid_t)syscall(SYS_gettid) != outer_tid)
        atomic_fetch_add(&n->mismatched_thread, 1);
    atomic_fetch_add(&n->inner_calls, 1);
}

static void outer_body(void *p, size_t b, size_t e, unsigned worker)
{
    struct nest *n = p;
    (void)worker;
    outer_tid = (pid_t)syscall(SYS_gettid);
    for (size_t i = b; i < e; i++)
        cr_assert_eq(nxr_parallel_for(n->ctx, 0, 10000, 1, inner_body, n), 0);
}

/* The team's own count of what it dispatched, rather than threads (a
 * nested dispatch would queue on the busy team, not add threads): the outer
 * loop is at most one region, the nested loops none. */
Test(executor_parallel_for, nested_loop_runs_sequentially_in_place)
{
    open_domains(NULL, 0);
    struct nxr__team *team = ctx->domain->team;
    uint64_t regions = nxr__team_regions(team);
    struct nest n = {.ctx = ctx};
    cr_assert_eq(nxr_parallel_for(ctx, 0, 8, 1, outer_body, &n), 0);
    cr_expect_eq(atomic_load(&n.inner_calls), 8, "each nested loop is one sequential call");
    cr_expect_eq(atomic_load(&n.mismatched_thread), 0, "nested loops stay on their thread");
    cr_expect_leq(nxr__team_regions(team) - regions, 1u, "the nested loops dispatched regions");
    cr_expect_eq(nxr__team_nested_regions(team), 0u, "a region was dispatched from a body");
}

static void sum_range(void *arg, size_t b, size_t e, void *partial)
{
    (void)arg;
    for (size_t i = b; i < e; i++)
        *(unsigned long long *)partial += i;
}

static void add_partial(void *arg, void *result, const void *partial)
{
    (void)arg;
    *(unsigned long long *)result += *(const unsigned long long *)partial;
}

Test(executor_parallel_for, reduce_sums_every_index)
{
    open_domains(NULL, 0);
    const unsigned long long zero = 0;
    static const size_t ns[] = {0, 1, 2, 999, 100001};
    for (size_t k = 0; k < 5; k++) {
        unsigned long long sum = 12345;
        cr_assert_eq(nxr_parallel_reduce(ctx, 0, ns[k], 7, sizeof(sum), &zero, sum_range,
                                         add_partial, NULL, &sum),
                     0);
        unsigned long long n = ns[k];
        cr_expect_eq(sum, n == 0 ? 0 : n * (n - 1) / 2, "n=%llu: %llu", n, sum);
    }
}

static void never(void *p, size_t b, size_t e, unsigned w)
{
    (void)p, (void)b, (void)e, (void)w;
    cr_assert_fail("body ran on a rejected call");
}

Test(executor_parallel_for, bad_arguments_are_einval)
{
    open_domains(NULL, 0);
    cr_expect_eq(nxr_parallel_for(NULL, 0, 1, 1, never, NULL), -EINVAL);
    cr_expect_eq(nxr_parallel_for(ctx, 0, 1, 1, NULL, NULL), -EINVAL);
    cr_expect_eq(nxr_parallel_for(ctx, 5, 4, 1, never, NULL), -EINVAL);
    struct nxr_for_opts o;
    nxr_for_opts_init(&o);
    o.schedule = (enum nxr_schedule)7;
    cr_expect_eq(nxr_parallel_for_opts(ctx, 0, 100, &o, never, NULL), -EINVAL);
    unsigned long long r;
    cr_expect_eq(nxr_parallel_reduce(ctx, 0, 1, 1, 0, &r, sum_range, add_partial, NULL, &r),
                 -EINVAL);
}

Test(executor_parallel_for, small_work_stays_on_the_calling_thread)
{
    open_domains(NULL, 0);
    /* A caller inside the domain (on a multi-node machine the default
     * domain is one node; outside it, small work goes to a worker). */
    cr_assert_eq(nxr_test_pin(nxr_domain_cpuset(nxr_ctx_domain(ctx))), 0);
    struct nest n = {.ctx = ctx};
    outer_tid = (pid_t)syscall(SYS_gettid);
    /* 100 iterations of 1 ns (the cost hint): 100 ns, under one
     * participant's share, so one participant: the caller runs it, and it
     * takes no permit and dispatches no region (what the shortcut saves;
     * without it the chunk would still run on this thread when the caller
     * takes part, so the thread alone proves nothing). */
    struct nxr__arbiter_stats before, after;
    nxr__arbiter_stats(rt->arbiter, &before);
    uint64_t regions = nxr__team_regions(rt->domains[0]->team);
    struct nxr_for_opts cheap;
    nxr_for_opts_init(&cheap);
    cheap.cost_ns = 1.0;
    cr_assert_eq(nxr_parallel_for_opts(ctx, 0, 100, &cheap, inner_body, &n), 0);
    nxr__arbiter_stats(rt->arbiter, &after);
    cr_expect_eq(atomic_load(&n.inner_calls), 1);
    cr_expect_eq(atomic_load(&n.mismatched_thread), 0);
    cr_expect_eq(after.grants, before.grants, "small work took a permit");
    cr_expect_eq(nxr__team_regions(rt->domains[0]->team), regions, "small work woke the team");
    /* The peer in the same run: the same 100 iterations without a hint
     * (grain 0: an even split) do take a permit (a budget of one runs them
     * on this thread too, permit-free). */
    if (nxr_ctx_budget(ctx) >= 2) {
        cr_assert_eq(nxr_parallel_for(ctx, 0, 100, 0, inner_body, &n), 0);
        nxr__arbiter_stats(rt->arbiter, &after);
        cr_expect_eq(after.grants, before.grants + 1, "two chunks went through admission");
    }
}
