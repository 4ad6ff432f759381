/*
 * Provider placement through a context: a fake GEMM provider of each class
 * (kernels/internal/rules.h), injected with opts.providers, is run or
 * rejected by nxr_sgemm(ctx, ...) exactly as the rules say, on a real
 * runtime:
 *  - budget 1: every class runs inline, on the calling thread, one thread,
 *    no permit taken;
 *  - strict policy on a domain that is not the whole allowed set: a
 *    provider whose threads could leave the domain is NXR_EPLACEMENT and
 *    never runs; engine-worker and calling-thread providers still run;
 *  - a domain that is the whole allowed set: such providers run under the
 *    domain's permit (a global count above the budget is still rejected);
 *  - process-exclusive policy: the call holds the exclusive permit, sees its
 *    global count set to the budget, and finds it restored afterwards;
 *  - a caller-managed domain never runs external-worker providers;
 *  - from inside a loop body, a call that needs the exclusive permit is
 *    -EBUSY, and engine providers run inline with one thread.
 *
 * Partial domains with a budget above one need three or more allowed CPUs.
 * This machine has two, so one test simulates a wider process by adding a
 * CPU id to the runtime's recorded allowed set after creation (what
 * kernel_call.c compares the domain with); the same rule on real CPUs runs
 * where there are at least three, and skips with a reason elsewhere.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include "ctx_support.h"
#include "examples/pool_executor.h"

TestSuite(kernels_ctx_rules, .timeout = 60);

struct cls {
    enum nxr_count_control count;
    enum nxr_provider_runs_on placement;
    const char *name;
};

#define PCB_ENGINE                                                                                 \
    {                                                                                              \
        NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_ENGINE_WORKERS, "per-call x engine"                  \
    }
#define SEQ_CALLER                                                                                 \
    {                                                                                              \
        NXR_COUNT_SEQUENTIAL, NXR_RUNS_ON_CALLING_THREAD, "sequential x caller"                    \
    }
#define CLAMP_CALLER                                                                               \
    {                                                                                              \
        NXR_COUNT_CLAMP_TO_ONE, NXR_RUNS_ON_CALLING_THREAD, "clamp x caller"                       \
    }
#define PCB_EXTERNAL                                                                               \
    {                                                                                              \
        NXR_COUNT_PER_CALL_BOUND, NXR_RUNS_ON_EXTERNAL_WORKERS, "per-call x external"              \
    }
#define GLOBAL_EXTERNAL                                                                            \
    {                                                                                              \
        NXR_COUNT_GLOBAL_OR_UNCONTROLLED, NXR_RUNS_ON_EXTERNAL_WORKERS, "global x external"        \
    }

static const struct cls every_class[] = {PCB_ENGINE, SEQ_CALLER, CLAMP_CALLER, PCB_EXTERNAL,
                                         GLOBAL_EXTERNAL};

/* A runtime whose GEMM slot is a fake of class c (global count `global`). */
static nxr_provider_t *open_fake(struct ctx_rt *r, struct fake *f, struct cls c, int global,
                                 const char *domains, int num_threads, int policy)
{
    memset(f, 0, sizeof *f);
    nxr_provider_t *p = fake_create(f, c.count, c.placement, global);
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    o.domains = domains != NULL ? nxr_test_expand(domains) : NULL; /* tests/support/cpus.h */
    o.num_threads = num_threads;
    o.policy = policy;
    o.gemm = p;
    ctx_rt_open(r, &o);
    f->rt = r->rt;
    return p;
}

static void close_fake(struct ctx_rt *r, nxr_provider_t *p)
{
    ctx_rt_close(r);
    nxr_provider_destroy(p);
}

static int call(nxr_ctx_t *ctx)
{
    struct nxr_sgemm_args g = fake_args();
    return nxr_sgemm(ctx, &g);
}

/*
 * The call ran once with exactly `threads` threads, with or without the
 * domain's workers handed over (call->parallel_for), and on the domain: a
 * call that fans out is made on the calling thread (its chunks go to the
 * workers); a one-thread call runs on the calling thread when that thread
 * is inside the domain, else on another thread, one of the domain's CPUs.
 */
static void expect_ran(struct fake *f, int rc, unsigned threads, bool fanned, const nxr_ctx_t *ctx,
                       const char *what)
{
    cr_assert_eq(rc, 0, "%s: %s", what, nxr_strerror(rc));
    cr_assert_eq(fake_calls(f), 1, "%s: ran once", what);
    cr_assert_eq(fake_threads(f), threads, "%s: call->threads %u, want %u", what, fake_threads(f),
                 threads);
    cr_assert_eq(fake_fanned(f), fanned, "%s: call->parallel_for %s", what,
                 fanned ? "missing" : "set");
    hwloc_const_bitmap_t cpus = nxr_domain_cpuset(nxr_ctx_domain(ctx));
    if (fanned || thread_inside(cpus)) {
        cr_assert(fake_ran_here(f), "%s: ran on the calling thread", what);
    } else {
        cr_assert_not(fake_ran_here(f), "%s: the caller is outside the domain, a worker ran it",
                      what);
        if (cpus != NULL)
            cr_assert(hwloc_bitmap_isset(cpus, (unsigned)fake_cpu(f)),
                      "%s: ran on CPU %d, outside the domain", what, fake_cpu(f));
    }
}

static void expect_rejected(struct fake *f, int rc, int want, const char *what)
{
    cr_assert_eq(rc, want, "%s: got %d (%s), want %s", what, rc, nxr_strerror(rc),
                 nxr_strerror(want));
    cr_assert_eq(fake_calls(f), 0, "%s: the provider never ran", what);
}

/* Simulates a process allowed one CPU more than the runtime's domains
 * cover (the set a provider's own threads may run on is the process's,
 * topo.process): the domain is then no longer the whole allowed set. Undone
 * by narrow_back before the runtime is destroyed. */
static int widen_allowed(nxr_runtime_t *rt)
{
    int extra = hwloc_bitmap_last(rt->topo.process) + 1;
    hwloc_bitmap_set(rt->topo.process, (unsigned)extra);
    return extra;
}

static void narrow_back(nxr_runtime_t *rt, int extra)
{
    hwloc_bitmap_clr(rt->topo.process, (unsigned)extra);
}

static unsigned default_budget(void)
{
    struct ctx_rt r;
    struct ctx_rt_opts o;
    ctx_rt_opts_init(&o);
    ctx_rt_open(&r, &o);
    unsigned b = nxr_ctx_budget(r.ctx[0]);
    ctx_rt_close(&r);
    return b;
}

/* ---- budget 1 --------------------------------------------------------------- */

Test(kernels_ctx_rules, budget_one_runs_every_class_inline)
{
    /* One CPU per domain (partial domains), and the whole set capped at 1. */
    const struct {
        const char *domains;
        int num_threads;
    } configs[] = {{"0:%0;1:%1", 0}, {NULL, 1}};
    if (nxr_test_cpu_count() < 2)
        cr_skip_test("\"0:0;1:1\" needs two CPUs");
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++)
        for (size_t k = 0; k < sizeof every_class / sizeof every_class[0]; k++) {
            struct ctx_rt r;
            struct fake f;
            /* A global count of 1: the only count a strict budget-1 call accepts. */
            nxr_provider_t *p = open_fake(&r, &f, every_class[k], 1, configs[ci].domains,
                                          configs[ci].num_threads, NXR_PROVIDER_STRICT);
            for (size_t d = 0; d < r.nctx; d++) {
                char what[96];
                snprintf(what, sizeof what, "%s on domain %zu of '%s'", every_class[k].name, d,
                         configs[ci].domains ? configs[ci].domains : "default/1");
                cr_assert_eq(nxr_ctx_budget(r.ctx[d]), 1u);
                atomic_store(&f.calls, 0);
                expect_ran(&f, call(r.ctx[d]), 1, false, r.ctx[d], what);
                cr_assert_not(f.arbiter.exclusive_held, "%s: no exclusive permit", what);
                bool inside = thread_inside(nxr_domain_cpuset(nxr_ctx_domain(r.ctx[d])));
                cr_assert_eq(f.arbiter.holders, inside ? 0u : 1u, "%s: %s", what,
                             inside ? "inline takes no permit"
                                    : "a hand-off to a worker holds the domain's permit");
                cr_assert_eq(atomic_load(&f.sets), 0, "%s: the global count is not touched", what);
            }
            close_fake(&r, p);
        }
}

/* ---- strict placement, partial domains ------------------------------------- */

/* One CPU per domain, budget 1: a process-global count of 2 would put
 * OpenBLAS-style workers outside the domain. */
Test(kernels_ctx_rules, strict_partial_domain_rejects_a_global_count_above_one)
{
    if (nxr_test_cpu_count() < 2)
        cr_skip_test("\"0:0;1:1\" needs two CPUs");
    struct ctx_rt r;
    struct fake f;
    const struct cls c = GLOBAL_EXTERNAL;
    nxr_provider_t *p = open_fake(&r, &f, c, 2, "0:%0;1:%1", 0, NXR_PROVIDER_STRICT);
    for (size_t d = 0; d < r.nctx; d++)
        expect_rejected(&f, call(r.ctx[d]), NXR_EPLACEMENT, "global count 2, partial domain");
    cr_assert_eq(fake_global(&f), 2, "the count is only read");
    cr_assert_eq(atomic_load(&f.sets), 0);
    close_fake(&r, p);
}

/* Budget 2 on a domain that is not the whole allowed set (simulated: see
 * the file comment). */
Test(kernels_ctx_rules, strict_partial_domain_with_budget_two)
{
    if (default_budget() < 2)
        cr_skip_test("the default domain has one CPU");
    const struct cls rejected[] = {PCB_EXTERNAL, GLOBAL_EXTERNAL};
    for (size_t k = 0; k < 2; k++) {
        struct ctx_rt r;
        struct fake f;
        nxr_provider_t *p = open_fake(&r, &f, rejected[k], 2, NULL, 0, NXR_PROVIDER_STRICT);
        int extra = widen_allowed(r.rt);
        expect_rejected(&f, call(r.ctx[0]), NXR_EPLACEMENT, rejected[k].name);
        narrow_back(r.rt, extra);
        /* Control: the same call on the whole allowed set runs, a global
         * provider at its own count (2, within the budget). */
        unsigned want =
            rejected[k].count == NXR_COUNT_GLOBAL_OR_UNCONTROLLED ? 2u : nxr_ctx_budget(r.ctx[0]);
        expect_ran(&f, call(r.ctx[0]), want, false, r.ctx[0], rejected[k].name);
        close_fake(&r, p);
    }
    /* Providers that stay inside the domain keep running there. */
    const struct cls kept[] = {PCB_ENGINE, SEQ_CALLER, CLAMP_CALLER};
    for (size_t k = 0; k < 3; k++) {
        struct ctx_rt r;
        struct fake f;
        nxr_provider_t *p = open_fake(&r, &f, kept[k], 0, NULL, 0, NXR_PROVIDER_STRICT);
        int extra = widen_allowed(r.rt);
        bool engine = kept[k].placement == NXR_RUNS_ON_ENGINE_WORKERS;
        expect_ran(&f, call(r.ctx[0]), engine ? nxr_ctx_budget(r.ctx[0]) : 1, engine, r.ctx[0],
                   kept[k].name);
        narrow_back(r.rt, extra);
        close_fake(&r, p);
    }
}

/* The same rule on real CPUs: a declared domain of two CPUs when the
 * process is allowed more. */
Test(kernels_ctx_rules, strict_partial_domain_on_real_cpus)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    if (CPU_COUNT(&set) < 3)
        cr_skip_test("needs at least three allowed CPUs (this process has %d)", CPU_COUNT(&set));
    int cpus[2], n = 0;
    for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
        if (CPU_ISSET(i, &set))
            cpus[n++] = i;
    char domains[64];
    snprintf(domains, sizeof domains, "0:%d,%d", cpus[0], cpus[1]);
    struct ctx_rt r;
    struct fake f;
    const struct cls c = PCB_EXTERNAL;
    nxr_provider_t *p = open_fake(&r, &f, c, 0, domains, 0, NXR_PROVIDER_STRICT);
    cr_assert_eq(nxr_ctx_budget(r.ctx[0]), 2u);
    expect_rejected(&f, call(r.ctx[0]), NXR_EPLACEMENT, domains);
    close_fake(&r, p);
}

/* ---- strict placement, the whole allowed set ---------------------------------- */

static void whole_set_case(const char *domains)
{
    const struct cls pcb = PCB_EXTERNAL, global = GLOBAL_EXTERNAL, engine = PCB_ENGINE;
    struct ctx_rt r;
    struct fake f;

    /* Its own threads, confined by the domain: under the domain's permit. */
    nxr_provider_t *p = open_fake(&r, &f, pcb, 0, domains, 0, NXR_PROVIDER_STRICT);
    unsigned budget = nxr_ctx_budget(r.ctx[0]);
    expect_ran(&f, call(r.ctx[0]), budget, false, r.ctx[0], "per-call x external, whole set");
    cr_assert_geq(f.arbiter.holders, 1u, "the domain's permit is held during the call");
    cr_assert_not(f.arbiter.exclusive_held);
    cr_assert_eq(ctx_arbiter(r.rt).holders, 0u, "and released after it");
    close_fake(&r, p);

    /* A global count within the budget runs at that count, untouched. */
    p = open_fake(&r, &f, global, 2, domains, 0, NXR_PROVIDER_STRICT);
    expect_ran(&f, call(r.ctx[0]), 2, false, r.ctx[0], "global count 2, whole set");
    cr_assert_geq(f.arbiter.holders, 1u);
    cr_assert_eq(fake_global_seen(&f), 2);
    cr_assert_eq(atomic_load(&f.sets), 0, "strict never sets the count");
    close_fake(&r, p);

    /* Above the budget: it would run wider than granted. */
    p = open_fake(&r, &f, global, (int)budget + 1, domains, 0, NXR_PROVIDER_STRICT);
    expect_rejected(&f, call(r.ctx[0]), NXR_EPLACEMENT, "global count above the budget");
    close_fake(&r, p);

    /* A count of 1 runs inline, without a permit. */
    p = open_fake(&r, &f, global, 1, domains, 0, NXR_PROVIDER_STRICT);
    expect_ran(&f, call(r.ctx[0]), 1, false, r.ctx[0], "global count 1");
    cr_assert_eq(f.arbiter.holders, 0u);
    close_fake(&r, p);

    /* Engine workers: the context is handed over with the whole budget; the
     * provider enters the domain per region, so no permit around the call. */
    p = open_fake(&r, &f, engine, 0, domains, 0, NXR_PROVIDER_STRICT);
    expect_ran(&f, call(r.ctx[0]), budget, true, r.ctx[0], "engine workers");
    cr_assert_eq(f.arbiter.holders, 0u);
    close_fake(&r, p);
}

Test(kernels_ctx_rules, whole_allowed_set_is_accepted)
{
    if (default_budget() < 2)
        cr_skip_test("the default domain has one CPU");
    whole_set_case(NULL); /* one domain over exactly the allowed set */
}

/* ---- process-exclusive policy ------------------------------------------------------ */

Test(kernels_ctx_rules, exclusive_policy_holds_the_exclusive_permit_and_restores_the_count)
{
    const struct cls global = GLOBAL_EXTERNAL;
    struct ctx_rt r;
    struct fake f;
    nxr_provider_t *p = open_fake(&r, &f, global, 5, NULL, 0, NXR_PROVIDER_PROCESS_EXCLUSIVE);
    unsigned budget = nxr_ctx_budget(r.ctx[0]);
    uint64_t grants = ctx_arbiter(r.rt).exclusive_grants;
    expect_ran(&f, call(r.ctx[0]), budget, false, r.ctx[0], "exclusive");
    cr_assert(f.arbiter.exclusive_held, "the exclusive permit is held during the call");
    cr_assert_eq(fake_global_seen(&f), (int)budget, "the count is the budget during the call");
    cr_assert_eq(fake_global(&f), 5, "and restored after it");
    cr_assert_eq(atomic_load(&f.sets), 2, "set once, restored once");
    struct nxr__arbiter_stats after = ctx_arbiter(r.rt);
    cr_assert_not(after.exclusive_held, "released after the call");
    cr_assert_eq(after.exclusive_grants, grants + 1);
    close_fake(&r, p);

    /* Restored even when the provider moved the count itself. */
    p = open_fake(&r, &f, global, 5, NULL, 0, NXR_PROVIDER_PROCESS_EXCLUSIVE);
    f.act = FAKE_MOVE_COUNT;
    expect_ran(&f, call(r.ctx[0]), budget, false, r.ctx[0], "exclusive, count moved");
    cr_assert_eq(fake_global(&f), 5);
    close_fake(&r, p);

    /* Every call takes the permit, even at a count of 1 and budget 1. */
    if (nxr_test_cpu_count() >= 2) {
        p = open_fake(&r, &f, global, 3, "0:%0;1:%1", 0, NXR_PROVIDER_PROCESS_EXCLUSIVE);
        for (size_t d = 0; d < r.nctx; d++) {
            atomic_store(&f.calls, 0);
            expect_ran(&f, call(r.ctx[d]), 1, false, r.ctx[d], "exclusive, budget 1");
            cr_assert(f.arbiter.exclusive_held);
            cr_assert_eq(fake_global_seen(&f), 1);
            cr_assert_eq(fake_global(&f), 3);
        }
        close_fake(&r, p);
    }
}

Test(kernels_ctx_rules, exclusive_policy_runs_per_call_external_on_partial_domains_only)
{
    if (default_budget() < 2)
        cr_skip_test("the default domain has one CPU");
    const struct cls pcb = PCB_EXTERNAL;
    struct ctx_rt r;
    struct fake f;
    nxr_provider_t *p = open_fake(&r, &f, pcb, 0, NULL, 0, NXR_PROVIDER_PROCESS_EXCLUSIVE);
    /* Whole set: its threads cannot leave it, the domain's permit is enough. */
    unsigned budget = nxr_ctx_budget(r.ctx[0]);
    expect_ran(&f, call(r.ctx[0]), budget, false, r.ctx[0], "per-call x external, whole set");
    cr_assert_not(f.arbiter.exclusive_held);
    cr_assert_geq(f.arbiter.holders, 1u);
    /* Partial (simulated): the whole process. */
    int extra = widen_allowed(r.rt);
    atomic_store(&f.calls, 0);
    expect_ran(&f, call(r.ctx[0]), budget, false, r.ctx[0], "per-call x external, partial domain");
    cr_assert(f.arbiter.exclusive_held);
    cr_assert_eq(f.arbiter.holders, 0u, "no domain permit beside the exclusive one");
    narrow_back(r.rt, extra);
    close_fake(&r, p);
}

/* ---- caller-managed domains --------------------------------------------------------- */

Test(kernels_ctx_rules, caller_managed_domain_rejects_external_workers)
{
    if (nxr_test_cpu_count() < 2)
        cr_skip_test("the host pool wants its own CPU");
    const struct cls external[] = {PCB_EXTERNAL, GLOBAL_EXTERNAL};
    const int policies[] = {NXR_PROVIDER_STRICT, NXR_PROVIDER_PROCESS_EXCLUSIVE};
    for (size_t k = 0; k < 3; k++)
        for (size_t pi = 0; pi < 2; pi++) {
            const struct cls c = k < 2 ? external[k] : (struct cls)SEQ_CALLER;
            struct ctx_rt r;
            struct fake f;
            /* Count 1: even the count strict accepts inline elsewhere. */
            nxr_provider_t *p = open_fake(&r, &f, c, 1, "0:%0", 0, policies[pi]);
            cpu_set_t one; /* the pool on the last allowed CPU (off domain 0's if there are two) */
            CPU_ZERO(&one);
            CPU_SET(nxr_test_cpu(nxr_test_cpu_count() - 1), &one);
            struct host_pool *pool = host_pool_start(1, &one);
            cr_assert_not_null(pool);
            struct nxr_external_decl decl;
            nxr_external_decl_init(&decl);
            decl.id = 7;
            decl.admission = NXR_ADMISSION_CALLER_MANAGED;
            pool_executor_init(&decl.executor, pool);
            cr_assert_eq(nxr_runtime_attach(r.rt, &decl), 0);
            nxr_ctx_t *ctx;
            cr_assert_eq(nxr_ctx_create(r.rt, 7, &ctx), 0);
            if (k < 2)
                expect_rejected(&f, call(ctx), NXR_EPLACEMENT, c.name);
            else
                expect_ran(&f, call(ctx), 1, false, ctx, "calling-thread provider, caller-managed");
            cr_assert_eq(fake_global(&f), 1);
            nxr_ctx_destroy(ctx);
            close_fake(&r, p);
            host_pool_stop(pool);
        }
}

/* ---- from inside a loop body -------------------------------------------------------- */

struct nested {
    nxr_ctx_t *ctx[2]; /* one context per participant: kernel calls on one
                        * context must not overlap */
    atomic_int rc[2];
    atomic_int bodies;
};

static void nested_body(void *arg, size_t begin, size_t end, unsigned participant)
{
    struct nested *n = arg;
    atomic_fetch_add(&n->bodies, 1);
    for (size_t i = begin; i < end; i++)
        atomic_store(&n->rc[participant & 1], call(n->ctx[participant & 1]));
}

static void run_nested(struct ctx_rt *r, struct nested *n)
{
    memset(n, 0, sizeof *n);
    nxr_domain_t *d = nxr_ctx_domain(r->ctx[0]);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(nxr_ctx_create(r->rt, nxr_domain_id(d), &n->ctx[i]), 0);
    uint64_t regions = ctx_regions(r->ctx[0]);
    cr_assert_eq(nxr_parallel_for(r->ctx[0], 0, 2, 1, nested_body, n), 0);
    cr_assert_geq(atomic_load(&n->bodies), 1);
    cr_assert_eq(ctx_regions(r->ctx[0]), regions + 1, "the loop itself is the only region");
    cr_assert_eq(ctx_nested_regions(r->ctx[0]), 0u);
    for (int i = 0; i < 2; i++)
        nxr_ctx_destroy(n->ctx[i]);
}

Test(kernels_ctx_rules, nested_call_needing_the_exclusive_permit_is_reentrant, .timeout = 30)
{
    if (default_budget() < 2)
        cr_skip_test("the loop needs two participants");
    const struct cls global = GLOBAL_EXTERNAL;
    struct ctx_rt r;
    struct fake f;
    nxr_provider_t *p = open_fake(&r, &f, global, 5, NULL, 0, NXR_PROVIDER_PROCESS_EXCLUSIVE);
    f.rt = NULL; /* concurrent calls: no arbiter snapshot */
    uint64_t grants = ctx_arbiter(r.rt).exclusive_grants;
    struct nested n;
    run_nested(&r, &n);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(atomic_load(&n.rc[i]), NXR_EREENTRANT, "participant %d: %d (%s)", i,
                     atomic_load(&n.rc[i]), nxr_strerror(atomic_load(&n.rc[i])));
    cr_assert_eq(fake_calls(&f), 0, "the provider never ran");
    cr_assert_eq(ctx_arbiter(r.rt).exclusive_grants, grants, "no exclusive permit was taken");
    cr_assert_eq(fake_global(&f), 5);
    cr_assert_eq(atomic_load(&f.sets), 0);
    close_fake(&r, p);
}

Test(kernels_ctx_rules, nested_engine_call_runs_inline_with_one_thread, .timeout = 30)
{
    if (default_budget() < 2)
        cr_skip_test("the loop needs two participants");
    const struct cls engine = PCB_ENGINE;
    struct ctx_rt r;
    struct fake f;
    nxr_provider_t *p = open_fake(&r, &f, engine, 0, NULL, 0, NXR_PROVIDER_STRICT);
    f.rt = NULL;
    struct nested n;
    run_nested(&r, &n);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(atomic_load(&n.rc[i]), 0);
    cr_assert_eq(fake_calls(&f), 2);
    cr_assert_eq(fake_threads(&f), 1u, "one thread: the participant's own");
    cr_assert_not(fake_fanned(&f), "no parallel_for handed over: nothing may fan out");
    close_fake(&r, p);
}
