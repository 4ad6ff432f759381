/*
 * External executors: registration errors (each typed, the runtime left
 * unchanged and the executor never retained), cooperative domains arbitrated
 * against managed ones, the caller-managed admission guard, and the
 * executor retained until its last job ended.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <numa.h>
#include <stdatomic.h>
#include <string.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "examples/pool_executor.h"
#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static struct nxr_test_runtime fx; /* the quiet runtime (tests/support/runtime.h) */
static struct host_pool *pool;

static void open_runtime(const char *domains)
{
    NXR_TEST_RUNTIME(&fx, domains, 0); /* a tests/support/cpus.h template */
    rt = fx.rt;
}

/* A one-thread host pool on the k-th allowed CPU. */
static void start_pool(int k)
{
    NXR_TEST_NEED_CPUS(k + 1);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(nxr_test_cpu(k), &set);
    pool = host_pool_start(1, &set);
    cr_assert_not_null(pool);
}

static void teardown(void)
{
    nxr_runtime_destroy(rt);
    if (pool != NULL)
        host_pool_stop(pool);
    rt = NULL;
    pool = NULL;
    cr_expect_eq(pool_executor_refs(), 0, "every retain was released");
}

TestSuite(runtime_attach, .fini = teardown, .timeout = 30);

/* A CPU set from a tests/support/cpus.h template ("%1" the second CPU). */
static hwloc_bitmap_t set_of(const char *tmpl)
{
    NXR_TEST_NEED_CPUS(nxr_test_cpus_needed(tmpl));
    hwloc_bitmap_t s = hwloc_bitmap_alloc();
    hwloc_bitmap_list_sscanf(s, nxr_test_expand(tmpl));
    return s;
}

/* A cooperative declaration on CPU 1 backed by the host pool. */
static void coop_decl(struct nxr_external_decl *d, int id, hwloc_const_bitmap_t cpus)
{
    nxr_external_decl_init(d);
    d->id = id;
    d->admission = NXR_ADMISSION_COOPERATIVE;
    d->cpus = cpus;
    pool_executor_init(&d->executor, pool);
}

static void expect_attach_fails(const struct nxr_external_decl *d, int want)
{
    size_t before = nxr_runtime_domain_count(rt);
    int rc = nxr_runtime_attach(rt, d);
    cr_assert_eq(rc, want, "got %d (%s), want %d: %s", rc, nxr_strerror(rc), want, nxr_last_error());
    cr_assert_neq(nxr_last_error()[0], '\0');
    cr_assert_eq(nxr_runtime_domain_count(rt), before, "the runtime changed");
    cr_assert_eq(pool_executor_refs(), 0, "a failed attach retained the executor");
}

Test(runtime_attach, bad_admission_mode_is_einval)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = set_of("%0");
    struct nxr_external_decl d;
    coop_decl(&d, 5, s);
    d.admission = NXR_ADMISSION_MANAGED;
    expect_attach_fails(&d, -EINVAL);
    d.admission = NXR_ADMISSION_COOPERATIVE;
    d.id = -3;
    expect_attach_fails(&d, -EINVAL);
    cr_expect_eq(nxr_runtime_attach(NULL, &d), -EINVAL);
    cr_expect_eq(nxr_runtime_attach(rt, NULL), -EINVAL);
    hwloc_bitmap_free(s);
}

Test(runtime_attach, caller_managed_with_a_cpu_set_is_einval)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = set_of("%0");
    struct nxr_external_decl d;
    coop_decl(&d, 5, s);
    d.admission = NXR_ADMISSION_CALLER_MANAGED;
    expect_attach_fails(&d, -EINVAL);
    hwloc_bitmap_free(s);
}

Test(runtime_attach, incomplete_executor_table_is_eexecutor)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = set_of("%0");
    struct nxr_external_decl d;
    coop_decl(&d, 5, s);
    struct nxr_executor_ops ops = *d.executor.ops;
    d.executor.ops = &ops;
    ops.install = NULL;
    expect_attach_fails(&d, NXR_EEXECUTOR);
    pool_executor_init(&d.executor, pool);
    ops = *d.executor.ops;
    d.executor.ops = &ops;
    ops.submit = NULL;
    expect_attach_fails(&d, NXR_EEXECUTOR);
    pool_executor_init(&d.executor, pool);
    ops = *d.executor.ops;
    d.executor.ops = &ops;
    ops.release = NULL;
    expect_attach_fails(&d, NXR_EEXECUTOR);
    d.executor.ops = NULL;
    expect_attach_fails(&d, NXR_EEXECUTOR);
    hwloc_bitmap_free(s);
}

Test(runtime_attach, executor_claiming_nxr_ownership_is_eexecutor)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = set_of("%0");
    struct nxr_external_decl d;
    coop_decl(&d, 5, s);
    d.executor.owner = NXR_EXECUTOR_OWNED_BY_NXR; /* nxr did not create those threads */
    expect_attach_fails(&d, NXR_EEXECUTOR);
    cr_expect_neq(strstr(nxr_last_error(), "owned by nxr"), NULL, "%s", nxr_last_error());
    hwloc_bitmap_free(s);
}

Test(runtime_attach, zero_workers_is_eexecutor)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = set_of("%0");
    struct nxr_external_decl d;
    coop_decl(&d, 5, s);
    d.executor.workers = 0;
    expect_attach_fails(&d, NXR_EEXECUTOR);
    hwloc_bitmap_free(s);
}

Test(runtime_attach, empty_cooperative_set_is_eemptyset)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = hwloc_bitmap_alloc();
    struct nxr_external_decl d;
    coop_decl(&d, 5, s);
    expect_attach_fails(&d, NXR_EEMPTYSET);
    d.cpus = NULL;
    expect_attach_fails(&d, NXR_EEMPTYSET);
    hwloc_bitmap_free(s);
}

Test(runtime_attach, cooperative_set_outside_allowed_is_edisallowed)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = set_of("%0,999");
    struct nxr_external_decl d;
    coop_decl(&d, 5, s);
    expect_attach_fails(&d, NXR_EDISALLOWED);
    hwloc_bitmap_free(s);
}

Test(runtime_attach, budget_beyond_workers_is_ebudget)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = set_of("%0");
    struct nxr_external_decl d;
    coop_decl(&d, 5, s);
    d.budget = 2; /* the pool has one thread (and the set one CPU) */
    expect_attach_fails(&d, NXR_EBUDGET);
    d.budget = -1;
    expect_attach_fails(&d, NXR_EBUDGET);
    hwloc_bitmap_free(s);
}

Test(runtime_attach, taken_id_is_edupid)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = set_of("%0");
    struct nxr_external_decl d;
    coop_decl(&d, 0, s);
    expect_attach_fails(&d, NXR_EDUPID);
    hwloc_bitmap_free(s);
}

struct where {
    struct host_pool *pool;
    atomic_uint on_pool, elsewhere;
};

static void note_thread(void *p, size_t b, size_t e, unsigned w)
{
    struct where *wh = p;
    (void)b, (void)e, (void)w;
    atomic_fetch_add(host_pool_is_own_thread(wh->pool) ? &wh->on_pool : &wh->elsewhere, 1);
}

Test(runtime_attach, cooperative_domain_runs_on_the_pool_and_reports_declared)
{
    open_runtime("0:%0");
    start_pool(1);
    hwloc_bitmap_t s = set_of("%1");
    struct nxr_external_decl d;
    coop_decl(&d, 7, s);
    cr_assert_eq(nxr_runtime_attach(rt, &d), 0, "%s", nxr_last_error());
    hwloc_bitmap_free(s); /* borrowed for the call only */
    cr_expect_eq(pool_executor_refs(), 1, "nxr holds the executor");
    nxr_domain_t *dom;
    cr_assert_eq(nxr_runtime_domain(rt, 7, &dom), 0);
    cr_expect_eq(nxr_domain_admission(dom), NXR_ADMISSION_COOPERATIVE);
    cr_expect_eq(nxr_domain_placement(dom), NXR_PLACEMENT_DECLARED);
    cr_expect_eq(hwloc_bitmap_first(nxr_domain_cpuset(dom)), nxr_test_cpu(1));
    cr_expect_eq(nxr_domain_workers(dom), 1);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 7, &ctx), 0);
    struct where wh = {.pool = pool};
    cr_assert_eq(nxr_parallel_for(ctx, 0, 100, 10, note_thread, &wh), 0);
    cr_expect_gt(atomic_load(&wh.on_pool), 0);
    cr_expect_eq(atomic_load(&wh.elsewhere), 0, "work left the pool");
    char *json, want[256];
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_JSON, &json), 0);
    /* The CPU's node, as the kernel says (0 here; 1 in a 4-node VM). */
    int c1 = nxr_test_cpu(1);
    snprintf(want, sizeof(want),
             "\"id\":7,\"node\":%d,\"cpus\":[%d],\"admission\":\"cooperative\","
             "\"placement\":\"declared\",\"workers\":1,\"budget\":1,"
             "\"executor_owner\":\"caller\"",
             numa_available() < 0 ? -1 : numa_node_of_cpu(c1), c1);
    cr_expect_neq(strstr(json, want), NULL, "%s", json);
    free(json);
    nxr_ctx_destroy(ctx);
}

/* Two bodies that must (or must not) overlap in time. */
struct overlap {
    atomic_int inside_a;
    atomic_int b_started;
    atomic_int violations;
    atomic_int met;
    bool expect_concurrent;
};

static void body_a(void *p, size_t b, size_t e, unsigned w)
{
    struct overlap *o = p;
    (void)b, (void)e, (void)w;
    atomic_store(&o->inside_a, 1);
    /* Concurrent: wait for B to arrive (rendezvous). Exclusive: wait until
     * B's request is queued in the arbiter (it is blocked: the right
     * outcome) or B started (the wrong one, counted in body_b). State, not
     * a time window. */
    if (o->expect_concurrent) {
        nxr_test_wait_at_least(&o->b_started, 1, 5000);
    } else {
        struct nxr__arbiter_stats st;
        do {
            sched_yield();
            nxr__arbiter_stats(rt->arbiter, &st);
        } while (st.waiters == 0 && atomic_load(&o->b_started) == 0);
    }
    atomic_store(&o->inside_a, 0);
}

static void body_b(void *p, size_t b, size_t e, unsigned w)
{
    struct overlap *o = p;
    (void)b, (void)e, (void)w;
    if (atomic_load(&o->inside_a))
        atomic_fetch_add(&o->met, 1);
    atomic_store(&o->b_started, 1);
}

struct runner {
    nxr_ctx_t *ctx;
    struct overlap *o;
};

static void *run_b(void *p)
{
    struct runner *r = p;
    nxr_test_wait_at_least(&r->o->inside_a, 1, 5000);
    nxr_parallel_for(r->ctx, 0, 2, 1, body_b, r->o);
    return NULL;
}

/* Runs A on ctx_a and, once A is inside, B on ctx_b from another thread. */
static int run_pair(nxr_ctx_t *ctx_a, nxr_ctx_t *ctx_b, bool concurrent)
{
    struct overlap o = {.expect_concurrent = concurrent};
    struct runner r = {.ctx = ctx_b, .o = &o};
    pthread_t t;
    pthread_create(&t, NULL, run_b, &r);
    cr_assert_eq(nxr_parallel_for(ctx_a, 0, 2, 1, body_a, &o), 0);
    pthread_join(t, NULL);
    cr_assert_eq(atomic_load(&o.b_started), 1);
    return atomic_load(&o.met);
}

Test(runtime_attach, overlapping_cooperative_and_managed_never_run_together)
{
    open_runtime("0:%0;1:%1");
    start_pool(1);
    hwloc_bitmap_t s = set_of("%1");
    struct nxr_external_decl d;
    coop_decl(&d, 7, s);
    cr_assert_eq(nxr_runtime_attach(rt, &d), 0, "%s", nxr_last_error());
    nxr_ctx_t *managed1, *managed0, *coop;
    cr_assert_eq(nxr_ctx_create(rt, 1, &managed1), 0);
    cr_assert_eq(nxr_ctx_create(rt, 0, &managed0), 0);
    cr_assert_eq(nxr_ctx_create(rt, 7, &coop), 0);
    cr_expect_eq(run_pair(managed1, coop, false), 0, "CPU 1 ran two domains at once");
    cr_expect_eq(run_pair(managed0, coop, true), 1, "disjoint domains did not run together");
    /* The managed team on CPU 1 now shares it with the pool: it parks at once. */
    cr_expect_eq(nxr__team_get_spin(rt->domains[1]->team), 0);
    cr_expect_neq(nxr__team_get_spin(rt->domains[0]->team), 0);
    nxr_ctx_destroy(managed1);
    nxr_ctx_destroy(managed0);
    nxr_ctx_destroy(coop);
    hwloc_bitmap_free(s);
}

Test(runtime_attach, shared_managed_domain_is_arbitrated)
{
    open_runtime("0:%0;1:%1;9:%0,%1 shared");
    cr_assert_eq(nxr_runtime_domain_count(rt), 3);
    for (size_t i = 0; i < 3; i++)
        cr_expect_eq(nxr__team_get_spin(rt->domains[i]->team), 0, "shared CPUs: park at once");
    nxr_ctx_t *all, *one;
    cr_assert_eq(nxr_ctx_create(rt, 9, &all), 0);
    cr_assert_eq(nxr_ctx_create(rt, 1, &one), 0);
    cr_expect_eq(run_pair(all, one, false), 0, "the shared domain overlapped domain 1");
    cr_expect_eq(run_pair(one, all, false), 0, "domain 1 overlapped the shared domain");
    nxr_ctx_destroy(all);
    nxr_ctx_destroy(one);
}

Test(runtime_attach, undeclared_overlap_is_still_eoverlap)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.domains = nxr_test_expand("0:%0;9:%0"); /* overlapping, neither says shared */
    nxr_runtime_t *bad = NULL;
    cr_expect_eq(nxr_runtime_create(&o, &bad), NXR_EOVERLAP);
    cr_expect_null(bad);
}

/* ---- caller-managed ------------------------------------------------------ */

struct guard_probe {
    nxr_ctx_t *ctx;
    atomic_int from_pool_rc;
    atomic_int entered;
    atomic_int release;
};

static int noop(void *p, size_t i)
{
    (void)p, (void)i;
    return 0;
}

static void body_hold(void *p, size_t b, size_t e, unsigned w)
{
    struct guard_probe *g = p;
    (void)b, (void)e, (void)w;
    /* From a worker of the same caller pool, while the domain is active. */
    atomic_store(&g->from_pool_rc, nxr_submit(g->ctx, 1, noop, NULL, NULL));
    atomic_store(&g->entered, 1);
    nxr_test_wait_at_least(&g->release, 1, 5000);
}

static void *hold_domain(void *p)
{
    struct guard_probe *g = p;
    nxr_parallel_for(g->ctx, 0, 2, 1, body_hold, g);
    return NULL;
}

static void attach_caller_managed(int id)
{
    struct nxr_external_decl d;
    nxr_external_decl_init(&d);
    d.id = id;
    pool_executor_init(&d.executor, pool);
    cr_assert_eq(nxr_runtime_attach(rt, &d), 0, "%s", nxr_last_error());
}

Test(runtime_attach, caller_managed_rejects_a_second_entry)
{
    open_runtime("0:%0");
    start_pool(0);
    attach_caller_managed(3);
    nxr_domain_t *dom;
    cr_assert_eq(nxr_runtime_domain(rt, 3, &dom), 0);
    cr_expect_null(nxr_domain_cpuset(dom), "no CPU set is invented");
    cr_expect_eq(nxr_domain_placement(dom), NXR_PLACEMENT_NONE);
    cr_expect_eq(nxr_domain_node(dom), NXR_NODE_NONE);
    struct guard_probe g;
    memset(&g, 0, sizeof(g));
    cr_assert_eq(nxr_ctx_create(rt, 3, &g.ctx), 0);
    pthread_t t;
    pthread_create(&t, NULL, hold_domain, &g);
    nxr_test_wait_at_least(&g.entered, 1, 5000);
    cr_assert_eq(atomic_load(&g.entered), 1);
    /* From another thread (with its own context: one driver per context)
     * while active. */
    nxr_ctx_t *mine;
    cr_assert_eq(nxr_ctx_create(rt, 3, &mine), 0);
    cr_expect_eq(nxr_run(mine, NXR_MODE_OUTER, 2, noop, NULL), NXR_EADMISSION);
    cr_expect_eq(nxr_submit(mine, 1, noop, NULL, NULL), NXR_EADMISSION);
    atomic_store(&g.release, 1);
    pthread_join(t, NULL);
    cr_expect_eq(atomic_load(&g.from_pool_rc), NXR_EREENTRANT,
                 "a submit from the pool's own worker inside a body: the nesting rule");
    /* The guard cleared: the domain admits again. */
    cr_expect_eq(nxr_run(mine, NXR_MODE_OUTER, 2, noop, NULL), 0);
    nxr_ctx_destroy(mine);
    nxr_ctx_destroy(g.ctx);
}

static int fail(void *p, size_t i)
{
    (void)p, (void)i;
    return -EIO;
}

Test(runtime_attach, caller_managed_guard_clears_after_an_error)
{
    open_runtime("0:%0");
    start_pool(0);
    attach_caller_managed(3);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 3, &ctx), 0);
    cr_expect_eq(nxr_run(ctx, NXR_MODE_OUTER, 1, fail, NULL), -EIO);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 3, fail, NULL, &job), 0, "the guard cleared after the error");
    cr_expect_eq(nxr_job_wait(job), -EIO);
    cr_expect_eq(nxr_run(ctx, NXR_MODE_OUTER, 1, noop, NULL), 0);
    nxr_ctx_destroy(ctx);
}

/* ---- retention ------------------------------------------------------------ */

static atomic_int slow_done;
static atomic_int slow_open;
static atomic_int destroyer; /* tid of the thread in nxr_runtime_destroy */

/* Holds until the gate opens: the job is surely in flight at destroy. */
static int slow(void *p, size_t i)
{
    (void)p, (void)i;
    while (atomic_load(&slow_open) == 0)
        sched_yield();
    atomic_fetch_add(&slow_done, 1);
    return 0;
}

/* Opens the gate once the destroying thread sleeps (in the drain). */
static void *open_when_destroy_waits(void *p)
{
    (void)p;
    while (atomic_load(&destroyer) == 0)
        sched_yield();
    nxr_test_wait_asleep((pid_t)atomic_load(&destroyer), NULL, NULL, 10000);
    atomic_store(&slow_open, 1);
    return NULL;
}

Test(runtime_attach, executor_is_retained_until_its_last_job_ends)
{
    open_runtime("0:%0");
    start_pool(0);
    hwloc_bitmap_t s = set_of("%0");
    struct nxr_external_decl d;
    coop_decl(&d, 7, s);
    cr_assert_eq(nxr_runtime_attach(rt, &d), 0, "%s", nxr_last_error());
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 7, &ctx), 0);
    atomic_store(&slow_done, 0);
    atomic_store(&slow_open, 0);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 5, slow, NULL, &job), 0);
    nxr_job_detach(job);
    cr_expect_eq(pool_executor_refs(), 2, "attach + the job in flight");
    nxr_ctx_destroy(ctx);
    pthread_t opener;
    pthread_create(&opener, NULL, open_when_destroy_waits, NULL);
    atomic_store(&destroyer, (int)syscall(SYS_gettid));
    nxr_runtime_destroy(rt);
    rt = NULL;
    pthread_join(opener, NULL);
    cr_expect_eq(atomic_load(&slow_done), 5, "destroy returned before the job ended");
    cr_expect_eq(pool_executor_refs(), 0, "released once nxr stopped using it");
    hwloc_bitmap_free(s);
}
