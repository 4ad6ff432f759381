/*
 * The built-in team's parking: a region wakes exactly its participants. On a
 * domain with as many CPUs as workers, the caller takes part in a region and
 * one worker sits it out; waking that worker as well would put one more
 * runnable thread than CPUs on the domain (measured: the participant then
 * queued behind the caller for milliseconds). Observed from the kernel's
 * side: a parked worker that takes no part in any region is never woken,
 * so its voluntary context switches do not grow.
 */
#include <criterion/criterion.h>
#include <sched.h>

#include "runtime/internal/runtime.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

static void noop(void *arg, size_t begin, size_t end, unsigned participant)
{
    (void)arg;
    (void)begin;
    (void)end;
    (void)participant;
}

struct parked_probe {
    struct nxr__team *team;
    unsigned worker;
};

static bool worker_parked(void *p)
{
    struct parked_probe *pp = p;
    return nxr__team_worker_parked(pp->team, pp->worker);
}

/* Waits until worker i is parked and asleep in the kernel (no sleep of a
 * guessed length): then its context switches so far are all counted. */
static void await_parked(struct nxr__team *team, unsigned i)
{
    struct parked_probe pp = {.team = team, .worker = i};
    cr_assert(nxr_test_wait_asleep(nxr__team_worker_tid(team, i), worker_parked, &pp, 10000),
              "worker %u never parked", i);
}

Test(executor_team, a_worker_that_sits_regions_out_stays_parked, .timeout = 30)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_PARK); /* park at once: every wake shows as a context switch */
    nxr_runtime_t *rt = fx.rt;
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    if (nxr_domain_budget(d) < 2) {
        nxr_runtime_destroy(rt);
        cr_skip_test("the default domain has one CPU");
    }
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, nxr_domain_id(d), &ctx), 0);
    struct nxr__team *team = ((const struct nxr_domain *)d)->team;
    /* Run inside the domain, as a service thread pinned to its socket would
     * (on a multi-node machine the default domain is one node). */
    cr_assert_eq(nxr_test_pin(nxr_domain_cpuset(d)), 0);
    cr_assert(nxr__exec_caller_inside(&((const struct nxr_domain *)d)->exec),
              "the test thread runs inside the domain");
    const unsigned workers = nxr__team_size(team);

    /* Two chunks: the caller and worker 0 take part, workers 1.. sit out. */
    cr_assert_eq(nxr_parallel_for(ctx, 0, 2, 1, noop, NULL), 0);
    for (unsigned i = 0; i < workers; i++)
        await_parked(team, i);
    long before[64];
    for (unsigned i = 0; i < workers && i < 64; i++)
        before[i] = nxr_test_thread_voluntary_switches(nxr__team_worker_tid(team, i));
    enum { REGIONS = 100 };
    for (int r = 0; r < REGIONS; r++) {
        cr_assert_eq(nxr_parallel_for(ctx, 0, 2, 1, noop, NULL), 0);
        await_parked(team, 0); /* worker 0 parks again between regions */
    }
    long w0 = nxr_test_thread_voluntary_switches(nxr__team_worker_tid(team, 0)) - before[0];
    /* Worker 0 is a participant: the regions wake it from its park. Not
     * necessarily once per region as the kernel counts it: the caller may
     * take both chunks first (the region rule allows it), and a wake-up
     * that the kernel has queued but not yet delivered when the next region
     * starts folds two into one sleep (seen under load: 99 of 100). What
     * the rule promises is that participants are woken at all and that the
     * workers that sit out are not (below). */
    cr_assert_geq(w0, 1, "worker 0 took part in none of %d regions", REGIONS);
    for (unsigned i = 1; i < workers && i < 64; i++) {
        long wi = nxr_test_thread_voluntary_switches(nxr__team_worker_tid(team, i)) - before[i];
        cr_assert_leq(wi, 2, "worker %u sat %d regions out but was woken %ld times", i, REGIONS,
                      wi);
    }
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}
