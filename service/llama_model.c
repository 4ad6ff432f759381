/* bench/decode's model (see svc_llama.h). */
#include "service/llama_model.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int svc_llama_shape_named(const char *name, struct svc_llama_shape *s)
{
    static const struct svc_llama_shape named[] = {
        /* The two shapes of the issue: a 15M- and a 110M-parameter llama. */
        {"15m", 288, 768, 6, 6, 6, 32000, 256},
        {"110m", 768, 2048, 12, 12, 12, 32000, 1024},
        /* A 1.1B-parameter shape (TinyLlama's): grouped-query attention. */
        {"1b", 2048, 5632, 22, 32, 4, 32000, 2048},
        /* CI's bench stage and the test: small, with grouped-query attention. */
        {"short", 64, 176, 2, 4, 2, 512, 32},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strcmp(name, named[i].name) == 0) {
            *s = named[i];
            return 0;
        }
    return -1;
}

const char *svc_llama_shape_problem(const struct svc_llama_shape *s)
{
    if (s->dim == 0 || s->hidden == 0 || s->layers == 0 || s->heads == 0 || s->kv_heads == 0 ||
        s->vocab == 0 || s->seq == 0)
        return "every dimension must be at least 1";
    if (s->dim % s->heads != 0)
        return "--dim must be a multiple of --heads";
    if (svc_llama_head_size(s) % 2 != 0)
        return "the head size (dim / heads) must be even (RoPE rotates pairs)";
    if (s->kv_heads > s->heads || s->heads % s->kv_heads != 0)
        return "--kv-heads must divide --heads";
    if (s->vocab < SVC_LLAMA_PROMPT_LEN + 1)
        return "--vocab must be larger than the prompt";
    if (s->dim > (1u << 16) || s->hidden > (1u << 18) || s->layers > 1024 ||
        s->vocab > (1u << 20) || s->seq > (1u << 16))
        return "a dimension is implausibly large";
    return NULL;
}

/* xorshift64*: a deterministic stream per seed, the same on every machine. */
static float uniform(uint64_t *state, float scale)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    const uint64_t r = x * 0x2545f4914f6cdd1dull;
    return scale * ((float)(r >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
}

static void fill(uint64_t *state, float *w, size_t n, float scale, float offset)
{
    for (size_t i = 0; i < n; i++)
        w[i] = offset + uniform(state, scale);
}

int svc_llama_create(const struct svc_llama_shape *s, uint64_t seed, struct svc_llama *m)
{
    memset(m, 0, sizeof *m);
    m->shape = *s;
    const size_t dim = s->dim, kv = svc_llama_kv_dim(s), hid = s->hidden;
    /* Each layer's matrices and its two norms' gains, the final norm's, the
     * classifier. */
    const size_t floats =
        svc_llama_layer_macs(s) + s->layers * 2 * dim + dim + svc_llama_classifier_macs(s);
    m->streamed_floats = (floats + 63) / 64 * 64;
    m->streamed = aligned_alloc(64, m->streamed_floats * sizeof(float));
    m->embed = aligned_alloc(64, (s->vocab * dim * sizeof(float) + 63) / 64 * 64);
    m->layer = calloc(s->layers, sizeof *m->layer);
    if (m->streamed == NULL || m->embed == NULL || m->layer == NULL) {
        svc_llama_destroy(m);
        return -ENOMEM;
    }
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
    const float in_dim = 1.0f / sqrtf((float)dim), in_hid = 1.0f / sqrtf((float)hid);
    float *p = m->streamed;
    for (size_t l = 0; l < s->layers; l++) {
        struct svc_llama_layer *L = &m->layer[l];
        fill(&state, p, dim, 0.1f, 1.0f);
        L->rms_att = p, p += dim;
        fill(&state, p, (dim + 2 * kv) * dim, in_dim, 0.0f);
        L->wqkv = p, p += (dim + 2 * kv) * dim;
        fill(&state, p, dim * dim, in_dim, 0.0f);
        L->wo = p, p += dim * dim;
        fill(&state, p, dim, 0.1f, 1.0f);
        L->rms_ffn = p, p += dim;
        fill(&state, p, 2 * hid * dim, in_dim, 0.0f);
        L->w13 = p, p += 2 * hid * dim;
        fill(&state, p, dim * hid, in_hid, 0.0f);
        L->w2 = p, p += dim * hid;
    }
    fill(&state, p, dim, 0.1f, 1.0f);
    m->rms_final = p, p += dim;
    fill(&state, p, s->vocab * dim, in_dim, 0.0f);
    m->wcls = p, p += s->vocab * dim;
    memset(p, 0, (m->streamed_floats - floats) * sizeof(float));
    fill(&state, m->embed, s->vocab * dim, 1.0f, 0.0f);
    return 0;
}

void svc_llama_destroy(struct svc_llama *m)
{
    free(m->streamed);
    free(m->embed);
    free(m->layer);
    memset(m, 0, sizeof *m);
}

void svc_llama_rope(const struct svc_llama_shape *s, size_t pos, float *q, float *k)
{
    const size_t hs = svc_llama_head_size(s);
    for (size_t i = 0; i < hs; i += 2) {
        const float freq = 1.0f / powf(10000.0f, (float)i / (float)hs);
        const float angle = (float)pos * freq, c = cosf(angle), sn = sinf(angle);
        for (size_t h = 0; h < s->heads; h++) {
            float *v = q + h * hs + i, a = v[0], b = v[1];
            v[0] = a * c - b * sn;
            v[1] = a * sn + b * c;
        }
        for (size_t h = 0; h < s->kv_heads; h++) {
            float *v = k + h * hs + i, a = v[0], b = v[1];
            v[0] = a * c - b * sn;
            v[1] = a * sn + b * c;
        }
    }
}

void svc_llama_prompt(const struct svc_llama_shape *s, int prompt[SVC_LLAMA_PROMPT_LEN])
{
    static const int fixed[SVC_LLAMA_PROMPT_LEN] = {1, 450, 4996, 17354};
    for (int i = 0; i < SVC_LLAMA_PROMPT_LEN; i++)
        prompt[i] = (int)((size_t)fixed[i] % s->vocab);
}
