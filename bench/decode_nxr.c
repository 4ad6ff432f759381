/* bench/decode's nxr engine (see decode_nxr.h). */
#include "bench/decode_nxr.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "bench/timing.h"
#include "service/llama_weights.h"

struct packed_layer {
    nxr_weights_t *wqkv, *wo, *w13, *w2;
};

/* One layer's loops in the step: which layer, and its attention's state. */
struct layer_ops;

struct decode_nxr {
    const struct svc_llama *m;
    nxr_ctx_t *ctx;
    enum nxr_weights_format format;
    struct packed_layer *layer;
    nxr_weights_t *wcls;
    /* Activations and the KV cache, in the domain's memory. */
    float *x, *xb, *qkv, *hb, *att, *logits;
    float *kcache, *vcache; /* layers x seq x kv_dim */
    /* The whole token as one nxr_step (decode_nxr_generate_step). */
    nxr_step_t *step;
    struct layer_ops *ops;
    size_t pos;  /* the position the step decodes; set before each run */
    int step_rc; /* the first failure of a loop body in the step, 0 if none */
};

/* op(W) = W^T for W stored out x in: k = in, n = out, packed as the
 * service packs it (f32 from W^T, into panels: service/llama_weights.h). */
static int pack(nxr_runtime_t *rt, enum nxr_weights_format format, const float *w, size_t out,
                size_t in, nxr_weights_t **pw)
{
    return svc_llama_pack(rt, format, w, out, in, NULL, 0, pw);
}

static int domain_floats(nxr_ctx_t *ctx, size_t n, float **p)
{
    int rc = nxr_domain_malloc(nxr_ctx_domain(ctx), n * sizeof(float), 64, (void **)p);
    if (rc == 0)
        memset(*p, 0, n * sizeof(float));
    return rc;
}

static int build_step(struct decode_nxr *e);

int decode_nxr_create(const struct svc_llama *m, enum nxr_weights_format format, nxr_runtime_t *rt,
                      nxr_ctx_t *ctx, struct decode_nxr **out)
{
    const struct svc_llama_shape *s = &m->shape;
    const size_t dim = s->dim, kv = svc_llama_kv_dim(s), hid = s->hidden;
    struct decode_nxr *e = calloc(1, sizeof *e);
    if (e == NULL || (e->layer = calloc(s->layers, sizeof *e->layer)) == NULL) {
        free(e);
        return -ENOMEM;
    }
    e->m = m;
    e->ctx = ctx;
    e->format = format;
    int rc = 0;
    for (size_t l = 0; l < s->layers && rc == 0; l++) {
        const struct svc_llama_layer *L = &m->layer[l];
        struct packed_layer *P = &e->layer[l];
        if ((rc = pack(rt, format, L->wqkv, dim + 2 * kv, dim, &P->wqkv)) != 0 ||
            (rc = pack(rt, format, L->wo, dim, dim, &P->wo)) != 0 ||
            (rc = pack(rt, format, L->w13, 2 * hid, dim, &P->w13)) != 0)
            break;
        rc = pack(rt, format, L->w2, dim, hid, &P->w2);
    }
    const size_t cache = s->layers * s->seq * kv;
    if (rc != 0 || (rc = pack(rt, format, m->wcls, s->vocab, dim, &e->wcls)) != 0 ||
        (rc = domain_floats(ctx, dim, &e->x)) != 0 || (rc = domain_floats(ctx, dim, &e->xb)) != 0 ||
        (rc = domain_floats(ctx, dim + 2 * kv, &e->qkv)) != 0 ||
        (rc = domain_floats(ctx, 2 * hid, &e->hb)) != 0 ||
        (rc = domain_floats(ctx, s->heads * s->seq, &e->att)) != 0 ||
        (rc = domain_floats(ctx, s->vocab, &e->logits)) != 0 ||
        (rc = domain_floats(ctx, cache, &e->kcache)) != 0 ||
        (rc = domain_floats(ctx, cache, &e->vcache)) != 0) {
        decode_nxr_destroy(e);
        return rc;
    }
    if ((rc = build_step(e)) != 0) {
        decode_nxr_destroy(e);
        return rc;
    }
    *out = e;
    return 0;
}

/* One matrix's copy on the engine's domain, as the kernel streams it. */
static size_t copy_bytes(const struct decode_nxr *e, const nxr_weights_t *w)
{
    const void *data;
    size_t bytes = 0;
    (void)nxr_weights_copy(w, nxr_ctx_domain(e->ctx), &data, &bytes);
    return bytes;
}

size_t decode_nxr_step_bytes(const struct decode_nxr *e)
{
    size_t bytes = copy_bytes(e, e->wcls);
    for (size_t l = 0; l < e->m->shape.layers; l++)
        bytes += copy_bytes(e, e->layer[l].wqkv) + copy_bytes(e, e->layer[l].wo) +
                 copy_bytes(e, e->layer[l].w13) + copy_bytes(e, e->layer[l].w2);
    return bytes;
}

static int add_copy(const struct decode_nxr *e, const nxr_weights_t *w, struct read_limit *r)
{
    const void *data;
    size_t bytes;
    int rc = nxr_weights_copy(w, nxr_ctx_domain(e->ctx), &data, &bytes);
    return rc != 0 ? rc : read_limit_add(r, data, bytes);
}

int decode_nxr_read_limit(const struct decode_nxr *e, struct read_limit *r)
{
    int rc = 0;
    for (size_t l = 0; l < e->m->shape.layers && rc == 0; l++) {
        const struct packed_layer *P = &e->layer[l];
        if ((rc = add_copy(e, P->wqkv, r)) != 0 || (rc = add_copy(e, P->wo, r)) != 0 ||
            (rc = add_copy(e, P->w13, r)) != 0)
            break;
        rc = add_copy(e, P->w2, r);
    }
    return rc != 0 ? rc : add_copy(e, e->wcls, r);
}

void decode_nxr_destroy(struct decode_nxr *e)
{
    if (e == NULL)
        return;
    for (size_t l = 0; l < e->m->shape.layers; l++) {
        nxr_weights_destroy(e->layer[l].wqkv);
        nxr_weights_destroy(e->layer[l].wo);
        nxr_weights_destroy(e->layer[l].w13);
        nxr_weights_destroy(e->layer[l].w2);
    }
    nxr_weights_destroy(e->wcls);
    nxr_step_destroy(e->step);
    free(e->ops);
    nxr_domain_free(e->x), nxr_domain_free(e->xb), nxr_domain_free(e->qkv);
    nxr_domain_free(e->hb), nxr_domain_free(e->att), nxr_domain_free(e->logits);
    nxr_domain_free(e->kcache), nxr_domain_free(e->vcache);
    free(e->layer);
    free(e);
}

/* c = a W^T (+ c when accumulate: the residual add), one row. */
static int product(struct decode_nxr *e, const float *a, nxr_weights_t *w, float *c,
                   bool accumulate)
{
    struct nxr_sgemm_packed_args g = {.m = 1,
                                      .alpha = 1.0f,
                                      .a = a,
                                      .lda = nxr_weights_k(w),
                                      .w = w,
                                      .beta = accumulate ? 1.0f : 0.0f,
                                      .c = c,
                                      .ldc = nxr_weights_n(w)};
    return nxr_sgemm_packed(e->ctx, &g, NULL);
}

/* One layer's attention at pos, a head per iteration. */
struct attention {
    struct decode_nxr *e;
    const float *q, *kc, *vc; /* this layer's cache */
    size_t pos;
    int rc; /* the first failure of a body, 0 if none */
};

static void attention_heads(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    struct attention *a = arg;
    const struct svc_llama_shape *s = &a->e->m->shape;
    const size_t hs = svc_llama_head_size(s), kv = svc_llama_kv_dim(s), n = a->pos + 1;
    for (size_t h = begin; h < end; h++) {
        const size_t off = h / (s->heads / s->kv_heads) * hs;
        float *att = a->e->att + h * s->seq, *out = a->e->xb + h * hs;
        /* scores = q_h K^T / sqrt(hs), K's rows strided by kv_dim in the cache. */
        struct nxr_sgemm_args scores = {.trans_b = true,
                                        .m = 1,
                                        .n = n,
                                        .k = hs,
                                        .alpha = 1.0f / sqrtf((float)hs),
                                        .a = a->q + h * hs,
                                        .lda = hs,
                                        .b = a->kc + off,
                                        .ldb = kv,
                                        .c = att,
                                        .ldc = n};
        /* out = softmax(scores) V. */
        struct nxr_sgemm_args mix = {.m = 1,
                                     .n = hs,
                                     .k = n,
                                     .alpha = 1.0f,
                                     .a = att,
                                     .lda = n,
                                     .b = a->vc + off,
                                     .ldb = kv,
                                     .c = out,
                                     .ldc = hs};
        int rc = nxr_sgemm(a->e->ctx, &scores);
        if (rc == 0)
            rc = nxr_softmax(a->e->ctx, 1, n, att, n, att, n);
        if (rc == 0)
            rc = nxr_sgemm(a->e->ctx, &mix);
        if (rc != 0)
            __atomic_compare_exchange_n(&a->rc, &(int){0}, rc, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
    }
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != 0)                                                                              \
            return rc_;                                                                            \
    } while (0)

/* Runs call, adding its seconds to tm->bucket; what no call covers is the
 * gaps between them (decode_nxr_times). */
#define TIMED(bucket, call)                                                                        \
    do {                                                                                           \
        const double t0_ = bench_now();                                                            \
        int rc_ = (call);                                                                          \
        tm->bucket += bench_now() - t0_;                                                           \
        if (rc_ != 0)                                                                              \
            return rc_;                                                                            \
    } while (0)

/* RoPE on q and k, then k and v into the cache at pos (plain code). */
static int rope_and_cache(struct decode_nxr *e, size_t pos, float *kc, float *vc)
{
    const struct svc_llama_shape *s = &e->m->shape;
    const size_t dim = s->dim, kv = svc_llama_kv_dim(s);
    float *q = e->qkv, *k = e->qkv + dim, *v = e->qkv + dim + kv;
    svc_llama_rope(s, pos, q, k);
    memcpy(kc + pos * kv, k, kv * sizeof(float));
    memcpy(vc + pos * kv, v, kv * sizeof(float));
    return 0;
}

static int attend(struct decode_nxr *e, size_t pos, const float *kc, const float *vc)
{
    struct attention a = {.e = e, .q = e->qkv, .kc = kc, .vc = vc, .pos = pos};
    int rc = nxr_parallel_for(e->ctx, 0, e->m->shape.heads, 1, attention_heads, &a);
    return rc != 0 ? rc : a.rc;
}

static int embed(struct decode_nxr *e, int token)
{
    const size_t dim = e->m->shape.dim;
    memcpy(e->x, e->m->embed + (size_t)token * dim, dim * sizeof(float));
    return 0;
}

static int forward(struct decode_nxr *e, int token, size_t pos, struct decode_nxr_times *tm)
{
    const struct svc_llama *m = e->m;
    const struct svc_llama_shape *s = &m->shape;
    const size_t dim = s->dim, kv = svc_llama_kv_dim(s), hid = s->hidden;
    nxr_ctx_t *ctx = e->ctx;
    const double t_step = bench_now();
    TIMED(rest, embed(e, token));
    for (size_t l = 0; l < s->layers; l++) {
        const struct svc_llama_layer *L = &m->layer[l];
        const struct packed_layer *P = &e->layer[l];
        float *kc = e->kcache + l * s->seq * kv, *vc = e->vcache + l * s->seq * kv;
        TIMED(rest, nxr_rmsnorm(ctx, 1, dim, e->x, dim, L->rms_att, SVC_LLAMA_EPS, e->xb, dim));
        TIMED(projections, product(e, e->xb, P->wqkv, e->qkv, false));
        TIMED(rest, rope_and_cache(e, pos, kc, vc));
        TIMED(attention, attend(e, pos, kc, vc));
        TIMED(projections, product(e, e->xb, P->wo, e->x, true));
        TIMED(rest, nxr_rmsnorm(ctx, 1, dim, e->x, dim, L->rms_ffn, SVC_LLAMA_EPS, e->xb, dim));
        TIMED(projections, product(e, e->xb, P->w13, e->hb, false));
        TIMED(rest, nxr_unary(ctx, NXR_UNARY_SILU, hid, e->hb, e->hb));
        TIMED(rest, nxr_binary(ctx, NXR_BINARY_MUL, hid, e->hb, e->hb + hid, e->hb));
        TIMED(projections, product(e, e->hb, P->w2, e->x, true));
    }
    TIMED(rest, nxr_rmsnorm(ctx, 1, dim, e->x, dim, m->rms_final, SVC_LLAMA_EPS, e->x, dim));
    TIMED(projections, product(e, e->x, e->wcls, e->logits, false));
    tm->step += bench_now() - t_step;
    tm->steps++;
    return 0;
}

int decode_nxr_generate(struct decode_nxr *e, const int *prompt, size_t prompt_len, size_t n,
                        int *out, struct decode_nxr_times *times)
{
    struct decode_nxr_times scratch = {0};
    struct decode_nxr_times *tm = times != NULL ? times : &scratch;
    int token = prompt[0];
    size_t made = 0;
    for (size_t pos = 0; made < n; pos++) {
        TRY(forward(e, token, pos, tm));
        if (pos + 1 < prompt_len) {
            token = prompt[pos + 1];
        } else {
            const double t0 = bench_now();
            size_t best;
            TIMED(rest, nxr_argmax(e->ctx, e->m->shape.vocab, e->logits, &best));
            tm->step += bench_now() - t0;
            token = (int)best;
            out[made++] = token;
        }
    }
    return 0;
}

/* ---- the whole token as one step --------------------------------------------------- */

/* The step's loops for layer l (the arguments its bodies get). */
struct layer_ops {
    struct decode_nxr *e;
    size_t l;
    struct attention att;
};

static void step_failed(struct decode_nxr *e, int rc)
{
    if (rc != 0)
        __atomic_compare_exchange_n(&e->step_rc, &(int){0}, rc, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
}

/* One chunk each: a norm is one short row (it runs in place, on the thread
 * that takes it: a body of the domain). */
static void norm_att(void *arg, size_t b, size_t end, unsigned worker)
{
    (void)b, (void)end, (void)worker;
    struct layer_ops *o = arg;
    struct decode_nxr *e = o->e;
    const size_t dim = e->m->shape.dim;
    step_failed(e, nxr_rmsnorm(e->ctx, 1, dim, e->x, dim, e->m->layer[o->l].rms_att, SVC_LLAMA_EPS,
                               e->xb, dim));
}

static void norm_ffn(void *arg, size_t b, size_t end, unsigned worker)
{
    (void)b, (void)end, (void)worker;
    struct layer_ops *o = arg;
    struct decode_nxr *e = o->e;
    const size_t dim = e->m->shape.dim;
    step_failed(e, nxr_rmsnorm(e->ctx, 1, dim, e->x, dim, e->m->layer[o->l].rms_ffn, SVC_LLAMA_EPS,
                               e->xb, dim));
}

static void norm_final(void *arg, size_t b, size_t end, unsigned worker)
{
    (void)b, (void)end, (void)worker;
    struct decode_nxr *e = arg;
    const size_t dim = e->m->shape.dim;
    step_failed(e,
                nxr_rmsnorm(e->ctx, 1, dim, e->x, dim, e->m->rms_final, SVC_LLAMA_EPS, e->x, dim));
}

static void rope_cache(void *arg, size_t b, size_t end, unsigned worker)
{
    (void)b, (void)end, (void)worker;
    struct layer_ops *o = arg;
    struct decode_nxr *e = o->e;
    const struct svc_llama_shape *s = &e->m->shape;
    const size_t kv = svc_llama_kv_dim(s);
    rope_and_cache(e, e->pos, e->kcache + o->l * s->seq * kv, e->vcache + o->l * s->seq * kv);
}

static void heads(void *arg, size_t b, size_t end, unsigned worker)
{
    struct layer_ops *o = arg;
    o->att.pos = o->e->pos;
    attention_heads(&o->att, b, end, worker);
    step_failed(o->e, o->att.rc);
}

/* hb[i] = silu(hb[i]) * hb[hidden + i] over the range, as the calls do. */
static void swiglu(void *arg, size_t b, size_t end, unsigned worker)
{
    (void)worker;
    struct decode_nxr *e = arg;
    const size_t hid = e->m->shape.hidden;
    float *h = e->hb + b;
    int rc = nxr_unary(e->ctx, NXR_UNARY_SILU, end - b, h, h);
    if (rc == 0)
        rc = nxr_binary(e->ctx, NXR_BINARY_MUL, end - b, h, h + hid, h);
    step_failed(e, rc);
}

static int add_product(nxr_step_t *st, const float *a, nxr_weights_t *w, float *c, bool accumulate)
{
    struct nxr_sgemm_packed_args g = {.m = 1,
                                      .alpha = 1.0f,
                                      .a = a,
                                      .lda = nxr_weights_k(w),
                                      .w = w,
                                      .beta = accumulate ? 1.0f : 0.0f,
                                      .c = c,
                                      .ldc = nxr_weights_n(w)};
    int rc = nxr_step_add_sgemm_packed(st, &g, NULL);
    return rc != 0 ? rc : nxr_step_add_barrier(st);
}

static int add_loop(nxr_step_t *st, size_t n, size_t grain, nxr_for_fn fn, void *arg)
{
    int rc = nxr_step_add_loop(st, 0, n, grain, fn, arg);
    return rc != 0 ? rc : nxr_step_add_barrier(st);
}

/* forward()'s operations, in its order, each behind a barrier (each reads
 * what the one before wrote). */
static int build_step(struct decode_nxr *e)
{
    const struct svc_llama_shape *s = &e->m->shape;
    const size_t kv = svc_llama_kv_dim(s), hid = s->hidden;
    e->ops = calloc(s->layers, sizeof *e->ops);
    if (e->ops == NULL)
        return -ENOMEM;
    int rc = nxr_step_create(&e->step);
    nxr_step_t *st = e->step;
    for (size_t l = 0; l < s->layers && rc == 0; l++) {
        struct layer_ops *o = &e->ops[l];
        const struct packed_layer *P = &e->layer[l];
        *o = (struct layer_ops){.e = e, .l = l};
        o->att = (struct attention){.e = e,
                                    .q = e->qkv,
                                    .kc = e->kcache + l * s->seq * kv,
                                    .vc = e->vcache + l * s->seq * kv};
        if ((rc = add_loop(st, 1, 1, norm_att, o)) != 0 ||
            (rc = add_product(st, e->xb, P->wqkv, e->qkv, false)) != 0 ||
            (rc = add_loop(st, 1, 1, rope_cache, o)) != 0 ||
            (rc = add_loop(st, s->heads, 1, heads, o)) != 0 ||
            (rc = add_product(st, e->xb, P->wo, e->x, true)) != 0 ||
            (rc = add_loop(st, 1, 1, norm_ffn, o)) != 0 ||
            (rc = add_product(st, e->xb, P->w13, e->hb, false)) != 0 ||
            (rc = add_loop(st, hid, 0, swiglu, e)) != 0)
            break;
        rc = add_product(st, e->hb, P->w2, e->x, true);
    }
    if (rc == 0)
        rc = add_loop(st, 1, 1, norm_final, e);
    if (rc == 0)
        rc = add_product(st, e->x, e->wcls, e->logits, false);
    return rc;
}

int decode_nxr_generate_step(struct decode_nxr *e, const int *prompt, size_t prompt_len, size_t n,
                             int *out)
{
    int token = prompt[0];
    size_t made = 0;
    for (size_t pos = 0; made < n; pos++) {
        TRY(embed(e, token));
        e->pos = pos;
        e->step_rc = 0;
        TRY(nxr_step_run(e->ctx, e->step));
        TRY(e->step_rc);
        if (pos + 1 < prompt_len) {
            token = prompt[pos + 1];
        } else {
            size_t best;
            TRY(nxr_argmax(e->ctx, e->m->shape.vocab, e->logits, &best));
            token = (int)best;
            out[made++] = token;
        }
    }
    return 0;
}
