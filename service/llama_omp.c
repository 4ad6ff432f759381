/* The llama decoder as a plain OpenMP row-loop engine (see llama_omp.h). */
#include "service/llama_omp.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct svc_llama_omp {
    const struct svc_llama *m;
    int threads;
    float *x, *xb, *xb2, *hb, *hb2, *q, *att, *logits;
    float *kcache, *vcache; /* layers x seq x kv_dim */
};

int svc_llama_omp_create(const struct svc_llama *m, int threads, struct svc_llama_omp **out)
{
    const struct svc_llama_shape *s = &m->shape;
    struct svc_llama_omp *e = calloc(1, sizeof *e);
    if (e == NULL)
        return -ENOMEM;
    e->m = m;
    e->threads = threads;
    const size_t cache = s->layers * s->seq * svc_llama_kv_dim(s);
    e->x = calloc(s->dim, sizeof(float));
    e->xb = calloc(s->dim, sizeof(float));
    e->xb2 = calloc(s->dim, sizeof(float));
    e->hb = calloc(s->hidden, sizeof(float));
    e->hb2 = calloc(s->hidden, sizeof(float));
    e->q = calloc(s->dim, sizeof(float));
    e->att = calloc(s->heads * s->seq, sizeof(float));
    e->logits = calloc(s->vocab, sizeof(float));
    e->kcache = calloc(cache, sizeof(float));
    e->vcache = calloc(cache, sizeof(float));
    if (e->x == NULL || e->xb == NULL || e->xb2 == NULL || e->hb == NULL || e->hb2 == NULL ||
        e->q == NULL || e->att == NULL || e->logits == NULL || e->kcache == NULL ||
        e->vcache == NULL) {
        svc_llama_omp_destroy(e);
        return -ENOMEM;
    }
    *out = e;
    return 0;
}

void svc_llama_omp_destroy(struct svc_llama_omp *e)
{
    if (e == NULL)
        return;
    free(e->x), free(e->xb), free(e->xb2), free(e->hb), free(e->hb2), free(e->q);
    free(e->att), free(e->logits), free(e->kcache), free(e->vcache);
    free(e);
}

/* y = W x, W rows x in, rows split statically over the threads. */
static void matmul(float *y, const float *x, const float *w, size_t in, size_t rows, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t i = 0; i < rows; i++) {
        const float *wi = w + i * in;
        float sum = 0.0f;
        for (size_t p = 0; p < in; p++)
            sum += wi[p] * x[p];
        y[i] = sum;
    }
}

static void rmsnorm(float *out, const float *x, const float *gamma, size_t n)
{
    float ss = 0.0f;
    for (size_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(ss / (float)n + SVC_LLAMA_EPS);
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] * inv * gamma[i];
}

static void softmax(float *x, size_t n)
{
    float max = x[0];
    for (size_t i = 1; i < n; i++)
        max = x[i] > max ? x[i] : max;
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (size_t i = 0; i < n; i++)
        x[i] /= sum;
}

/* One decode step: token at pos; the logits land in e->logits. */
static void forward(struct svc_llama_omp *e, int token, size_t pos)
{
    const struct svc_llama *m = e->m;
    const struct svc_llama_shape *s = &m->shape;
    const size_t dim = s->dim, hs = svc_llama_head_size(s), kv = svc_llama_kv_dim(s);
    const size_t hid = s->hidden, group = s->heads / s->kv_heads;
    memcpy(e->x, m->embed + (size_t)token * dim, dim * sizeof(float));
    for (size_t l = 0; l < s->layers; l++) {
        const struct svc_llama_layer *L = &m->layer[l];
        float *kc = e->kcache + l * s->seq * kv, *vc = e->vcache + l * s->seq * kv;
        float *k = kc + pos * kv, *v = vc + pos * kv;
        rmsnorm(e->xb, e->x, L->rms_att, dim);
        matmul(e->q, e->xb, L->wqkv, dim, dim, e->threads);
        matmul(k, e->xb, L->wqkv + dim * dim, dim, kv, e->threads);
        matmul(v, e->xb, L->wqkv + (dim + kv) * dim, dim, kv, e->threads);
        svc_llama_rope(s, pos, e->q, k);
        const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) num_threads(e->threads)
        for (size_t h = 0; h < s->heads; h++) {
            const float *qh = e->q + h * hs;
            float *att = e->att + h * s->seq, *out = e->xb + h * hs;
            const size_t off = (h / group) * hs;
            for (size_t t = 0; t <= pos; t++) {
                const float *kt = kc + t * kv + off;
                float dot = 0.0f;
                for (size_t i = 0; i < hs; i++)
                    dot += qh[i] * kt[i];
                att[t] = dot * scale;
            }
            softmax(att, pos + 1);
            memset(out, 0, hs * sizeof(float));
            for (size_t t = 0; t <= pos; t++) {
                const float *vt = vc + t * kv + off;
                for (size_t i = 0; i < hs; i++)
                    out[i] += att[t] * vt[i];
            }
        }
        matmul(e->xb2, e->xb, L->wo, dim, dim, e->threads);
        for (size_t i = 0; i < dim; i++)
            e->x[i] += e->xb2[i];
        rmsnorm(e->xb, e->x, L->rms_ffn, dim);
        matmul(e->hb, e->xb, L->w13, dim, hid, e->threads);
        matmul(e->hb2, e->xb, L->w13 + hid * dim, dim, hid, e->threads);
        for (size_t i = 0; i < hid; i++) {
            const float g = e->hb[i];
            e->hb[i] = g / (1.0f + expf(-g)) * e->hb2[i];
        }
        matmul(e->xb2, e->hb, L->w2, hid, dim, e->threads);
        for (size_t i = 0; i < dim; i++)
            e->x[i] += e->xb2[i];
    }
    rmsnorm(e->x, e->x, m->rms_final, dim);
    matmul(e->logits, e->x, m->wcls, dim, s->vocab, e->threads);
}

static int argmax(const float *x, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (int)best;
}

void svc_llama_omp_generate(struct svc_llama_omp *e, const int *prompt, size_t prompt_len, size_t n,
                            int *out, void (*on_token)(void *arg, size_t made), void *arg)
{
    int token = prompt[0];
    size_t made = 0;
    for (size_t pos = 0; made < n; pos++) {
        forward(e, token, pos);
        if (pos + 1 < prompt_len) {
            token = prompt[pos + 1];
        } else {
            token = argmax(e->logits, e->m->shape.vocab);
            out[made++] = token;
            if (on_token != NULL)
                on_token(arg, made);
        }
    }
}
