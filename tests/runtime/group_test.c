/*
 * nxr_run_across: tasks over several domains at once, under one permit for
 * the union of their CPU sets, granted whole or not at all.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static struct nxr_test_runtime fx; /* the quiet runtime (tests/support/runtime.h) */

static void open_runtime(const char *domains)
{
    NXR_TEST_RUNTIME(&fx, domains, 0); /* a tests/support/cpus.h template */
    rt = fx.rt;
}

static void teardown(void)
{
    nxr_runtime_destroy(rt);
    rt = NULL;
}

TestSuite(runtime_group, .fini = teardown, .timeout = 30);

struct meet {
    atomic_int on_domain[2];
    atomic_int arrived;
    atomic_int met;
};

static int meet_task(void *p, size_t i)
{
    struct meet *m = p;
    int d = nxr_test_worker_domain();
    if (d == 0 || d == 1)
        atomic_fetch_add(&m->on_domain[d], 1);
    if (i < 2) { /* two tasks wait for each other: only concurrency lets them meet */
        atomic_fetch_add(&m->arrived, 1);
        nxr_test_wait_at_least(&m->arrived, 2, 5000);
        if (atomic_load(&m->arrived) >= 2)
            atomic_fetch_add(&m->met, 1);
    }
    return 0;
}

Test(runtime_group, tasks_run_on_every_listed_domain_at_once)
{
    open_runtime("0:%0;1:%1");
    struct meet m;
    memset(&m, 0, sizeof(m));
    const int ids[] = {0, 1};
    cr_assert_eq(nxr_run_across(rt, ids, 2, 64, meet_task, &m), 0);
    cr_expect_eq(atomic_load(&m.met), 2, "the group's domains ran concurrently");
    cr_expect_gt(atomic_load(&m.on_domain[0]), 0);
    cr_expect_gt(atomic_load(&m.on_domain[1]), 0);
}

struct hold {
    atomic_int inside;
    atomic_int release;
    atomic_int violations;
};

static void hold_body(void *p, size_t b, size_t e, unsigned w)
{
    struct hold *h = p;
    (void)b, (void)e, (void)w;
    atomic_store(&h->inside, 1);
    nxr_test_wait_at_least(&h->release, 1, 5000);
    atomic_store(&h->inside, 0);
}

static void *hold_domain1(void *p)
{
    nxr_ctx_t *ctx;
    nxr_ctx_create(rt, 1, &ctx);
    nxr_parallel_for(ctx, 0, 2, 1, hold_body, p);
    nxr_ctx_destroy(ctx);
    return NULL;
}

static int check_task(void *p, size_t i)
{
    struct hold *h = p;
    (void)i;
    if (atomic_load(&h->inside))
        atomic_fetch_add(&h->violations, 1);
    return 0;
}

static void *run_group(void *p)
{
    static const int ids[] = {0, 1};
    nxr_run_across(rt, ids, 2, 16, check_task, p);
    return NULL;
}

Test(runtime_group, the_union_is_granted_whole_or_not_at_all)
{
    open_runtime("0:%0;1:%1");
    struct hold h;
    memset(&h, 0, sizeof(h));
    pthread_t a, b;
    pthread_create(&a, NULL, hold_domain1, &h);
    nxr_test_wait_at_least(&h.inside, 1, 5000);
    cr_assert_eq(atomic_load(&h.inside), 1);
    pthread_create(&b, NULL, run_group, &h);
    /* While domain 1 is busy the group waits holding nothing. Wait (by
     * state, not time) until its request is queued, or one of its tasks ran
     * (the failure below): then only domain 1's CPU is held and the group's
     * whole union is what waits. */
    struct nxr__arbiter_stats st;
    do {
        sched_yield();
        nxr__arbiter_stats(rt->arbiter, &st);
    } while (st.waiters == 0 && atomic_load(&h.violations) == 0);
    cr_expect_eq(st.waiters, 1, "the group did not queue");
    hwloc_bitmap_t held = hwloc_bitmap_alloc(), waiting = hwloc_bitmap_alloc();
    cr_assert_eq(nxr__arbiter_snapshot(rt->arbiter, held, waiting), 0);
    hwloc_bitmap_t one = nxr_test_cpus(1, 1), both = nxr_test_cpus(0, 2);
    char list[32];
    hwloc_bitmap_list_snprintf(list, sizeof(list), held);
    cr_expect(hwloc_bitmap_isequal(held, one), "held %s: only domain 1's permit may be", list);
    hwloc_bitmap_list_snprintf(list, sizeof(list), waiting);
    cr_expect(hwloc_bitmap_isequal(waiting, both), "waiting %s: the group's union waits", list);
    hwloc_bitmap_free(one);
    hwloc_bitmap_free(both);
    hwloc_bitmap_free(waiting);
    hwloc_bitmap_free(held);
    atomic_store(&h.release, 1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    cr_expect_eq(atomic_load(&h.violations), 0, "a group task ran while domain 1 was busy");
}

static int fail_at_3(void *p, size_t i)
{
    (void)p;
    return i == 3 ? -EIO : 0;
}

Test(runtime_group, first_error_wins)
{
    open_runtime("0:%0;1:%1");
    const int ids[] = {1, 0};
    cr_expect_eq(nxr_run_across(rt, ids, 2, 1000, fail_at_3, NULL), -EIO);
    struct meet m;
    memset(&m, 0, sizeof(m));
    cr_expect_eq(nxr_run_across(rt, ids, 2, 8, meet_task, &m), 0, "the permit was released");
}

static atomic_int nested_rc;

static int nested_group(void *p, size_t i)
{
    (void)p, (void)i;
    const int ids[] = {0};
    atomic_store(&nested_rc, nxr_run_across(rt, ids, 1, 1, fail_at_3, NULL));
    return 0;
}

Test(runtime_group, bad_arguments_and_reentry)
{
    open_runtime("0:%0;1:%1");
    const int ids[] = {0, 1}, twice[] = {0, 0}, missing[] = {0, 7};
    cr_expect_eq(nxr_run_across(NULL, ids, 2, 1, fail_at_3, NULL), -EINVAL);
    cr_expect_eq(nxr_run_across(rt, NULL, 2, 1, fail_at_3, NULL), -EINVAL);
    cr_expect_eq(nxr_run_across(rt, ids, 0, 1, fail_at_3, NULL), -EINVAL);
    cr_expect_eq(nxr_run_across(rt, ids, 2, 1, NULL, NULL), -EINVAL);
    cr_expect_eq(nxr_run_across(rt, twice, 2, 1, fail_at_3, NULL), -EINVAL);
    cr_expect_eq(nxr_run_across(rt, missing, 2, 1, fail_at_3, NULL), NXR_ENODOMAIN);
    cr_expect_eq(nxr_run_across(rt, ids, 2, 0, fail_at_3, NULL), 0);
    /* From a task of domain 0's own workers: re-entry. */
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 1, &ctx), 0);
    atomic_store(&nested_rc, 0);
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, 1, nested_group, NULL), 0);
    cr_expect_eq(atomic_load(&nested_rc), NXR_EREENTRANT, "inside a body of domain 1");
    nxr_ctx_destroy(ctx);
}
