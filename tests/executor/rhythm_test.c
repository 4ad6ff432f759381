/*
 * The rhythm's plan (executor/internal/rhythm.h) on made-up publish times:
 * pure arithmetic, so the expected plans follow from the documented rule
 * (period = median interval, margin = MARGIN_MIN + the spread of the middle
 * intervals, lead = learnt lateness + PAD) and the header's bounds.
 */
#include <criterion/criterion.h>

#include "executor/internal/rhythm.h"

#define US 1000u
#define T0 ((uint64_t)1000000000u)

/* Stamps generations 1..last, gen g at T0 + sum of the intervals before. */
static uint64_t stamp(struct nxr__rhythm *r, uint32_t last, const uint64_t *intervals)
{
    uint64_t t = T0;
    for (uint32_t g = 1; g <= last; g++) {
        nxr__rhythm_start(r, g, t);
        if (g < last)
            t += intervals[(g - 1) % 16];
    }
    return t; /* the last generation's publish time */
}

static void regular(uint64_t *iv, uint64_t period)
{
    for (int i = 0; i < 16; i++)
        iv[i] = period;
}

Test(executor_rhythm, no_history_means_a_short_spin_then_park)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t iv[16];
    regular(iv, 500 * US);
    uint64_t last = stamp(&r, NXR__RHYTHM_HISTORY - 1, iv);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, NXR__RHYTHM_HISTORY - 1, last + 1 * US, &p);
    cr_assert_eq(p.sleep_until, 0);
    cr_assert_eq(p.spin_until, last + 1 * US + NXR__RHYTHM_FALLBACK_SPIN_NS);
}

Test(executor_rhythm, a_steady_stream_parks_until_just_before_the_next_region)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t iv[16];
    regular(iv, 500 * US);
    uint64_t last = stamp(&r, 20, iv);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 20, last + 3 * US, &p);
    cr_assert_eq(p.sleep_until, last + 500 * US - NXR__RHYTHM_LEAD_PAD_NS);
    cr_assert_eq(p.spin_until, last + 500 * US + NXR__RHYTHM_MARGIN_MIN_NS);

    /* A timed wake-up that came 40 us late: the lead grows by a quarter of
     * it, and the next plan parks that much earlier. */
    nxr__rhythm_woke(&r, p.sleep_until, p.sleep_until + 40 * US);
    nxr__rhythm_plan(&r, 20, last + 3 * US, &p);
    cr_assert_eq(p.sleep_until, last + 500 * US - NXR__RHYTHM_LEAD_PAD_NS - 10 * US);
    /* Woken before the deadline: no lesson about lateness. */
    nxr__rhythm_woke(&r, p.sleep_until, p.sleep_until - 1 * US);
    nxr__rhythm_plan(&r, 20, last + 3 * US, &p);
    cr_assert_eq(p.sleep_until, last + 500 * US - NXR__RHYTHM_LEAD_PAD_NS - 10 * US);
}

Test(executor_rhythm, short_gaps_are_spun_through)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t iv[16];
    regular(iv, 10 * US);
    uint64_t last = stamp(&r, 12, iv);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 12, last + 2 * US, &p);
    cr_assert_eq(p.sleep_until, 0, "a 10 us gap is shorter than a timed park is worth");
    cr_assert_eq(p.spin_until, last + 10 * US + NXR__RHYTHM_MARGIN_MIN_NS);
}

Test(executor_rhythm, one_outlier_moves_neither_period_nor_margin)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t iv[16];
    regular(iv, 500 * US);
    iv[14] = 40000 * US; /* the interval just before the last region */
    uint64_t last = stamp(&r, 16, iv);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 16, last + 3 * US, &p);
    cr_assert_eq(p.sleep_until, last + 500 * US - NXR__RHYTHM_LEAD_PAD_NS);
    cr_assert_eq(p.spin_until, last + 500 * US + NXR__RHYTHM_MARGIN_MIN_NS);
}

Test(executor_rhythm, jitter_widens_the_margin_up_to_its_bound)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    /* Seven intervals 480..520 us (sorted: 480 490 495 500 505 510 520):
     * period 500, middle spread 510 - 490 = 20 us. */
    uint64_t iv[16] = {500 * US, 480 * US, 520 * US, 490 * US, 510 * US, 495 * US, 505 * US};
    uint64_t last = stamp(&r, 8, iv);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 8, last + 3 * US, &p);
    cr_assert_eq(p.spin_until, last + 500 * US + NXR__RHYTHM_MARGIN_MIN_NS + 20 * US);

    /* Wildly irregular: the margin stops at its bound. */
    uint64_t wild[16] = {100 * US, 5000 * US, 300 * US, 9000 * US, 200 * US, 7000 * US, 400 * US};
    nxr__rhythm_init(&r);
    last = stamp(&r, 8, wild);
    nxr__rhythm_plan(&r, 8, last + 3 * US, &p);
    cr_assert_eq(p.spin_until, last + 400 * US + NXR__RHYTHM_MARGIN_MAX_NS);
}

Test(executor_rhythm, a_late_or_stopped_stream_spins_one_margin_then_parks)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t iv[16];
    regular(iv, 500 * US);
    uint64_t last = stamp(&r, 10, iv);
    struct nxr__idle_plan p;
    uint64_t now = last + 2000 * US; /* well past the predicted publish */
    nxr__rhythm_plan(&r, 10, now, &p);
    cr_assert_eq(p.sleep_until, 0);
    cr_assert_eq(p.spin_until, now + NXR__RHYTHM_MARGIN_MIN_NS);
}

Test(executor_rhythm, slow_streams_and_torn_rings_fall_back)
{
    struct nxr__rhythm r;
    nxr__rhythm_init(&r);
    uint64_t iv[16];
    regular(iv, (uint64_t)NXR__RHYTHM_PERIOD_MAX_NS + 1);
    uint64_t last = stamp(&r, 10, iv);
    struct nxr__idle_plan p;
    nxr__rhythm_plan(&r, 10, last + 1 * US, &p);
    cr_assert_eq(p.sleep_until, 0);
    cr_assert_eq(p.spin_until, last + 1 * US + NXR__RHYTHM_FALLBACK_SPIN_NS);

    /* A ring entry older than the one before it (overwritten meanwhile). */
    regular(iv, 500 * US);
    nxr__rhythm_init(&r);
    last = stamp(&r, 10, iv);
    nxr__rhythm_start(&r, 7, last + 1 * US);
    nxr__rhythm_plan(&r, 10, last + 2 * US, &p);
    cr_assert_eq(p.sleep_until, 0);
    cr_assert_eq(p.spin_until, last + 2 * US + NXR__RHYTHM_FALLBACK_SPIN_NS);
}
