/*
 * Two runtimes in one process (DESIGN.md section 4: nxr keeps no
 * process-global state that breaks a second runtime). Each is built from its
 * own part of the process's allowed set (opts.allowed_cpus), so their domains
 * are disjoint; both run loops and kernels at the same time; the one piece of
 * admission that is process-wide by necessity, the exclusive permit and the
 * process-global thread count it protects, excludes across runtimes; and
 * destroying one leaves the other working.
 *
 * Concurrency is proven with rendezvous inside bodies, never with time: a
 * body of one runtime waits (bounded) for something only the other runtime
 * can do while it waits; exclusion is proven by seeing the excluded thread
 * blocked in the kernel (or its request queued) while the excluding call is
 * still inside. CPU ids come from the allowed set; the tests need two
 * allowed CPUs and skip with a reason below that.
 */
#include <cblas.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/internal/fpenv_arch.h"
#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

TestSuite(runtime_two_runtimes, .timeout = 60);

/* A bounded wait long enough for any scheduler: a rendezvous that does not
 * happen within it is a failure, not a slow machine. */
#define MEET_MS 10000

/* ---- set-up ------------------------------------------------------------------ */

/* The first two CPUs of the process's allowed set, or a skip. */
static void two_cpus(unsigned *a, unsigned *b)
{
    NXR_TEST_NEED_CPUS(2); /* two runtimes with disjoint allowed sets */
    *a = (unsigned)nxr_test_cpu(0);
    *b = (unsigned)nxr_test_cpu(1);
}

static pid_t tid_self(void)
{
    return (pid_t)syscall(SYS_gettid);
}

struct rt_opts {
    hwloc_bitmap_t allowed;          /* opts.allowed_cpus */
    const char *domains;             /* NULL: one domain per node */
    enum nxr_provider_policy policy; /* NXR_PROVIDER_POLICY_DEFAULT: strict */
    nxr_provider_t *gemm;            /* NULL: native */
};

static nxr_runtime_t *open_rt(const struct rt_opts *ro)
{
    struct nxr_test_runtime fx;
    nxr_test_runtime_opts(&fx, ro->domains, 0);
    fx.opts.allowed_cpus = ro->allowed;
    fx.opts.provider_policy = ro->policy;
    fx.opts.providers[NXR_FAMILY_GEMM] = ro->gemm;
    fx.opts.spin = 256; /* two runtimes share the CPUs with the test's threads */
    NXR_TEST_RUNTIME_OPEN(&fx);
    nxr_runtime_t *rt = fx.rt;
    return rt;
}

static nxr_runtime_t *open_on(unsigned cpu)
{
    struct rt_opts ro = {.allowed = hwloc_bitmap_alloc(), .policy = NXR_PROVIDER_POLICY_DEFAULT};
    hwloc_bitmap_only(ro.allowed, cpu);
    nxr_runtime_t *rt = open_rt(&ro);
    hwloc_bitmap_free(ro.allowed);
    return rt;
}

/* A context on the runtime's first domain. */
static nxr_ctx_t *ctx_of(nxr_runtime_t *rt)
{
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, 0)), &ctx), 0);
    return ctx;
}

static hwloc_const_bitmap_t cpus_of(const nxr_ctx_t *ctx)
{
    return nxr_domain_cpuset(nxr_ctx_domain(ctx));
}

/* Starts fn on a thread; pthread_join ends it. */
static pthread_t start(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, fn, arg), 0);
    return t;
}

static void pin_self(unsigned cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    cr_assert_eq(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
}

/* ---- the domains -------------------------------------------------------------- */

Test(runtime_two_runtimes, allowed_sets_and_domains_are_disjoint)
{
    unsigned a, b;
    two_cpus(&a, &b);
    nxr_runtime_t *ra = open_on(a), *rb = open_on(b);
    cr_assert(hwloc_bitmap_isset(nxr_runtime_allowed_cpus(ra), a));
    cr_assert_eq(hwloc_bitmap_weight(nxr_runtime_allowed_cpus(ra)), 1);
    cr_assert(hwloc_bitmap_isset(nxr_runtime_allowed_cpus(rb), b));
    cr_assert_eq(hwloc_bitmap_weight(nxr_runtime_allowed_cpus(rb)), 1);
    for (size_t i = 0; i < nxr_runtime_domain_count(ra); i++) {
        hwloc_const_bitmap_t da = nxr_domain_cpuset(nxr_runtime_domain_at(ra, i));
        cr_assert(hwloc_bitmap_isincluded(da, nxr_runtime_allowed_cpus(ra)));
        for (size_t j = 0; j < nxr_runtime_domain_count(rb); j++)
            cr_assert_not(
                hwloc_bitmap_intersects(da, nxr_domain_cpuset(nxr_runtime_domain_at(rb, j))));
    }
    /* Each narrowed runtime still knows the process's set: a provider's own
     * threads may run anywhere in it, so neither domain counts as "the whole
     * allowed set" for the placement rules. */
    hwloc_bitmap_t process = hwloc_bitmap_alloc();
    cr_assert_eq(nxr_test_thread_affinity(0, process), 0);
    cr_assert(hwloc_bitmap_isequal(ra->topo.process, process));
    cr_assert(hwloc_bitmap_isequal(rb->topo.process, process));
    hwloc_bitmap_free(process);
    nxr_runtime_destroy(rb);
    nxr_runtime_destroy(ra);
}

/* ---- loops at the same time ------------------------------------------------------ */

struct meet {
    atomic_int arrived;
    atomic_int met;
    atomic_int off_domain; /* bodies that ran outside their domain */
    hwloc_const_bitmap_t cpus[2];
    nxr_ctx_t *ctx[2];
};

struct side {
    struct meet *m;
    int which;
    int rc;
};

static void meet_body(void *p, size_t begin, size_t end, unsigned w)
{
    (void)begin, (void)end, (void)w;
    struct side *s = p;
    int cpu = sched_getcpu();
    if (cpu < 0 || !hwloc_bitmap_isset(s->m->cpus[s->which], (unsigned)cpu))
        atomic_fetch_add(&s->m->off_domain, 1);
    /* Only a body of the other runtime, running now, can complete this. */
    atomic_fetch_add(&s->m->arrived, 1);
    nxr_test_wait_at_least(&s->m->arrived, 2, MEET_MS);
    if (atomic_load(&s->m->arrived) >= 2)
        atomic_fetch_add(&s->m->met, 1);
}

static void *loop_thread(void *p)
{
    struct side *s = p;
    s->rc = nxr_parallel_for(s->m->ctx[s->which], 0, 1, 0, meet_body, s);
    return NULL;
}

Test(runtime_two_runtimes, loops_of_both_run_at_the_same_time)
{
    unsigned a, b;
    two_cpus(&a, &b);
    nxr_runtime_t *rt[2] = {open_on(a), open_on(b)};
    struct meet m = {0};
    struct side s[2];
    for (int i = 0; i < 2; i++) {
        m.ctx[i] = ctx_of(rt[i]);
        m.cpus[i] = cpus_of(m.ctx[i]);
        s[i] = (struct side){.m = &m, .which = i};
    }
    pthread_t t[2] = {start(loop_thread, &s[0]), start(loop_thread, &s[1])};
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(s[i].rc, 0, "%s", nxr_strerror(s[i].rc));
    cr_assert_eq(atomic_load(&m.met), 2, "both bodies were inside at once");
    cr_assert_eq(atomic_load(&m.off_domain), 0, "every body ran on its own runtime's CPU");
    for (int i = 0; i < 2; i++) {
        nxr_ctx_destroy(m.ctx[i]);
        nxr_runtime_destroy(rt[i]);
    }
}

/* ---- kernels of one while the other is inside a body ------------------------------ */

#define N 24

struct problem {
    float a[N * N], b[N * N], c[N * N], ref[N * N];
    float x[N * N], norm[N * N], sum, sum_ref;
};

static void problem_init(struct problem *p, int seed)
{
    for (int i = 0; i < N * N; i++) {
        p->a[i] = (float)((i * 7 + seed) % 13) / 13.0f - 0.5f;
        p->b[i] = (float)((i * 5 + 3 * seed) % 11) / 11.0f - 0.5f;
        p->x[i] = (float)((i * 3 + seed) % 17) / 17.0f;
    }
    /* The reference: the definition, in double. */
    double total = 0;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++) {
            double acc = 0;
            for (int k = 0; k < N; k++)
                acc += (double)p->a[r * N + k] * p->b[k * N + c];
            p->ref[r * N + c] = (float)acc;
        }
    for (int i = 0; i < N * N; i++)
        total += p->x[i];
    p->sum_ref = (float)total;
}

/* GEMM, a sum and an RMS norm on ctx, each checked against the definition. */
static int kernels_checked(nxr_ctx_t *ctx, int seed)
{
    struct problem *p = calloc(1, sizeof *p);
    cr_assert_not_null(p);
    problem_init(p, seed);
    struct nxr_sgemm_args g = {.m = N,
                               .n = N,
                               .k = N,
                               .alpha = 1,
                               .a = p->a,
                               .lda = N,
                               .b = p->b,
                               .ldb = N,
                               .beta = 0,
                               .c = p->c,
                               .ldc = N};
    int rc = nxr_sgemm(ctx, &g);
    if (rc == 0)
        rc = nxr_sum(ctx, N * N, p->x, &p->sum);
    if (rc == 0)
        rc = nxr_rmsnorm(ctx, N, N, p->x, N, NULL, 0.0f, p->norm, N);
    if (rc == 0) {
        for (int i = 0; i < N * N; i++)
            cr_assert(fabsf(p->c[i] - p->ref[i]) <= 1e-4f, "C[%d] = %g, want %g", i, p->c[i],
                      p->ref[i]);
        cr_assert(fabsf(p->sum - p->sum_ref) <= 1e-3f, "sum %g, want %g", p->sum, p->sum_ref);
        for (int r = 0; r < N; r++) {
            double ms = 0;
            for (int c = 0; c < N; c++)
                ms += (double)p->x[r * N + c] * p->x[r * N + c];
            double scale = 1.0 / sqrt(ms / N);
            for (int c = 0; c < N; c++)
                cr_assert(fabsf(p->norm[r * N + c] - (float)(p->x[r * N + c] * scale)) <= 1e-4f);
        }
    }
    free(p);
    return rc;
}

struct hold {
    atomic_int inside;   /* the holder's body has started */
    atomic_int released; /* the other runtime's work is done */
    atomic_int saw_release;
    nxr_ctx_t *ctx;
    int rc;
};

static void hold_body(void *p, size_t begin, size_t end, unsigned w)
{
    (void)begin, (void)end, (void)w;
    struct hold *h = p;
    atomic_store(&h->inside, 1);
    nxr_test_wait_at_least(&h->released, 1, MEET_MS);
    atomic_store(&h->saw_release, atomic_load(&h->released));
}

static void *hold_thread(void *p)
{
    struct hold *h = p;
    h->rc = nxr_parallel_for(h->ctx, 0, 1, 0, hold_body, h);
    return NULL;
}

Test(runtime_two_runtimes, kernels_of_one_run_while_the_other_is_inside_a_body)
{
    unsigned a, b;
    two_cpus(&a, &b);
    nxr_runtime_t *rt[2] = {open_on(a), open_on(b)};
    nxr_ctx_t *ctx[2] = {ctx_of(rt[0]), ctx_of(rt[1])};
    for (int holder = 0; holder < 2; holder++) {
        struct hold h = {.ctx = ctx[holder]};
        pthread_t t = start(hold_thread, &h);
        nxr_test_wait_at_least(&h.inside, 1, MEET_MS);
        cr_assert_eq(atomic_load(&h.inside), 1, "the holder's body started");
        /* The holder's operation is in flight (its permit held, its worker
         * busy); the other runtime's kernels must run to completion now. */
        int rc = kernels_checked(ctx[1 - holder], holder);
        atomic_store(&h.released, 1);
        pthread_join(t, NULL);
        cr_assert_eq(rc, 0, "%s", nxr_strerror(rc));
        cr_assert_eq(h.rc, 0, "%s", nxr_strerror(h.rc));
        cr_assert_eq(atomic_load(&h.saw_release), 1,
                     "runtime %d's kernels finished while runtime %d was inside a body", 1 - holder,
                     holder);
    }
    for (int i = 0; i < 2; i++) {
        nxr_ctx_destroy(ctx[i]);
        nxr_runtime_destroy(rt[i]);
    }
}

/* ---- destroying one -------------------------------------------------------------- */

static int add_task(void *p, size_t i)
{
    atomic_fetch_add((atomic_int *)p, (int)i + 1);
    return 0;
}

Test(runtime_two_runtimes, destroying_one_leaves_the_other_working)
{
    unsigned a, b;
    two_cpus(&a, &b);
    int threads_before = nxr_test_thread_count();
    nxr_runtime_t *ra = open_on(a), *rb = open_on(b);
    nxr_ctx_t *ca = ctx_of(ra), *cb = ctx_of(rb);
    unsigned workers_a = 0;
    for (size_t i = 0; i < nxr_runtime_domain_count(ra); i++)
        workers_a += nxr_domain_workers(nxr_runtime_domain_at(ra, i));
    /* The holder thread below is one more while A goes away. */
    int threads_both = nxr_test_thread_count() + 1;

    /* B is inside an operation (its permit held) while A is destroyed. */
    struct hold h = {.ctx = cb};
    pthread_t t = start(hold_thread, &h);
    nxr_test_wait_at_least(&h.inside, 1, MEET_MS);
    cr_assert_eq(atomic_load(&h.inside), 1);
    nxr_buffer_t *buf_a;
    cr_assert_eq(nxr_buffer_acquire(nxr_ctx_domain(ca), 4096, &buf_a), 0);
    nxr_buffer_release(buf_a);
    nxr_ctx_destroy(ca);
    nxr_runtime_destroy(ra);
    cr_assert_eq(nxr_test_wait_thread_count(threads_both - (int)workers_a),
                 threads_both - (int)workers_a, "A's workers are gone, B's are not");
    atomic_store(&h.released, 1);
    pthread_join(t, NULL);
    cr_assert_eq(h.rc, 0, "B's operation finished normally: %s", nxr_strerror(h.rc));

    /* B still runs loops, tasks, submitted jobs, kernels and buffers. */
    struct hold again = {.ctx = cb, .released = 1};
    cr_assert_eq(nxr_parallel_for(cb, 0, 1, 0, hold_body, &again), 0);
    cr_assert_eq(atomic_load(&again.inside), 1);
    atomic_int total = 0;
    cr_assert_eq(nxr_run(cb, NXR_MODE_OUTER, 10, add_task, &total), 0);
    cr_assert_eq(atomic_load(&total), 55);
    nxr_job_t *job;
    cr_assert_eq(nxr_submit(cb, 10, add_task, &total, &job), 0);
    cr_assert_eq(nxr_job_wait(job), 0);
    cr_assert_eq(atomic_load(&total), 110);
    cr_assert_eq(kernels_checked(cb, 3), 0);
    nxr_buffer_t *buf;
    cr_assert_eq(nxr_buffer_acquire(nxr_ctx_domain(cb), 1 << 16, &buf), 0);
    memset(nxr_buffer_data(buf), 1, nxr_buffer_size(buf));
    nxr_buffer_release(buf);
    struct nxr_pool_stats st;
    cr_assert_eq(nxr_pool_stats(nxr_ctx_domain(cb), &st), 0);
    cr_assert_eq(st.outstanding, 0u);

    nxr_ctx_destroy(cb);
    nxr_runtime_destroy(rb);
    cr_assert_eq(nxr_test_wait_thread_count(threads_before), threads_before);
}

/* ---- the exclusive permit is the process's ----------------------------------------- */

/* A GEMM provider with a process-global thread count, like parallel
 * OpenBLAS: one count for the whole process, whoever wraps it. */
static atomic_int library_count;

struct spy {
    /* What to do inside the call (NULL: nothing). */
    void (*during)(struct spy *s);
    void *arg;
    atomic_int calls;
    atomic_int count_seen;
};

static int spy_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *g)
{
    (void)call, (void)g;
    struct spy *s = self;
    atomic_store(&s->count_seen, atomic_load(&library_count));
    atomic_fetch_add(&s->calls, 1);
    if (s->during != NULL)
        s->during(s);
    return 0;
}

static int spy_get(void *self)
{
    (void)self;
    return atomic_load(&library_count);
}

static void spy_set(void *self, int count)
{
    (void)self;
    atomic_store(&library_count, count);
}

static const struct nxr_gemm_ops spy_gemm = {.sgemm = spy_sgemm};
static const struct nxr_global_threads_ops spy_threads = {.get = spy_get, .set = spy_set};

static nxr_provider_t *spy_create(struct spy *s)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "global-spy";
    d.count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS;
    d.gemm = &spy_gemm;
    d.global_threads = &spy_threads;
    d.self = s;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    return p;
}

/* Valid arguments (the spy never reads them; C overlaps neither input). */
static int spy_call(nxr_ctx_t *ctx)
{
    float a[4] = {0}, b[4] = {0}, c[4];
    struct nxr_sgemm_args g = {
        .m = 2, .n = 2, .k = 2, .alpha = 1, .a = a, .lda = 2, .b = b, .ldb = 2, .c = c, .ldc = 2};
    return nxr_sgemm(ctx, &g);
}

struct exclusive_case {
    nxr_runtime_t *rb;
    nxr_ctx_t *cb;
    atomic_int go;         /* set inside A's exclusive call */
    atomic_int b_ran;      /* B's loop body ran */
    int b_ran_during;      /* ... while A's call was still inside */
    unsigned waiters_seen; /* permit requests queued while A's call was inside */
    int b_rc;
};

static void b_body(void *p, size_t begin, size_t end, unsigned w)
{
    (void)begin, (void)end, (void)w;
    atomic_store(&((struct exclusive_case *)p)->b_ran, 1);
}

static void *b_loop_thread(void *p)
{
    struct exclusive_case *e = p;
    nxr_test_wait_at_least(&e->go, 1, MEET_MS);
    /* This thread is not on B's CPU, so the loop goes to B's worker under
     * B's permit, which the exclusive permit must hold back. */
    e->b_rc = nxr_parallel_for(e->cb, 0, 1, 0, b_body, e);
    return NULL;
}

static bool a_request_waits(void *p)
{
    struct exclusive_case *e = p;
    struct nxr__arbiter_stats st;
    /* B's request is queued on the arbiter the exclusive permit is held on
     * only if both runtimes share it: the process's arbiter. */
    nxr__arbiter_stats(e->rb->arbiter, &st);
    e->waiters_seen = st.waiters;
    return st.waiters > 0 || atomic_load(&e->b_ran) != 0;
}

static void wait_for_a_waiter(struct spy *s)
{
    struct exclusive_case *e = s->arg;
    atomic_store(&e->go, 1);
    nxr_test_wait_until(a_request_waits, e, MEET_MS);
    e->b_ran_during = atomic_load(&e->b_ran);
}

Test(runtime_two_runtimes, exclusive_permit_of_one_holds_back_the_other)
{
    unsigned a, b;
    two_cpus(&a, &b);
    struct exclusive_case e = {0};
    struct spy s = {.during = wait_for_a_waiter, .arg = &e};
    atomic_store(&library_count, 1);
    nxr_provider_t *p = spy_create(&s);
    struct rt_opts ro = {
        .allowed = hwloc_bitmap_alloc(), .policy = NXR_PROVIDER_PROCESS_EXCLUSIVE, .gemm = p};
    hwloc_bitmap_only(ro.allowed, a);
    nxr_runtime_t *ra = open_rt(&ro);
    hwloc_bitmap_free(ro.allowed);
    e.rb = open_on(b);
    e.cb = ctx_of(e.rb);
    nxr_ctx_t *ca = ctx_of(ra);

    pthread_t t = start(b_loop_thread, &e);
    int rc = spy_call(ca); /* exclusive: the spy waits inside for B's request */
    pthread_join(t, NULL);
    cr_assert_eq(rc, 0, "%s", nxr_strerror(rc));
    cr_assert_eq(atomic_load(&s.calls), 1);
    cr_assert_eq(e.b_ran_during, 0, "B's loop ran while A held the exclusive permit");
    cr_assert_geq(e.waiters_seen, 1u, "B's permit request queued behind A's exclusive permit");
    cr_assert_eq(e.b_rc, 0, "%s", nxr_strerror(e.b_rc));
    cr_assert_eq(atomic_load(&e.b_ran), 1, "and ran once it was released");

    nxr_ctx_destroy(ca);
    nxr_ctx_destroy(e.cb);
    nxr_runtime_destroy(ra);
    nxr_runtime_destroy(e.rb);
    nxr_provider_destroy(p);
}

/* ---- the global count: one runtime's transient count is not another's ---------------- */

struct gate_case {
    nxr_ctx_t *cb;
    unsigned b_cpu;
    atomic_int go;      /* A's count is set */
    atomic_int b_tid;   /* B's calling thread */
    atomic_int calling; /* ... is inside its call */
    atomic_int b_done;  /* B's call returned */
    int b_blocked;      /* B's thread was seen asleep inside its call */
    int b_done_during;  /* B's call returned while A still held the count */
    int a_count_seen;   /* the count during A's call */
    int b_rc;
};

static void *b_strict_thread(void *p)
{
    struct gate_case *g = p;
    pin_self(g->b_cpu); /* on B's CPU: B's call runs here, inline, no permit */
    atomic_store(&g->b_tid, (int)tid_self());
    nxr_test_wait_at_least(&g->go, 1, MEET_MS);
    atomic_store(&g->calling, 1);
    g->b_rc = spy_call(g->cb);
    atomic_store(&g->b_done, 1);
    return NULL;
}

static bool b_calling(void *p)
{
    return atomic_load(&((struct gate_case *)p)->calling) != 0;
}

/* A's call, count set: B's call must block (asleep in the kernel, on the
 * gate) rather than run or fail. With the gate broken B never sleeps: it
 * returns at once, and the wait below gives up. */
static void hold_the_count(struct spy *s)
{
    struct gate_case *g = s->arg;
    g->a_count_seen = atomic_load(&library_count);
    atomic_store(&g->go, 1);
    g->b_blocked =
        nxr_test_wait_asleep((pid_t)atomic_load(&g->b_tid), b_calling, g, MEET_MS) ? 1 : 0;
    g->b_done_during = atomic_load(&g->b_done);
}

Test(runtime_two_runtimes, a_strict_runtime_never_sees_an_exclusive_runtimes_count)
{
    unsigned a, b;
    two_cpus(&a, &b);
    struct gate_case g = {.b_cpu = b};
    struct spy sa = {.during = hold_the_count, .arg = &g}, sb = {0};
    atomic_store(&library_count, 1);
    nxr_provider_t *pa = spy_create(&sa), *pb = spy_create(&sb);
    /* A: exclusive, one domain over a and b (budget 2: its call sets the
     * count to 2). B: strict, CPU b only (count 1: inline on its caller). */
    struct rt_opts ro = {
        .allowed = hwloc_bitmap_alloc(), .policy = NXR_PROVIDER_PROCESS_EXCLUSIVE, .gemm = pa};
    char domains[64];
    snprintf(domains, sizeof domains, "0:%u,%u", a, b);
    ro.domains = domains;
    hwloc_bitmap_zero(ro.allowed);
    hwloc_bitmap_set(ro.allowed, a);
    hwloc_bitmap_set(ro.allowed, b);
    nxr_runtime_t *ra = open_rt(&ro);
    ro.domains = NULL;
    ro.policy = NXR_PROVIDER_STRICT;
    ro.gemm = pb;
    hwloc_bitmap_only(ro.allowed, b);
    nxr_runtime_t *rb = open_rt(&ro);
    hwloc_bitmap_free(ro.allowed);
    nxr_ctx_t *ca = ctx_of(ra);
    g.cb = ctx_of(rb);
    cr_assert_eq(nxr_ctx_budget(ca), 2u);

    pthread_t t = start(b_strict_thread, &g);
    nxr_test_wait_at_least(&g.b_tid, 1, MEET_MS);
    int rc = spy_call(ca);
    pthread_join(t, NULL);
    cr_assert_eq(rc, 0, "%s", nxr_strerror(rc));
    cr_assert_eq(g.a_count_seen, 2, "A's call ran at its budget");
    cr_assert_eq(g.b_done_during, 0, "B's call did not complete while A's count was set");
    cr_assert_eq(g.b_blocked, 1, "B's call waited, asleep, while A's count was set");
    cr_assert_eq(g.b_rc, 0, "B's strict call ran (it saw the resting count): %s",
                 nxr_strerror(g.b_rc));
    cr_assert_eq(atomic_load(&sb.calls), 1);
    cr_assert_eq(atomic_load(&sb.count_seen), 1, "B's provider ran at count 1");
    cr_assert_eq(atomic_load(&library_count), 1, "A restored the count");

    nxr_ctx_destroy(ca);
    nxr_ctx_destroy(g.cb);
    nxr_runtime_destroy(ra);
    nxr_runtime_destroy(rb);
    nxr_provider_destroy(pa);
    nxr_provider_destroy(pb);
}

/* ---- the gate prefers the exclusive call: strict readers cannot starve it -------------- */

struct fair_case {
    nxr_ctx_t *c1, *c2, *ca;
    unsigned a_cpu, b_cpu;
    atomic_int seq;        /* order of the provider calls that record themselves */
    atomic_int r1_inside;  /* B's first strict call holds the gate */
    atomic_int release_r1; /* ... until this */
    atomic_int w_tid, w_calling, w_seq;
    atomic_int r2_tid, r2_calling, r2_seq;
    int w_rc, r2_rc;
};

/* B's provider: its first call parks inside the gate (shared); the second
 * records when it got in. */
static void strict_during(struct spy *s)
{
    struct fair_case *f = s->arg;
    if (atomic_load(&s->calls) == 1) {
        atomic_store(&f->r1_inside, 1);
        nxr_test_wait_at_least(&f->release_r1, 1, MEET_MS);
    } else {
        atomic_store(&f->r2_seq, atomic_fetch_add(&f->seq, 1) + 1);
    }
}

static void exclusive_during(struct spy *s)
{
    struct fair_case *f = s->arg;
    atomic_store(&f->w_seq, atomic_fetch_add(&f->seq, 1) + 1);
}

static void *r1_thread(void *p)
{
    struct fair_case *f = p;
    pin_self(f->b_cpu);
    spy_call(f->c1);
    return NULL;
}

/* W runs on a CPU of A's domain, so its exclusive call is made on W itself:
 * W asleep inside the call is W queued at the gate. Off the domain the call
 * would be handed to a worker, and W would sleep on that hand-off while the
 * worker (sharing CPU b with R1 and R2) had not yet asked for the gate; R2
 * could then join R1 with no writer waiting (seen once in the 4-node VM). */
static void *w_thread(void *p)
{
    struct fair_case *f = p;
    pin_self(f->a_cpu);
    atomic_store(&f->w_tid, (int)tid_self());
    atomic_store(&f->w_calling, 1);
    f->w_rc = spy_call(f->ca);
    return NULL;
}

static void *r2_thread(void *p)
{
    struct fair_case *f = p;
    pin_self(f->b_cpu);
    atomic_store(&f->r2_tid, (int)tid_self());
    atomic_store(&f->r2_calling, 1);
    f->r2_rc = spy_call(f->c2);
    return NULL;
}

static bool w_calling(void *p)
{
    return atomic_load(&((struct fair_case *)p)->w_calling) != 0;
}

static bool r2_calling(void *p)
{
    return atomic_load(&((struct fair_case *)p)->r2_calling) != 0;
}

/* R1 (strict, B) holds the gate shared; W (exclusive, A) asks for it and
 * waits; R2 (strict, B) arrives after W: it must queue behind W, not join
 * R1, or a stream of strict calls would hold W back for ever. */
Test(runtime_two_runtimes, a_stream_of_strict_calls_cannot_hold_an_exclusive_call_back)
{
    unsigned a, b;
    two_cpus(&a, &b);
    struct fair_case f = {.a_cpu = a, .b_cpu = b};
    struct spy sa = {.during = exclusive_during, .arg = &f},
               sb = {.during = strict_during, .arg = &f};
    atomic_store(&library_count, 1);
    nxr_provider_t *pa = spy_create(&sa), *pb = spy_create(&sb);
    char domains[64];
    snprintf(domains, sizeof domains, "0:%u,%u", a, b);
    struct rt_opts ro = {.allowed = hwloc_bitmap_alloc(),
                         .domains = domains,
                         .policy = NXR_PROVIDER_PROCESS_EXCLUSIVE,
                         .gemm = pa};
    hwloc_bitmap_zero(ro.allowed);
    hwloc_bitmap_set(ro.allowed, a);
    hwloc_bitmap_set(ro.allowed, b);
    nxr_runtime_t *ra = open_rt(&ro);
    ro.domains = NULL;
    ro.policy = NXR_PROVIDER_STRICT;
    ro.gemm = pb;
    hwloc_bitmap_only(ro.allowed, b);
    nxr_runtime_t *rb = open_rt(&ro);
    hwloc_bitmap_free(ro.allowed);
    f.ca = ctx_of(ra);
    f.c1 = ctx_of(rb);
    f.c2 = ctx_of(rb);

    pthread_t r1 = start(r1_thread, &f);
    nxr_test_wait_at_least(&f.r1_inside, 1, MEET_MS);
    pthread_t w = start(w_thread, &f);
    nxr_test_wait_at_least(&f.w_tid, 1, MEET_MS);
    bool w_waited = nxr_test_wait_asleep((pid_t)atomic_load(&f.w_tid), w_calling, &f, MEET_MS);
    pthread_t r2 = start(r2_thread, &f);
    nxr_test_wait_at_least(&f.r2_tid, 1, MEET_MS);
    bool r2_waited = nxr_test_wait_asleep((pid_t)atomic_load(&f.r2_tid), r2_calling, &f, MEET_MS);
    int r2_seq_before_release = atomic_load(&f.r2_seq);
    atomic_store(&f.release_r1, 1);
    pthread_join(r1, NULL);
    pthread_join(w, NULL);
    pthread_join(r2, NULL);

    cr_assert(w_waited, "the exclusive call waited for the strict call inside the gate");
    cr_assert(r2_waited, "the later strict call waited behind the exclusive one");
    cr_assert_eq(r2_seq_before_release, 0, "the later strict call got in beside the first");
    cr_assert_eq(f.w_rc, 0, "%s", nxr_strerror(f.w_rc));
    cr_assert_eq(f.r2_rc, 0, "%s", nxr_strerror(f.r2_rc));
    cr_assert_lt(atomic_load(&f.w_seq), atomic_load(&f.r2_seq),
                 "the exclusive call (%d) ran before the strict one that came after it (%d)",
                 atomic_load(&f.w_seq), atomic_load(&f.r2_seq));
    cr_assert_eq(atomic_load(&library_count), 1, "the count is back at rest");

    nxr_ctx_destroy(f.ca);
    nxr_ctx_destroy(f.c1);
    nxr_ctx_destroy(f.c2);
    nxr_runtime_destroy(ra);
    nxr_runtime_destroy(rb);
    nxr_provider_destroy(pa);
    nxr_provider_destroy(pb);
}

/* ---- OpenBLAS's count as a new runtime records it ------------------------------------- */

/* The spy's count is OpenBLAS's own here: what a new runtime's probe reads. */
static int ob_get(void *self)
{
    (void)self;
    return openblas_get_num_threads();
}

static void ob_set(void *self, int count)
{
    (void)self;
    openblas_set_num_threads(count);
}

static const struct nxr_global_threads_ops ob_threads = {.get = ob_get, .set = ob_set};

struct probe_case {
    nxr_ctx_t *ca;
    pid_t main_tid;     /* the thread that makes runtime C */
    atomic_int go;      /* A's count is set */
    atomic_int making;  /* C's creation has begun */
    atomic_int created; /* ... and returned */
    int created_during; /* ... while A's count was still set */
    int count_in_call;  /* OpenBLAS's count during A's call */
    int a_rc;
};

static bool making_c(void *p)
{
    return atomic_load(&((struct probe_case *)p)->making) != 0;
}

/* A's call, OpenBLAS's count set to 2: C's creation reaches its probe and
 * must wait there (asleep, on the gate) until the count is back. */
static void create_during(struct spy *s)
{
    struct probe_case *c = s->arg;
    c->count_in_call = openblas_get_num_threads();
    atomic_store(&c->go, 1);
    nxr_test_wait_asleep(c->main_tid, making_c, c, MEET_MS);
    c->created_during = atomic_load(&c->created);
}

static void *a_call_thread(void *p)
{
    struct probe_case *c = p;
    c->a_rc = spy_call(c->ca); /* exclusive: sets OpenBLAS's count to 2 meanwhile */
    return NULL;
}

Test(runtime_two_runtimes, a_runtime_made_during_an_exclusive_call_records_the_resting_count)
{
    unsigned a, b;
    two_cpus(&a, &b);
    if (openblas_get_parallel() == 0)
        cr_skip_test("this OpenBLAS is sequential: it has no count to move");
    const int original = openblas_get_num_threads();
    openblas_set_num_threads(1);
    struct probe_case c = {.main_tid = tid_self()};
    struct spy s = {.during = create_during, .arg = &c};
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "openblas-count-spy";
    d.count = NXR_COUNT_GLOBAL_OR_UNCONTROLLED;
    d.runs_on = NXR_RUNS_ON_EXTERNAL_WORKERS;
    d.gemm = &spy_gemm;
    d.global_threads = &ob_threads;
    d.self = &s;
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    char domains[64];
    snprintf(domains, sizeof domains, "0:%u,%u", a, b);
    struct rt_opts ro = {.domains = domains, .policy = NXR_PROVIDER_PROCESS_EXCLUSIVE, .gemm = p};
    nxr_runtime_t *ra = open_rt(&ro);
    c.ca = ctx_of(ra);
    cr_assert_eq(nxr_ctx_budget(c.ca), 2u);

    /* A's exclusive call on a thread; runtime C made here meanwhile. */
    pthread_t t = start(a_call_thread, &c);
    nxr_test_wait_at_least(&c.go, 1, MEET_MS);
    cr_assert_eq(atomic_load(&c.go), 1, "A's call started");
    atomic_store(&c.making, 1);
    nxr_runtime_t *rc_rt = open_on(b);
    atomic_store(&c.created, 1);
    pthread_join(t, NULL);
    cr_assert_eq(c.a_rc, 0, "%s", nxr_strerror(c.a_rc));
    cr_assert_eq(c.count_in_call, 2, "A's call ran at its budget");
    cr_assert_eq(c.created_during, 0, "C's probe waited for A's count to be put back");
    cr_assert_eq(rc_rt->openblas.threads, 1, "C recorded the resting count, not A's transient one");

    nxr_runtime_destroy(rc_rt);
    nxr_ctx_destroy(c.ca);
    nxr_runtime_destroy(ra);
    nxr_provider_destroy(p);
    openblas_set_num_threads(original);
}

/* ---- the floating-point environment record ---------------------------------------- */

static bool describes_ftz(const nxr_runtime_t *rt)
{
    char *json;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_JSON, &json), 0);
    bool on = strstr(json, "\"flush_to_zero\":true") != NULL;
    cr_assert(on || strstr(json, "\"flush_to_zero\":false") != NULL, "%s", json);
    free(json);
    /* Text names the environment only when it is not the default. */
    char *text;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_TEXT, &text), 0);
    static const char label[] = "fpenv: not the default (flush-to-zero ";
    const char *line = strstr(text, label);
    if (on)
        cr_expect(line != NULL && strncmp(line + strlen(label), "on, denormals-are-zero ", 23) == 0,
                  "%s", text);
    else /* the default, or not for another reason (denormals-are-zero) */
        cr_expect(line == NULL || strncmp(line + strlen(label), "off, ", 5) == 0, "%s", text);
    free(text);
    return on;
}

Test(runtime_two_runtimes, each_runtime_records_its_own_fp_environment)
{
    unsigned a, b;
    two_cpus(&a, &b);
    if (!nxr__fpenv_supported() || nxr__fpenv_ftz_bit() == 0)
        cr_skip_test("this architecture has no observable flush-to-zero bit");
    unsigned saved = nxr__fpenv_read_control();
    nxr__fpenv_write_control(saved | nxr__fpenv_ftz_bit());
    nxr_runtime_t *ra = open_on(a); /* created with flush-to-zero on */
    nxr__fpenv_write_control(saved & ~nxr__fpenv_ftz_bit());
    nxr_runtime_t *rb = open_on(b); /* and with it off */
    nxr__fpenv_write_control(saved);
    cr_assert(describes_ftz(ra));
    cr_assert_not(describes_ftz(rb));
    nxr_runtime_destroy(ra);
    cr_assert_not(describes_ftz(rb), "destroying A changed nothing of B's");
    nxr_runtime_destroy(rb);
}
