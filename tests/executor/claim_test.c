/*
 * Claimed slots (executor/team.c): a region never waits for a worker that
 * has not started, a worker that arrives after its region finished touches
 * nothing of it, and reductions come out bit-identical whoever ran which
 * block. Workers are made late with the team's claim hook (a worker blocks
 * there after it saw a region and before it claims), never with sleeps.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/internal/runtime.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

#define LIVE     0x4c495645u
#define DEAD     0x44454144u
#define BOUND_MS 20000 /* rendezvous bound: a broken test fails, never hangs */

/* Until the team counted `want` late arrivals (workers that found their
 * region finished). */
struct late_wait {
    struct nxr__team *team;
    uint64_t want;
};

static bool late_arrivals_reached(void *p)
{
    const struct late_wait *w = p;
    return nxr__team_late_arrivals(w->team) >= w->want;
}

static pid_t tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static struct nxr__team *make_team(unsigned size)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            hwloc_bitmap_set(cpus, (unsigned)c);
    struct nxr__team_opts o = {.domain_id = 0, .size = size, .spin = NXR__TEAM_SPIN_ADAPTIVE};
    struct nxr__team *team;
    char err[256];
    cr_assert_eq(nxr__team_create(&team, cpus, &o, err, sizeof err), 0, "%s", err);
    hwloc_bitmap_free(cpus);
    return team;
}

/* ---- the hook: hold one worker once, until released -------------------- */

struct holder {
    int worker;         /* the worker to hold */
    atomic_int used;    /* 1 once it has held it */
    atomic_int held;    /* 1 while the worker waits in the hook */
    atomic_int release; /* the test sets it to let the worker go */
    struct nxr__team_claim_hook hook;
};

static void hold_once(void *arg, unsigned worker, uint32_t gen)
{
    struct holder *h = arg;
    (void)gen;
    if ((int)worker != h->worker || atomic_exchange(&h->used, 1) != 0)
        return;
    atomic_store(&h->held, 1);
    nxr_test_wait_at_least(&h->release, 1, BOUND_MS);
    atomic_store(&h->held, 0);
}

static void holder_init(struct holder *h, int worker)
{
    memset(h, 0, sizeof(*h));
    h->worker = worker;
    h->hook = (struct nxr__team_claim_hook){.fn = hold_once, .arg = h};
}

/* ---- regions with canaries ---------------------------------------------- */

enum { REGIONS = 32, SLOTS = 2 };

struct region {
    unsigned canary; /* LIVE while its nxr__team_run call runs, then DEAD */
    pid_t ran_by[SLOTS];
    atomic_int calls[SLOTS];
};

static struct region regions[REGIONS];
static atomic_int dead_touches; /* a body ran on a region already finished */

static void slot_body(void *arg, unsigned slot, unsigned count)
{
    struct region *r = arg;
    if (r->canary != LIVE || count != SLOTS || slot >= SLOTS) {
        atomic_fetch_add(&dead_touches, 1);
        return;
    }
    r->ran_by[slot] = tid();
    atomic_fetch_add(&r->calls[slot], 1);
}

static void run_region(struct nxr__team *team, struct region *r, bool caller_joins)
{
    memset(r, 0, sizeof(*r));
    r->canary = LIVE;
    nxr__team_run(team, slot_body, r, SLOTS, caller_joins);
    r->canary = DEAD;
}

Test(executor_claim, a_late_worker_touches_nothing_of_finished_regions, .timeout = 60)
{
    struct nxr__team *team = make_team(1);
    struct holder h;
    holder_init(&h, 0);
    nxr__team_set_claim_hook(team, &h.hook);
    atomic_store(&dead_touches, 0);
    const pid_t me = tid();

    /* Worker 0 sees region 0 and blocks before it claims: the caller runs
     * both slots of every region, and each call returns. */
    run_region(team, &regions[0], true);
    nxr_test_wait_at_least(&h.held, 1, BOUND_MS);
    cr_assert_eq(atomic_load(&h.held), 1, "worker 0 never reached the hook");
    for (int i = 1; i < REGIONS; i++)
        run_region(team, &regions[i], true);
    for (int i = 0; i < REGIONS; i++) {
        for (int s = 0; s < SLOTS; s++) {
            cr_assert_eq(atomic_load(&regions[i].calls[s]), 1, "region %d slot %d ran %d times", i,
                         s, atomic_load(&regions[i].calls[s]));
            cr_assert_eq(regions[i].ran_by[s], me, "region %d slot %d ran off the caller", i, s);
        }
    }

    /* Let it go: it tries region 0, then the newest one, and finds both
     * claimed (two late arrivals), running nothing. */
    uint64_t late0 = nxr__team_late_arrivals(team);
    atomic_store(&h.release, 1);
    struct late_wait lw = {.team = team, .want = late0 + 2};
    nxr_test_wait_until(late_arrivals_reached, &lw, BOUND_MS);
    cr_assert_eq(nxr__team_late_arrivals(team), late0 + 2);
    cr_assert_eq(atomic_load(&dead_touches), 0, "a late worker ran a finished region's slot");
    for (int i = 0; i < REGIONS; i++)
        for (int s = 0; s < SLOTS; s++)
            cr_assert_eq(atomic_load(&regions[i].calls[s]), 1);
    nxr__team_set_claim_hook(team, NULL);
    nxr__team_destroy(team);
}

/* A slot body that, as slot 0, waits until slot 1 started elsewhere: forces
 * the order "the worker takes its own slot" (bounded). */
struct split {
    atomic_int started1;
    pid_t ran_by[SLOTS];
};

static void split_body(void *arg, unsigned slot, unsigned count)
{
    struct split *sp = arg;
    (void)count;
    sp->ran_by[slot] = tid();
    if (slot == 1)
        atomic_store(&sp->started1, 1);
    else
        nxr_test_wait_at_least(&sp->started1, 1, BOUND_MS);
}

Test(executor_claim, an_awake_worker_takes_its_own_slot, .timeout = 60)
{
    struct nxr__team *team = make_team(1);
    struct split sp = {0};
    nxr__team_run(team, split_body, &sp, SLOTS, true);
    cr_assert_eq(sp.ran_by[0], tid());
    cr_assert_neq(sp.ran_by[1], tid(), "slot 1 ran on the caller, not on the awake worker");
    cr_assert_eq(sp.ran_by[1], nxr__team_worker_tid(team, 0));
    nxr__team_destroy(team);
}

Test(executor_claim, awake_workers_run_the_slots_of_sleeping_ones, .timeout = 60)
{
    struct nxr__team *team = make_team(2);
    static struct holder holders[2];
    for (int held = 0; held < 2; held++) {
        struct holder *hp = &holders[held];
        holder_init(hp, held);
        nxr__team_set_claim_hook(team, &hp->hook);
        atomic_store(&dead_touches, 0);
        /* The caller does not join: the one worker not held runs both. */
        run_region(team, &regions[0], false);
        pid_t other = nxr__team_worker_tid(team, (unsigned)(1 - held));
        for (int s = 0; s < SLOTS; s++) {
            cr_assert_eq(atomic_load(&regions[0].calls[s]), 1);
            cr_assert_eq(regions[0].ran_by[s], other, "worker %d held: slot %d ran elsewhere", held,
                         s);
        }
        /* The held worker may not have seen the region at all (it was
         * parked and the awake one finished first); if it did, release it
         * and wait for its late arrival. */
        uint64_t late0 = nxr__team_late_arrivals(team);
        bool was_held = atomic_load(&hp->held) == 1;
        nxr__team_set_claim_hook(team, NULL);
        atomic_store(&hp->release, 1);
        if (was_held) {
            struct late_wait lw = {.team = team, .want = late0 + 1};
            nxr_test_wait_until(late_arrivals_reached, &lw, BOUND_MS);
            cr_assert_geq(nxr__team_late_arrivals(team), late0 + 1);
        }
        cr_assert_eq(atomic_load(&dead_touches), 0);
        cr_assert_eq(atomic_load(&regions[0].calls[0]) + atomic_load(&regions[0].calls[1]), 2);
    }
    nxr__team_destroy(team);
}

/* ---- reductions under forced claim orders -------------------------------- */

enum { GRAIN = 64, BLOCKS = 37, N = GRAIN * BLOCKS - 5 };

static float xs[N];

struct red_arg {
    pid_t caller;
    bool wait_for_worker; /* the caller's first map waits for a worker map */
    atomic_int worker_maps;
    atomic_int caller_maps;
};

static void sum_map(void *arg, size_t b, size_t e, void *partial)
{
    struct red_arg *a = arg;
    if (tid() == a->caller) {
        if (atomic_fetch_add(&a->caller_maps, 1) == 0 && a->wait_for_worker)
            nxr_test_wait_at_least(&a->worker_maps, 1, BOUND_MS);
    } else {
        atomic_fetch_add(&a->worker_maps, 1);
    }
    float *p = partial;
    for (size_t i = b; i < e; i++)
        *p += xs[i];
}

static void sum_combine(void *arg, void *result, const void *partial)
{
    (void)arg;
    *(float *)result += *(const float *)partial;
}

/* The documented result: each block of GRAIN folded from 0, then the block
 * partials added in block order. */
static float reference_sum(void)
{
    float result = 0.0f;
    for (size_t b = 0; b < N; b += GRAIN) {
        float p = 0.0f;
        for (size_t i = b; i < N && i < b + GRAIN; i++)
            p += xs[i];
        result += p;
    }
    return result;
}

static void fill(void)
{
    /* Every third block holds large values growing with the block, the
     * others small ones: both the association inside a range and the order
     * of the block partials show in the bits. */
    for (size_t i = 0; i < N; i++) {
        size_t b = i / GRAIN;
        xs[i] = b % 3 == 0 ? (i % 7 == 0 ? 3.0e7f : 0.37f * (float)(i % 13)) * (float)(1 + b * 97)
                           : 0.37f * (float)(i % 13 + 1);
    }
}

/* An executor that forwards to a team with a fixed "caller joins". */
struct fwd {
    struct nxr__team *team;
    bool joins;
};

static int fwd_install(void *self, nxr_region_fn fn, void *arg, unsigned count)
{
    struct fwd *f = self;
    nxr__team_run(f->team, fn, arg, count, f->joins);
    return 0;
}

static int fwd_submit(void *self, nxr_item_fn fn, void *arg, size_t count, nxr_done_fn done,
                      void *done_arg)
{
    (void)self, (void)fn, (void)arg, (void)count, (void)done, (void)done_arg;
    return -ENOSYS;
}

static const struct nxr_executor_ops fwd_ops = {.install = fwd_install, .submit = fwd_submit};

static float reduce_on(struct nxr__team *team, bool joins, unsigned budget, struct holder *h,
                       bool wait_for_worker, struct red_arg *a)
{
    struct fwd f = {.team = team, .joins = joins};
    struct nxr__exec exec;
    memset(&exec, 0, sizeof(exec));
    exec.executor = (struct nxr_executor){.ops = &fwd_ops,
                                          .self = &f,
                                          .workers = nxr__team_size(team),
                                          .flags = NXR_EXECUTOR_FANOUT,
                                          .owner = NXR_EXECUTOR_OWNED_BY_CALLER};
    /* No CPU set: never "inside". */
    struct nxr__domain_spec spec = {.budget = budget, .admission = NXR_ADMISSION_CALLER_MANAGED};
    exec.spec = &spec;
    cr_assert_eq(nxr__exec_admission_init(&exec, NULL), 0);
    memset(a, 0, sizeof(*a));
    a->caller = tid();
    a->wait_for_worker = wait_for_worker;
    if (h != NULL)
        nxr__team_set_claim_hook(team, &h->hook);
    float zero = 0.0f, result = -1.0f;
    cr_assert_eq(nxr__exec_parallel_reduce(&exec, 0, N, GRAIN, sizeof(float), &zero, sum_map,
                                           sum_combine, a, &result),
                 0);
    if (h != NULL) {
        nxr__team_set_claim_hook(team, NULL);
        atomic_store(&h->release, 1);
    }
    nxr__exec_admission_fini(&exec);
    return result;
}

static void assert_bits(float got, float want, const char *order)
{
    cr_assert_eq(memcmp(&got, &want, sizeof got), 0, "%s: %.9g, want %.9g", order, (double)got,
                 (double)want);
}

Test(executor_claim, reductions_are_bit_identical_under_every_claim_order, .timeout = 120)
{
    fill();
    const float want = reference_sum();
    float serial = 0.0f;
    for (size_t i = 0; i < N; i++)
        serial += xs[i];
    float reversed = 0.0f; /* the block partials added last to first */
    for (size_t b = (N - 1) / GRAIN + 1; b-- > 0;) {
        float p = 0.0f;
        for (size_t i = b * GRAIN; i < N && i < (b + 1) * GRAIN; i++)
            p += xs[i];
        reversed += p;
    }
    cr_assert_neq(memcmp(&serial, &want, sizeof want), 0,
                  "the data must make the association visible");
    cr_assert_neq(memcmp(&reversed, &want, sizeof want), 0,
                  "the data must make the order of the partials visible");

    struct red_arg a;
    /* One holder per use: a released worker may still be leaving the hook
     * of the previous one. */
    static struct holder h[3];
    struct nxr__team *one = make_team(1);
    /* The caller alone: worker 0 held before it claims. */
    holder_init(&h[0], 0);
    assert_bits(reduce_on(one, true, 2, &h[0], false, &a), want, "caller alone");
    cr_assert_eq(atomic_load(&a.worker_maps), 0);
    /* Caller and worker: the caller's first block waits for the worker. */
    assert_bits(reduce_on(one, true, 2, NULL, true, &a), want, "caller and worker");
    cr_assert_gt(atomic_load(&a.worker_maps), 0);
    cr_assert_gt(atomic_load(&a.caller_maps), 0);
    /* One participant, on the worker (a budget of one). */
    assert_bits(reduce_on(one, false, 1, NULL, false, &a), want, "budget 1, on a worker");
    cr_assert_eq(atomic_load(&a.caller_maps), 0);
    nxr__team_destroy(one);

    /* Workers only: each of two held in turn, then both free. */
    struct nxr__team *two = make_team(2);
    for (int held = 0; held < 2; held++) {
        holder_init(&h[1 + held], held);
        assert_bits(reduce_on(two, false, 2, &h[1 + held], false, &a), want,
                    held == 0 ? "worker 1 alone" : "worker 0 alone");
        cr_assert_eq(atomic_load(&a.caller_maps), 0);
    }
    assert_bits(reduce_on(two, false, 2, NULL, false, &a), want, "two workers");
    assert_bits(reduce_on(two, true, 3, NULL, false, &a), want, "caller and two workers");
    nxr__team_destroy(two);

    /* And through a context, with the machine's budget and with one. */
    for (int threads = 0; threads <= 1; threads++) {
        struct nxr_test_runtime fx;
        nxr_test_runtime_opts(&fx, NULL, NXR_TEST_CTX);
        fx.opts.num_threads = threads;
        NXR_TEST_RUNTIME_OPEN(&fx);
        nxr_ctx_t *ctx = fx.ctx;
        memset(&a, 0, sizeof(a));
        a.caller = tid();
        float zero = 0.0f, result = -1.0f;
        cr_assert_eq(nxr_parallel_reduce(ctx, 0, N, GRAIN, sizeof(float), &zero, sum_map,
                                         sum_combine, &a, &result),
                     0);
        assert_bits(result, want, threads == 1 ? "context, budget 1" : "context");
        nxr_test_runtime_close(&fx);
    }
}
