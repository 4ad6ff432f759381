/*
 * Serving the llama decoder (service/llama_serve.h) with its threads, on
 * two domains declared on one CPU (so that the test runs on any machine),
 * no clock in any check:
 *  - every sequence of the stream is served, each one's tokens those of
 *    the same sequence served alone (one client, one sequence a step);
 *  - both domains serve (new sequences go to the one with most free
 *    cache), and their counts add up;
 *  - a cache budget below the longest sequence is refused with -EINVAL,
 *    naming --kv-mib, before any thread starts.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "service/llama_serve.h"
#include "tests/service/llama_fixture.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static struct llama_fixture lf;

static void setup(void)
{
    static struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, "0:%0;1:%0 shared", 0);
    rt = fx.rt;
    const struct svc_llama_shape s = llama_fixture_short();
    nxr_domain_t *d[2] = {nxr_runtime_domain_at(rt, 0), nxr_runtime_domain_at(rt, 1)};
    llama_fixture_open(&lf, &s, 3, rt, d, 2);
}

static void teardown(void)
{
    llama_fixture_close(&lf);
    nxr_runtime_destroy(rt);
}

TestSuite(service_llama_serve, .init = setup, .fini = teardown, .timeout = 120);

enum { SEQUENCES = 10, GEN_MAX = 7 };

static struct svc_llama_serve_config config(size_t clients, size_t max_active)
{
    struct svc_llama_serve_config c = {
        .stream = {.seed = 11, .prompt_min = 1, .prompt_max = 12, .gen_min = 1, .gen_max = GEN_MAX},
        .first = 0,
        .count = SEQUENCES,
        .clients = clients,
    };
    svc_llama_batch_opts_init(&c.batch);
    c.batch.step_tokens = 8;
    c.batch.max_active = max_active;
    c.batch.block_tokens = 4;
    c.batch.kv_bytes = (size_t)1 << 20;
    return c;
}

Test(service_llama_serve, batched_on_two_domains_equals_alone)
{
    int alone[SEQUENCES * GEN_MAX] = {0}, batched[SEQUENCES * GEN_MAX] = {0};
    char err[256] = "";
    struct svc_llama_serve_result r;
    struct svc_llama_serve_config c = config(1, 1);
    cr_assert_eq(svc_llama_serve(rt, &lf.weights, &c, alone, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.sequences, SEQUENCES);
    svc_llama_serve_result_free(&r);

    c = config(4, 4);
    cr_assert_eq(svc_llama_serve(rt, &lf.weights, &c, batched, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.sequences, SEQUENCES);
    cr_assert_eq(r.domains, 2);
    size_t tokens = 0;
    for (size_t i = 0; i < SEQUENCES; i++) {
        size_t plen, gen;
        svc_llama_request(&c.stream, i, lf.model.shape.vocab, &plen, &gen, NULL);
        tokens += gen;
        for (size_t t = 0; t < gen; t++)
            cr_assert_eq(batched[i * GEN_MAX + t], alone[i * GEN_MAX + t],
                         "sequence %zu token %zu: batched %d, alone %d", i, t,
                         batched[i * GEN_MAX + t], alone[i * GEN_MAX + t]);
    }
    cr_assert_eq(r.tokens, tokens);
    cr_assert_eq(r.domain[0].tokens + r.domain[1].tokens, tokens);
    cr_assert_gt(r.domain[0].sequences, 0, "domain 0 served nothing");
    cr_assert_gt(r.domain[1].sequences, 0, "domain 1 served nothing");
    cr_assert_eq(r.itl_count, tokens - SEQUENCES);
    /* The step log: every token after a sequence's first was made by a
     * logged step, of a domain that served, in the order the steps ended. */
    size_t logged = 0;
    for (size_t i = 0; i < r.step_count; i++) {
        cr_assert_lt(r.step_domain[i], 2u, "step %zu", i);
        cr_assert_gt(r.step_tokens[i], 0u, "step %zu made no token", i);
        cr_assert(i == 0 || r.step_s[i] >= r.step_s[i - 1], "step %zu ended before %zu", i, i - 1);
        logged += r.step_tokens[i];
    }
    cr_assert_eq(logged, r.itl_count, "tokens of the logged steps");
    cr_assert_leq(r.step_count, r.steps);
    svc_llama_serve_result_free(&r);
}

Test(service_llama_serve, a_budget_below_the_longest_sequence_is_refused)
{
    int out[SEQUENCES * GEN_MAX];
    char err[256] = "";
    struct svc_llama_serve_result r;
    struct svc_llama_serve_config c = config(2, 2);
    c.batch.kv_bytes = 1024; /* below one block */
    cr_assert_eq(svc_llama_serve(rt, &lf.weights, &c, out, &r, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "--kv-mib") != NULL, "%s", err);
    cr_assert_null(r.ttft_ms);
}
