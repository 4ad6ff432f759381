/*
 * The llama-architecture decoder, written once: its shape, its f32 weights
 * (random, from a seed), the rotary position embedding and a fixed prompt.
 * The service's continuous-batching engine (service/llama_batch.h) and
 * bench/decode's two engines (decode_nxr.c, decode_omp.c) all run this
 * model, so that they decode the same bytes.
 *
 * Weights follow the usual checkpoint layout: every matrix is out x in,
 * row-major (y = W x reads W row by row). Everything a decode step reads
 * in full (each layer's norms and matrices, the final norm, the
 * classifier) lies in one allocation, `streamed`, in that order, with a
 * layer's Wq, Wk, Wv adjacent (one (dim + 2 kv_dim) x dim matrix) and its
 * W1, W3 adjacent (one 2 hidden x dim matrix); the embedding table, of which
 * a step reads one row, is apart. A step's weight bytes are `streamed`'s.
 */
#ifndef NXR_SERVICE_LLAMA_MODEL_H
#define NXR_SERVICE_LLAMA_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct svc_llama_shape {
    const char *name; /* "15m", "110m", "1b", "short" or "custom" */
    size_t dim, hidden, layers, heads, kv_heads, vocab, seq;
};

/* Fills *s with a named shape; returns 0, or -1 for an unknown name. */
int svc_llama_shape_named(const char *name, struct svc_llama_shape *s);

/* NULL when the shape is usable, else what is wrong with it. */
const char *svc_llama_shape_problem(const struct svc_llama_shape *s);

static inline size_t svc_llama_head_size(const struct svc_llama_shape *s)
{
    return s->dim / s->heads;
}

static inline size_t svc_llama_kv_dim(const struct svc_llama_shape *s)
{
    return svc_llama_head_size(s) * s->kv_heads;
}

/* One layer's weights, pointers into the model's `streamed`. */
struct svc_llama_layer {
    const float *rms_att; /* dim */
    const float *wqkv;    /* (dim + 2 kv_dim) x dim: Wq, then Wk, then Wv */
    const float *wo;      /* dim x dim */
    const float *rms_ffn; /* dim */
    const float *w13;     /* 2 hidden x dim: W1 (gate), then W3 (up) */
    const float *w2;      /* dim x hidden */
};

struct svc_llama {
    struct svc_llama_shape shape;
    float *streamed;        /* what a step reads in full (see above) */
    size_t streamed_floats; /* its length, a multiple of 64 (zero padded) */
    float *embed;           /* vocab x dim */
    struct svc_llama_layer *layer;
    const float *rms_final; /* dim */
    const float *wcls;      /* vocab x dim */
};

/* Allocates the weights and fills them from `seed` (each matrix uniform in
 * +-1/sqrt(in), the norms' gains near 1, the embedding uniform in +-1).
 * Returns 0 or -ENOMEM (nothing left allocated). */
int svc_llama_create(const struct svc_llama_shape *s, uint64_t seed, struct svc_llama *m);
void svc_llama_destroy(struct svc_llama *m);

/* Multiply-adds of the products a row runs through the layers (Q/K/V, O,
 * W1 and W3, W2), and those of the classifier, which only a row that makes
 * a token runs (a decoder's, a prompt's last). */
static inline size_t svc_llama_layer_macs(const struct svc_llama_shape *s)
{
    const size_t dim = s->dim, kv = svc_llama_kv_dim(s), hid = s->hidden;
    return s->layers * ((dim + 2 * kv) * dim + dim * dim + 2 * hid * dim + dim * hid);
}

static inline size_t svc_llama_classifier_macs(const struct svc_llama_shape *s)
{
    return s->vocab * s->dim;
}

/* The weight bytes one decode step reads. */
static inline size_t svc_llama_step_bytes(const struct svc_llama *m)
{
    return m->streamed_floats * sizeof(float);
}

/* Rotates q (heads x head_size) and k (kv_heads x head_size) for position
 * pos, each pair (2i, 2i + 1) of a head by pos / 10000^(2i / head_size).
 * Both engines call this one, so their rotations are the same bits. */
void svc_llama_rope(const struct svc_llama_shape *s, size_t pos, float *q, float *k);

/* The prompt every run starts from (SVC_LLAMA_PROMPT_LEN tokens < vocab). */
#define SVC_LLAMA_PROMPT_LEN 4
void svc_llama_prompt(const struct svc_llama_shape *s, int prompt[SVC_LLAMA_PROMPT_LEN]);

/* The RMSNorm epsilon both engines use. */
#define SVC_LLAMA_EPS 1e-5f

#endif /* NXR_SERVICE_LLAMA_MODEL_H */
