/* The demo's model (see model.h): layout, seeded weights, the forward pass. */
#include "service/model.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define RMS_EPS 1e-5f

struct svc_model_shape svc_model_shape_make(size_t hidden, size_t layers, size_t vocab)
{
    return (struct svc_model_shape){
        .hidden = hidden, .ffn = 4 * hidden, .layers = layers, .vocab = vocab};
}

/* Floats of one block: gamma, W_up, b_up, W_down, b_down. */
static size_t block_floats(const struct svc_model_shape *s)
{
    return s->hidden + s->hidden * s->ffn + s->ffn + s->ffn * s->hidden + s->hidden;
}

size_t svc_model_floats(const struct svc_model_shape *s)
{
    return s->layers * block_floats(s) + s->hidden + s->hidden * s->vocab + s->vocab;
}

double svc_model_flops_per_row(const struct svc_model_shape *s)
{
    return 2.0 * ((double)s->layers * 2.0 * (double)(s->hidden * s->ffn) +
                  (double)(s->hidden * s->vocab));
}

size_t svc_model_scratch_floats(const struct svc_model_shape *s, size_t rows)
{
    /* x, t (hidden each), u (ffn), logits (vocab) */
    return rows * (2 * s->hidden + s->ffn + s->vocab);
}

size_t svc_model_matrices(const struct svc_model_shape *s)
{
    return 2 * s->layers + 1;
}

struct svc_model_matrix svc_model_matrix(const struct svc_model_shape *s, const float *w,
                                         size_t index)
{
    const size_t h = s->hidden, f = s->ffn, l = index / 2;
    if (index == 2 * s->layers)
        return (struct svc_model_matrix){w + s->layers * block_floats(s) + h, h, s->vocab};
    const float *w_up = w + l * block_floats(s) + h;
    if (index % 2 == 0)
        return (struct svc_model_matrix){w_up, h, f};
    return (struct svc_model_matrix){w_up + h * f + f, f, h};
}

/* splitmix64: a fixed, portable stream (the weights must not depend on libc). */
static uint64_t mix(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1): 24 random bits, exact in float. */
static float uniform(uint64_t *state)
{
    return (float)((int32_t)(mix(state) >> 40) - (1 << 23)) / (float)(1 << 23);
}

static void fill(uint64_t *state, float *w, size_t n, float centre, float spread)
{
    for (size_t i = 0; i < n; i++)
        w[i] = centre + spread * uniform(state);
}

void svc_model_fill(const struct svc_model_shape *s, uint64_t seed, float *w)
{
    uint64_t state = seed;
    const float up = 1.0f / sqrtf((float)s->hidden), down = 1.0f / sqrtf((float)s->ffn);
    for (size_t l = 0; l < s->layers; l++) {
        fill(&state, w, s->hidden, 1.0f, 0.05f);
        w += s->hidden;
        fill(&state, w, s->hidden * s->ffn, 0.0f, up);
        w += s->hidden * s->ffn;
        fill(&state, w, s->ffn, 0.0f, 0.02f);
        w += s->ffn;
        fill(&state, w, s->ffn * s->hidden, 0.0f, down);
        w += s->ffn * s->hidden;
        fill(&state, w, s->hidden, 0.0f, 0.02f);
        w += s->hidden;
    }
    fill(&state, w, s->hidden, 1.0f, 0.05f);
    w += s->hidden;
    fill(&state, w, s->hidden * s->vocab, 0.0f, up);
    w += s->hidden * s->vocab;
    fill(&state, w, s->vocab, 0.0f, 0.02f);
}

void svc_model_input(const struct svc_model_shape *s, uint64_t seed, uint64_t index, size_t rows,
                     float *x)
{
    uint64_t state = seed ^ (index * UINT64_C(0xd1b54a32d192ed03)) ^ UINT64_C(0x5851f42d4c957f2d);
    fill(&state, x, rows * s->hidden, 0.0f, 1.0f);
}

int svc_model_forward(const struct svc_ops *ops, void *self, const struct svc_model_shape *s,
                      const float *w, size_t rows, const float *input, float *out,
                      float *scratch)
{
    return svc_model_forward_with(ops, self, s, w, NULL, rows, input, out, scratch);
}

/* One linear step with matrix `index`: packed when there are packed
 * weights, else plain. */
static int linear(const struct svc_ops *ops, void *self, const nxr_weights_t *const *packed,
                  size_t index, size_t rows, size_t in, size_t out, const float *x,
                  const float *w, const float *b, enum svc_act act, bool accumulate, float *y)
{
    if (packed == NULL)
        return ops->linear(self, rows, in, out, x, w, b, act, accumulate, y);
    return ops->linear_packed(self, rows, x, packed[index], b, act, accumulate, y);
}

int svc_model_forward_with(const struct svc_ops *ops, void *self, const struct svc_model_shape *s,
                           const float *w, const nxr_weights_t *const *packed, size_t rows,
                           const float *input, float *out, float *scratch)
{
    if (packed != NULL && ops->linear_packed == NULL)
        return -EINVAL;
    const size_t h = s->hidden, f = s->ffn;
    float *x = scratch, *t = x + rows * h, *u = t + rows * h, *logits = u + rows * f;
    memcpy(x, input, rows * h * sizeof(float));
    int rc = 0;
    for (size_t l = 0; l < s->layers && rc == 0; l++) {
        const float *gamma = w, *w_up = gamma + h, *b_up = w_up + h * f, *w_down = b_up + f,
                    *b_down = w_down + f * h;
        w = b_down + h;
        enum svc_act act = l % 2 == 0 ? SVC_ACT_SILU : SVC_ACT_GELU;
        rc = ops->rmsnorm(self, rows, h, x, gamma, RMS_EPS, t);
        if (rc == 0)
            rc = linear(ops, self, packed, 2 * l, rows, h, f, t, w_up, b_up, act, false, u);
        if (rc == 0)
            rc = linear(ops, self, packed, 2 * l + 1, rows, f, h, u, w_down, b_down,
                        SVC_ACT_NONE, true, x);
    }
    const float *gamma = w, *w_head = gamma + h, *b_head = w_head + h * s->vocab;
    if (rc == 0)
        rc = ops->rmsnorm(self, rows, h, x, gamma, RMS_EPS, t);
    if (rc == 0)
        rc = linear(ops, self, packed, 2 * s->layers, rows, h, s->vocab, t, w_head, b_head,
                    SVC_ACT_NONE, false, logits);
    if (rc == 0)
        rc = ops->softmax(self, rows, s->vocab, logits, out);
    return rc;
}
