/*
 * The OpenMP adapter attached as a caller-managed domain: loops and tasks run
 * on OpenMP's threads, and the admission guard holds against entries from
 * those threads.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <omp.h>
#include <stdatomic.h>

#include "executor/nxr_omp.h"
#include "runtime/nxr.h"
#include "tests/support/runtime.h"

struct probe {
    nxr_ctx_t *ctx;
    atomic_uint thread_mask; /* bit t: OpenMP thread t ran a chunk */
    atomic_uint hits[1000];
    atomic_int nested_rc;
};

static void body(void *p, size_t b, size_t e, unsigned worker)
{
    struct probe *pr = p;
    (void)worker;
    atomic_fetch_or(&pr->thread_mask, 1u << (omp_get_thread_num() & 31));
    for (size_t i = b; i < e; i++)
        atomic_fetch_add(&pr->hits[i], 1);
}

static int noop(void *p, size_t i)
{
    (void)p, (void)i;
    return 0;
}

static void reenter(void *p, size_t b, size_t e, unsigned worker)
{
    struct probe *pr = p;
    (void)b, (void)e, (void)worker;
    int rc = nxr_submit(pr->ctx, 1, noop, NULL, NULL);
    if (rc != 0)
        atomic_store(&pr->nested_rc, rc);
}

static int count_task(void *p, size_t i)
{
    struct probe *pr = p;
    atomic_fetch_add(&pr->hits[i], 1);
    return 0;
}

Test(executor_omp, caller_managed_openmp_team_runs_nxr_work, .timeout = 30)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, 0);
    nxr_runtime_t *rt = fx.rt;
    struct nxr_external_decl d;
    nxr_external_decl_init(&d); /* caller-managed by default */
    d.id = 42;
    cr_assert_eq(nxr_omp_executor_init(&d.executor, 2), 0);
    cr_assert_eq(nxr_runtime_attach(rt, &d), 0);
    static struct probe pr;
    cr_assert_eq(nxr_ctx_create(rt, 42, &pr.ctx), 0);
    cr_expect_eq(nxr_ctx_budget(pr.ctx), 2);

    cr_assert_eq(nxr_parallel_for(pr.ctx, 0, 1000, 10, body, &pr), 0);
    for (size_t i = 0; i < 1000; i++)
        cr_assert_eq(atomic_load(&pr.hits[i]), 1, "index %zu", i);
    cr_expect_eq(atomic_load(&pr.thread_mask), 3u, "both OpenMP threads took chunks");

    /* A submit from one of OpenMP's own threads, inside a body of the domain:
     * the nesting rule refuses it before admission is asked. */
    cr_assert_eq(nxr_parallel_for(pr.ctx, 0, 2, 1, reenter, &pr), 0);
    cr_expect_eq(atomic_load(&pr.nested_rc), NXR_EREENTRANT);

    for (size_t i = 0; i < 1000; i++)
        atomic_store(&pr.hits[i], 0);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(pr.ctx, 1000, count_task, &pr, &job), 0);
    cr_assert_eq(nxr_job_wait(job), 0);
    for (size_t i = 0; i < 1000; i++)
        cr_assert_eq(atomic_load(&pr.hits[i]), 1, "task %zu", i);
    cr_expect_eq(nxr_omp_executor_init(NULL, 1), -EINVAL);
    cr_expect_eq(nxr_omp_executor_init(&d.executor, -1), -EINVAL);
    nxr_ctx_destroy(pr.ctx);
    nxr_runtime_destroy(rt);
}
