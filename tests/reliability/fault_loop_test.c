/*
 * The fault-injection loop: every failure point of the system seam
 * (base/internal/sys.h), failed at its 1st, 2nd, ... Nth call until the
 * Nth call no longer comes, over four scenarios: runtime creation, external
 * domain registration (nxr_runtime_attach), pool use, and work (parallel
 * loops, reductions, OUTER runs, submit/wait/detach, kernels). After each
 * injected failure:
 *   - the call that failed returns the point's typed error (never a crash,
 *     a hang or a silent success that did less than asked);
 *   - no thread is left (/proc/self/task counts as before);
 *   - no permit is held and none waits (the arbiter's own statistics), no
 *     caller-managed guard is left set, no buffer is outstanding;
 *   - nothing leaks (LeakSanitizer checks the process in --config=asan).
 * A spurious futex wake-up (NXR_FAULT_FUTEX_WAIT) is not an error: the work
 * scenario must then still succeed, with every index visited once. Nor is a
 * refusal to give memory back or to change its protection, or a failed page
 * query: the calls succeed and the refusal shows where nxr documents it
 *   - munmap, madvise: the pools' release_failures count exactly one;
 *   - mprotect (checked scopes): the scope counts one unchecked reset, or
 *     at destroy the chunk is retried and returned (nothing outstanding);
 *   - move_pages (the binding probe), a page reported absent (as one the
 *     kernel is moving): exactly one domain's memory is "unavailable", and
 *     its reason names the failed query.
 *
 * Each test prints "fault loop <scenario>: ..." with the number of injected
 * failures per point; .ci/run adds them up.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/pool.h"
#include "examples/pool_executor.h"
#include "runtime/internal/runtime.h"
#include "base/internal/sys.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"

/* Bounds that turn a runaway loop into a failure, never a target. */
#define MAX_N 5000

struct point {
    unsigned bit;
    const char *name;
    int errors[3];   /* the typed errors this point may surface as (0: none) */
    unsigned always; /* points failed on every call meanwhile (the path to `bit`) */
    bool must_fail;  /* a failure here always fails the call (nothing can stand in) */
};

static const struct point points[] = {
    {NXR_FAULT_ALLOC, "alloc", {-ENOMEM}, 0, false},
    {NXR_FAULT_THREAD_CREATE, "thread_create", {-EAGAIN}, 0, true},
    {NXR_FAULT_SETAFFINITY, "setaffinity", {NXR_EPLACEMENT}, 0, true},
    /* The allowed-set read at load sees an empty set: no domain can form. */
    {NXR_FAULT_VERIFY_AFFINITY,
     "verify_affinity",
     {NXR_EPLACEMENT, NXR_EDISALLOWED, NXR_ENODOMAIN},
     0,
     false},
    {NXR_FAULT_TOPOLOGY_LOAD, "topology_load", {NXR_ETOPOLOGY}, 0, true},
    {NXR_FAULT_MBIND, "mbind", {NXR_EPLACEMENT}, 0, false},
    {NXR_FAULT_MMAP, "mmap", {-ENOMEM}, 0, false},
    {NXR_FAULT_FUTEX_WAIT, "futex_wait", {0}, 0, false}, /* a spurious wake-up: never an error */
    {NXR_FAULT_SYNC_INIT, "sync_init", {-ENOMEM}, 0, true},
    /* Refusals the calls absorb (see the file comment): never an error. */
    {NXR_FAULT_MUNMAP, "munmap", {0}, 0, false},
    /* jemalloc purges (madvise) only an extent it could not unmap. */
    {NXR_FAULT_MADVISE, "madvise", {0}, NXR_FAULT_MUNMAP, false},
    {NXR_FAULT_MPROTECT, "mprotect", {0}, 0, false},
    {NXR_FAULT_MOVE_PAGES, "move_pages", {0}, 0, false},
    {NXR_FAULT_PAGE_ABSENT, "page_absent", {0}, 0, false},
};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

struct scenario {
    const char *name;
    void (*setup)(void);    /* unarmed */
    int (*run)(void);       /* armed: the calls under test */
    void (*check)(int rc);  /* unarmed: state after run */
    void (*teardown)(void); /* unarmed */
};

static bool typed(const struct point *p, int rc)
{
    for (size_t i = 0; i < 3; i++) {
        if (p->errors[i] != 0 && p->errors[i] == rc)
            return true;
    }
    return false;
}

/* "scenario/point #n", for the checks' messages. */
static char where[128];

static nxr_runtime_t *rt;
static long armed_n;     /* the call number the armed point fails */
static long always_hits; /* calls failed by the point's `always` set */

/* What the pool scenario's checked scope saw (run_pool records it). */
static uint64_t scope_check_failures;
static long scope_calls_before_destroy;

static uint64_t release_failures(void)
{
    uint64_t n = 0;
    for (size_t i = 0; rt != NULL && i < rt->domain_count; i++) {
        struct nxr_pool_stats ps;
        cr_assert_eq(nxr_pool_stats(rt->domains[i], &ps), 0);
        n += ps.release_failures;
    }
    return n;
}

static size_t domains_whose_probe_query_failed(void)
{
    size_t n = 0;
    for (size_t i = 0; rt != NULL && i < rt->domain_count; i++) {
        nxr_domain_t *d = rt->domains[i];
        if (nxr_domain_mem_binding(d) == NXR_MEM_UNAVAILABLE &&
            strstr(nxr__arena_binding_reason(nxr__pool_arena(d->pool)), "move_pages") != NULL)
            n++;
    }
    return n;
}

/* After a run that succeeded: a refusal was absorbed where documented, and
 * nothing was counted without one. `absorbed`: this point failed a call. */
static void expect_absorbed(const struct point *p, bool absorbed)
{
    bool release = absorbed && (p->bit == NXR_FAULT_MUNMAP || p->bit == NXR_FAULT_MADVISE);
    /* Refusals of the `always` set are releases too (munmap). */
    cr_assert_eq(release_failures(), (uint64_t)always_hits + (release ? 1u : 0u),
                 "%s: refused releases counted", where);
    if (p->bit == NXR_FAULT_MOVE_PAGES || p->bit == NXR_FAULT_PAGE_ABSENT)
        cr_assert_eq(domains_whose_probe_query_failed(), absorbed ? 1u : 0u,
                     "%s: a failed probe query shows in exactly one domain's binding", where);
    if (p->bit == NXR_FAULT_MPROTECT && absorbed) {
        /* Before destroy: one reset left unchecked; in destroy: retried. */
        bool in_reset = scope_calls_before_destroy >= armed_n;
        cr_assert_eq(scope_check_failures, in_reset ? 1u : 0u, "%s: unchecked resets", where);
    }
}

/* Loops N over one point; returns how many failures were injected. */
static long loop_point(const struct scenario *sc, const struct point *p)
{
    long injected = 0;
    for (long n = 1;; n++) {
        snprintf(where, sizeof(where), "%s/%s #%ld", sc->name, p->name, n);
        cr_assert_lt(n, MAX_N, "%s/%s: the loop does not end", sc->name, p->name);
        int threads = nxr_test_thread_count();
        if (sc->setup != NULL)
            sc->setup();
        int before = nxr_test_thread_count();
        scope_check_failures = 0;
        scope_calls_before_destroy = 0;
        armed_n = n;
        nxr__fault_arm_always(p->always);
        nxr__fault_arm(p->bit, n);
        int rc = sc->run();
        long calls = nxr__fault_calls();
        nxr__fault_arm(0, 0);
        always_hits = nxr__fault_always_hits();
        nxr__fault_arm_always(0);
        bool hit = calls >= n;
        if (rc != 0) {
            cr_assert(hit, "%s/%s #%ld: failed (%s) without an injected fault", sc->name, p->name,
                      n, nxr_strerror(rc));
            cr_assert(typed(p, rc), "%s/%s #%ld: got %d (%s), not this point's typed error",
                      sc->name, p->name, n, rc, nxr_strerror(rc));
        }
        cr_assert(!(hit && rc == 0 && p->must_fail), "%s: the injected failure was swallowed",
                  where);
        if (rc != 0)
            cr_assert_eq(nxr_test_wait_thread_count(before), before,
                         "%s/%s #%ld: threads left running", sc->name, p->name, n);
        sc->check(rc);
        if (rc == 0)
            expect_absorbed(p, hit);
        if (sc->teardown != NULL)
            sc->teardown();
        cr_assert_eq(nxr_test_wait_thread_count(threads), threads,
                     "%s/%s #%ld: threads left after teardown", sc->name, p->name, n);
        if (!hit)
            return injected; /* the Nth call never came: every call was failed once */
        injected++;
    }
}

static void loop_all(const struct scenario *sc)
{
    char line[512];
    int len = snprintf(line, sizeof(line), "fault loop %s:", sc->name);
    long total = 0;
    unsigned covered = 0;
    for (size_t i = 0; i < NPOINTS; i++) {
        long n = loop_point(sc, &points[i]);
        total += n;
        covered += n > 0;
        len += snprintf(line + len, sizeof(line) - (size_t)len, " %s %ld", points[i].name, n);
    }
    printf("%s; %u points hit, %ld injected failures\n", line, covered, total);
    fflush(stdout);
    cr_assert_gt(total, 0);
}

/* ---- shared state and checks ------------------------------------------- */


static int create(const char *domains)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.domains = nxr_test_expand(domains); /* a tests/support/cpus.h template */
    o.spin = NXR_SPIN_NONE; /* park at once: every wait is a futex wait */
    return nxr_runtime_create(&o, &rt);
}

static void create_unarmed(const char *domains)
{
    int rc = create(domains);
    cr_assert_eq(rc, 0, "%s: %s", nxr_strerror(rc), nxr_last_error());
}

static void destroy_runtime(void)
{
    nxr_runtime_destroy(rt);
    rt = NULL;
}

/* No permit held or waiting, no guard set, no operation in flight, no
 * buffer outstanding, in any domain of the runtime. */
static void expect_quiet(void)
{
    for (size_t i = 0; i < rt->domain_count; i++)
        nxr__exec_drain(&rt->domains[i]->exec); /* detached jobs finish */
    struct nxr__arbiter_stats st;
    nxr__arbiter_stats(rt->arbiter, &st);
    cr_assert_eq(st.holders, 0, "a permit is still held");
    cr_assert_eq(st.waiters, 0, "a request still waits");
    cr_assert(!st.exclusive_held, "the exclusive permit is still held");
    for (size_t i = 0; i < rt->domain_count; i++) {
        const struct nxr_domain *d = rt->domains[i];
        cr_assert_eq(atomic_load(&((struct nxr_domain *)d)->exec.guard), 0,
                     "domain %d: guard left set", d->spec.id);
        cr_assert_eq(d->exec.active, 0, "domain %d: operation in flight", d->spec.id);
        struct nxr_pool_stats ps;
        cr_assert_eq(nxr_pool_stats(d, &ps), 0);
        cr_assert_eq(ps.outstanding, 0, "domain %d: buffers outstanding", d->spec.id);
    }
}

/* ---- scenario: runtime creation ---------------------------------------- */

static int run_create(void)
{
    /* Two teams on the real topology: thread creation, pinning and
     * verification fail in the second team after the first started. */
    return create("0:%0;1:%1");
}

static void check_create(int rc)
{
    if (rc != 0) {
        cr_assert_null(rt, "a failed create hands nothing out");
        cr_assert_neq(nxr_last_error()[0], '\0', "%s: a failed create (%s) explains itself", where,
                      nxr_strerror(rc));
        return;
    }
    cr_assert_eq(rt->domain_count, 2);
    for (size_t i = 0; i < rt->domain_count; i++) {
        nxr_domain_t *d = rt->domains[i];
        cr_assert_eq(nxr_domain_workers(d), 1);
        cr_assert_eq(nxr_domain_placement(d), NXR_PLACEMENT_VERIFIED);
        /* A failed probe binding is reported, never claimed as bound. */
        enum nxr_mem_binding b = nxr_domain_mem_binding(d);
        cr_assert(b == NXR_MEM_BOUND || b == NXR_MEM_UNAVAILABLE);
    }
    expect_quiet();
}

Test(reliability_fault_loop, runtime_creation, .timeout = 600)
{
    NXR_TEST_NEED_CPUS(2); /* two one-CPU domains, or a pool on the second CPU */
    static const struct scenario sc = {
        "create", NULL, run_create, check_create, destroy_runtime,
    };
    loop_all(&sc);
}

/* ---- scenario: external domain registration ---------------------------- */

static struct host_pool *coop_pool, *caller_pool;
static size_t attached;

static void setup_attach(void)
{
    create_unarmed("0:%0");
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(nxr_test_cpu(1), &one);
    coop_pool = host_pool_start(1, &one);
    caller_pool = host_pool_start(2, NULL);
    cr_assert(coop_pool != NULL && caller_pool != NULL);
    attached = 0;
}

static void teardown_attach(void)
{
    destroy_runtime();
    host_pool_stop(coop_pool);
    host_pool_stop(caller_pool);
    cr_assert_eq(pool_executor_refs(), 0, "every retain was released");
}

static void count_range(void *arg, size_t b, size_t e, unsigned worker)
{
    (void)worker;
    atomic_uint *hits = arg;
    for (size_t i = b; i < e; i++)
        atomic_fetch_add_explicit(&hits[i], 1, memory_order_relaxed);
}

#define LOOP_N 600

static int loop_once(nxr_ctx_t *ctx)
{
    static atomic_uint hits[LOOP_N];
    for (size_t i = 0; i < LOOP_N; i++)
        atomic_store(&hits[i], 0);
    int rc = nxr_parallel_for(ctx, 0, LOOP_N, 7, count_range, hits);
    if (rc == 0) {
        for (size_t i = 0; i < LOOP_N; i++)
            cr_assert_eq(atomic_load(&hits[i]), 1, "index %zu", i);
    }
    return rc;
}

static int task_ok(void *arg, size_t index)
{
    (void)index;
    atomic_fetch_add_explicit((atomic_uint *)arg, 1, memory_order_relaxed);
    return 0;
}

/* Opens a context on domain `id` and runs a loop and a submitted job. */
static int use_domain(int id)
{
    nxr_ctx_t *ctx;
    int rc = nxr_ctx_create(rt, id, &ctx);
    if (rc != 0)
        return rc;
    rc = loop_once(ctx);
    if (rc == 0) {
        atomic_uint done = 0;
        nxr_job_t *job;
        rc = nxr_submit(ctx, 5, task_ok, &done, &job);
        if (rc == 0) {
            rc = nxr_job_wait(job);
            cr_assert_eq(atomic_load(&done), 5);
        }
    }
    nxr_ctx_destroy(ctx);
    return rc;
}

static int run_attach(void)
{
    hwloc_bitmap_t one = hwloc_bitmap_alloc();
    hwloc_bitmap_only(one, 1);
    struct nxr_external_decl coop, caller;
    nxr_external_decl_init(&coop);
    coop.id = 5;
    coop.admission = NXR_ADMISSION_COOPERATIVE;
    coop.cpus = one;
    pool_executor_init(&coop.executor, coop_pool);
    nxr_external_decl_init(&caller);
    caller.id = 6;
    pool_executor_init(&caller.executor, caller_pool);

    int rc = nxr_runtime_attach(rt, &coop);
    hwloc_bitmap_free(one);
    if (rc != 0)
        return rc;
    attached++;
    if ((rc = nxr_runtime_attach(rt, &caller)) != 0)
        return rc;
    attached++;
    if ((rc = use_domain(5)) != 0)
        return rc;
    if ((rc = use_domain(6)) != 0)
        return rc;
    return use_domain(0);
}

static void check_attach(int rc)
{
    (void)rc;
    /* A failed attach leaves the runtime as it was; a done one stays. */
    cr_assert_eq(nxr_runtime_domain_count(rt), 1 + attached);
    cr_assert_eq(pool_executor_refs(), (long)attached, "one retain per attached pool");
    expect_quiet();
}

Test(reliability_fault_loop, external_registration, .timeout = 600)
{
    NXR_TEST_NEED_CPUS(2); /* two one-CPU domains, or a pool on the second CPU */
    static const struct scenario sc = {
        "attach", setup_attach, run_attach, check_attach, teardown_attach,
    };
    loop_all(&sc);
}

/* ---- scenario: pool use ------------------------------------------------ */

static void setup_two(void)
{
    create_unarmed("0:%0;1:%1");
}

static int run_pool(void)
{
    static const size_t sizes[] = {64, 4096, 70000, 1u << 20};
    nxr_buffer_t *bufs[2][4] = {{NULL}};
    void *mem[2] = {NULL, NULL};
    nxr_scope_t *scope = NULL;
    int rc = 0;
    for (size_t d = 0; d < 2 && rc == 0; d++) {
        nxr_domain_t *dom = nxr_runtime_domain_at(rt, d);
        for (size_t i = 0; i < 4 && rc == 0; i++) {
            rc = nxr_buffer_acquire(dom, sizes[i], &bufs[d][i]);
            if (rc == 0)
                memset(nxr_buffer_data(bufs[d][i]), 1, sizes[i]);
        }
        if (rc == 0) {
            /* A release and a re-acquire: the cached (LIFO) path. */
            nxr_buffer_release(bufs[d][0]);
            bufs[d][0] = NULL;
            rc = nxr_buffer_acquire(dom, sizes[0], &bufs[d][0]);
        }
        if (rc == 0)
            rc = nxr_domain_malloc(dom, 3u << 20, 64, &mem[d]);
    }
    if (rc == 0) {
        /* Checked (in every build): each reset is two rounds of mprotect. */
        struct nxr_scope_opts so;
        nxr_scope_opts_init(&so);
        so.check = NXR_SCOPE_CHECK_ON;
        rc = nxr_scope_create(nxr_runtime_domain_at(rt, 1), &so, &scope);
    }
    for (int step = 0; step < 2 && rc == 0; step++) {
        void *p, *q;
        rc = nxr_scope_alloc(scope, 100, &p);
        if (rc == 0)
            rc = nxr_scope_alloc(scope, 2u << 20, &q); /* a chunk of its own */
        if (rc == 0)
            memset(q, 2, 2u << 20);
        nxr_scope_reset(scope);
    }
    if (scope != NULL) {
        struct nxr_scope_stats ss;
        nxr_scope_stats(scope, &ss);
        scope_check_failures = ss.check_failures;
    }
    scope_calls_before_destroy = nxr__fault_calls();
    nxr_scope_destroy(scope);
    for (size_t d = 0; d < 2; d++) {
        for (size_t i = 0; i < 4; i++)
            nxr_buffer_release(bufs[d][i]);
        nxr_domain_free(mem[d]);
        /* Back to the system: the purge path (madvise). */
        if (nxr_pool_trim(nxr_runtime_domain_at(rt, d)) != 0 && rc == 0)
            rc = -EINVAL;
    }
    return rc;
}

static void check_pool(int rc)
{
    (void)rc;
    expect_quiet();
    /* Usable again at once. */
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(nxr_runtime_domain_at(rt, 0), 5000, &b), 0);
    nxr_buffer_release(b);
}

Test(reliability_fault_loop, pool_use, .timeout = 600)
{
    NXR_TEST_NEED_CPUS(2); /* two one-CPU domains, or a pool on the second CPU */
    static const struct scenario sc = {
        "pool", setup_two, run_pool, check_pool, destroy_runtime,
    };
    loop_all(&sc);
}

/* ---- scenario: work ---------------------------------------------------- */

static void setup_work(void)
{
    /* Two disjoint domains and one shared over both: the arbiter keeps the
     * shared one apart from the others. */
    create_unarmed("0:%0;1:%1;7:%0,%1 shared");
}

#define BIG_ELEM 10000 /* two partials of this size overflow the stack array */

static void map_big(void *arg, size_t b, size_t e, void *partial)
{
    (void)arg;
    *(size_t *)partial += e - b;
}

static void combine_big(void *arg, void *result, const void *partial)
{
    (void)arg;
    *(size_t *)result += *(const size_t *)partial;
}

static int work_on(int id)
{
    nxr_ctx_t *ctx;
    int rc = nxr_ctx_create(rt, id, &ctx);
    if (rc != 0)
        return rc;
    if ((rc = loop_once(ctx)) != 0)
        goto out;
    static unsigned char identity[BIG_ELEM], result[BIG_ELEM];
    rc = nxr_parallel_reduce(ctx, 0, 5000, 10, BIG_ELEM, identity, map_big, combine_big, NULL,
                             result);
    if (rc != 0)
        goto out;
    cr_assert_eq(*(size_t *)result, 5000);
    atomic_uint done = 0;
    if ((rc = nxr_run(ctx, NXR_MODE_OUTER, 9, task_ok, &done)) != 0)
        goto out;
    cr_assert_eq(atomic_load(&done), 9);
    nxr_job_t *job;
    if ((rc = nxr_submit(ctx, 6, task_ok, &done, &job)) != 0)
        goto out;
    if ((rc = nxr_job_wait(job)) != 0)
        goto out;
    cr_assert_eq(atomic_load(&done), 15);
    static atomic_uint detached;
    if ((rc = nxr_submit(ctx, 4, task_ok, &detached, NULL)) != 0)
        goto out;
    /* Kernels: a reduction split over the domain, a GEMM with scratch. */
    static float x[1 << 17];
    for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
        x[i] = 1.0f;
    float sum = 0;
    if ((rc = nxr_sum(ctx, sizeof(x) / sizeof(x[0]), x, &sum)) != 0)
        goto out;
    cr_assert_eq(sum, (float)(sizeof(x) / sizeof(x[0])));
    static float a[64 * 64], b[64 * 64], c[64 * 64];
    for (size_t i = 0; i < 64 * 64; i++)
        a[i] = b[i] = 1.0f;
    struct nxr_sgemm_args g = {.m = 64,
                          .n = 64,
                          .k = 64,
                          .alpha = 1,
                          .a = a,
                          .lda = 64,
                          .b = b,
                          .ldb = 64,
                          .beta = 0,
                          .c = c,
                          .ldc = 64};
    if ((rc = nxr_sgemm(ctx, &g)) != 0)
        goto out;
    cr_assert_eq(c[0], 64.0f);
out:
    nxr_ctx_destroy(ctx);
    return rc;
}

static int run_work(void)
{
    static const int ids[] = {0, 1, 7};
    for (size_t i = 0; i < 3; i++) {
        int rc = work_on(ids[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void check_work(int rc)
{
    (void)rc;
    expect_quiet();
}

Test(reliability_fault_loop, work, .timeout = 600)
{
    NXR_TEST_NEED_CPUS(2); /* two one-CPU domains, or a pool on the second CPU */
    static const struct scenario sc = {
        "work", setup_work, run_work, check_work, destroy_runtime,
    };
    loop_all(&sc);
}

/* Every futex wait spurious at once: the wait loops must still make
 * progress (by spinning) and lose nothing. */
Test(reliability_fault_loop, every_futex_wait_spurious, .timeout = 300)
{
    NXR_TEST_NEED_CPUS(2); /* two one-CPU domains, or a pool on the second CPU */
    setup_work();
    nxr__fault_arm_from(NXR_FAULT_FUTEX_WAIT, 1);
    int rc = run_work();
    long calls = nxr__fault_calls();
    nxr__fault_arm(0, 0);
    cr_assert_eq(rc, 0, "%s", nxr_strerror(rc));
    cr_assert_gt(calls, 0, "the work parked somewhere");
    check_work(rc);
    destroy_runtime();
}
