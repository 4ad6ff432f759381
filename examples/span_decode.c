/*
 * One decode stream across every socket: a small transformer (a few layers,
 * random weights) generating tokens one at a time, its weights sharded over
 * a span of every domain, so each socket streams only its own part of every
 * matrix from its own memory (docs/one-context-per-socket.md, "one request
 * across sockets").
 *
 * Per layer: RMSNorm, the Q/K/V projection sharded by output rows (each
 * member computes its rows of q, k, v), attention split by head across the
 * members (nxr_parallel_for on the span), the output projection sharded by
 * the inner dimension (each member multiplies its slice of the attention
 * output by its rows of Wo, the partials are added in member order), a
 * ReLU MLP (up: by output rows, down: by the inner dimension) and the
 * residuals. The logits are sharded by output rows.
 *
 * It runs the same decode twice: over the span, and on a context of the
 * first domain alone (the reference), and compares. The tokens must be the
 * same. The logits are bit-identical when the span has one member; with
 * several, the inner-sharded products add per-member partials instead of
 * one running sum, so they may differ by rounding: at most
 * 1e-4 * (1 + max |logit|), the tolerance docs state. Exits 1 otherwise.
 *
 * Run: bazel run //examples:span_decode   (NXR_DOMAINS / NXR_TOPOLOGY pick
 * the domains, e.g. NXR_DOMAINS='0:0;1:1' for two on one node).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t, sched_getaffinity */
#endif
#include <nxr/nxr.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYERS 3
#define DIM    64  /* model width */
#define HEADS  4
#define HDIM   (DIM / HEADS)
#define FFN    128
#define VOCAB  97
#define STEPS  24
#define EPS    1e-5f

struct layer {
    nxr_shards_t *wqkv; /* BY_OUTPUT: 3 * DIM rows of DIM (q, k, v) */
    nxr_shards_t *wo;   /* BY_INNER:  DIM rows of DIM */
    nxr_shards_t *w1;   /* BY_OUTPUT: FFN rows of DIM */
    nxr_shards_t *w2;   /* BY_INNER:  FFN rows of DIM */
    float kcache[STEPS][DIM], vcache[STEPS][DIM];
};

struct model {
    nxr_ctx_t *ctx;     /* the span, or the reference's one-domain context */
    struct layer layer[LAYERS];
    nxr_shards_t *wout; /* BY_OUTPUT: VOCAB rows of DIM */
    float embed[VOCAB][DIM];
    float ones[DIM];
};

/* ---- deterministic random weights ---------------------------------------------- */

static unsigned long long rng = 0x9e3779b97f4a7c15ull;

static float uniform(float scale)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return scale * ((float)(rng >> 40) / (float)(1ull << 24) * 2.0f - 1.0f);
}

/* rows x cols of uniform(1/sqrt(fan_in)) into shards over ctx's members. */
static int weights(nxr_ctx_t *ctx, size_t rows, size_t cols, size_t fan_in, nxr_shards_t **out)
{
    int rc = nxr_shards_create(ctx, rows, cols * sizeof(float), NULL,
                               nxr_span_domain_count(ctx), out);
    if (rc != 0) {
        fprintf(stderr, "span_decode: %s\n", nxr_last_error());
        return rc;
    }
    float scale = 1.0f / sqrtf((float)fan_in);
    for (size_t r = 0; r < rows; r++) {
        float *row = nxr_shards_row(*out, r);
        for (size_t c = 0; c < cols; c++)
            row[c] = uniform(scale);
    }
    return 0;
}

static void model_free(struct model *m)
{
    for (int l = 0; l < LAYERS; l++) {
        nxr_shards_destroy(m->layer[l].wqkv);
        nxr_shards_destroy(m->layer[l].wo);
        nxr_shards_destroy(m->layer[l].w1);
        nxr_shards_destroy(m->layer[l].w2);
    }
    nxr_shards_destroy(m->wout);
}

/* The same weights whatever ctx is: the generator restarts per model. */
static int model_init(struct model *m, nxr_ctx_t *ctx)
{
    memset(m, 0, sizeof(*m));
    m->ctx = ctx;
    rng = 0x9e3779b97f4a7c15ull;
    int rc = 0;
    for (int l = 0; l < LAYERS && rc == 0; l++) {
        struct layer *y = &m->layer[l];
        if ((rc = weights(ctx, 3 * DIM, DIM, DIM, &y->wqkv)) == 0 &&
            (rc = weights(ctx, DIM, DIM, DIM, &y->wo)) == 0 &&
            (rc = weights(ctx, FFN, DIM, DIM, &y->w1)) == 0)
            rc = weights(ctx, FFN, DIM, FFN, &y->w2);
    }
    if (rc == 0)
        rc = weights(ctx, VOCAB, DIM, DIM, &m->wout);
    for (int t = 0; t < VOCAB; t++)
        for (int c = 0; c < DIM; c++)
            m->embed[t][c] = uniform(1.0f);
    for (int c = 0; c < DIM; c++)
        m->ones[c] = 1.0f;
    if (rc != 0)
        model_free(m);
    return rc;
}

/* ---- one decode step -------------------------------------------------------------- */

static int linear(nxr_ctx_t *ctx, const nxr_shards_t *w, enum nxr_shard_layout layout, size_t k,
                  size_t n, const float *x, float *y)
{
    struct nxr_span_linear_args a = {.m = 1, .k = k, .n = n, .x = x, .ldx = k, .w = w,
                                     .layout = layout, .y = y, .ldy = n};
    int rc = nxr_span_linear(ctx, &a);
    if (rc != 0)
        fprintf(stderr, "span_decode: %s\n", nxr_last_error());
    return rc;
}

struct attention {
    const struct layer *layer;
    const float *q;
    float *out;
    int pos;
};

/* Heads [b, e): softmax(q k^T / sqrt(HDIM)) v over positions 0..pos. Each
 * head is computed whole by one participant, so the result does not depend
 * on which member ran it. */
static void attend(void *p, size_t b, size_t e, unsigned worker)
{
    const struct attention *a = p;
    (void)worker;
    float score[STEPS];
    for (size_t h = b; h < e; h++) {
        const size_t o = h * HDIM;
        float top = -INFINITY, sum = 0.0f;
        for (int t = 0; t <= a->pos; t++) {
            float s = 0.0f;
            for (int c = 0; c < HDIM; c++)
                s += a->q[o + c] * a->layer->kcache[t][o + c];
            score[t] = s / sqrtf((float)HDIM);
            top = score[t] > top ? score[t] : top;
        }
        for (int t = 0; t <= a->pos; t++) {
            score[t] = expf(score[t] - top);
            sum += score[t];
        }
        for (int c = 0; c < HDIM; c++) {
            float acc = 0.0f;
            for (int t = 0; t <= a->pos; t++)
                acc += score[t] * a->layer->vcache[t][o + c];
            a->out[o + c] = acc / sum;
        }
    }
}

/* Feeds `token` at position pos; leaves the logits. */
static int step(struct model *m, int token, int pos, float *logits)
{
    nxr_ctx_t *ctx = m->ctx;
    float x[DIM], xn[DIM], qkv[3 * DIM], att[DIM], o[DIM], h[FFN];
    memcpy(x, m->embed[token], sizeof(x));
    int rc = 0;
    for (int l = 0; l < LAYERS && rc == 0; l++) {
        struct layer *y = &m->layer[l];
        if ((rc = nxr_rmsnorm(ctx, 1, DIM, x, DIM, m->ones, EPS, xn, DIM)) != 0 ||
            (rc = linear(ctx, y->wqkv, NXR_SHARD_BY_OUTPUT, DIM, 3 * DIM, xn, qkv)) != 0)
            break;
        memcpy(y->kcache[pos], qkv + DIM, sizeof(y->kcache[pos]));
        memcpy(y->vcache[pos], qkv + 2 * DIM, sizeof(y->vcache[pos]));
        struct attention a = {.layer = y, .q = qkv, .out = att, .pos = pos};
        if ((rc = nxr_parallel_for(ctx, 0, HEADS, 1, attend, &a)) != 0 ||
            (rc = linear(ctx, y->wo, NXR_SHARD_BY_INNER, DIM, DIM, att, o)) != 0)
            break;
        for (int c = 0; c < DIM; c++)
            x[c] += o[c];
        if ((rc = nxr_rmsnorm(ctx, 1, DIM, x, DIM, m->ones, EPS, xn, DIM)) != 0 ||
            (rc = linear(ctx, y->w1, NXR_SHARD_BY_OUTPUT, DIM, FFN, xn, h)) != 0)
            break;
        for (int c = 0; c < FFN; c++)
            h[c] = h[c] > 0.0f ? h[c] : 0.0f;
        if ((rc = linear(ctx, y->w2, NXR_SHARD_BY_INNER, FFN, DIM, h, o)) != 0)
            break;
        for (int c = 0; c < DIM; c++)
            x[c] += o[c];
    }
    if (rc == 0 && (rc = nxr_rmsnorm(ctx, 1, DIM, x, DIM, m->ones, EPS, xn, DIM)) == 0)
        rc = linear(ctx, m->wout, NXR_SHARD_BY_OUTPUT, DIM, VOCAB, xn, logits);
    return rc;
}

/* Greedy decode from token 1: the tokens and the last step's logits. */
static int decode(struct model *m, int *tokens, float *logits)
{
    int token = 1;
    for (int pos = 0; pos < STEPS; pos++) {
        int rc = step(m, token, pos, logits);
        if (rc != 0)
            return rc;
        int best = 0;
        for (int v = 1; v < VOCAB; v++)
            best = logits[v] > logits[best] ? v : best;
        tokens[pos] = token = best;
    }
    return 0;
}

int main(void)
{
    nxr_runtime_t *rt;
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    int rc = nxr_runtime_create(&o, &rt);
    if (rc != 0) {
        fprintf(stderr, "span_decode: runtime: %s (%s)\n", nxr_strerror(rc), nxr_last_error());
        return 1;
    }
    nxr_ctx_t *span = NULL, *one = NULL;
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    so.every = true;
    if ((rc = nxr_span_create(rt, &so, &span)) != 0) {
        fprintf(stderr, "span_decode: span: %s (%s)\n", nxr_strerror(rc), nxr_last_error());
        goto out_rt;
    }
    if ((rc = nxr_ctx_create(rt, nxr_domain_id(nxr_span_domain_at(span, 0)), &one)) != 0)
        goto out_rt;
    static struct model across, ref;
    static float logits[VOCAB], ref_logits[VOCAB];
    int tokens[STEPS], ref_tokens[STEPS];
    if ((rc = model_init(&across, span)) != 0)
        goto out_rt;
    if ((rc = model_init(&ref, one)) != 0)
        goto out_model;
    if ((rc = decode(&across, tokens, logits)) != 0 || (rc = decode(&ref, ref_tokens, ref_logits)))
        goto out_models;

    size_t members = nxr_span_domain_count(span);
    printf("span over %zu domain(s):", members);
    for (size_t i = 0; i < members; i++) {
        struct nxr_shard part;
        nxr_shards_part(across.wout, i, &part);
        printf("%s%d (%zu of %d logit rows, on node %s)", i ? "; domain " : " domain ",
               nxr_domain_id(part.domain), part.rows, VOCAB,
               part.on_node < 0 ? "unknown" : part.on_node == 1.0 ? "yes" : "NO");
    }
    printf("\ntokens:");
    float diff = 0.0f, top = 0.0f;
    bool same = memcmp(tokens, ref_tokens, sizeof(tokens)) == 0;
    for (int i = 0; i < STEPS; i++)
        printf(" %d", tokens[i]);
    for (int v = 0; v < VOCAB; v++) {
        float d = fabsf(logits[v] - ref_logits[v]);
        diff = d > diff ? d : diff;
        top = fabsf(ref_logits[v]) > top ? fabsf(ref_logits[v]) : top;
    }
    bool bits = memcmp(logits, ref_logits, sizeof(logits)) == 0;
    float tolerance = 1e-4f * (1.0f + top);
    printf("\nversus one domain: tokens %s, logits %s (max |diff| %.3g, tolerance %.3g)\n",
           same ? "identical" : "DIFFER", bits ? "bit-identical" : "within rounding", diff,
           tolerance);
    if (!same || diff > tolerance || (members == 1 && !bits))
        rc = -EDOM;
out_models:
    model_free(&ref);
out_model:
    model_free(&across);
out_rt:
    nxr_ctx_destroy(one);
    nxr_ctx_destroy(span);
    nxr_runtime_destroy(rt);
    if (rc != 0 && rc != -EDOM)
        fprintf(stderr, "span_decode: %s\n", nxr_strerror(rc));
    return rc == 0 ? 0 : 1;
}
