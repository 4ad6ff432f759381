/*
 * fork() after nxr_runtime_create ("fork", docs/contracts.md). The parent
 * forks while its threads hold what a child would otherwise wait on for
 * ever: a submitted job's task is running on a worker (so the job holds its
 * domain's permit in the process arbiter), and another thread is inside a
 * GLOBAL_OR_UNCONTROLLED provider's call (so the global-count gate is held
 * shared). In the child:
 *   - every call on the inherited runtime, its domain, the context and the
 *     job answers NXR_EFORKED at once, and destroy returns;
 *   - a new runtime works: a submitted job (its permit comes from the
 *     process arbiter the parent's job held), a loop, and an exclusive call
 *     of the GLOBAL provider (which takes the gate's write side).
 * The child reports each failed check on a pipe and exits with the number of
 * failures; alarm() kills it if a call hangs (the one timer: it turns a hang
 * into a report instead of a stuck test, and orders nothing). The parent
 * reads the pipe to its end and waits for the child.
 *
 * Not under TSan (tagged no_tsan): TSan refuses a child that starts threads
 * after a fork of a multithreaded process.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/nxr.h"
#include "runtime/nxr_ctx.h"
#include "runtime/nxr_ctx_kernels.h"
#include "runtime/nxr_memory.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

TestSuite(runtime_fork, .timeout = 60);

#define MEET_MS       10000
#define CHILD_ALARM_S 20

/* ---- what the parent's threads hold at the fork ------------------------------- */

static atomic_int task_running, task_release; /* the job's task on a worker */
static atomic_int gemm_inside, gemm_release;  /* the GLOBAL provider's call */
static atomic_int hold_in_calls;              /* the provider's op waits (parent only) */

static int held_task(void *arg, size_t index)
{
    (void)arg, (void)index;
    atomic_store(&task_running, 1);
    nxr_test_wait_at_least(&task_release, 1, MEET_MS);
    return 0;
}

static atomic_int library_count = 1;

static int global_get(void *self)
{
    (void)self;
    return atomic_load(&library_count);
}

static void global_set(void *self, int count)
{
    (void)self;
    atomic_store(&library_count, count);
}

static atomic_int gemm_calls;

static int global_sgemm(void *self, const struct nxr_kernel_call *call,
                        const struct nxr_sgemm_args *g)
{
    (void)self, (void)call, (void)g;
    atomic_fetch_add(&gemm_calls, 1);
    if (atomic_load(&hold_in_calls)) {
        atomic_store(&gemm_inside, 1);
        nxr_test_wait_at_least(&gemm_release, 1, MEET_MS);
    }
    return 0;
}

static const struct nxr_gemm_ops global_gemm = {.sgemm = global_sgemm};
static const struct nxr_global_threads_ops global_ops = {.get = global_get, .set = global_set};

static nxr_provider_t *global_provider(void)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "global-gemm";
    d.count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS;
    d.gemm = &global_gemm;
    d.global_threads = &global_ops;
    nxr_provider_t *p = NULL;
    int rc = nxr_provider_create(&d, &p);
    return rc == 0 ? p : NULL;
}

static int gemm(nxr_ctx_t *ctx)
{
    float a[4] = {0}, b[4] = {0}, c[4];
    struct nxr_sgemm_args g = {
        .m = 2, .n = 2, .k = 2, .alpha = 1, .a = a, .lda = 2, .b = b, .ldb = 2, .c = c, .ldc = 2};
    return nxr_sgemm(ctx, &g);
}

static int open_runtime(nxr_runtime_t **rt, nxr_ctx_t **ctx, nxr_provider_t *p,
                        enum nxr_provider_policy policy)
{
    /* One domain over two CPUs, whatever the nodes (a 4-node VM has one
     * CPU per node): a held task's permit and a provider call side by side
     * need a budget of 2. With one allowed CPU, the default domain (the
     * test ran there before: one CPU runs the call inline). */
    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, nxr_test_cpu_count() >= 2 ? "0:%0,%1" : NULL, 0);
    fx.opts.provider_policy = policy;
    fx.opts.providers[NXR_FAMILY_GEMM] = p;
    int rc = nxr_test_runtime_open(&fx);
    *rt = fx.rt;
    if (rc != 0)
        return rc;
    rc = nxr_ctx_create(*rt, nxr_domain_id(nxr_runtime_default_domain(*rt)), ctx);
    if (rc != 0)
        nxr_runtime_destroy(*rt);
    return rc;
}

/* The calling thread runs inside the domain's CPUs, so the small call runs
 * on it, inline: a caller elsewhere (a VM's other node) would hand the call
 * to the team as a region, and the team's worker that holds the task could
 * not take it until the task ends (reported as a stall, bounded by the task). */
static void *gemm_thread(void *p)
{
    nxr_ctx_t *ctx = p;
    int rc = nxr_test_pin(nxr_domain_cpuset(nxr_ctx_domain(ctx)));
    if (rc != 0)
        return (void *)(intptr_t)rc;
    return (void *)(intptr_t)gemm(ctx);
}

/* ---- the child ------------------------------------------------------------------------ */

static int report_fd;
static int failures;

static void fail(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    (void)!write(report_fd, line, (size_t)n);
    failures++;
}

#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != (want))                                                                         \
            fail("%s returned %d (%s), want %s", #call, rc_, nxr_strerror(rc_), #want);            \
    } while (0)

static atomic_int child_task_ran;

static int child_task(void *arg, size_t index)
{
    (void)arg, (void)index;
    atomic_fetch_add(&child_task_ran, 1);
    return 0;
}

static int loop_out[64];

static void child_loop(void *arg, size_t b, size_t e, unsigned w)
{
    (void)arg, (void)w;
    for (size_t i = b; i < e; i++)
        loop_out[i] = (int)i * 3;
}

static void noop_body(void *arg, size_t b, size_t e, unsigned w)
{
    (void)arg, (void)b, (void)e, (void)w;
}

static int noop_task(void *arg, size_t index)
{
    (void)arg, (void)index;
    return 0;
}

static void child(nxr_runtime_t *rt, nxr_ctx_t *ctx, nxr_job_t *job, nxr_provider_t *p)
{
    alarm(CHILD_ALARM_S); /* a hang is killed, and the parent reports it */
    atomic_store(&hold_in_calls, 0);

    /* The inherited objects: a typed error at once, never a wait. */
    nxr_domain_t *d = nxr_ctx_domain(ctx);
    nxr_domain_t *found;
    nxr_ctx_t *c2;
    nxr_job_t *j2;
    nxr_buffer_t *buf;
    char *text;
    EXPECT(nxr_parallel_for(ctx, 0, 64, 1, noop_body, NULL), NXR_EFORKED);
    EXPECT(nxr_run(ctx, NXR_MODE_OUTER, 4, noop_task, NULL), NXR_EFORKED);
    EXPECT(nxr_submit(ctx, 1, noop_task, NULL, &j2), NXR_EFORKED);
    EXPECT(gemm(ctx), NXR_EFORKED);
    EXPECT(nxr_job_wait(job), NXR_EFORKED);
    EXPECT(nxr_ctx_create(rt, nxr_domain_id(d), &c2), NXR_EFORKED);
    EXPECT(nxr_runtime_domain(rt, nxr_domain_id(d), &found), NXR_EFORKED);
    EXPECT(nxr_runtime_describe(rt, NXR_DESCRIBE_TEXT, &text), NXR_EFORKED);
    EXPECT(nxr_buffer_acquire(d, 64, &buf), NXR_EFORKED);
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    so.every = true;
    EXPECT(nxr_span_create(rt, &so, &c2), NXR_EFORKED);
    static const float w16[16];
    struct nxr_weights_desc wd;
    nxr_weights_desc_init(&wd);
    wd.k = wd.n = wd.ldw = 4;
    wd.w = w16;
    nxr_weights_t *wt;
    EXPECT(nxr_weights_create(rt, &wd, &wt), NXR_EFORKED);
    if (strstr(nxr_last_error(), "forked") == NULL)
        fail("last error does not say why: '%s'", nxr_last_error());
    const unsigned budget = nxr_ctx_budget(ctx);
    /* The runtime first, the context after (the order a child that only
     * wants to drop everything inherited may use). */
    nxr_runtime_destroy(rt);
    struct nxr_route place;
    EXPECT(nxr_ctx_last_route(ctx, &place), NXR_EFORKED);
    EXPECT(nxr_parallel_for(ctx, 0, 64, 1, noop_body, NULL), NXR_EFORKED);
    if (nxr_ctx_budget(ctx) != budget)
        fail("the context's budget changed: %u, was %u", nxr_ctx_budget(ctx), budget);
    nxr_ctx_destroy(ctx);

    /* A runtime of the child's own: the arbiter and the gate start clean. */
    nxr_runtime_t *mine;
    nxr_ctx_t *mctx;
    int rc = open_runtime(&mine, &mctx, p, NXR_PROVIDER_PROCESS_EXCLUSIVE);
    if (rc != 0) {
        fail("a new runtime in the child: %s", nxr_strerror(rc));
        return;
    }
    nxr_job_t *mj;
    EXPECT(nxr_submit(mctx, 3, child_task, NULL, &mj), 0);
    if (mj != NULL)
        EXPECT(nxr_job_wait(mj), 0);
    if (atomic_load(&child_task_ran) != 3)
        fail("the child's job ran %d of 3 tasks", atomic_load(&child_task_ran));
    EXPECT(nxr_parallel_for(mctx, 0, 64, 1, child_loop, NULL), 0);
    for (int i = 0; i < 64; i++)
        if (loop_out[i] != i * 3) {
            fail("loop_out[%d] = %d", i, loop_out[i]);
            break;
        }
    int before = atomic_load(&gemm_calls);
    EXPECT(gemm(mctx), 0); /* exclusive permit, then the gate exclusively */
    if (atomic_load(&gemm_calls) != before + 1)
        fail("the exclusive call did not reach the provider");
    nxr_ctx_destroy(mctx);
    nxr_runtime_destroy(mine);
}

/* ---- the test -------------------------------------------------------------------------- */

Test(runtime_fork, the_child_gets_typed_errors_at_once_and_a_new_runtime_works)
{
    nxr_provider_t *p = global_provider();
    cr_assert_not_null(p);
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx, *gctx;
    int rc = open_runtime(&rt, &ctx, p,
                          NXR_PROVIDER_STRICT); /* strict: the count-1 call holds the gate shared */
    cr_assert_eq(rc, 0, "%s", nxr_strerror(rc));
    cr_assert_eq(nxr_ctx_create(rt, nxr_domain_id(nxr_ctx_domain(ctx)), &gctx), 0);

    /* A job whose task is running on a worker: its permit is held. */
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 1, held_task, NULL, &job), 0);
    nxr_test_wait_at_least(&task_running, 1, MEET_MS);
    cr_assert_eq(atomic_load(&task_running), 1, "the task never started");
    /* A thread inside the GLOBAL provider's call: the gate is held shared. */
    atomic_store(&hold_in_calls, 1);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, gemm_thread, gctx), 0);
    nxr_test_wait_at_least(&gemm_inside, 1, MEET_MS);
    cr_assert_eq(atomic_load(&gemm_inside), 1, "the provider call never started");

    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        report_fd = fds[1];
        child(rt, ctx, job, p);
        _exit(failures > 100 ? 100 : failures);
    }
    close(fds[1]);
    /* The parent lets its holders go at once: the child must not need them. */
    atomic_store(&task_release, 1);
    atomic_store(&gemm_release, 1);

    char report[4096];
    size_t len = 0;
    ssize_t n;
    /* Bounded: the child's calls return at once, and alarm() ends it if one
     * does not; either way the pipe closes. */
    while (len < sizeof report - 1 && (n = read(fds[0], report + len, sizeof report - 1 - len)) > 0)
        len += (size_t)n;
    report[len] = '\0';
    close(fds[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert_not(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM,
                  "the child hung (killed by its alarm after %d s); its report:\n%s", CHILD_ALARM_S,
                  report);
    cr_assert(WIFEXITED(status), "the child died (signal %d); its report:\n%s",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0, report);
    cr_assert_eq(WEXITSTATUS(status), 0, "%d check(s) failed in the child:\n%s",
                 WEXITSTATUS(status), report);

    /* The parent's runtime is untouched by the child. */
    void *grc;
    pthread_join(t, &grc);
    cr_assert_eq((int)(intptr_t)grc, 0);
    cr_assert_eq(nxr_job_wait(job), 0);
    atomic_store(&hold_in_calls, 0);
    cr_assert_eq(gemm(ctx), 0);
    nxr_ctx_destroy(gctx);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
    nxr_provider_destroy(p);
}
