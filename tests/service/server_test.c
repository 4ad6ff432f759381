/*
 * The serving path under concurrent clients: every request of a round is
 * answered exactly once, by a domain, on that domain's CPUs, with the same
 * bits the model gives computed directly on the calling thread (nxr's
 * kernels do not depend on the split, so a request served as a task, or
 * split over the domain, must equal the direct computation). Batch 1-12,
 * split at 6: with one client every request finds the domain idle, so
 * exactly the big ones run split; with five, requests run side by side.
 * Also: the flat layout (one declared domain over the allowed set) gives
 * the same bits.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "service/load.h"
#include "service/server.h"
#include "service/stream.h"
#include "tests/support/runtime.h"

static uint64_t run_server(const char *domains, unsigned clients, float **out_outputs,
                           struct svc_round *round, const struct svc_model_shape *shape,
                           const float *w)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, domains, 0);
    nxr_runtime_t *rt = fx.rt;
    size_t n = nxr_runtime_domain_count(rt);
    struct svc_slot_decl slots[8];
    cr_assert_leq(n, 8);
    for (size_t i = 0; i < n; i++)
        slots[i] = (struct svc_slot_decl){
            .domain_id = nxr_domain_id(nxr_runtime_domain_at(rt, i)), .weights = w};
    struct svc_server_opts so = {.shape = *shape, .split_rows = 6};
    struct svc_server *srv;
    char err[256] = "";
    cr_assert_eq(svc_server_start(&srv, rt, slots, n, &so, err, sizeof(err)), 0, "%s", err);
    float *out = malloc(round->total_rows * shape->vocab * sizeof(float));
    memset(out, 0xff, round->total_rows * shape->vocab * sizeof(float)); /* NaN: unanswered */
    double *lat = calloc(round->count, sizeof(double));
    int *slot = calloc(round->count, sizeof(int));
    struct svc_load_result lr = {.latency_ms = lat, .slot = slot};
    cr_assert_eq(svc_load_run(round, shape, clients, svc_server_submit, srv, out, 0, &lr), 0);
    uint64_t served = 0, split = 0;
    hwloc_bitmap_t ran = hwloc_bitmap_alloc();
    for (size_t i = 0; i < n; i++) {
        struct svc_slot_stats st;
        svc_server_slot_stats(srv, i, &st, ran);
        served += st.served;
        split += st.split;
        cr_expect_eq(st.errors, 0);
        cr_expect(hwloc_bitmap_isincluded(ran, nxr_domain_cpuset(svc_server_slot_domain(srv, i))),
                  "slot %zu computed outside its domain", i);
    }
    hwloc_bitmap_free(ran);
    cr_expect_eq(served, round->count, "served %llu of %zu", (unsigned long long)served,
                 round->count);
    for (size_t i = 0; i < round->count; i++)
        cr_expect(slot[i] >= 0 && slot[i] < (int)n && lat[i] > 0, "request %zu: slot %d", i,
                  slot[i]);
    svc_server_stop(srv);
    nxr_runtime_destroy(rt);
    free(lat);
    free(slot);
    *out_outputs = out;
    return split;
}

Test(service_server, every_request_answered_with_the_direct_bits, .timeout = 120)
{
    const struct svc_model_shape shape = svc_model_shape_make(32, 2, 24);
    float *w = malloc(svc_model_floats(&shape) * sizeof(float));
    svc_model_fill(&shape, 5, w);
    struct svc_stream stream = {.shape = shape, .seed = 5, .batch_min = 1, .batch_max = 12};
    struct svc_round round;
    cr_assert_eq(svc_round_make(&round, &stream, 0, 120), 0);

    /* The direct computation, on this thread through a context. */
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_CTX);
    nxr_runtime_t *rt = fx.rt;
    nxr_ctx_t *ctx = fx.ctx;
    float *want = malloc(round.total_rows * shape.vocab * sizeof(float));
    float *scratch = malloc(svc_model_scratch_floats(&shape, 12) * sizeof(float));
    for (size_t i = 0; i < round.count; i++)
        cr_assert_eq(svc_model_forward(&svc_ops_nxr, ctx, &shape, w, round.rows[i],
                                       round.input + round.offset[i] * shape.hidden,
                                       want + round.offset[i] * shape.vocab, scratch),
                     0);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);

    uint64_t big = 0;
    for (size_t i = 0; i < round.count; i++)
        big += round.rows[i] >= 6;
    cr_assert(big > 0 && big < round.count);
    float *got;
    uint64_t split = run_server(NULL, 1, &got, &round, &shape, w);
    cr_expect_eq(split, big, "one client: %llu split, %llu big requests", (unsigned long long)split,
                 (unsigned long long)big);
    cr_expect_eq(memcmp(got, want, round.total_rows * shape.vocab * sizeof(float)), 0,
                 "served outputs differ from the direct computation (one client)");
    free(got);
    split = run_server(NULL, 5, &got, &round, &shape, w);
    cr_expect_leq(split, big);
    cr_expect_eq(memcmp(got, want, round.total_rows * shape.vocab * sizeof(float)), 0,
                 "served outputs differ from the direct computation (five clients)");
    free(got);

    /* Flat: one declared domain over the allowed set. */
    cpu_set_t mine;
    sched_getaffinity(0, sizeof(mine), &mine);
    char decl[64] = "0:";
    int first = -1, last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mine))
            last = c, first = first < 0 ? c : first;
    if (CPU_COUNT(&mine) == last - first + 1) { /* contiguous: "first-last" */
        snprintf(decl + 2, sizeof(decl) - 2, "%d-%d", first, last);
        run_server(decl, 5, &got, &round, &shape, w);
        cr_expect_eq(memcmp(got, want, round.total_rows * shape.vocab * sizeof(float)), 0,
                     "flat outputs differ from the direct computation");
        free(got);
    }
    free(want);
    free(scratch);
    free(w);
    svc_round_free(&round);
}
