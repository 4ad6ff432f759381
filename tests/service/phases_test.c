/*
 * The demo's budget phases (service/phases.h), on made-up timestamps: each
 * request goes to the phase in force when it was sent, each phase's latency
 * is over its own requests only, its req/s over the time served within it;
 * phases stay in order and past SVC_PHASES_MAX the last one takes the rest.
 */
#include <criterion/criterion.h>

#include "service/phases.h"

#define MS 1000000LL

/* Two phases: 2 CPUs from 0, 1 CPU from 100 ms. Requests sent every 10 ms
 * from 0 to 190 ms; those before the change took 1 ms, those after 9 ms
 * (and one sent exactly at the change belongs to the new phase). */
Test(service_phases, requests_go_to_the_phase_they_were_sent_in)
{
    struct svc_phases ph = {0};
    svc_phases_add(&ph, 0, 2, 2, NULL, 0);
    svc_phases_add(&ph, 100 * MS, 1, 1, "quota", 1);
    cr_assert_eq(ph.count, 2);
    enum { N = 20 };
    double lat[N];
    long long sent[N];
    for (int i = 0; i < N; i++) {
        sent[i] = i * 10 * MS;
        lat[i] = sent[i] < 100 * MS ? 1.0 : 9.0;
    }
    /* Served 0-50 ms and 80-200 ms: 70 ms before the change, 100 after. */
    const long long spans[] = {0, 50 * MS, 80 * MS, 200 * MS};
    cr_assert_eq(svc_phases_summarise(&ph, lat, sent, N, spans, 2), 0);
    const struct svc_phase *before = &ph.phase[0], *after = &ph.phase[1];
    cr_expect_eq(before->requests, 10);
    cr_expect_eq(after->requests, 10);
    cr_expect_eq(before->latency.p99_ms, 1.0, "before: only the 2-CPU requests");
    cr_expect_eq(after->latency.p50_ms, 9.0, "after: only the 1-CPU requests");
    cr_expect_eq(after->latency.max_ms, 9.0);
    cr_expect_float_eq(before->served_s, 0.070, 1e-9);
    cr_expect_float_eq(after->served_s, 0.100, 1e-9);
    cr_expect_float_eq(before->requests_per_s, 10 / 0.070, 1e-6);
    cr_expect_float_eq(after->requests_per_s, 10 / 0.100, 1e-6);
    cr_expect_eq(after->budget, 1);
    cr_expect_eq(after->cpu_quota, 1);
    cr_expect_str_eq(after->limited_by, "quota");
    cr_expect_eq(after->changes, 1);
}

/* One phase (no change): every request in it, its time the whole serving. */
Test(service_phases, one_phase_holds_every_request)
{
    struct svc_phases ph = {0};
    svc_phases_add(&ph, 5 * MS, 2, 0, NULL, 0);
    double lat[] = {3.0, 1.0, 2.0};
    long long sent[] = {0, 6 * MS, 7 * MS}; /* the first before the phase began */
    const long long spans[] = {0, 10 * MS};
    cr_assert_eq(svc_phases_summarise(&ph, lat, sent, 3, spans, 1), 0);
    cr_expect_eq(ph.phase[0].requests, 3);
    cr_expect_eq(ph.phase[0].latency.max_ms, 3.0);
    cr_expect_float_eq(ph.phase[0].served_s, 0.010, 1e-9);
}

/* A change read after a later one is held at the later's start; past the
 * maximum the last phase takes the changes (and the latest budget). */
Test(service_phases, phases_stay_in_order_and_bounded)
{
    struct svc_phases ph = {0};
    svc_phases_add(&ph, 100, 2, 0, NULL, 0);
    svc_phases_add(&ph, 50, 1, 1, "quota", 1);
    cr_expect_eq(ph.phase[1].from_ns, 100, "no earlier than the phase before");
    for (unsigned k = 2; k < SVC_PHASES_MAX + 3; k++)
        svc_phases_add(&ph, 100 + k, 1 + k % 2, 1, "quota", 1);
    cr_expect_eq(ph.count, SVC_PHASES_MAX);
    struct svc_phase *last = &ph.phase[SVC_PHASES_MAX - 1];
    cr_expect_eq(last->changes, 4, "its own change and the three past the maximum");
    cr_expect_eq(last->budget, 1 + (SVC_PHASES_MAX + 2) % 2, "the latest budget");
}
