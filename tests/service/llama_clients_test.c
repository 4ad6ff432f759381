/*
 * Batched equals alone the way a server batches: closed-loop clients (the
 * next sequence is submitted as one leaves, so sequences join at every
 * kind of step), prompts and generations of random lengths fed in chunks
 * under the prefill cap beside decoders, cache blocks of 16 positions
 * reused by later sequences. The shape has grouped heads (4 query heads
 * over 2 KV heads) and a head size of 20, which attention's eight-lane dot
 * product covers with two full passes and a tail of 4: a sum that depended
 * on the batch, on a sequence's chunking or on the lanes' tail would show
 * as a token that differs from the sequence served alone. No clock: steps
 * are counted.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "service/llama_batch.h"
#include "service/llama_model.h"
#include "service/llama_weights.h"
#include "tests/service/llama_fixture.h"
#include "tests/support/runtime.h"

enum { SEQUENCES = 12, PROMPT_MIN = 9, PROMPT_MAX = 90, GEN_MIN = 4, GEN_MAX = 40 };

static nxr_runtime_t *rt;
static nxr_ctx_t *ctx;
static struct llama_fixture lf;

static void setup(void)
{
    static struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_CTX);
    rt = fx.rt;
    ctx = fx.ctx;
    const struct svc_llama_shape s = {.name = "custom",
                                      .dim = 80,
                                      .hidden = 160,
                                      .layers = 2,
                                      .heads = 4,
                                      .kv_heads = 2,
                                      .vocab = 512,
                                      .seq = PROMPT_MAX + GEN_MAX};
    nxr_domain_t *d = nxr_ctx_domain(ctx);
    llama_fixture_open(&lf, &s, 11, rt, &d, 1);
}

static void teardown(void)
{
    llama_fixture_close(&lf);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}

TestSuite(service_llama_clients, .init = setup, .fini = teardown);

struct request {
    int prompt[PROMPT_MAX];
    int out[GEN_MAX];
    struct svc_llama_seq seq;
};

/* A small linear congruential generator: the same requests on every run. */
static uint32_t next(uint32_t *x)
{
    *x = *x * 1103515245u + 12345u;
    return *x >> 8;
}

static void request_init(struct request *r, size_t i)
{
    memset(r, 0, sizeof *r);
    uint32_t x = 7919u * (uint32_t)i + 1;
    r->seq.prompt_len = PROMPT_MIN + next(&x) % (PROMPT_MAX - PROMPT_MIN + 1);
    r->seq.gen = GEN_MIN + next(&x) % (GEN_MAX - GEN_MIN + 1);
    for (size_t j = 0; j < r->seq.prompt_len; j++)
        r->prompt[j] = (int)(next(&x) % lf.model.shape.vocab);
    r->seq.prompt = r->prompt;
    r->seq.out = r->out;
}

/* The demo's step options: 64 rows, 8 prompt rows beside decoders. */
static struct svc_llama_batch *engine(size_t max_active)
{
    struct svc_llama_batch_opts o;
    svc_llama_batch_opts_init(&o);
    o.step_tokens = 64;
    o.prefill_tokens = 8;
    o.max_active = max_active;
    o.block_tokens = 16;
    o.kv_bytes = (size_t)4 << 20;
    struct svc_llama_batch *b = NULL;
    cr_assert_eq(svc_llama_batch_create(&lf.weights, 0, ctx, &o, &b), 0);
    return b;
}

/* Serves requests [0, SEQUENCES) with `clients` in flight: a client whose
 * sequence left submits the next one before the next step. */
static void serve(struct request *r, size_t clients)
{
    struct svc_llama_batch *b = engine(clients);
    size_t submitted = 0, finished = 0;
    for (size_t steps = 0;; steps++) {
        for (; submitted < SEQUENCES && submitted - finished < clients; submitted++) {
            request_init(&r[submitted], submitted);
            cr_assert_eq(svc_llama_batch_submit(b, &r[submitted].seq), 0);
        }
        if (svc_llama_batch_idle(b))
            break;
        cr_assert_lt(steps, 10000, "the engine never went idle");
        cr_assert_eq(svc_llama_batch_step(b, NULL), 0);
        finished = 0;
        for (size_t i = 0; i < submitted; i++)
            finished += r[i].seq.made == r[i].seq.gen;
    }
    cr_assert_eq(submitted, SEQUENCES);
    svc_llama_batch_destroy(b);
}

Test(service_llama_clients, batched_equals_alone_for_closed_loop_clients)
{
    static struct request alone[SEQUENCES], batched[SEQUENCES];
    serve(alone, 1);
    for (size_t clients = 3; clients <= 6; clients += 3) {
        serve(batched, clients);
        for (size_t i = 0; i < SEQUENCES; i++) {
            cr_assert_eq(batched[i].seq.made, alone[i].seq.gen);
            for (size_t t = 0; t < alone[i].seq.gen; t++)
                cr_assert_eq(batched[i].out[t], alone[i].out[t],
                             "%zu clients: sequence %zu (prompt %zu) token %zu is %d, alone %d",
                             clients, i, alone[i].seq.prompt_len, t, batched[i].out[t],
                             alone[i].out[t]);
        }
    }
}
