/*
 * The thread rule of runtime/nxr_ctx.h: a context is driven by one thread at
 * a time, and checked builds catch a second thread inside it. The threads
 * are ordered with flags, never with time: thread A parks inside a loop body
 * of the context until thread B has made its own call.
 *
 * Default builds do not check (the rule costs nothing there); the death test
 * runs in checked builds (--config=asan or --config=checked) and skips
 * otherwise. The controls run in every build: one thread after another,
 * and calls from inside a body (which belong to the enclosing operation)
 * are not a violation.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "runtime/nxr.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static struct nxr_test_runtime fx; /* the quiet runtime (tests/support/runtime.h) */
static nxr_ctx_t *shared_ctx;
static atomic_int a_inside, b_done;

static void open_runtime(void)
{
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_PARK | NXR_TEST_CTX);
    rt = fx.rt;
    shared_ctx = fx.ctx;
    atomic_store(&a_inside, 0);
    atomic_store(&b_done, 0);
}

static void close_runtime(void)
{
    nxr_ctx_destroy(shared_ctx);
    nxr_runtime_destroy(rt);
}

static void noop(void *p, size_t b, size_t e, unsigned w)
{
    (void)p, (void)b, (void)e, (void)w;
}

/* Thread A's body: says it is inside, then waits (bounded) for B. */
static void hold_inside(void *p, size_t b, size_t e, unsigned w)
{
    (void)p, (void)b, (void)e, (void)w;
    atomic_store(&a_inside, 1);
    nxr_test_wait_at_least(&b_done, 1, 10000);
}

static void *thread_a(void *p)
{
    (void)p;
    nxr_parallel_for(shared_ctx, 0, 1, 1, hold_inside, NULL);
    return NULL;
}

#if defined(NXR_CHECKED) && NXR_CHECKED
Test(runtime_thread_rule, two_threads_inside_one_context_abort_in_checked_builds,
     .signal = SIGABRT, .timeout = 30)
{
    open_runtime();
    pthread_t a;
    cr_assert_eq(pthread_create(&a, NULL, thread_a, NULL), 0);
    nxr_test_wait_at_least(&a_inside, 1, 10000);
    cr_assert_eq(atomic_load(&a_inside), 1, "thread A is inside the context");
    /* Thread B (this one) calls while A is inside: the process aborts with
     * a message naming the context. */
    nxr_parallel_for(shared_ctx, 0, 1, 1, noop, NULL);
    /* Not reached in a checked build. */
    atomic_store(&b_done, 1);
    pthread_join(a, NULL);
    close_runtime();
}
#else
Test(runtime_thread_rule, two_threads_inside_one_context_abort_in_checked_builds)
{
    cr_skip_test("the thread rule is checked in checked builds only (--config=asan/checked)");
}
#endif

/* One thread after another: each call finished before the next began. */
Test(runtime_thread_rule, one_thread_after_another_is_allowed, .timeout = 30)
{
    open_runtime();
    atomic_store(&b_done, 1); /* A's body does not wait */
    pthread_t a;
    cr_assert_eq(pthread_create(&a, NULL, thread_a, NULL), 0);
    cr_assert_eq(pthread_join(a, NULL), 0);
    cr_assert_eq(atomic_load(&a_inside), 1);
    cr_assert_eq(nxr_parallel_for(shared_ctx, 0, 100, 1, noop, NULL), 0);
    close_runtime();
}

/* Calls from inside bodies, on whichever thread, belong to the enclosing
 * operation: a loop whose chunks call kernels and loops on the same
 * context is not a second driver. */
static void nested_calls(void *p, size_t b, size_t e, unsigned w)
{
    float *out = p;
    static const float x[4] = {1, 2, 3, 4};
    (void)w;
    for (size_t i = b; i < e; i++) {
        cr_assert_eq(nxr_sum(shared_ctx, 4, x, &out[i]), 0);
        cr_assert_eq(nxr_parallel_for(shared_ctx, 0, 8, 1, noop, NULL), 0);
    }
}

Test(runtime_thread_rule, calls_from_inside_bodies_are_not_a_second_driver, .timeout = 30)
{
    open_runtime();
    float out[64];
    cr_assert_eq(nxr_parallel_for(shared_ctx, 0, 64, 1, nested_calls, out), 0);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(out[i], 10.0f, "chunk %d", i);
    close_runtime();
}
