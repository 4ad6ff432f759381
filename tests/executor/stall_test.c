/*
 * The stall reporter (executor/internal/stall.h): a wait past the threshold
 * prints one line naming the domain, who holds its CPUs and who else waits,
 * once per wait, and counts it in nxr_runtime_describe. Deterministic: the
 * threshold is 1 ms and whatever holds the wait up (a task, a region body)
 * lets go only once it has seen the report arrive in the test's sink, so
 * the wait cannot end before it reported; no sleeps, no timing asserts.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

#define BOUND_MS 20000 /* a broken reporter fails the test, never hangs it */

static nxr_runtime_t *rt;
static struct nxr_test_runtime fx; /* the quiet runtime (tests/support/runtime.h) */

/* ---- the sink: every line, kept ------------------------------------------ */

#define MAX_LINES 64
static pthread_mutex_t lines_lock = PTHREAD_MUTEX_INITIALIZER;
static char *lines[MAX_LINES];
static int nlines;

static void sink(void *arg, const char *line)
{
    (void)arg;
    pthread_mutex_lock(&lines_lock);
    if (nlines < MAX_LINES)
        lines[nlines++] = strdup(line);
    pthread_mutex_unlock(&lines_lock);
}

/* Lines containing `what` so far. */
static int count_lines(const char *what)
{
    int n = 0;
    pthread_mutex_lock(&lines_lock);
    for (int i = 0; i < nlines; i++)
        n += strstr(lines[i], what) != NULL;
    pthread_mutex_unlock(&lines_lock);
    return n;
}

/* A copy of the first line containing `what` (caller frees), or NULL. */
static char *first_line(const char *what)
{
    char *copy = NULL;
    pthread_mutex_lock(&lines_lock);
    for (int i = 0; i < nlines && copy == NULL; i++)
        if (strstr(lines[i], what) != NULL)
            copy = strdup(lines[i]);
    pthread_mutex_unlock(&lines_lock);
    return copy;
}

static bool reported(void *what)
{
    return count_lines(what) > 0;
}

static void open_runtime(const char *tmpl, int stall_ms)
{
    NXR_TEST_NEED_CPUS(nxr_test_runtime_cpus_needed(tmpl));
    nxr_test_runtime_opts(&fx, tmpl, 0);
    fx.opts.stall_report_ms = stall_ms;
    NXR_TEST_RUNTIME_OPEN(&fx);
    rt = fx.rt;
    /* Before any operation: no wait can report yet. */
    rt->stall.sink = sink;
}

static void teardown(void)
{
    nxr_runtime_destroy(rt);
    rt = NULL;
    pthread_mutex_lock(&lines_lock);
    for (int i = 0; i < nlines; i++)
        free(lines[i]);
    nlines = 0;
    pthread_mutex_unlock(&lines_lock);
}

TestSuite(executor_stall, .fini = teardown, .timeout = 60);

/* A task that holds its worker (and its domain's permit) until a line
 * containing `arg` was reported. */
static atomic_int hold_gave_up;

static int hold_until_reported(void *arg, size_t i)
{
    (void)i;
    if (!nxr_test_wait_until(reported, arg, BOUND_MS))
        atomic_store(&hold_gave_up, 1);
    return 0;
}

static void noop_body(void *arg, size_t b, size_t e, unsigned w)
{
    (void)arg, (void)b, (void)e, (void)w;
}

struct loop_on {
    nxr_ctx_t *ctx;
    int rc;
};

static void *loop_thread(void *p)
{
    struct loop_on *l = p;
    l->rc = nxr_parallel_for(l->ctx, 0, 2, 1, noop_body, NULL);
    return NULL;
}

static unsigned long long describe_count(void)
{
    char *text;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_JSON, &text), 0);
    const char *at = strstr(text, "\"stalls\":{\"threshold_ms\":1,\"reported\":");
    cr_assert_not_null(at, "no stalls object in: %s", text);
    unsigned long long n =
        strtoull(at + strlen("\"stalls\":{\"threshold_ms\":1,\"reported\":"), NULL, 10);
    free(text);
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_TEXT, &text), 0);
    char want[96];
    snprintf(want, sizeof want, "stalls: waits past 1 ms reported, %llu so far", n);
    cr_expect_not_null(strstr(text, want), "text describe lacks '%s':\n%s", want, text);
    free(text);
    return n;
}

Test(executor_stall, an_admission_wait_names_the_holder_and_the_waiters)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("0:%0;1:%1;9:%0,%1 shared", 1);
    nxr_ctx_t *ctx0, *ctx9;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx0), 0);
    cr_assert_eq(nxr_ctx_create(rt, 9, &ctx9), 0);
    atomic_store(&hold_gave_up, 0);
    /* Domain 0's permit, held by a batch until domain 9's wait reported. */
    nxr_job_t *held;
    cr_assert_eq(
        nxr_submit(ctx0, 1, hold_until_reported, "admission of a region on domain 9", &held), 0);
    struct loop_on nine = {.ctx = ctx9};
    pthread_t t9;
    pthread_create(&t9, NULL, loop_thread, &nine);
    pthread_join(t9, NULL);
    cr_expect_eq(nine.rc, 0);
    cr_expect_eq(nxr_job_wait(held), 0);
    cr_expect_eq(atomic_load(&hold_gave_up), 0, "domain 9's admission wait never reported");
    cr_expect_eq(count_lines("admission of a region on domain 9"), 1,
                 "one report per wait, %d seen", count_lines("admission of a region on domain 9"));
    char *line = first_line("admission of a region on domain 9");
    cr_assert_not_null(line);
    printf("the stall line: %s\n", line);
    cr_expect_not_null(strstr(line, "its CPUs are held by: domain 0 (1 batch(es), 0 region(s)"),
                       "%s", line);
    cr_expect_not_null(strstr(line, "waiting for them: domain 9 (1 caller(s) in admission"), "%s",
                       line);
    free(line);
    cr_expect_geq(describe_count(), 1);
    nxr_ctx_destroy(ctx0);
    nxr_ctx_destroy(ctx9);
}

Test(executor_stall, a_job_wait_reports_once)
{
    open_runtime("0:%0", 1);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
    atomic_store(&hold_gave_up, 0);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(ctx, 1, hold_until_reported, "nxr_job_wait on domain 0", &job), 0);
    cr_expect_eq(nxr_job_wait(job), 0);
    cr_expect_eq(atomic_load(&hold_gave_up), 0, "the job wait never reported");
    cr_expect_eq(count_lines("nxr_job_wait on domain 0"), 1);
    char *line = first_line("nxr_job_wait on domain 0");
    cr_assert_not_null(line);
    cr_expect_not_null(strstr(line, "held by: domain 0 (1 batch(es)"), "%s", line);
    free(line);
    cr_expect_geq(describe_count(), 1);
    nxr_ctx_destroy(ctx);
}

/* A one-chunk loop from outside the domain runs on its worker; its body
 * holds until the dispatcher's wait reported. */
static atomic_int body_gave_up;

static void hold_body(void *arg, size_t b, size_t e, unsigned w)
{
    (void)b, (void)e, (void)w;
    if (!nxr_test_wait_until(reported, arg, BOUND_MS))
        atomic_store(&body_gave_up, 1);
}

Test(executor_stall, a_region_waiting_for_its_slots_reports_once)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("0:%0", 1);
    hwloc_bitmap_t outside = nxr_test_cpus(1, 1);
    cr_assert_eq(nxr_test_pin(outside), 0);
    hwloc_bitmap_free(outside);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
    atomic_store(&body_gave_up, 0);
    cr_expect_eq(nxr_parallel_for(ctx, 0, 1, 1, hold_body, "a region (1 slot(s) still running)"),
                 0);
    cr_expect_eq(atomic_load(&body_gave_up), 0, "the region's wait never reported");
    cr_expect_eq(count_lines("a region (1 slot(s) still running) on domain 0"), 1);
    cr_expect_geq(describe_count(), 1);
    nxr_ctx_destroy(ctx);
}

/* A multi-domain operation queued for its union permit behind a batch that
 * holds an overlapping one: the group's or the span's admission reports,
 * named after the first member. */
static int count_task(void *arg, size_t i)
{
    (void)i;
    atomic_fetch_add((atomic_int *)arg, 1);
    return 0;
}

Test(executor_stall, a_group_waiting_for_its_union_permit_reports_once)
{
    open_runtime("0:%0", 1);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
    atomic_store(&hold_gave_up, 0);
    nxr_job_t *held;
    cr_assert_eq(
        nxr_submit(ctx, 1, hold_until_reported, "admission of nxr_run_across on domain 0", &held),
        0);
    atomic_int ran = 0;
    const int ids[] = {0};
    cr_expect_eq(nxr_run_across(rt, ids, 1, 3, count_task, &ran), 0);
    cr_expect_eq(atomic_load(&ran), 3);
    cr_expect_eq(nxr_job_wait(held), 0);
    cr_expect_eq(atomic_load(&hold_gave_up), 0, "the group's permit wait never reported");
    cr_expect_eq(count_lines("admission of nxr_run_across on domain 0"), 1);
    cr_expect_geq(describe_count(), 1);
    nxr_ctx_destroy(ctx);
}

Test(executor_stall, a_span_waiting_for_its_union_permit_reports_once)
{
    NXR_TEST_NEED_CPUS(2);
    open_runtime("0:%0;1:%1", 1);
    nxr_ctx_t *ctx0, *span;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx0), 0);
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    const int ids[] = {1, 0};
    so.domain_ids = ids;
    so.count = 2;
    cr_assert_eq(nxr_span_create(rt, &so, &span), 0);
    atomic_store(&hold_gave_up, 0);
    nxr_job_t *held;
    cr_assert_eq(nxr_submit(ctx0, 1, hold_until_reported, "admission of a span on domain 1", &held),
                 0);
    cr_expect_eq(nxr_parallel_for(span, 0, 64, 1, noop_body, NULL), 0);
    cr_expect_eq(nxr_job_wait(held), 0);
    cr_expect_eq(atomic_load(&hold_gave_up), 0, "the span's permit wait never reported");
    cr_expect_eq(count_lines("admission of a span on domain 1"), 1);
    nxr_ctx_destroy(span);
    nxr_ctx_destroy(ctx0);
}

/* A GLOBAL_OR_UNCONTROLLED provider: under the exclusive policy its calls
 * take the process-wide exclusive permit (kernels/rules.c). */
static int exclusive_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *g)
{
    (void)self, (void)call, (void)g;
    return 0;
}

static const struct nxr_gemm_ops exclusive_gemm = {.sgemm = exclusive_sgemm};

/* Its process-global count (a GLOBAL provider must bring one). */
static atomic_int exclusive_count = 1;

static int exclusive_count_get(void *self)
{
    (void)self;
    return atomic_load(&exclusive_count);
}

static void exclusive_count_set(void *self, int count)
{
    (void)self;
    atomic_store(&exclusive_count, count);
}

static const struct nxr_global_threads_ops exclusive_count_ops = {.get = exclusive_count_get,
                                                             .set = exclusive_count_set};

Test(executor_stall, a_kernel_waiting_for_the_exclusive_permit_reports_once)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "exclusive-gemm";
    d.count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS;
    d.gemm = &exclusive_gemm;
    d.global_threads = &exclusive_count_ops;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.domains = nxr_test_expand("0:%0");
    o.stall_report_ms = 1;
    o.provider_policy = NXR_PROVIDER_PROCESS_EXCLUSIVE;
    o.providers[NXR_FAMILY_GEMM] = p;
    cr_assert_not_null(o.domains);
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
    nxr_provider_destroy(p); /* the runtime's bundle holds its own reference */
    rt->stall.sink = sink;
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
    /* The batch holds domain 0's permit until the kernel's wait reported. */
    const char *what = "admission of a kernel under the exclusive permit on domain 0";
    atomic_store(&hold_gave_up, 0);
    nxr_job_t *held;
    cr_assert_eq(nxr_submit(ctx, 1, hold_until_reported, (void *)what, &held), 0);
    float a[4] = {0}, b[4] = {0}, c[4];
    struct nxr_sgemm_args g = {
        .m = 2, .n = 2, .k = 2, .alpha = 1, .a = a, .lda = 2, .b = b, .ldb = 2, .c = c, .ldc = 2};
    cr_expect_eq(nxr_sgemm(ctx, &g), 0);
    cr_expect_eq(nxr_job_wait(held), 0);
    cr_expect_eq(atomic_load(&hold_gave_up), 0, "the exclusive permit's wait never reported");
    cr_expect_eq(count_lines(what), 1);
    cr_expect_geq(describe_count(), 1);
    nxr_ctx_destroy(ctx);
}

Test(executor_stall, the_threshold_option_and_variable_are_checked)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.stall_report_ms = -2;
    nxr_runtime_t *bad = NULL;
    cr_expect_eq(nxr_runtime_create(&o, &bad), -EINVAL);
    cr_expect_null(bad);
    nxr_runtime_opts_init(&o);
    setenv("NXR_STALL_REPORT_MS", "soon", 1);
    cr_expect_eq(nxr_runtime_create(&o, &bad), NXR_ESYNTAX);
    cr_expect_null(bad);
    setenv("NXR_STALL_REPORT_MS", "0", 1);
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
    unsetenv("NXR_STALL_REPORT_MS");
    char *text;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_TEXT, &text), 0);
    cr_expect_not_null(strstr(text, "stalls: reporting off"), "%s", text);
    free(text);
}
