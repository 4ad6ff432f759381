/* The demo's span path (see span_path.h). */
#include "service/span_path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/lone_path.h"

#define MAX_MATRICES 64

struct sharded {
    const float *w; /* the matrix in the model's copy (its identity) */
    nxr_shards_t *shards;
};

struct svc_span_path {
    nxr_ctx_t *span; /* driven by the serving thread only */
    struct sharded matrices[MAX_MATRICES];
    size_t nmatrices;
    float *tmp; /* the GEMM's output before the epilogue */
    size_t tmp_floats;
    struct svc_lone_path *lone;
};

/* The shards of matrix w (in x out), made at its first use. */
static int shards_of(struct svc_span_path *p, const float *w, size_t in, size_t out,
                     nxr_shards_t **s)
{
    for (size_t i = 0; i < p->nmatrices; i++) {
        if (p->matrices[i].w == w) {
            *s = p->matrices[i].shards;
            return 0;
        }
    }
    if (p->nmatrices == MAX_MATRICES)
        return -ENOMEM;
    int rc = nxr_shards_create(p->span, in, out * sizeof(float), NULL,
                               nxr_span_domain_count(p->span), s);
    if (rc != 0)
        return rc;
    for (size_t r = 0; r < in; r++)
        memcpy(nxr_shards_row(*s, r), w + r * out, out * sizeof(float));
    p->matrices[p->nmatrices++] = (struct sharded){.w = w, .shards = *s};
    return 0;
}

static int span_rmsnorm(void *self, size_t rows, size_t cols, const float *x, const float *gamma,
                        float eps, float *out)
{
    const struct svc_span_path *p = self;
    return nxr_rmsnorm(p->span, rows, cols, x, cols, gamma, eps, out, cols);
}

/* y = act(x W + b) (or y += x W + b): the product over the span with W
 * sharded by its input rows, then the epilogue with nxr's kernels. */
static int span_linear(void *self, size_t rows, size_t in, size_t out, const float *x,
                       const float *w, const float *b, enum svc_act act, bool accumulate,
                       float *y)
{
    struct svc_span_path *p = self;
    nxr_shards_t *s;
    int rc = shards_of(p, w, in, out, &s);
    if (rc != 0)
        return rc;
    float *dst = y;
    if (accumulate) {
        if (rows * out > p->tmp_floats) {
            float *grown = realloc(p->tmp, rows * out * sizeof(float));
            if (grown == NULL)
                return -ENOMEM;
            p->tmp = grown;
            p->tmp_floats = rows * out;
        }
        dst = p->tmp;
    }
    struct nxr_span_linear_args a = {.m = rows, .k = in, .n = out, .x = x, .ldx = in, .w = s,
                                     .layout = NXR_SHARD_BY_INNER, .y = dst, .ldy = out};
    if ((rc = nxr_span_linear(p->span, &a)) != 0 ||
        (rc = nxr_binary_rows(p->span, NXR_BINARY_ADD, rows, out, dst, out, b, dst, out)) != 0)
        return rc;
    if (act != SVC_ACT_NONE &&
        (rc = nxr_unary(p->span, act == SVC_ACT_SILU ? NXR_UNARY_SILU : NXR_UNARY_GELU_TANH,
                        rows * out, dst, dst)) != 0)
        return rc;
    return accumulate ? nxr_binary(p->span, NXR_BINARY_ADD, rows * out, y, dst, y) : 0;
}

static int span_softmax(void *self, size_t rows, size_t cols, const float *x, float *out)
{
    const struct svc_span_path *p = self;
    return nxr_softmax(p->span, rows, cols, x, cols, out, cols);
}

static const struct svc_ops svc_ops_span = {
    .rmsnorm = span_rmsnorm,
    .linear = span_linear,
    .softmax = span_softmax,
};

/* On the first member's CPUs, like a per-domain serving thread: the steps
 * a span does not split (norms, epilogues, softmax) then run on the
 * serving thread instead of being handed to a worker. Unbound (a cpuset
 * narrower than the domain) it still serves, with that hand-off. */
static void *span_enter(void *self)
{
    struct svc_span_path *p = self;
    nxr_thread_binding_t *was = NULL;
    return nxr_ctx_bind(p->span, &was) == 0 ? was : NULL;
}

static void span_leave(void *self, void *entered)
{
    (void)self;
    nxr_thread_binding_restore(entered);
}

static const char *span_detail(void *self, int rc)
{
    (void)self, (void)rc;
    return nxr_last_error();
}

static void path_free(struct svc_span_path *p)
{
    for (size_t i = 0; i < p->nmatrices; i++)
        nxr_shards_destroy(p->matrices[i].shards);
    nxr_ctx_destroy(p->span);
    free(p->tmp);
    free(p);
}

int svc_span_path_start(struct svc_span_path **out, nxr_runtime_t *rt,
                        const struct svc_model_shape *shape, const float *weights, char *why,
                        size_t whysz)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (rt == NULL || shape == NULL || weights == NULL)
        return -EINVAL;
    struct svc_span_path *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    struct nxr_span_opts so;
    nxr_span_opts_init(&so);
    so.every = true;
    int rc = nxr_span_create(rt, &so, &p->span);
    if (rc != 0) {
        snprintf(why, whysz, "%s", nxr_last_error());
        free(p);
        return rc;
    }
    struct svc_lone_path_desc d = {.name = "span path",
                                   .ops = &svc_ops_span,
                                   .ops_self = p,
                                   .shape = *shape,
                                   .weights = weights,
                                   .enter = span_enter,
                                   .leave = span_leave,
                                   .detail = span_detail};
    rc = svc_lone_path_start(&p->lone, &d);
    if (rc != 0) {
        snprintf(why, whysz, "the serving thread: %s", nxr_strerror(rc));
        path_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int svc_span_path_submit(void *path, struct svc_request *r)
{
    struct svc_span_path *p = path;
    return svc_lone_path_submit(p->lone, r);
}

size_t svc_span_path_members(const struct svc_span_path *p)
{
    return nxr_span_domain_count(p->span);
}

nxr_domain_t *svc_span_path_member(const struct svc_span_path *p, size_t i, double *on_node)
{
    double lowest = p->nmatrices > 0 ? 1.0 : -1.0;
    for (size_t m = 0; m < p->nmatrices; m++) {
        struct nxr_shard part;
        if (nxr_shards_part(p->matrices[m].shards, i, &part) == 0 && part.rows > 0 &&
            part.on_node < lowest)
            lowest = part.on_node;
    }
    *on_node = lowest;
    return nxr_span_domain_at(p->span, i);
}

void svc_span_path_stop(struct svc_span_path *p)
{
    if (p == NULL)
        return;
    svc_lone_path_stop(p->lone); /* before the span its ops use */
    path_free(p);
}
