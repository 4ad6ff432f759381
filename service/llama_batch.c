/* Continuous batching of the llama decoder on one domain (see llama_batch.h). */
#include "service/llama_batch.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "service/llama_scores.h"

/* The largest of m and a[0, n): sixteen running maxima, then the largest
 * of them. The largest of a set is the same value in any order (a NaN
 * loses every comparison either way), so the lanes change no bits; one
 * running maximum made a chain of compares as long as the cache. */
static inline __attribute__((always_inline)) float max_lanes(const float *a, size_t n, float m)
{
    float lane[16];
    for (size_t l = 0; l < 16; l++)
        lane[l] = m;
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (size_t l = 0; l < 16; l++)
            lane[l] = a[j + l] > lane[l] ? a[j + l] : lane[l];
    for (; j < n; j++)
        lane[0] = a[j] > lane[0] ? a[j] : lane[0];
    for (size_t l = 0; l < 16; l++)
        m = lane[l] > m ? lane[l] : m;
    return m;
}

/* The rows attention reads: row i's sequence and position, and its runs
 * (run j is rows [run_first[j], run_first[j + 1]), n_runs of them). */
struct attention_rows {
    struct svc_llama_seq **seq;
    size_t *pos;
    size_t *run_first;
    size_t n_runs;
};

/* A layer's operations' argument: the forward's loops over rows and
 * attention's over (run of rows, group of heads) read it. One per layer,
 * made with the batch: a step holds its loops' arguments until it has run.
 * `rows`: the step's rows, or in the last layer the logit rows alone
 * (forward_ops), fixed when the batch is made. */
struct layer_op {
    struct svc_llama_batch *b;
    size_t layer;
    const struct attention_rows *rows;
};

struct svc_llama_batch {
    const struct svc_llama_weights *w;
    const struct svc_llama_side *side;
    const struct svc_llama_shape *s;
    nxr_ctx_t *ctx;
    struct svc_llama_batch_opts o;
    struct svc_kv_blocks kv;
    struct svc_llama_seq **active; /* admission order, n_active of them */
    size_t n_active;
    struct svc_llama_seq *wait_head, *wait_tail;
    size_t n_waiting;
    /* The step's rows (step_tokens at most): whose, which token, where. */
    struct svc_llama_seq **row_seq;
    int *row_token;
    size_t *row_pos;
    size_t *chunk; /* per active sequence: prompt tokens fed this step */
    /* Attention's rows in every layer but the last: row_seq and row_pos,
     * cut into runs by attention_runs. */
    struct attention_rows step_rows;
    /* Logit rows (max_active at most): the row each comes from, its token. */
    size_t *logit_row;
    int *logit_token;
    size_t n_logits; /* logit rows of the last step */
    /* Attention's rows in the last layer: the logit rows, gathered to the
     * front (logit row i is row i there), each a run of its own. */
    struct attention_rows logit_rows;
    /* Activations, in the domain's memory. */
    float *x, *xb, *qkv, *hb, *att, *lx, *logits;
    float *sum; /* with a span: a residual product before it is added */
    /* The forward's loops' arguments, one per layer, and the first failure
     * of a context call inside a loop body (0: none). */
    struct layer_op *layer_ops;
    atomic_int body_rc;
    size_t heads_per_unit; /* attention's heads per iteration (attention_heads_per_unit) */
};

void svc_llama_batch_opts_init(struct svc_llama_batch_opts *o)
{
    memset(o, 0, sizeof *o);
    o->step_tokens = 64;
    o->max_active = 16;
    o->kv_bytes = (size_t)64 << 20;
    o->block_tokens = 16;
}

/* Rows of one prompt chunk that attend together, each block of the cache
 * read once for all of them (attention_rows_heads). A run's state is on the
 * iteration's stack; more rows make fewer, longer iterations for the
 * threads to share. */
#define ATTENTION_RUN_ROWS 4

/* Heads per iteration: half a row's (so a row alone still feeds two
 * threads), at most ATTENTION_MAX_GROUP (the iteration's per-head state is
 * on its stack): the largest divisor of that half within the cap. */
#define ATTENTION_MAX_GROUP 32

static size_t attention_heads_per_unit(const struct svc_llama_shape *s)
{
    const size_t half = s->heads % 2 == 0 ? s->heads / 2 : s->heads;
    size_t per = half < ATTENTION_MAX_GROUP ? half : ATTENTION_MAX_GROUP;
    while (half % per != 0)
        per--;
    return per;
}

static int layer_ops_create(struct svc_llama_batch *b)
{
    const size_t layers = b->s->layers;
    if ((b->layer_ops = calloc(layers, sizeof *b->layer_ops)) == NULL)
        return -ENOMEM;
    for (size_t l = 0; l < layers; l++)
        b->layer_ops[l] = (struct layer_op){
            .b = b, .layer = l, .rows = l + 1 < layers ? &b->step_rows : &b->logit_rows};
    b->heads_per_unit = attention_heads_per_unit(b->s);
    return 0;
}

static int domain_floats(nxr_ctx_t *ctx, size_t n, float **p)
{
    return nxr_domain_malloc(nxr_ctx_domain(ctx), n * sizeof(float), 64, (void **)p);
}

int svc_llama_batch_create(const struct svc_llama_weights *w, size_t side, nxr_ctx_t *ctx,
                           const struct svc_llama_batch_opts *o, struct svc_llama_batch **out)
{
    *out = NULL;
    if (side >= w->domains || o->step_tokens == 0 || o->max_active == 0 ||
        o->max_active > o->step_tokens || o->block_tokens == 0 ||
        (o->span == NULL) != (o->shards == NULL))
        return -EINVAL;
    if (o->span != NULL && (o->shards->members != nxr_span_domain_count(o->span) ||
                            o->shards->count != w->packed.count || w->format != SVC_LLAMA_F32 ||
                            nxr_span_domain_at(o->span, 0) != nxr_ctx_domain(ctx)))
        return -EINVAL;
    const struct svc_llama_shape *s = &w->model->shape;
    const size_t T = o->step_tokens, A = o->max_active, dim = s->dim;
    const size_t kv = svc_llama_kv_dim(s), hid = s->hidden;
    struct svc_llama_batch *b = calloc(1, sizeof *b);
    if (b == NULL)
        return -ENOMEM;
    b->w = w;
    b->side = &w->side[side];
    b->s = s;
    b->ctx = ctx;
    b->o = *o;
    int rc = svc_kv_blocks_create(&b->kv, nxr_ctx_domain(ctx), o->kv_bytes, o->block_tokens,
                                  s->layers, kv);
    b->active = calloc(A, sizeof *b->active);
    b->row_seq = calloc(T, sizeof *b->row_seq);
    b->row_token = calloc(T, sizeof *b->row_token);
    b->row_pos = calloc(T, sizeof *b->row_pos);
    b->chunk = calloc(A, sizeof *b->chunk);
    b->step_rows = (struct attention_rows){
        .seq = b->row_seq, .pos = b->row_pos, .run_first = calloc(T + 1, sizeof(size_t))};
    b->logit_row = calloc(A, sizeof *b->logit_row);
    b->logit_token = calloc(A, sizeof *b->logit_token);
    b->logit_rows = (struct attention_rows){.seq = calloc(A, sizeof(struct svc_llama_seq *)),
                                            .pos = calloc(A, sizeof(size_t)),
                                            .run_first = calloc(A + 1, sizeof(size_t))};
    if (rc == 0 &&
        (b->active == NULL || b->row_seq == NULL || b->row_token == NULL || b->row_pos == NULL ||
         b->chunk == NULL || b->logit_row == NULL || b->logit_token == NULL ||
         b->step_rows.run_first == NULL || b->logit_rows.seq == NULL || b->logit_rows.pos == NULL ||
         b->logit_rows.run_first == NULL))
        rc = -ENOMEM;
    if (rc != 0 || (rc = domain_floats(ctx, T * dim, &b->x)) != 0 ||
        (rc = domain_floats(ctx, T * dim, &b->xb)) != 0 ||
        (rc = domain_floats(ctx, T * (dim + 2 * kv), &b->qkv)) != 0 ||
        (rc = domain_floats(ctx, T * 2 * hid, &b->hb)) != 0 ||
        (rc = domain_floats(ctx, T * s->heads * s->seq, &b->att)) != 0 ||
        (rc = domain_floats(ctx, A * dim, &b->lx)) != 0 ||
        (rc = domain_floats(ctx, A * s->vocab, &b->logits)) != 0 ||
        (o->span != NULL && (rc = domain_floats(ctx, T * dim, &b->sum)) != 0) ||
        (rc = layer_ops_create(b)) != 0) {
        svc_llama_batch_destroy(b);
        return rc;
    }
    *out = b;
    return 0;
}

static void drop_blocks(struct svc_llama_batch *b, struct svc_llama_seq *s)
{
    svc_kv_give(&b->kv, s, s->nblocks, s->blocks);
    free(s->blocks);
    s->blocks = NULL;
    s->nblocks = 0;
}

void svc_llama_batch_destroy(struct svc_llama_batch *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->n_active; i++)
        drop_blocks(b, b->active[i]);
    void *domain_mem[] = {b->x, b->xb, b->qkv, b->hb, b->att, b->lx, b->logits, b->sum};
    for (size_t i = 0; i < sizeof domain_mem / sizeof domain_mem[0]; i++)
        if (domain_mem[i] != NULL)
            nxr_domain_free(domain_mem[i]);
    svc_kv_blocks_destroy(&b->kv);
    free(b->active), free(b->row_seq), free(b->row_token), free(b->row_pos);
    free(b->chunk), free(b->logit_row), free(b->logit_token), free(b->step_rows.run_first);
    free(b->logit_rows.seq), free(b->logit_rows.pos), free(b->logit_rows.run_first);
    free(b->layer_ops);
    free(b);
}

/* Cache positions s needs: the prompt's, then every token it makes but the
 * last (which no later step feeds). */
static size_t positions(const struct svc_llama_seq *s)
{
    return s->prompt_len + s->gen - 1;
}

int svc_llama_batch_submit(struct svc_llama_batch *b, struct svc_llama_seq *s)
{
    if (s == NULL || s->prompt == NULL || s->out == NULL || s->prompt_len == 0 || s->gen == 0 ||
        positions(s) > b->s->seq || svc_kv_blocks_for(&b->kv, positions(s)) > b->kv.count)
        return -EINVAL;
    for (size_t i = 0; i < s->prompt_len; i++)
        if (s->prompt[i] < 0 || (size_t)s->prompt[i] >= b->s->vocab)
            return -EINVAL;
    s->fed = 0;
    s->made = 0;
    s->blocks = NULL;
    s->nblocks = 0;
    s->passed = 0;
    s->next = NULL;
    if (b->wait_tail != NULL)
        b->wait_tail->next = s;
    else
        b->wait_head = s;
    b->wait_tail = s;
    b->n_waiting++;
    return 0;
}

bool svc_llama_batch_idle(const struct svc_llama_batch *b)
{
    return b->n_active == 0 && b->n_waiting == 0;
}

size_t svc_llama_batch_active(const struct svc_llama_batch *b)
{
    return b->n_active;
}

size_t svc_llama_batch_waiting(const struct svc_llama_batch *b)
{
    return b->n_waiting;
}

size_t svc_llama_batch_free_blocks(const struct svc_llama_batch *b)
{
    return b->kv.free_count;
}

size_t svc_llama_batch_logits(const struct svc_llama_batch *b, size_t i,
                              const struct svc_llama_seq **seq, const float **logits)
{
    if (i < b->n_logits) {
        *seq = b->row_seq[b->logit_row[i]];
        *logits = b->logits + i * b->s->vocab;
    }
    return b->n_logits;
}

const struct svc_kv_blocks *svc_llama_batch_cache(const struct svc_llama_batch *b)
{
    return &b->kv;
}

/* The waiting sequence that joins next (the link that points at it): the
 * one with the most tokens to make, the earliest of equals, so that the
 * longest decoders start first and decode through the others' prefill
 * (with the prefill serial, the order that ends a set of sequences soonest:
 * the largest tail first). A sequence that later ones have passed
 * max_active times goes next whatever its length: nobody waits forever. */
static struct svc_llama_seq **next_waiting(struct svc_llama_batch *b)
{
    struct svc_llama_seq **pick = &b->wait_head;
    if ((*pick)->passed >= b->o.max_active)
        return pick;
    for (struct svc_llama_seq **l = &(*pick)->next; *l != NULL; l = &(*l)->next)
        if ((*l)->gen > (*pick)->gen)
            pick = l;
    return pick;
}

/* The next waiting sequence (next_waiting) joins if the cache holds its
 * whole length; those it passed count it. */
static bool admit(struct svc_llama_batch *b)
{
    if (b->wait_head == NULL || b->n_active == b->o.max_active)
        return false;
    struct svc_llama_seq **link = next_waiting(b), *s = *link;
    const size_t n = svc_kv_blocks_for(&b->kv, positions(s));
    if (n > b->kv.free_count)
        return false;
    size_t *table = malloc(n * sizeof *table);
    if (table == NULL)
        return false; /* it waits; a later step tries again */
    svc_kv_take(&b->kv, s, n, table);
    s->blocks = table;
    s->nblocks = n;
    struct svc_llama_seq *before = NULL; /* the one ahead of s, if any */
    for (struct svc_llama_seq *p = b->wait_head; p != s; p = p->next) {
        p->passed++;
        before = p;
    }
    *link = s->next;
    if (b->wait_tail == s)
        b->wait_tail = before;
    s->next = NULL;
    b->n_waiting--;
    b->chunk[b->n_active] = 0;
    b->active[b->n_active++] = s;
    return true;
}

static void add_row(struct svc_llama_batch *b, size_t *rows, struct svc_llama_seq *s, int token,
                    size_t pos)
{
    b->row_seq[*rows] = s;
    b->row_token[*rows] = token;
    b->row_pos[*rows] = pos;
    (*rows)++;
}

/* Feeds active sequence i's next prompt chunk, up to limit rows in the
 * step; a chunk that ends the prompt asks for logits. */
static void add_chunk(struct svc_llama_batch *b, size_t i, size_t limit, size_t *rows,
                      size_t *logits)
{
    struct svc_llama_seq *s = b->active[i];
    const size_t room = limit - *rows, left = s->prompt_len - s->fed;
    const size_t c = left < room ? left : room;
    for (size_t j = 0; j < c; j++)
        add_row(b, rows, s, s->prompt[s->fed + j], s->fed + j);
    b->chunk[i] = c;
    if (c > 0 && c == left)
        b->logit_row[(*logits)++] = *rows - 1;
}

/* out += p v over n floats. restrict: the output row is never the cache, and
 * saying so lets the compiler keep out in registers a vector at a time
 * instead of loading and storing it around every multiply-add. */
static inline __attribute__((always_inline)) void axpy_lanes(float *restrict out, float p,
                                                             const float *restrict v, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t l = 0; l < 16; l++)
            out[i + l] += p * v[i + l];
    for (; i < n; i++)
        out[i] += p * v[i];
}

/* axpy_lanes of four values `stride` floats apart, in their order: each
 * element of out takes the four products one after another, as four calls
 * would add them (the same bits), loaded and stored once instead of four
 * times. */
static inline __attribute__((always_inline)) void
axpy4_lanes(float *restrict out, const float p[4], const float *restrict v, size_t stride, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t l = 0; l < 16; l++) {
            float o = out[i + l];
            o += p[0] * v[i + l];
            o += p[1] * v[stride + i + l];
            o += p[2] * v[2 * stride + i + l];
            o += p[3] * v[3 * stride + i + l];
            out[i + l] = o;
        }
    for (; i < n; i++) {
        float o = out[i];
        o += p[0] * v[i];
        o += p[1] * v[stride + i];
        o += p[2] * v[2 * stride + i];
        o += p[3] * v[3 * stride + i];
        out[i] = o;
    }
}

/* The service is built for the ISA's baseline, so attention's lane loops
 * ran 4 wide (SSE); a clone per vector width runs them as wide as the CPU
 * has (110m demo, three alternated pairs: 1.02-1.05x tokens/s). The lanes
 * do the same multiplies and adds in the same order in every clone (no
 * contraction in ISO C mode), so the bits do not depend on the clone. */
#if defined(__SANITIZE_THREAD__)
#define ATTENTION_NO_CLONES 1 /* TSan cannot run the clones' ifunc resolver */
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ATTENTION_NO_CLONES 1
#endif
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(ATTENTION_NO_CLONES)
#define ATTENTION_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ATTENTION_CLONES
#endif

/* The first row of a run (row i attends over [0, n0 + i)) that reaches
 * position t0. */
static inline size_t first_row_reaching(size_t t0, size_t n0)
{
    return t0 < n0 ? 0 : t0 - n0 + 1;
}

/* One iteration: a run of rows (attention_runs: up to ATTENTION_RUN_ROWS
 * consecutive positions of one sequence, a prompt chunk's; a decoder's row
 * alone) and a group of heads (attention_heads_per_unit). Each cache block
 * is read for every head of the group and every row of the run while it is
 * in cache (a block's key tile is one run of kv x bt floats, its values one
 * of bt x kv), not once per head and row. Each row's and head's scores,
 * softmax and sum are its own, in the same order whichever run, group or
 * thread computes them: the same bits as a row alone. */
ATTENTION_CLONES static void attention_rows_heads(void *arg, size_t begin, size_t end,
                                                  unsigned worker)
{
    (void)worker;
    const struct layer_op *a = arg;
    struct svc_llama_batch *b = a->b;
    const struct svc_llama_shape *s = b->s;
    const size_t hs = svc_llama_head_size(s), dim = s->dim, kv = svc_llama_kv_dim(s);
    const size_t group = s->heads / s->kv_heads, bt = b->kv.block_tokens;
    const size_t per = b->heads_per_unit, units = s->heads / per;
    const float scale = 1.0f / sqrtf((float)hs);
    for (size_t it = begin; it < end; it++) {
        const size_t run = it / units, h0 = it % units * per;
        const size_t r0 = a->rows->run_first[run], rows = a->rows->run_first[run + 1] - r0;
        const struct svc_llama_seq *q_seq = a->rows->seq[r0];
        /* Row r0 + i attends over positions [0, n0 + i). */
        const size_t n0 = a->rows->pos[r0] + 1, n_end = n0 + rows - 1;
        float max[ATTENTION_RUN_ROWS][ATTENTION_MAX_GROUP];
        for (size_t i = 0; i < rows; i++)
            for (size_t h = h0; h < h0 + per; h++)
                max[i][h - h0] = -INFINITY;
        /* A block at a time: one lookup per block, not a division per
         * position. */
        for (size_t t0 = 0; t0 < n_end; t0 += bt) {
            const float *kt = svc_kv_keys(&b->kv, q_seq->blocks, a->layer, t0);
            for (size_t h = h0; h < h0 + per; h++)
                for (size_t i = first_row_reaching(t0, n0); i < rows; i++) {
                    const size_t n = n0 + i, nt = (t0 + bt < n ? t0 + bt : n) - t0;
                    const size_t r = r0 + i;
                    float *att = b->att + (r * s->heads + h) * s->seq + t0;
                    svc_llama_scores_tile(b->qkv + r * (dim + 2 * kv) + h * hs,
                                          kt + h / group * hs * bt, bt, hs, nt, scale, att);
                    max[i][h - h0] = max_lanes(att, nt, max[i][h - h0]);
                }
        }
        for (size_t i = 0; i < rows; i++)
            for (size_t h = h0; h < h0 + per; h++) {
                const size_t n = n0 + i, r = r0 + i;
                float *att = b->att + (r * s->heads + h) * s->seq, total = 0.0f;
                for (size_t t = 0; t < n; t++) {
                    att[t] = expf(att[t] - max[i][h - h0]);
                    total += att[t];
                }
                /* Each weight divided once here, a vector at a time, not
                 * once per head and position in the sum below: the same
                 * division, the same bits. */
                size_t t = 0;
                for (; t + 16 <= n; t += 16)
                    for (size_t l = 0; l < 16; l++)
                        att[t + l] = att[t + l] / total;
                for (; t < n; t++)
                    att[t] = att[t] / total;
                memset(b->xb + r * dim + h * hs, 0, hs * sizeof(float));
            }
        for (size_t t0 = 0; t0 < n_end; t0 += bt) {
            const float *vb = svc_kv_value(&b->kv, q_seq->blocks, a->layer, t0);
            for (size_t h = h0; h < h0 + per; h++)
                for (size_t i = first_row_reaching(t0, n0); i < rows; i++) {
                    const size_t n = n0 + i, r = r0 + i, t1 = t0 + bt < n ? t0 + bt : n;
                    const float *att = b->att + (r * s->heads + h) * s->seq,
                                *v = vb + h / group * hs;
                    float *out = b->xb + r * dim + h * hs;
                    size_t t = t0;
                    for (; t + 4 <= t1; t += 4, v += 4 * kv)
                        axpy4_lanes(out, att + t, v, kv, hs);
                    for (; t < t1; t++, v += kv)
                        axpy_lanes(out, att[t], v, hs);
                }
        }
    }
}

/* With a span: c[rows x n] = a W^T (+ c when accumulate: the residual
 * add), W the matrix `index` (svc_llama_weights' numbering) as its shards,
 * each member computing its own rows' outputs. The residual add is one
 * more pass (c + (a W^T): one rounding, as the packed product's beta = 1
 * does). The shards are rows of W, summed by dot products along k, where
 * the f32 copy's panels sum in one chain: the span's tokens are the one
 * domain's (llama_span_test), its bits need not be. */
static int span_product(struct svc_llama_batch *b, size_t rows, const float *a, size_t lda,
                        size_t index, float *c, bool accumulate)
{
    const nxr_shards_t *w = svc_llama_shard(b->o.shards, index);
    const size_t n = nxr_weights_n(b->w->packed.m[index]);
    const size_t k = nxr_weights_k(b->w->packed.m[index]);
    float *y = accumulate ? b->sum : c;
    struct nxr_span_linear_args g = {.m = rows,
                                     .k = k,
                                     .n = n,
                                     .x = a,
                                     .ldx = lda,
                                     .w = w,
                                     .layout = NXR_SHARD_BY_OUTPUT,
                                     .y = y,
                                     .ldy = n};
    int rc = nxr_span_linear(b->o.span, &g);
    if (rc != 0 || !accumulate)
        return rc;
    return nxr_binary(b->ctx, NXR_BINARY_ADD, rows * n, c, y, c);
}

/* Matrix `which` of layer l, in svc_llama_weights' numbering. */
static size_t matrix(size_t l, int which)
{
    return l * SVC_LLAMA_MATRICES + (size_t)which;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != 0)                                                                              \
            return rc_;                                                                            \
    } while (0)

/* A context call's failure inside a loop body: the first one is kept, and
 * the forward returns it once its operations are done. */
static void body_failed(struct svc_llama_batch *b, int rc)
{
    int none = 0;
    if (rc != 0)
        atomic_compare_exchange_strong(&b->body_rc, &none, rc);
}

/* The forward's loops below run over rows (or logit rows, or attention's
 * (run of rows, group of heads)). A context call in a body (nxr_rmsnorm,
 * nxr_argmax) runs in place on the thread that took the chunk: a body of
 * the domain. */

/* RMSNorm of x's rows into xb with layer o's norm weights `which`: 0
 * before attention, 1 before the FFN (svc_llama_side's order). */
static void norm_rows(const struct layer_op *o, size_t begin, size_t end, size_t which)
{
    struct svc_llama_batch *b = o->b;
    const size_t dim = b->s->dim;
    const float *weights = b->side->rms_att0 + (2 * o->layer + which) * dim;
    body_failed(b, nxr_rmsnorm(b->ctx, end - begin, dim, b->x + begin * dim, dim, weights,
                               SVC_LLAMA_EPS, b->xb + begin * dim, dim));
}

static void norm_att_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    norm_rows(arg, begin, end, 0);
}

static void norm_ffn_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    norm_rows(arg, begin, end, 1);
}

/* RoPE on each row's q and k at its position, then its k and v into its
 * sequence's cache: every row's keys are in place before any row attends
 * (a barrier follows), so a chunk's later tokens see its earlier ones.
 * Rows write their own positions: no two write the same floats. */
static void rope_cache_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    const struct layer_op *o = arg;
    struct svc_llama_batch *b = o->b;
    const struct svc_llama_shape *s = b->s;
    const size_t dim = s->dim, kv = svc_llama_kv_dim(s);
    for (size_t r = begin; r < end; r++) {
        float *q = b->qkv + r * (dim + 2 * kv), *k = q + dim, *v = k + kv;
        const struct svc_llama_seq *sq = b->row_seq[r];
        svc_llama_rope(s, b->row_pos[r], q, k);
        svc_kv_put_key(&b->kv, sq->blocks, o->layer, b->row_pos[r], k);
        memcpy(svc_kv_value(&b->kv, sq->blocks, o->layer, b->row_pos[r]), v, kv * sizeof(float));
    }
}

/* SwiGLU in place on each row of hb: gate = silu(gate) * up. */
static void swiglu_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    const struct layer_op *o = arg;
    const struct svc_llama_batch *b = o->b;
    const size_t hid = b->s->hidden;
    for (size_t r = begin; r < end; r++) {
        float *g = b->hb + r * 2 * hid, *u = g + hid;
        for (size_t i = 0; i < hid; i++)
            g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

/* The logit rows (gathered to the front of x in the last layer) normed
 * into lx for the classifier. */
static void final_norm_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    struct svc_llama_batch *b = arg;
    const size_t dim = b->s->dim;
    body_failed(b, nxr_rmsnorm(b->ctx, end - begin, dim, b->x + begin * dim, dim,
                               b->side->rms_final, SVC_LLAMA_EPS, b->lx + begin * dim, dim));
}

/* Logit row i's residual and q (with its k and v) moved from row
 * logit_row[i] to row i, in order: the rows only grow apart (logit_row
 * rises, logit_row[i] >= i), so no move overwrites a row still to move.
 * One iteration: in parallel, row i's move could overwrite the row another
 * thread is reading. */
static void gather_logit_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    (void)begin;
    (void)end;
    struct svc_llama_batch *b = arg;
    const size_t dim = b->s->dim, width = dim + 2 * svc_llama_kv_dim(b->s);
    for (size_t i = 0; i < b->logit_rows.n_runs; i++) {
        const size_t from = b->logit_row[i];
        if (from == i)
            continue;
        memcpy(b->x + i * dim, b->x + from * dim, dim * sizeof(float));
        memcpy(b->qkv + i * width, b->qkv + from * width, width * sizeof(float));
    }
}

static void argmax_rows(void *arg, size_t begin, size_t end, unsigned worker)
{
    (void)worker;
    struct svc_llama_batch *b = arg;
    for (size_t i = begin; i < end; i++) {
        size_t best = 0;
        int rc = nxr_argmax(b->ctx, b->s->vocab, b->logits + i * b->s->vocab, &best);
        body_failed(b, rc);
        b->logit_token[i] = rc == 0 ? (int)best : 0;
    }
}

/* Where the forward's operations go. Without a span: into one nxr_step,
 * each behind a barrier (each reads what the one before wrote), run as
 * one region when the forward is built, so a token's 9 operations a layer
 * cost no fork and join each. With a span the products are span calls,
 * which no step holds, so every operation runs as it is added. */
struct ops {
    struct svc_llama_batch *b;
    nxr_step_t *step; /* NULL: run at once (a span) */
};

/* Chunks of one iteration, claimed one at a time. An iteration of
 * attention (a run of rows, a group of heads) costs its rows' positions: decoders' rows (first)
 * attend over whole caches, a prompt chunk's over its first positions. In even contiguous shares
 * (the static schedule) one thread took the decoders and the other waited: 9 % of a 110m step's
 * samples in the caller's share against 3.6 % in the worker's. Claimed one at a time, they balance.
 * A row of a norm or of SwiGLU is the smallest useful piece at the batch's few rows. */
static const struct nxr_for_opts claimed_one_by_one = {.grain = 1,
                                                       .schedule = NXR_SCHEDULE_DYNAMIC};

static int op_loop(struct ops *o, size_t n, nxr_for_fn fn, void *arg)
{
    int rc;
    if (o->step == NULL) {
        rc = nxr_parallel_for_opts(o->b->ctx, 0, n, &claimed_one_by_one, fn, arg);
        return rc != 0 ? rc : atomic_load(&o->b->body_rc);
    }
    rc = nxr_step_add_loop(o->step, 0, n, claimed_one_by_one.grain, fn, arg);
    return rc != 0 ? rc : nxr_step_add_barrier(o->step);
}

static int op_product(struct ops *o, size_t rows, const float *a, size_t lda, size_t index,
                      float *c, bool accumulate)
{
    if (o->step == NULL)
        return span_product(o->b, rows, a, lda, index, c, accumulate);
    const nxr_weights_t *w = o->b->w->packed.m[index];
    struct nxr_sgemm_packed_args g = {.m = rows,
                                      .alpha = 1.0f,
                                      .a = a,
                                      .lda = lda,
                                      .w = w,
                                      .beta = accumulate ? 1.0f : 0.0f,
                                      .c = c,
                                      .ldc = nxr_weights_n(w)};
    int rc = nxr_step_add_sgemm_packed(o->step, &g, NULL);
    return rc != 0 ? rc : nxr_step_add_barrier(o->step);
}

/* The forward's operations, in order, into o. In the last layer only the
 * logit rows go on past the cache write: a prompt row that makes no token
 * leaves nothing but its keys and values for later steps, which are in the
 * cache by then, so its attention, output projection and FFN there would
 * be computed for nothing (at 12 prompt rows a step, about 4 % of a 110m
 * step's arithmetic). Every row's arithmetic is its own, so the logit
 * rows' bits are the same either way. */
static int forward_ops(struct ops *o, size_t rows, size_t logits)
{
    struct svc_llama_batch *b = o->b;
    const struct svc_llama_shape *s = b->s;
    const size_t dim = s->dim, hid = s->hidden;
    for (size_t l = 0; l < s->layers; l++) {
        struct layer_op *lo = &b->layer_ops[l];
        const size_t units = s->heads / b->heads_per_unit;
        size_t n = rows;
        TRY(op_loop(o, n, norm_att_rows, lo));
        TRY(op_product(o, n, b->xb, dim, matrix(l, SVC_LLAMA_WQKV), b->qkv, false));
        TRY(op_loop(o, n, rope_cache_rows, lo));
        if (l + 1 == s->layers) {
            if (logits == 0)
                return 0;
            TRY(op_loop(o, 1, gather_logit_rows, b));
            n = logits;
        }
        TRY(op_loop(o, lo->rows->n_runs * units, attention_rows_heads, lo));
        TRY(op_product(o, n, b->xb, dim, matrix(l, SVC_LLAMA_WO), b->x, true));
        TRY(op_loop(o, n, norm_ffn_rows, lo));
        TRY(op_product(o, n, b->xb, dim, matrix(l, SVC_LLAMA_W13), b->hb, false));
        TRY(op_loop(o, n, swiglu_rows, lo));
        TRY(op_product(o, n, b->hb, 2 * hid, matrix(l, SVC_LLAMA_W2), b->x, true));
    }
    TRY(op_loop(o, logits, final_norm_rows, b));
    TRY(op_product(o, logits, b->lx, dim, b->w->packed.count - 1, b->logits, false));
    return op_loop(o, logits, argmax_rows, b);
}

/* Cuts the step's rows into attention's runs: consecutive rows of one
 * sequence at consecutive positions (a prompt chunk's), at most
 * ATTENTION_RUN_ROWS each. */
static void attention_runs(struct svc_llama_batch *b, size_t rows)
{
    struct attention_rows *a = &b->step_rows;
    size_t n = 0;
    for (size_t r = 0; r < rows; r++)
        if (r == 0 || r - a->run_first[n - 1] == ATTENTION_RUN_ROWS || a->seq[r] != a->seq[r - 1] ||
            a->pos[r] != a->pos[r - 1] + 1)
            a->run_first[n++] = r;
    a->run_first[n] = rows;
    a->n_runs = n;
}

/* The last layer's attention rows: logit row i (gathered to row i) alone. */
static void logit_runs(struct svc_llama_batch *b, size_t logits)
{
    struct attention_rows *a = &b->logit_rows;
    for (size_t i = 0; i < logits; i++) {
        a->seq[i] = b->row_seq[b->logit_row[i]];
        a->pos[i] = b->row_pos[b->logit_row[i]];
        a->run_first[i] = i;
    }
    a->run_first[logits] = logits;
    a->n_runs = logits;
}

/* The step's rows through the model: the logit rows' tokens into
 * logit_token. The step is built anew each time (its rows change from one
 * step to the next; building it is microseconds against the milliseconds
 * it runs). */
static int forward(struct svc_llama_batch *b, size_t rows, size_t logits)
{
    const size_t dim = b->s->dim;
    for (size_t r = 0; r < rows; r++)
        memcpy(b->x + r * dim, b->side->embed + (size_t)b->row_token[r] * dim, dim * sizeof(float));
    attention_runs(b, rows);
    logit_runs(b, logits);
    atomic_store(&b->body_rc, 0);
    struct ops o = {.b = b};
    if (b->o.span != NULL)
        return forward_ops(&o, rows, logits);
    int rc = nxr_step_create(&o.step);
    if (rc == 0)
        rc = forward_ops(&o, rows, logits);
    if (rc == 0)
        rc = nxr_step_run(b->ctx, o.step);
    if (rc == 0)
        rc = atomic_load(&b->body_rc);
    nxr_step_destroy(o.step);
    return rc;
}

int svc_llama_batch_step(struct svc_llama_batch *b, struct svc_llama_step *out)
{
    struct svc_llama_step st = {0};
    size_t rows = 0, logits = 0;
    b->n_logits = 0;
    /* Decoders first: one row each, whatever the budget. */
    for (size_t i = 0; i < b->n_active; i++) {
        struct svc_llama_seq *s = b->active[i];
        b->chunk[i] = 0;
        if (s->fed == s->prompt_len) {
            b->logit_row[logits++] = rows;
            add_row(b, &rows, s, s->out[s->made - 1], s->prompt_len + s->made - 1);
        }
    }
    st.decode_rows = rows;
    /* Then the prompts being fed, in admission order, then newcomers: as
     * many rows as the step leaves, or prefill_tokens beside decoders. */
    size_t limit = b->o.step_tokens;
    if (rows > 0 && b->o.prefill_tokens > 0 && rows + b->o.prefill_tokens < limit)
        limit = rows + b->o.prefill_tokens;
    for (size_t i = 0; i < b->n_active && rows < limit; i++)
        if (b->active[i]->fed < b->active[i]->prompt_len)
            add_chunk(b, i, limit, &rows, &logits);
    while (rows < limit && admit(b)) {
        st.admitted++;
        add_chunk(b, b->n_active - 1, limit, &rows, &logits);
    }
    st.rows = rows;
    st.prefill_rows = rows - st.decode_rows;
    if (rows > 0)
        TRY(forward(b, rows, logits));
    for (size_t i = 0; i < b->n_active; i++)
        b->active[i]->fed += b->chunk[i];
    for (size_t i = 0; i < logits; i++) {
        struct svc_llama_seq *s = b->row_seq[b->logit_row[i]];
        s->out[s->made++] = b->logit_token[i];
    }
    /* Leavers give their blocks back before anyone hears of their tokens:
     * a callback may reuse the sequence at once. */
    size_t kept = 0;
    for (size_t i = 0; i < b->n_active; i++) {
        struct svc_llama_seq *s = b->active[i];
        if (s->made == s->gen) {
            drop_blocks(b, s);
            st.left++;
        } else {
            b->active[kept++] = s;
        }
    }
    b->n_active = kept;
    b->n_logits = logits;
    for (size_t i = 0; i < logits && b->o.on_token != NULL; i++)
        b->o.on_token(b->o.arg, b->row_seq[b->logit_row[i]], b->logit_token[i]);
    if (out != NULL)
        *out = st;
    return 0;
}
