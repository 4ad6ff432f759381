/*
 * Service threads on their domain: nxr_ctx_bind confines the calling thread
 * to the context's domain (the mask reads back as the domain set), after
 * which small work runs on the thread itself, with no hand-off (the team's
 * region counter stays put, where an unbound thread's small work costs a
 * one-worker region); restoring gives back exactly the old mask. The
 * lookups (domain of a CPU, of a node, of the calling thread) and
 * nxr_ctx_create_here answer for a thread placed by its launcher.
 *
 * CPUs come from the allowed set: the binding tests need two (a thread
 * allowed on both, a domain on one) and skip with a reason on one CPU.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/internal/team.h"
#include "runtime/internal/ctx.h"
#include "tests/support/cpus.h"
#include "tests/support/runtime.h"

static int cpus[2], ncpus;
static nxr_runtime_t *rt;
static nxr_ctx_t *ctx0, *ctx1;
static cpu_set_t original;

static void setup(void)
{
    ncpus = nxr_test_cpu_count();
    cr_assert_geq(ncpus, 1);
    cpus[0] = nxr_test_cpu(0);
    cpus[1] = ncpus >= 2 ? nxr_test_cpu(1) : cpus[0];
    cr_assert_eq(sched_getaffinity(0, sizeof(original), &original), 0);
}

static void teardown(void)
{
    /* Whatever a failed test left, the next one starts from the original. */
    sched_setaffinity(0, sizeof(original), &original);
    nxr_ctx_destroy(ctx0);
    nxr_ctx_destroy(ctx1);
    nxr_runtime_destroy(rt);
    ctx0 = ctx1 = NULL;
    rt = NULL;
}

TestSuite(runtime_bind, .init = setup, .fini = teardown, .timeout = 60);

/* A thread wider than one domain needs two CPUs. */
#define need_two_cpus() NXR_TEST_NEED_CPUS(2)

/* Domains 0 on the first allowed CPU and 1 on the second (or both on the
 * only one, shared). */
static void open_runtime(void)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, ncpus >= 2 ? "0:%0;1:%1" : "0:%0;1:%0 shared", NXR_TEST_PARK);
    rt = fx.rt;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx0), 0);
    cr_assert_eq(nxr_ctx_create(rt, 1, &ctx1), 0);
}

static bool mask_is(const cpu_set_t *want)
{
    cpu_set_t now;
    cr_assert_eq(sched_getaffinity(0, sizeof(now), &now), 0);
    return CPU_EQUAL(&now, want);
}

static bool mask_is_cpu(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return mask_is(&one);
}

struct where {
    pthread_t thread;
    int calls;
};

static void note_thread(void *arg, size_t b, size_t e, unsigned worker)
{
    struct where *w = arg;
    (void)b, (void)e, (void)worker;
    w->thread = pthread_self();
    w->calls++;
}

/* Runs one small loop (one chunk) on ctx: whether it ran on this thread,
 * and how many team regions it cost. */
static bool small_loop_here(nxr_ctx_t *ctx, uint64_t *regions)
{
    struct nxr__team *team = ctx->exec->team;
    uint64_t before = nxr__team_regions(team);
    struct where w = {0};
    cr_assert_eq(nxr_parallel_for(ctx, 0, 10, 0, note_thread, &w), 0);
    cr_assert_eq(w.calls, 1);
    *regions = nxr__team_regions(team) - before;
    return pthread_equal(w.thread, pthread_self());
}

Test(runtime_bind, a_bound_thread_reads_back_the_domain_set_and_runs_small_work_itself)
{
    need_two_cpus();
    open_runtime();
    uint64_t regions;
    cr_assert(!small_loop_here(ctx1, &regions), "unbound, the thread is wider than domain 1");
    cr_assert_eq(regions, 1, "so its small work cost a one-worker region");

    nxr_thread_binding_t *prev = NULL;
    cr_assert_eq(nxr_ctx_bind(ctx1, &prev), 0, "%s", nxr_last_error());
    cr_assert_not_null(prev);
    cr_assert(mask_is_cpu(cpus[1]), "the mask reads back as domain 1's set");
    cr_assert(small_loop_here(ctx1, &regions), "bound, it runs its small work");
    cr_assert_eq(regions, 0, "no hand-off, no region");
    float x[100], sum;
    for (int i = 0; i < 100; i++)
        x[i] = 1.0f;
    uint64_t before = nxr__team_regions(ctx1->exec->team);
    cr_assert_eq(nxr_sum(ctx1, 100, x, &sum), 0);
    cr_assert_eq(sum, 100.0f);
    cr_assert_eq(nxr__team_regions(ctx1->exec->team), before, "a small kernel too");

    cr_assert_eq(nxr_thread_binding_restore(prev), 0);
    cr_assert(mask_is(&original), "the old mask is back");
    cr_assert(!small_loop_here(ctx1, &regions), "and so is the hand-off");
    cr_assert_eq(regions, 1);
}

struct other_thread {
    nxr_thread_binding_t *prev;
    int rc;
};

static void *restore_elsewhere(void *p)
{
    struct other_thread *o = p;
    o->rc = nxr_thread_binding_restore(o->prev);
    return NULL;
}

Test(runtime_bind, restore_belongs_to_the_thread_that_bound)
{
    need_two_cpus();
    open_runtime();
    nxr_thread_binding_t *prev;
    cr_assert_eq(nxr_ctx_bind(ctx0, &prev), 0);
    struct other_thread o = {.prev = prev};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, restore_elsewhere, &o), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(o.rc, -EINVAL, "another thread may not restore it");
    cr_assert(mask_is_cpu(cpus[0]), "and nothing changed here");
    cr_assert_eq(nxr_thread_binding_restore(prev), 0, "the handle was kept");
    cr_assert(mask_is(&original));
    cr_assert_eq(nxr_thread_binding_restore(NULL), 0, "NULL is a no-op");
}

Test(runtime_bind, binding_twice_restores_in_reverse_order)
{
    need_two_cpus();
    open_runtime();
    nxr_thread_binding_t *first, *second;
    cr_assert_eq(nxr_ctx_bind(ctx0, &first), 0);
    cr_assert_eq(nxr_ctx_bind(ctx1, &second), 0);
    cr_assert(mask_is_cpu(cpus[1]));
    cr_assert_eq(nxr_thread_binding_restore(second), 0);
    cr_assert(mask_is_cpu(cpus[0]), "back to the first binding");
    cr_assert_eq(nxr_thread_binding_restore(first), 0);
    cr_assert(mask_is(&original));
}

static int noop_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    (void)self;
    for (unsigned p = 0; p < count; p++)
        fn(arg, p, count);
    return 0;
}

static int noop_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                       void *done_arg)
{
    (void)self;
    for (size_t i = 0; i < count; i++)
        fn(arg, i);
    done(done_arg);
    return 0;
}

static const struct nxr_executor_ops inline_ops = {.install = noop_install, .submit = noop_submit};

struct bind_in_body {
    nxr_ctx_t *ctx;
    int rc;
};

static void bind_from_body(void *arg, size_t b, size_t e, unsigned worker)
{
    struct bind_in_body *x = arg;
    (void)b, (void)e, (void)worker;
    nxr_thread_binding_t *prev = (nxr_thread_binding_t *)0x1;
    x->rc = nxr_ctx_bind(x->ctx, &prev);
    if (prev != NULL)
        x->rc = 12345; /* a failed bind must hand nothing out */
}

Test(runtime_bind, what_cannot_be_bound)
{
    open_runtime();
    nxr_thread_binding_t *prev = (nxr_thread_binding_t *)0x1;
    cr_assert_eq(nxr_ctx_bind(NULL, &prev), -EINVAL);
    cr_assert_null(prev);
    cr_assert_eq(nxr_ctx_bind(ctx0, NULL), -EINVAL);

    nxr_ctx_t *placing;
    cr_assert_eq(nxr_ctx_create(rt, NXR_DOMAIN_AUTO, &placing), 0);
    prev = (nxr_thread_binding_t *)0x1;
    cr_assert_eq(nxr_ctx_bind(placing, &prev), -EINVAL, "a routing context has no one domain");
    cr_assert_null(prev);
    nxr_ctx_destroy(placing);

    struct nxr_external_decl d;
    nxr_external_decl_init(&d);
    d.id = 9;
    d.executor = (struct nxr_executor){.ops = &inline_ops, .workers = 1};
    cr_assert_eq(nxr_runtime_attach(rt, &d), 0);
    nxr_ctx_t *cm;
    cr_assert_eq(nxr_ctx_create(rt, 9, &cm), 0);
    cr_assert_eq(nxr_ctx_bind(cm, &prev), NXR_EPLACEMENT, "caller-managed: no CPU set");
    cr_assert(strstr(nxr_last_error(), "no CPU set") != NULL, "%s", nxr_last_error());
    nxr_ctx_destroy(cm);

    struct bind_in_body x = {.ctx = ctx0};
    cr_assert_eq(nxr_parallel_for(ctx0, 0, 1, 0, bind_from_body, &x), 0);
    cr_assert_eq(x.rc, NXR_EREENTRANT, "a body's thread belongs to its executor");
    cr_assert(mask_is(&original), "nothing was changed by the refusals");
}

/* ---- lookups --------------------------------------------------------------- */

Test(runtime_bind, domain_of_cpu_and_of_node)
{
    open_runtime();
    nxr_domain_t *d = (nxr_domain_t *)0x1;
    cr_assert_eq(nxr_runtime_domain_of_cpu(rt, cpus[0], &d), 0);
    cr_assert_eq(nxr_domain_id(d), 0, "managed, lowest id");
    if (ncpus >= 2) {
        cr_assert_eq(nxr_runtime_domain_of_cpu(rt, cpus[1], &d), 0);
        cr_assert_eq(nxr_domain_id(d), 1);
    }
    d = (nxr_domain_t *)0x1;
    cr_assert_eq(nxr_runtime_domain_of_cpu(rt, NXR_CPU_ID_MAX, &d), NXR_ENODOMAIN,
                 "a CPU in no domain");
    cr_assert_null(d);
    cr_assert_eq(nxr_runtime_domain_of_cpu(rt, -1, &d), -EINVAL);
    cr_assert_eq(nxr_runtime_domain_of_cpu(NULL, 0, &d), -EINVAL);
    cr_assert_eq(nxr_runtime_domain_of_cpu(rt, 0, NULL), -EINVAL);

    /* Each domain's node leads back to the lowest-id domain on that node. */
    for (int id = 0; id < 2; id++) {
        nxr_domain_t *mine;
        cr_assert_eq(nxr_runtime_domain(rt, id, &mine), 0);
        int node = nxr_domain_node(mine);
        if (node == NXR_NODE_NONE)
            continue;
        cr_assert_eq(nxr_runtime_domain_of_node(rt, node, &d), 0);
        cr_assert_eq(nxr_domain_node(d), node);
        cr_assert_leq(nxr_domain_id(d), id);
    }
    cr_assert_eq(nxr_runtime_domain_of_node(rt, 4095, &d), NXR_ENODOMAIN);
    cr_assert_eq(nxr_runtime_domain_of_node(rt, -1, &d), -EINVAL);
}

Test(runtime_bind, a_thread_placed_by_its_launcher_finds_its_domain)
{
    need_two_cpus();
    open_runtime();
    /* As taskset or MPI would: the thread confined to the second CPU. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[1], &one);
    cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
    nxr_domain_t *d;
    cr_assert_eq(nxr_runtime_domain_here(rt, &d), 0);
    cr_assert_eq(nxr_domain_id(d), 1, "its whole affinity lies in domain 1");
    nxr_ctx_t *here;
    cr_assert_eq(nxr_ctx_create_here(rt, &here), 0);
    cr_assert_eq(nxr_domain_id(nxr_ctx_domain(here)), 1);
    nxr_ctx_destroy(here);
    /* Wider than one domain: the domain of the CPU it is on now. */
    cr_assert_eq(sched_setaffinity(0, sizeof(original), &original), 0);
    cr_assert_eq(nxr_runtime_domain_here(rt, &d), 0);
    cr_assert(nxr_domain_id(d) == 0 || nxr_domain_id(d) == 1);
    nxr_ctx_t *out = (nxr_ctx_t *)0x1;
    cr_assert_eq(nxr_ctx_create_here(NULL, &out), -EINVAL);
    cr_assert_null(out);
}

Test(runtime_bind, domain_here_prefers_the_domain_holding_the_whole_affinity)
{
    need_two_cpus();
    /* Domain 5 covers both CPUs; 0 and 1 one each. A thread allowed on both
     * lies wholly inside 5 only, whichever CPU it runs on now (the CPU alone
     * would say 0 or 1). */
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, "0:%0;1:%1;5:%0,%1 shared", NXR_TEST_PARK);
    rt = fx.rt;
    cpu_set_t two;
    CPU_ZERO(&two);
    CPU_SET(cpus[0], &two);
    CPU_SET(cpus[1], &two);
    cr_assert_eq(sched_setaffinity(0, sizeof(two), &two), 0);
    nxr_domain_t *d;
    cr_assert_eq(nxr_runtime_domain_here(rt, &d), 0);
    cr_assert_eq(nxr_domain_id(d), 5);
}

Test(runtime_bind, domain_here_outside_every_domain_is_enodomain)
{
    need_two_cpus();
    /* A runtime whose only domain is the first CPU; the thread on the
     * second one only. */
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, "0:%0", NXR_TEST_PARK);
    rt = fx.rt;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[1], &one);
    cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
    nxr_domain_t *d = (nxr_domain_t *)0x1;
    cr_assert_eq(nxr_runtime_domain_here(rt, &d), NXR_ENODOMAIN);
    cr_assert_null(d);
}
