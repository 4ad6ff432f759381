/*
 * Kernel calls through contexts, shared test helpers: opening a real
 * runtime with given domains, budget cap, provider policy and providers; a
 * context per domain; the team behind a context (for its region counters);
 * and a fake GEMM provider of any classification that records how and
 * where nxr called it (threads granted, exec handed over, calling thread,
 * the arbiter's state and its fake process-global count during the call).
 */
#ifndef NXR_TESTS_KERNELS_CTX_SUPPORT_H
#define NXR_TESTS_KERNELS_CTX_SUPPORT_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/internal/fpenv_arch.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"

/* ---- runtimes ------------------------------------------------------------- */

struct ctx_rt_opts {
    /* NULL: one domain (id 0) over the process's whole allowed set; on a
     * one-node machine that is the default layout, and on a multi-node one
     * (the VM runs) it keeps "the domain is the whole allowed set" true. */
    const char *domains;
    int num_threads; /* 0: no cap */
    enum nxr_provider_policy policy; /* NXR_PROVIDER_POLICY_DEFAULT: strict (env ignored) */
    nxr_provider_t *gemm;
};

static inline void ctx_rt_opts_init(struct ctx_rt_opts *o)
{
    memset(o, 0, sizeof *o);
    o->policy = NXR_PROVIDER_POLICY_DEFAULT;
}

/* A runtime (env ignored, short spin: several runtimes may share the two
 * CPUs in one test) and one context per domain, in domain order. */
struct ctx_rt {
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx[8];
    size_t nctx;
};

static inline void ctx_rt_open(struct ctx_rt *r, const struct ctx_rt_opts *ro)
{
    static char whole[512];
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.domains = ro->domains;
    if (o.domains == NULL) {
        cpu_set_t set;
        cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
        size_t len = (size_t)snprintf(whole, sizeof whole, "0:");
        for (int cpu = 0; cpu < CPU_SETSIZE && len < sizeof whole - 8; cpu++) {
            if (CPU_ISSET(cpu, &set))
                len += (size_t)snprintf(whole + len, sizeof whole - len, "%s%d",
                                        whole[len - 1] == ':' ? "" : ",", cpu);
        }
        o.domains = whole;
    }
    o.num_threads = ro->num_threads;
    o.provider_policy = ro->policy;
    o.providers[NXR_FAMILY_GEMM] = ro->gemm;
    o.spin = 256;
    memset(r, 0, sizeof *r);
    int rc = nxr_runtime_create(&o, &r->rt);
    cr_assert_eq(rc, 0, "runtime '%s': %s (%s)", ro->domains ? ro->domains : "default",
                 nxr_strerror(rc), nxr_last_error());
    r->nctx = nxr_runtime_domain_count(r->rt);
    cr_assert_leq(r->nctx, 8);
    for (size_t i = 0; i < r->nctx; i++) {
        nxr_domain_t *d = nxr_runtime_domain_at(r->rt, i);
        cr_assert_eq(nxr_ctx_create(r->rt, nxr_domain_id(d), &r->ctx[i]), 0);
    }
}

static inline void ctx_rt_close(struct ctx_rt *r)
{
    for (size_t i = 0; i < r->nctx; i++)
        nxr_ctx_destroy(r->ctx[i]);
    nxr_runtime_destroy(r->rt);
    memset(r, 0, sizeof *r);
}

/* The built-in team behind a context (NULL for external executors). */
static inline struct nxr__team *ctx_team(const nxr_ctx_t *ctx)
{
    return ctx->exec->team;
}

static inline uint64_t ctx_regions(const nxr_ctx_t *ctx)
{
    return nxr__team_regions(ctx_team(ctx));
}

static inline uint64_t ctx_nested_regions(const nxr_ctx_t *ctx)
{
    return nxr__team_nested_regions(ctx_team(ctx));
}

static inline struct nxr__arbiter_stats ctx_arbiter(const nxr_runtime_t *rt)
{
    struct nxr__arbiter_stats s;
    nxr__arbiter_stats(rt->arbiter, &s);
    return s;
}

/* ---- a fake GEMM provider of any classification ------------------------------ */

enum fake_act {
    FAKE_RECORD = 0,     /* record and return 0 */
    FAKE_FLIP_FTZ = 1,   /* ... and set flush-to-zero on the calling thread */
    FAKE_MOVE_COUNT = 2, /* ... and change its own global count */
};

struct fake {
    enum fake_act act;
    const nxr_runtime_t *rt; /* whose arbiter to look at during the call */
    /* The fake process-global count (GLOBAL providers): get/set. */
    atomic_int global;
    atomic_int sets; /* set calls */
    /* What the calls saw: the number of calls and the last call's view.
     * Atomic so that concurrent calls (from inside a loop body) are not a
     * data race; arbiter is recorded only when rt is set, by tests that call
     * from one thread. */
    atomic_int calls;
    atomic_uint threads;
    atomic_bool fanned;  /* the call carried parallel_for */
    atomic_ulong thread; /* pthread_self() of the caller, as an integer */
    atomic_int cpu;      /* sched_getcpu() of the caller */
    atomic_int global_seen;
    struct nxr__arbiter_stats arbiter;
};

static inline int fake_sgemm(void *self, const struct nxr_kernel_call *call,
                             const struct nxr_sgemm_args *args)
{
    struct fake *f = self;
    (void)args;
    /* Relaxed: the test reads the counters after the call returned (the
     * call's own synchronisation orders them). */
    atomic_fetch_add_explicit(&f->calls, 1, memory_order_relaxed);
    atomic_store_explicit(&f->threads, call->threads, memory_order_relaxed);
    atomic_store_explicit(&f->fanned, call->parallel_for != NULL, memory_order_relaxed);
    atomic_store_explicit(&f->thread, (unsigned long)pthread_self(), memory_order_relaxed);
    atomic_store_explicit(&f->cpu, sched_getcpu(), memory_order_relaxed);
    atomic_store_explicit(&f->global_seen, atomic_load_explicit(&f->global, memory_order_relaxed),
                          memory_order_relaxed);
    if (f->rt != NULL)
        f->arbiter = ctx_arbiter(f->rt);
    if (f->act == FAKE_FLIP_FTZ)
        nxr__fpenv_write_control(nxr__fpenv_read_control() | nxr__fpenv_ftz_bit());
    if (f->act == FAKE_MOVE_COUNT)
        atomic_store_explicit(&f->global, 7, memory_order_relaxed);
    return 0;
}

static inline int fake_get(void *self)
{
    return atomic_load_explicit(&((struct fake *)self)->global, memory_order_relaxed);
}

static inline void fake_set(void *self, int count)
{
    struct fake *f = self;
    atomic_fetch_add_explicit(&f->sets, 1, memory_order_relaxed);
    atomic_store_explicit(&f->global, count, memory_order_relaxed);
}

static const struct nxr_gemm_ops fake_gemm_ops = {.sgemm = fake_sgemm};
static const struct nxr_global_threads_ops fake_global_ops = {.get = fake_get, .set = fake_set};

/* A foreign provider of the given class over f (global ops only for GLOBAL). */
static inline nxr_provider_t *fake_create(struct fake *f, enum nxr_count_control count,
                                          enum nxr_provider_runs_on placement, int global)
{
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = "fake";
    d.family = NXR_FAMILY_GEMM;
    d.count = count;
    d.runs_on = placement;
    d.gemm = &fake_gemm_ops;
    d.global_threads = count == NXR_COUNT_GLOBAL_OR_UNCONTROLLED ? &fake_global_ops : NULL;
    d.self = f;
    atomic_init(&f->global, global);
    atomic_init(&f->sets, 0);
    atomic_init(&f->calls, 0);
    atomic_init(&f->threads, 0);
    atomic_init(&f->fanned, false);
    atomic_init(&f->thread, 0);
    atomic_init(&f->cpu, -1);
    atomic_init(&f->global_seen, 0);
    nxr_provider_t *p;
    cr_assert_eq(nxr_provider_create(&d, &p), 0);
    return p;
}

/* Any valid arguments: the fake never reads them. */
static inline struct nxr_sgemm_args fake_args(void)
{
    static float a[4], b[4], c[4];
    return (struct nxr_sgemm_args){
        .m = 2, .n = 2, .k = 2, .alpha = 1, .a = a, .lda = 2, .b = b, .ldb = 2, .c = c, .ldc = 2};
}

static inline int fake_calls(struct fake *f)
{
    return atomic_load_explicit(&f->calls, memory_order_relaxed);
}

static inline unsigned fake_threads(struct fake *f)
{
    return atomic_load_explicit(&f->threads, memory_order_relaxed);
}

static inline bool fake_fanned(struct fake *f)
{
    return atomic_load_explicit(&f->fanned, memory_order_relaxed);
}

static inline int fake_cpu(struct fake *f)
{
    return atomic_load_explicit(&f->cpu, memory_order_relaxed);
}

/* Whether the calling thread's whole affinity lies inside cpus. */
static inline bool thread_inside(hwloc_const_bitmap_t cpus)
{
    if (cpus == NULL)
        return false;
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            hwloc_bitmap_set(mine, (unsigned)c);
    bool inside = hwloc_bitmap_isincluded(mine, cpus);
    hwloc_bitmap_free(mine);
    return inside;
}

static inline bool fake_ran_here(struct fake *f)
{
    return atomic_load_explicit(&f->thread, memory_order_relaxed) == (unsigned long)pthread_self();
}

static inline int fake_global(struct fake *f)
{
    return atomic_load_explicit(&f->global, memory_order_relaxed);
}

static inline int fake_global_seen(struct fake *f)
{
    return atomic_load_explicit(&f->global_seen, memory_order_relaxed);
}

#endif /* NXR_TESTS_KERNELS_CTX_SUPPORT_H */
