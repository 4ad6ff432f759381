/*
 * The nesting table of executor/nxr_executor.h, every cell: each call kind,
 * made from inside a body of domain A, on a context of A and on a context of
 * another domain B, by a body that the calling thread runs and by a body
 * that one of A's workers runs. The answer must be the table's, and the
 * same whichever participant runs the body:
 *   - same domain, loops, kernels, SEQUENTIAL and INNER: 0, run in place on
 *     the body's own thread, no region dispatched;
 *   - same domain, OUTER, submit, job wait, run_across: NXR_EREENTRANT and
 *     nothing of it runs;
 *   - another domain: NXR_EREENTRANT for every kind, nothing runs there.
 * B is a `shared` domain on A's CPUs, so the table is tested on one CPU
 * too. With two CPUs a region whose participants are the caller and a
 * worker also runs every row, and both participants must agree.
 */
#include <criterion/criterion.h>
#include <sched.h>
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

enum kind {
    K_FOR,
    K_REDUCE,
    K_SUM,
    K_SGEMM,
    K_RUN_SEQUENTIAL,
    K_RUN_INNER,
    K_RUN_OUTER,
    K_SUBMIT,
    K_JOB_WAIT,
    K_RUN_ACROSS,
    K_COUNT,
};

static const char *const kind_name[K_COUNT] = {
    "parallel_for", "parallel_reduce", "nxr_sum",     "nxr_sgemm",   "run SEQUENTIAL",
    "run INNER",    "run OUTER",       "nxr_submit",  "nxr_job_wait", "nxr_run_across",
};

/* The table: in place (true) or NXR_EREENTRANT, for a call on the body's
 * own domain. Every call on another domain is NXR_EREENTRANT. */
static bool runs_in_place(enum kind k)
{
    return k <= K_RUN_INNER;
}

static pid_t tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

struct probe {
    nxr_runtime_t *rt;
    nxr_ctx_t *target; /* the context the nested call is made on */
    int target_id;
    enum kind kind;
    nxr_job_t *job; /* K_JOB_WAIT: a job of the target's domain */
    /* What happened. */
    int rc;
    pid_t body_tid;
    atomic_int inner_runs;
    atomic_int inner_elsewhere; /* nested work seen on another thread */
    float sum;
    float c[4];
};

static void inner_for(void *p, size_t b, size_t e, unsigned w)
{
    struct probe *pr = p;
    (void)b, (void)e, (void)w;
    atomic_fetch_add(&pr->inner_runs, 1);
    if (tid() != pr->body_tid)
        atomic_fetch_add(&pr->inner_elsewhere, 1);
}

static int inner_task(void *p, size_t i)
{
    inner_for(p, i, i + 1, 0);
    return 0;
}

static void inner_map(void *p, size_t b, size_t e, void *partial)
{
    inner_for(p, b, e, 0);
    *(size_t *)partial += e - b;
}

static void inner_combine(void *p, void *result, const void *partial)
{
    (void)p;
    *(size_t *)result += *(const size_t *)partial;
}

static const float ones[64] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

/* Makes the probe's nested call (from inside a body). */
static void nested_call(struct probe *pr)
{
    pr->body_tid = tid();
    switch (pr->kind) {
    case K_FOR:
        pr->rc = nxr_parallel_for(pr->target, 0, 4096, 1, inner_for, pr);
        break;
    case K_REDUCE: {
        size_t zero = 0, total = 0;
        pr->rc = nxr_parallel_reduce(pr->target, 0, 4096, 1, sizeof total, &zero, inner_map,
                                     inner_combine, pr, &total);
        if (pr->rc == 0 && total != 4096)
            pr->rc = -1000000; /* wrong result: fails the expectation below */
        break;
    }
    case K_SUM:
        pr->rc = nxr_sum(pr->target, 64, ones, &pr->sum);
        break;
    case K_SGEMM: {
        /* 2x2 = (2x32) (32x2) of ones: every entry 32. */
        struct nxr_sgemm_args g = {.m = 2, .n = 2, .k = 32, .alpha = 1, .a = ones, .lda = 32,
                              .b = ones, .ldb = 2, .beta = 0, .c = pr->c, .ldc = 2};
        pr->rc = nxr_sgemm(pr->target, &g);
        break;
    }
    case K_RUN_SEQUENTIAL:
        pr->rc = nxr_run(pr->target, NXR_MODE_SEQUENTIAL, 3, inner_task, pr);
        break;
    case K_RUN_INNER:
        pr->rc = nxr_run(pr->target, NXR_MODE_INNER, 3, inner_task, pr);
        break;
    case K_RUN_OUTER:
        pr->rc = nxr_run(pr->target, NXR_MODE_OUTER, 3, inner_task, pr);
        break;
    case K_SUBMIT: {
        nxr_job_t *job = NULL;
        pr->rc = nxr_submit(pr->target, 3, inner_task, pr, &job);
        if (job != NULL)
            nxr_job_wait(job); /* only if the table were broken */
        break;
    }
    case K_JOB_WAIT:
        pr->rc = nxr_job_wait(pr->job);
        if (pr->rc == 0)
            pr->job = NULL; /* the handle is gone */
        break;
    case K_RUN_ACROSS:
        pr->rc = nxr_run_across(pr->rt, &pr->target_id, 1, 3, inner_task, pr);
        break;
    case K_COUNT:
        break;
    }
}

static void probe_body(void *p, size_t b, size_t e, unsigned w)
{
    struct probe *pr = p;
    (void)w;
    for (size_t i = b; i < e; i++)
        nested_call(&pr[i]);
}

/* probe_body for two participants that must be two threads: a region does
 * not wait for a worker that is not awake (the caller would claim both
 * chunks), so each waits (bounded) until the other has started. */
static atomic_int pair_arrived;

static void pair_body(void *p, size_t b, size_t e, unsigned w)
{
    atomic_fetch_add(&pair_arrived, 1);
    nxr_test_wait_at_least(&pair_arrived, 2, 5000);
    probe_body(p, b, e, w);
}

static int probe_task(void *p, size_t i)
{
    nested_call(&((struct probe *)p)[i]);
    return 0;
}

static int quiet_task(void *p, size_t i)
{
    (void)p, (void)i;
    return 0;
}

/* ---- the runtime: domain A (`a`) and B, a shared domain on A's CPUs ---------- */

static nxr_runtime_t *rt;
static nxr_ctx_t *ctx_a, *ctx_b;
enum { A = 3, B = 8 };

static void open_domains(const char *tmpl)
{
    static struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, tmpl, NXR_TEST_PARK);
    rt = fx.rt;
    cr_assert_eq(nxr_ctx_create(rt, A, &ctx_a), 0);
    cr_assert_eq(nxr_ctx_create(rt, B, &ctx_b), 0);
}

static void close_domains(void)
{
    nxr_ctx_destroy(ctx_a);
    nxr_ctx_destroy(ctx_b);
    nxr_runtime_destroy(rt);
}

/* Confines the test thread to A's CPUs, so that it runs A's small work. */
static void pin_inside_a(void)
{
    cr_assert_eq(nxr_test_pin(nxr_domain_cpuset(nxr_ctx_domain(ctx_a))), 0);
}

static uint64_t regions(nxr_ctx_t *ctx)
{
    return nxr__team_regions(ctx->domain->team);
}

static void prepare(struct probe *pr, enum kind k, bool same)
{
    memset(pr, 0, sizeof *pr);
    pr->rt = rt;
    pr->kind = k;
    pr->target = same ? ctx_a : ctx_b;
    pr->target_id = same ? A : B;
    pr->rc = 12345; /* "not called" */
    if (k == K_JOB_WAIT)
        cr_assert_eq(nxr_submit(pr->target, 1, quiet_task, NULL, &pr->job), 0);
}

/* The table's answer for one probe that ran in a body. */
static void expect_cell(struct probe *pr, bool same, const char *who)
{
    const char *k = kind_name[pr->kind], *where = same ? "same domain" : "other domain";
    if (same && runs_in_place(pr->kind)) {
        cr_assert_eq(pr->rc, 0, "%s, %s, body run by %s: %d (%s)", k, where, who, pr->rc,
                     nxr_strerror(pr->rc));
        cr_assert_eq(atomic_load(&pr->inner_elsewhere), 0,
                     "%s, %s, body run by %s: nested work left the body's thread", k, where, who);
        if (pr->kind == K_SUM)
            cr_assert_eq(pr->sum, 64.0f, "%s: sum %g", k, (double)pr->sum);
        else if (pr->kind == K_SGEMM)
            for (int i = 0; i < 4; i++)
                cr_assert_eq(pr->c[i], 32.0f, "%s: c[%d] = %g", k, i, (double)pr->c[i]);
        else
            cr_assert_gt(atomic_load(&pr->inner_runs), 0, "%s: the nested work ran", k);
    } else {
        cr_assert_eq(pr->rc, NXR_EREENTRANT, "%s, %s, body run by %s: %d (%s), want NXR_EREENTRANT",
                     k, where, who, pr->rc, nxr_strerror(pr->rc));
        cr_assert_eq(atomic_load(&pr->inner_runs), 0, "%s, %s, body run by %s: nothing may run",
                     k, where, who);
    }
    if (pr->job != NULL) /* the refused wait kept the handle */
        cr_assert_eq(nxr_job_wait(pr->job), 0, "%s: the job is still waitable", k);
}

static void run_table(bool caller_runs_body)
{
    const char *who = caller_runs_body ? "the caller" : "a worker";
    for (int same = 1; same >= 0; same--)
        for (enum kind k = 0; k < K_COUNT; k++) {
            struct probe pr;
            prepare(&pr, k, same);
            uint64_t ra = regions(ctx_a), rb = regions(ctx_b);
            if (caller_runs_body) {
                /* One chunk on a caller inside A: the caller runs the body. */
                cr_assert_eq(nxr_parallel_for(ctx_a, 0, 1, 1, probe_body, &pr), 0);
                cr_assert_eq(pr.body_tid, tid(), "%s: the caller ran the body", kind_name[k]);
            } else {
                nxr_job_t *job;
                cr_assert_eq(nxr_submit(ctx_a, 1, probe_task, &pr, &job), 0);
                cr_assert_eq(nxr_job_wait(job), 0);
                cr_assert_neq(pr.body_tid, tid(), "%s: a worker ran the body", kind_name[k]);
            }
            expect_cell(&pr, same, who);
            /* In place means no region of A's team, and nothing ever runs
             * on B's (a submitted job counts no region either). */
            cr_assert_eq(regions(ctx_a), ra, "%s: a nested region on A", kind_name[k]);
            cr_assert_eq(regions(ctx_b), rb, "%s: B's team was used", kind_name[k]);
        }
    cr_assert_eq(nxr__team_nested_regions(ctx_a->domain->team), 0u);
    cr_assert_eq(nxr__team_nested_regions(ctx_b->domain->team), 0u);
}

Test(executor_nesting, the_table_from_a_body_the_caller_runs, .timeout = 60)
{
    open_domains("3:%0;8:%0 shared");
    pin_inside_a();
    run_table(true);
    close_domains();
}

Test(executor_nesting, the_table_from_a_body_a_worker_runs, .timeout = 60)
{
    open_domains("3:%0;8:%0 shared");
    pin_inside_a();
    run_table(false);
    close_domains();
}

/* One region, two participants: the caller (inside A) and a worker. Each
 * runs the same row; the answers must be the same cell. */
Test(executor_nesting, both_participants_of_one_region_get_the_same_answer, .timeout = 60)
{
    NXR_TEST_NEED_CPUS(2);
    open_domains("3:%0,%1;8:%0,%1 shared");
    pin_inside_a();
    for (int same = 1; same >= 0; same--)
        for (enum kind k = 0; k < K_COUNT; k++) {
            struct probe pr[2];
            prepare(&pr[0], k, same);
            prepare(&pr[1], k, same);
            atomic_store(&pair_arrived, 0);
            cr_assert_eq(nxr_parallel_for(ctx_a, 0, 2, 1, pair_body, pr), 0);
            cr_assert(pr[0].body_tid != pr[1].body_tid, "%s: two participants", kind_name[k]);
            cr_assert(pr[0].body_tid == tid() || pr[1].body_tid == tid(),
                      "%s: the caller took part", kind_name[k]);
            for (int i = 0; i < 2; i++)
                expect_cell(&pr[i], same, pr[i].body_tid == tid() ? "the caller" : "a worker");
            cr_assert_eq(pr[0].rc, pr[1].rc, "%s: the participants disagree", kind_name[k]);
        }
    cr_assert_eq(nxr__team_nested_regions(ctx_a->domain->team), 0u);
    close_domains();
}
