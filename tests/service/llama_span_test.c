/*
 * `nxr demo --span` for the llama decoder: one engine whose products run
 * over every domain of the runtime against the matrices sharded by node
 * (service/llama_shards.h, svc_llama_batch_opts.span), on the small shape,
 * no clock in any check:
 *  - on a synthetic two-node machine (one allowed CPU per node; skipped
 *    with fewer than two CPUs), on two domains declared on one CPU (so
 *    that it runs under `taskset -c 1` too) and on this machine's own nodes
 *    (skipped on one node; in the multi-node VM, NXR_TEST_NEED_NODE1, it
 *    must run, and every shard must be on its node): every sequence's greedy tokens
 *    served by the span, batched, are the one-domain engine's, bit for bit
 *    (f32), and each member's shards lie on that member (the page check
 *    where memory is bound);
 *  - the server's span mode (svc_llama_serve with config.span): one engine,
 *    every sequence served, tokens as on one domain; under TSan too;
 *  - bad combinations are refused with -EINVAL and leave nothing: a span
 *    without shards or shards without a span, packed weights that are not
 *    f32, an engine whose context is not the span's first member.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "service/llama_batch.h"
#include "service/llama_serve.h"
#include "service/llama_shards.h"
#include "tests/service/llama_fixture.h"
#include "tests/support/runtime.h"

static struct nxr_test_runtime fx;
static struct llama_fixture lf; /* weights packed on domain 0 only */
static struct svc_llama_shards shards;
static nxr_ctx_t *one, *span;

/* The model, its packed copy on the first domain and its shards over a
 * span of every domain of the runtime tmpl describes. */
static void open_machine(const char *tmpl, unsigned flags)
{
    NXR_TEST_RUNTIME(&fx, tmpl, flags | NXR_TEST_CTX);
    one = fx.ctx;
    const size_t n = nxr_runtime_domain_count(fx.rt);
    if (n < 2) {
        if (getenv("NXR_TEST_NEED_NODE1") != NULL)
            cr_assert_fail("the machine has one node (NXR_TEST_NEED_NODE1: the VM must have two)");
        cr_skip_test("one node here: the synthetic and declared cases cover the span");
    }
    const struct svc_llama_shape s = llama_fixture_short();
    nxr_domain_t *d = nxr_ctx_domain(one);
    llama_fixture_open(&lf, &s, 9, fx.rt, &d, 1);
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    so.every = true;
    cr_assert_eq(nxr_span_create(fx.rt, &so, &span), 0, "%s", nxr_last_error());
    cr_assert_eq(nxr_span_domain_count(span), n);
    cr_assert_eq(nxr_span_domain_at(span, 0), d, "the span's first member is the engine's");
    cr_assert_eq(svc_llama_shards_create(&shards, span, &lf.model), 0, "%s", nxr_last_error());
}

static void teardown(void)
{
    svc_llama_shards_destroy(&shards);
    nxr_ctx_destroy(span);
    span = NULL;
    llama_fixture_close(&lf);
    nxr_test_runtime_close(&fx);
}

TestSuite(service_llama_span, .fini = teardown);

enum { SEQUENCES = 6, GEN_MAX = 9, PROMPT_MAX = 14 };

static const struct svc_llama_stream stream = {
    .seed = 4, .prompt_min = 1, .prompt_max = PROMPT_MAX, .gen_min = 2, .gen_max = GEN_MAX};

/* Serves the stream's first SEQUENCES on one engine, all submitted at once
 * (so they join and leave at different steps), with or without the span. */
static void serve(bool over_span, int out[SEQUENCES][GEN_MAX])
{
    static int prompts[SEQUENCES][PROMPT_MAX];
    struct svc_llama_seq seq[SEQUENCES];
    struct svc_llama_batch_opts o;
    svc_llama_batch_opts_init(&o);
    o.step_tokens = 8;
    o.max_active = 4;
    o.block_tokens = 4;
    o.kv_bytes = (size_t)1 << 20;
    if (over_span) {
        o.span = span;
        o.shards = &shards;
    }
    struct svc_llama_batch *b;
    cr_assert_eq(svc_llama_batch_create(&lf.weights, 0, one, &o, &b), 0);
    for (size_t i = 0; i < SEQUENCES; i++) {
        memset(&seq[i], 0, sizeof seq[i]);
        svc_llama_request(&stream, i, lf.model.shape.vocab, &seq[i].prompt_len, &seq[i].gen,
                          prompts[i]);
        seq[i].prompt = prompts[i];
        seq[i].out = out[i];
        cr_assert_eq(svc_llama_batch_submit(b, &seq[i]), 0);
    }
    for (size_t steps = 0; !svc_llama_batch_idle(b); steps++) {
        cr_assert_lt(steps, 1000u, "the engine does not finish");
        int rc = svc_llama_batch_step(b, NULL);
        cr_assert_eq(rc, 0, "step %zu: %s: %s", steps, nxr_strerror(rc), nxr_last_error());
    }
    for (size_t i = 0; i < SEQUENCES; i++)
        cr_assert_eq(seq[i].made, seq[i].gen, "sequence %zu", i);
    svc_llama_batch_destroy(b);
}

static void span_equals_one_domain(void)
{
    int alone[SEQUENCES][GEN_MAX] = {{0}}, spanned[SEQUENCES][GEN_MAX] = {{0}};
    serve(false, alone);
    serve(true, spanned);
    for (size_t i = 0; i < SEQUENCES; i++)
        for (size_t t = 0; t < GEN_MAX; t++)
            cr_assert_eq(spanned[i][t], alone[i][t],
                         "sequence %zu token %zu: span %d, one domain %d", i, t, spanned[i][t],
                         alone[i][t]);
    /* Each member's parts are its own, on its node where that is known. */
    for (size_t m = 0; m < nxr_span_domain_count(span); m++) {
        cr_assert_eq(svc_llama_shards_domain(&shards, m), nxr_span_domain_at(span, m));
        const double on = svc_llama_shards_on_node(&shards, m);
        nxr_domain_t *d = nxr_span_domain_at(span, m);
        if (nxr_domain_node(d) >= 0 && on >= 0)
            cr_assert_eq(on, 1.0, "member %zu: %.3f of its shards' pages on its node", m, on);
    }
}

Test(service_llama_span, two_synthetic_nodes_make_the_one_domain_tokens)
{
    open_machine("synthetic:pack:2 numa:1(indexes=0,2) pu:1(indexes=%0,%1)", NXR_TEST_TOPOLOGY);
    span_equals_one_domain();
}

Test(service_llama_span, two_domains_on_one_cpu_make_the_one_domain_tokens)
{
    open_machine("0:%0;1:%0 shared", 0);
    span_equals_one_domain();
}

Test(service_llama_span, every_node_of_this_machine_makes_the_one_domain_tokens)
{
    open_machine(NULL, 0);
    span_equals_one_domain();
    /* Real nodes (the VM): the page check must answer, and say "here". */
    for (size_t m = 0; getenv("NXR_TEST_NEED_NODE1") != NULL && m < nxr_span_domain_count(span);
         m++)
        cr_assert_eq(svc_llama_shards_on_node(&shards, m), 1.0, "member %zu's shards", m);
}

Test(service_llama_span, the_server_serves_every_sequence_on_one_span_engine)
{
    open_machine("0:%0;1:%0 shared", 0);
    int alone[SEQUENCES * GEN_MAX] = {0}, spanned[SEQUENCES * GEN_MAX] = {0};
    struct svc_llama_serve_config c = {.stream = stream, .count = SEQUENCES, .clients = 3};
    svc_llama_batch_opts_init(&c.batch);
    c.batch.step_tokens = 8;
    c.batch.max_active = 3;
    c.batch.block_tokens = 4;
    c.batch.kv_bytes = (size_t)1 << 20;
    char err[256] = "";
    struct svc_llama_serve_result r;
    cr_assert_eq(svc_llama_serve(fx.rt, &lf.weights, &c, alone, &r, err, sizeof err), 0, "%s", err);
    svc_llama_serve_result_free(&r);
    c.span = &shards;
    cr_assert_eq(svc_llama_serve(fx.rt, &lf.weights, &c, spanned, &r, err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(r.sequences, SEQUENCES);
    cr_assert_eq(r.domains, 1, "one engine serves the span");
    cr_assert_eq(r.domain[0].sequences, SEQUENCES);
    svc_llama_serve_result_free(&r);
    for (size_t i = 0; i < SEQUENCES * GEN_MAX; i++)
        cr_assert_eq(spanned[i], alone[i], "sequence %zu token %zu: span %d, one domain %d",
                     i / GEN_MAX, i % GEN_MAX, spanned[i], alone[i]);
}

Test(service_llama_span, bad_combinations_are_refused)
{
    open_machine("0:%0;1:%0 shared", 0);
    struct svc_llama_batch_opts o;
    svc_llama_batch_opts_init(&o);
    struct svc_llama_batch *b = (void *)&o;
    o.span = span; /* no shards */
    cr_assert_eq(svc_llama_batch_create(&lf.weights, 0, one, &o, &b), -EINVAL);
    cr_assert_null(b);
    o.span = NULL, o.shards = &shards; /* no span */
    cr_assert_eq(svc_llama_batch_create(&lf.weights, 0, one, &o, &b), -EINVAL);
    /* A context on the second member: the span's first holds the engine. */
    o.span = span;
    nxr_ctx_t *second;
    cr_assert_eq(nxr_ctx_create(fx.rt, nxr_domain_id(nxr_span_domain_at(span, 1)), &second), 0);
    struct svc_llama_weights both;
    nxr_domain_t *d[2] = {nxr_span_domain_at(span, 0), nxr_span_domain_at(span, 1)};
    cr_assert_eq(svc_llama_weights_create(&both, fx.rt, &lf.model, SVC_LLAMA_F32, d, 2), 0);
    cr_assert_eq(svc_llama_batch_create(&both, 1, second, &o, &b), -EINVAL);
    svc_llama_weights_destroy(&both);
    nxr_ctx_destroy(second);
    /* Packed in 8-bit blocks: the shards are f32, the tokens would differ. */
    struct svc_llama_weights q8;
    cr_assert_eq(svc_llama_weights_create(&q8, fx.rt, &lf.model, SVC_LLAMA_INT8, d, 1), 0);
    cr_assert_eq(svc_llama_batch_create(&q8, 0, one, &o, &b), -EINVAL);
    cr_assert_null(b);
    svc_llama_weights_destroy(&q8);
}
