/*
 * The rhythm's plan (executor/internal/rhythm.h) on made-up region times:
 * pure arithmetic, so the expected plans follow from the documented rule
 * (next publish = the region's end + the median gap, margin = MARGIN_MIN +
 * the spread of the middle gaps, lead = learnt lateness + PAD) and the
 * header's bounds.
 */
#include <criterion/criterion.h>

#include "executor/internal/rhythm.h"

#define US  1000u
#define T0  ((uint64_t)1000000000u)
#define DUR (3 * US) /* every region lasts 3 us */

/* Stamps generations 1..last: publish, DUR later its end, then gaps[g - 1]
 * until the next publish. The last one's end is stamped when `ended`.
 * Returns the last generation's end (or when it would end). */
static uint64_t stamp(struct nxr__rhythm *r, uint32_t last, const uint64_t *gaps, bool ended)
{
    uint64_t t = T0;
    for (uint32_t g = 1;; g++) {
        nxr__rhythm_start(r, g, t);
        t += DUR;
        if (g == last) {
            if (ended)
                nxr__rhythm_end(r, g, t);
            return t;
        }
        nxr__rhythm_end(r, g, t);
        t += gaps[(g - 1) % 16];
    }
}

static void regular(uint64_t *gaps, uint64_t gap)
{
    for (int i = 0; i < 16; i++)
        gaps[i] = gap;
}

Test(executor_rhythm, no_history_means_a_short_spin_then_park)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t g[16];
    regular(g, 500 * US);
    uint64_t end = stamp(&r, NXR__RHYTHM_HISTORY - 1, g, true);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, NXR__RHYTHM_HISTORY - 1, end + 1 * US, 0, &p);
    cr_assert_not(p.predicted);
    cr_assert_eq(p.sleep_until, 0);
    cr_assert_eq(p.spin_until, end + 1 * US + NXR__RHYTHM_FALLBACK_SPIN_NS);
}

Test(executor_rhythm, a_steady_stream_parks_until_just_before_the_next_region)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t g[16];
    regular(g, 500 * US);
    uint64_t end = stamp(&r, 20, g, true);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 20, end + 1 * US, 0, &p);
    cr_assert(p.end_known);
    cr_assert(p.predicted);
    cr_assert_eq(p.sleep_until, end + 500 * US - NXR__RHYTHM_LEAD_PAD_NS);
    cr_assert_eq(p.spin_until, end + 500 * US + NXR__RHYTHM_MARGIN_MIN_NS);
    cr_assert_eq(nxr__rhythm_lead(&r), NXR__RHYTHM_LEAD_PAD_NS);

    /* A timed wake-up that came 40 us late: the learnt lateness goes all
     * the way up at once, and the next plan parks that much earlier. */
    nxr__rhythm_woke(&r, p.sleep_until, p.sleep_until + 40 * US);
    cr_assert_eq(nxr__rhythm_lead(&r), NXR__RHYTHM_LEAD_PAD_NS + 40 * US);
    nxr__rhythm_plan(&r, 20, end + 1 * US, 0, &p);
    cr_assert_eq(p.sleep_until, end + 500 * US - NXR__RHYTHM_LEAD_PAD_NS - 40 * US);
    /* Punctual ones bring it down by an eighth of the way each. */
    nxr__rhythm_woke(&r, p.sleep_until, p.sleep_until + 8 * US);
    cr_assert_eq(nxr__rhythm_lead(&r), NXR__RHYTHM_LEAD_PAD_NS + 36 * US);
    /* Woken before the deadline: no lesson about lateness. */
    nxr__rhythm_woke(&r, p.sleep_until, p.sleep_until - 1 * US);
    cr_assert_eq(nxr__rhythm_lead(&r), NXR__RHYTHM_LEAD_PAD_NS + 36 * US);
}

Test(executor_rhythm, the_gap_is_predicted_from_the_end_whatever_the_region_took)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t g[16];
    regular(g, 500 * US);
    uint64_t end = stamp(&r, 12, g, true);
    /* The last region ran 200 us longer than the others. */
    nxr__rhythm_end(&r, 12, end + 200 * US);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 12, end + 201 * US, 0, &p);
    cr_assert_eq(p.sleep_until, end + 200 * US + 500 * US - NXR__RHYTHM_LEAD_PAD_NS);
}

Test(executor_rhythm, before_the_end_is_stamped_the_worker_takes_its_own_clock)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t g[16];
    regular(g, 500 * US);
    uint64_t end = stamp(&r, 12, g, false);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 12, end - 1 * US, 0, &p);
    cr_assert_not(p.end_known);
    cr_assert_eq(p.sleep_until, end - 1 * US + 500 * US - NXR__RHYTHM_LEAD_PAD_NS);
    /* Stamped later: the re-plan uses it. */
    nxr__rhythm_end(&r, 12, end + 100 * US);
    nxr__rhythm_plan(&r, 12, end + 101 * US, 0, &p);
    cr_assert(p.end_known);
    cr_assert_eq(p.sleep_until, end + 100 * US + 500 * US - NXR__RHYTHM_LEAD_PAD_NS);
}

Test(executor_rhythm, a_missed_region_aims_at_the_one_after)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t g[16];
    regular(g, 500 * US);
    uint64_t end = stamp(&r, 12, g, true);
    struct nxr__idle_plan p;
    uint64_t now = end + 520 * US; /* the predicted publish did not come */
    nxr__rhythm_plan(&r, 12, now, 1, &p);
    cr_assert(p.predicted);
    /* One more gap and one more region (3 us) later. */
    cr_assert_eq(p.sleep_until, end + 500 * US + DUR + 500 * US - NXR__RHYTHM_LEAD_PAD_NS);
    cr_assert_eq(p.spin_until, end + 500 * US + DUR + 500 * US + NXR__RHYTHM_MARGIN_MIN_NS);
}

Test(executor_rhythm, short_gaps_are_spun_through)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t g[16];
    regular(g, 10 * US);
    uint64_t end = stamp(&r, 12, g, true);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 12, end + 1 * US, 0, &p);
    cr_assert_eq(p.sleep_until, 0, "a 10 us gap is shorter than a timed park is worth");
    cr_assert_eq(p.spin_until, end + 10 * US + NXR__RHYTHM_THROUGH_MARGIN_NS);
}

Test(executor_rhythm, one_outlier_moves_neither_gap_nor_margin)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t g[16];
    regular(g, 500 * US);
    g[14] = 40000 * US; /* the gap just before the last region */
    uint64_t end = stamp(&r, 16, g, true);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 16, end + 1 * US, 0, &p);
    cr_assert_eq(p.sleep_until, end + 500 * US - NXR__RHYTHM_LEAD_PAD_NS);
    cr_assert_eq(p.spin_until, end + 500 * US + NXR__RHYTHM_MARGIN_MIN_NS);
}

Test(executor_rhythm, jitter_widens_the_margin_up_to_its_bound)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    /* Seven gaps 480..520 us (sorted: 480 490 495 500 505 510 520):
     * gap 500, middle spread 510 - 490 = 20 us. */
    uint64_t g[16] = {500 * US, 480 * US, 520 * US, 490 * US, 510 * US, 495 * US, 505 * US};
    uint64_t end = stamp(&r, 8, g, true);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 8, end + 1 * US, 0, &p);
    cr_assert_eq(p.spin_until, end + 500 * US + NXR__RHYTHM_MARGIN_MIN_NS + 20 * US);

    /* Wildly irregular: the margin stops at its bound. */
    uint64_t wild[16] = {100 * US, 5000 * US, 300 * US, 9000 * US, 200 * US, 7000 * US, 400 * US};
    nxr__rhythm_init(&r);
    end = stamp(&r, 8, wild, true);
    nxr__rhythm_plan(&r, 8, end + 1 * US, 0, &p);
    cr_assert_eq(p.spin_until, end + 400 * US + NXR__RHYTHM_MARGIN_MAX_NS);
}

Test(executor_rhythm, a_late_or_stopped_stream_spins_one_margin_then_parks)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t g[16];
    regular(g, 500 * US);
    uint64_t end = stamp(&r, 10, g, true);
    struct nxr__idle_plan p;
    uint64_t now = end + 2000 * US; /* well past the predicted publish */
    nxr__rhythm_plan(&r, 10, now, 0, &p);
    cr_assert_eq(p.sleep_until, 0);
    cr_assert_eq(p.spin_until, now + NXR__RHYTHM_THROUGH_MARGIN_NS);
}

Test(executor_rhythm, slow_streams_and_torn_rings_fall_back)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t g[16];
    regular(g, (uint64_t)NXR__RHYTHM_GAP_MAX_NS + 1);
    uint64_t end = stamp(&r, 10, g, true);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 10, end + 1 * US, 0, &p);
    cr_assert_eq(p.sleep_until, 0);
    cr_assert_eq(p.spin_until, end + 1 * US + NXR__RHYTHM_FALLBACK_SPIN_NS);

    /* A region whose publish is later than the next one's (overwritten). */
    regular(g, 500 * US);
    nxr__rhythm_init(&r);
    end = stamp(&r, 10, g, true);
    nxr__rhythm_start(&r, 7, end + 1 * US);
    nxr__rhythm_plan(&r, 10, end + 2 * US, 0, &p);
    cr_assert_eq(p.sleep_until, 0);
    cr_assert_eq(p.spin_until, end + 2 * US + NXR__RHYTHM_FALLBACK_SPIN_NS);
}


/* ---- the rhythm through a real team (executor/team.c) -------------------- */

#include <sched.h>

#include "executor/internal/team.h"
#include "tests/support/procfs.h"

#define BOUND_MS 20000 /* rendezvous bound: a broken team fails, never hangs */

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

static atomic_int slot_calls;

static void count_slot(void *arg, unsigned slot, unsigned count)
{
    (void)arg, (void)slot, (void)count;
    atomic_fetch_add(&slot_calls, 1);
}

struct parked_all {
    struct nxr__team *team;
    unsigned size;
};

static bool all_parked_for_good(void *p)
{
    const struct parked_all *a = p;
    for (unsigned i = 0; i < a->size; i++)
        if (!nxr__team_worker_parked_for_good(a->team, i))
            return false;
    return true;
}

/* Every worker parked for good and asleep in the kernel (bounded). */
static bool await_parked_for_good(struct nxr__team *team, unsigned size)
{
    struct parked_all a = {.team = team, .size = size};
    for (unsigned i = 0; i < size; i++)
        if (!nxr_test_wait_asleep(nxr__team_worker_tid(team, i), all_parked_for_good, &a,
                                  BOUND_MS))
            return false;
    return true;
}

/* A stream of regions the workers follow (the caller waits, so every slot
 * is a worker's), then nothing: the workers' plans stop predicting, they
 * poll once and park for good (no timed park left to wake them), and the
 * next region, which needs them, wakes every one. A 3-worker team on any
 * CPUs: the wake tree's second level is in it. */
Test(executor_rhythm, a_stopped_stream_ends_parked_and_the_next_region_wakes_its_workers,
     .timeout = 90)
{
    enum { SIZE = 3, STREAM = 200 };
    struct nxr__team *team = make_team(SIZE);
    atomic_store(&slot_calls, 0);
    for (int r = 0; r < STREAM; r++)
        nxr__team_run(team, count_slot, NULL, SIZE, false);
    cr_expect_eq(atomic_load(&slot_calls), SIZE * STREAM);
    cr_expect(await_parked_for_good(team, SIZE),
              "a worker is still spinning or in a timed park after the stream stopped");
    nxr__team_run(team, count_slot, NULL, SIZE, false);
    cr_expect_eq(atomic_load(&slot_calls), SIZE * (STREAM + 1));
    cr_expect(await_parked_for_good(team, SIZE), "the workers did not park again");
    nxr__team_destroy(team);
}
