/*
 * Destroy order: a runtime destroyed while contexts are still open is a
 * caller bug that nxr reports. Default builds print how many contexts are
 * open on which domains and orphan them: every later call on one is
 * NXR_EBROKEN (not a use of freed memory), their step memory went back
 * before the pools did, and nxr_ctx_destroy only frees the context. Checked
 * builds (--config=checked, --config=asan) abort with the message instead.
 *
 * Destroy from inside a body (a task destroying its own runtime) would wait
 * for the operation that runs the caller: it is refused at once, reported
 * as NXR_EREENTRANT, and the runtime is left as it was (checked builds
 * abort with the report).
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "runtime/nxr.h"
#include "runtime/nxr_ctx.h"
#include "tests/support/cpus.h"
#include "tests/support/runtime.h"

/* A task that destroys the runtime it runs on. */
static int destroying_task(void *arg, size_t index)
{
    (void)index;
    nxr_runtime_destroy(arg);
    return 0;
}

static nxr_runtime_t *runtime_with_two_domains(void)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, "0:%0;1:%0 shared", NXR_TEST_PARK);
    return fx.rt;
}

#if defined(NXR_CHECKED) && NXR_CHECKED
Test(runtime_destroy_order, open_contexts_at_destroy_abort_in_checked_builds,
     .signal = SIGABRT, .timeout = 60)
{
    nxr_runtime_t *rt = runtime_with_two_domains();
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 1, &ctx), 0);
    nxr_runtime_destroy(rt); /* aborts: ctx is still open */
}

Test(runtime_destroy_order, destroy_inside_a_body_aborts_in_checked_builds, .signal = SIGABRT,
     .timeout = 20)
{
    nxr_runtime_t *rt = runtime_with_two_domains();
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 1, destroying_task, rt, &job), 0);
    nxr_job_wait(job); /* the task aborts the process */
}
#else
static void body(void *arg, size_t b, size_t e, unsigned worker)
{
    (void)b, (void)e, (void)worker;
    ++*(int *)arg;
}

/* Everything the process wrote to stderr so far. */
static void read_stderr(char *buf, size_t size)
{
    fflush(stderr);
    FILE *f = cr_get_redirected_stderr();
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
}

Test(runtime_destroy_order, open_contexts_at_destroy_are_reported_and_orphaned,
     .init = cr_redirect_stderr, .timeout = 60)
{
    nxr_runtime_t *rt = runtime_with_two_domains();
    nxr_ctx_t *a, *b, *c, *placing, *closed;
    cr_assert_eq(nxr_ctx_create(rt, 0, &a), 0);
    cr_assert_eq(nxr_ctx_create(rt, 1, &b), 0);
    cr_assert_eq(nxr_ctx_create(rt, 1, &c), 0);
    cr_assert_eq(nxr_ctx_create(rt, NXR_DOMAIN_AUTO, &placing), 0);
    cr_assert_eq(nxr_ctx_create(rt, 0, &closed), 0);
    nxr_ctx_destroy(closed); /* closed in time: not reported */
    void *step;
    cr_assert_eq(nxr_ctx_alloc(b, 4096, &step), 0, "step memory in a pool chunk");

    nxr_runtime_destroy(rt);

    char out[2048];
    read_stderr(out, sizeof(out));
    cr_assert(strstr(out, "destroyed with 4 context(s) still open (domain 0: 1, domain 1: 2, "
                          "placing: 1)") != NULL,
              "stderr: %s", out);
    cr_assert(strstr(out, "outstanding") == NULL,
              "the step memory was returned before the pools: %s", out);

    int calls = 0;
    cr_assert_eq(nxr_parallel_for(b, 0, 10, 0, body, &calls), NXR_EBROKEN);
    cr_assert_eq(calls, 0, "nothing ran");
    cr_assert(strstr(nxr_last_error(), "destroyed") != NULL, "%s", nxr_last_error());
    float x[4] = {1, 2, 3, 4}, s;
    cr_assert_eq(nxr_sum(placing, 4, x, &s), NXR_EBROKEN);
    cr_assert_eq(nxr_ctx_alloc(a, 64, &step), NXR_EBROKEN);
    nxr_thread_binding_t *prev;
    cr_assert_eq(nxr_ctx_bind(a, &prev), NXR_EBROKEN);
    cr_assert_null(prev);
    struct nxr_route p;
    cr_assert_eq(nxr_ctx_last_route(a, &p), NXR_EBROKEN);
    nxr_ctx_destroy(a); /* only frees them */
    nxr_ctx_destroy(b);
    nxr_ctx_destroy(c);
    nxr_ctx_destroy(placing);
}

Test(runtime_destroy_order, contexts_closed_in_time_leave_stderr_quiet,
     .init = cr_redirect_stderr, .timeout = 60)
{
    nxr_runtime_t *rt = runtime_with_two_domains();
    nxr_ctx_t *a;
    cr_assert_eq(nxr_ctx_create(rt, 0, &a), 0);
    void *step;
    cr_assert_eq(nxr_ctx_alloc(a, 4096, &step), 0);
    nxr_ctx_destroy(a);
    nxr_runtime_destroy(rt);
    char out[256];
    read_stderr(out, sizeof(out));
    cr_assert_str_eq(out, "");
}

/* Bounded by the refusal itself: before it, the task's destroy drained the
 * domain and so waited for the job running it, and nxr_job_wait for ever. */
Test(runtime_destroy_order, destroy_inside_a_body_is_refused_and_reported,
     .init = cr_redirect_stderr, .timeout = 20)
{
    nxr_runtime_t *rt = runtime_with_two_domains();
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 1, destroying_task, rt, &job), 0);
    cr_assert_eq(nxr_job_wait(job), 0);
    char out[512];
    read_stderr(out, sizeof(out));
    cr_assert(strstr(out, "nxr_runtime_destroy") != NULL && strstr(out, "NXR_EREENTRANT") != NULL,
              "stderr: %s", out);
    int calls = 0;
    cr_assert_eq(nxr_parallel_for(ctx, 0, 10, 0, body, &calls), 0, "the runtime still works");
    cr_assert_eq(calls, 1);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}
#endif
