/* The llama decoder's matrices sharded by node (see llama_shards.h). */
#include "service/llama_shards.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "service/llama_weights.h"

/* W (out x in, row-major) split by its rows over the span's members. */
static int shard(nxr_ctx_t *span, const float *w, size_t out, size_t in, nxr_shards_t **s)
{
    int rc = nxr_shards_create(span, out, in * sizeof(float), NULL, nxr_span_domain_count(span), s);
    if (rc != 0)
        return rc;
    for (size_t r = 0; r < out; r++)
        memcpy(nxr_shards_row(*s, r), w + r * in, in * sizeof(float));
    return 0;
}

int svc_llama_shards_create(struct svc_llama_shards *out, nxr_ctx_t *span,
                            const struct svc_llama *model)
{
    memset(out, 0, sizeof *out);
    const struct svc_llama_shape *s = &model->shape;
    const size_t dim = s->dim, kv = svc_llama_kv_dim(s), hid = s->hidden;
    const size_t count = s->layers * SVC_LLAMA_MATRICES + 1;
    out->m = calloc(count, sizeof out->m[0]);
    if (out->m == NULL)
        return -ENOMEM;
    out->count = count;
    out->members = nxr_span_domain_count(span);
    int rc = 0;
    for (size_t l = 0; l < s->layers && rc == 0; l++) {
        const struct svc_llama_layer *L = &model->layer[l];
        nxr_shards_t **m = out->m + l * SVC_LLAMA_MATRICES;
        if ((rc = shard(span, L->wqkv, dim + 2 * kv, dim, &m[SVC_LLAMA_WQKV])) != 0 ||
            (rc = shard(span, L->wo, dim, dim, &m[SVC_LLAMA_WO])) != 0 ||
            (rc = shard(span, L->w13, 2 * hid, dim, &m[SVC_LLAMA_W13])) != 0)
            break;
        rc = shard(span, L->w2, dim, hid, &m[SVC_LLAMA_W2]);
    }
    if (rc == 0)
        rc = shard(span, model->wcls, s->vocab, dim, &out->m[count - 1]);
    if (rc != 0)
        svc_llama_shards_destroy(out);
    return rc;
}

void svc_llama_shards_destroy(struct svc_llama_shards *s)
{
    for (size_t i = 0; s->m != NULL && i < s->count; i++)
        nxr_shards_destroy(s->m[i]);
    free(s->m);
    memset(s, 0, sizeof *s);
}

double svc_llama_shards_on_node(const struct svc_llama_shards *s, size_t i)
{
    double lowest = 1.0;
    for (size_t k = 0; k < s->count; k++) {
        struct nxr_shard part;
        if (nxr_shards_part(s->m[k], i, &part) != 0 || part.rows == 0)
            continue;
        if (part.on_node < 0)
            return -1;
        lowest = part.on_node < lowest ? part.on_node : lowest;
    }
    return lowest;
}

nxr_domain_t *svc_llama_shards_domain(const struct svc_llama_shards *s, size_t i)
{
    struct nxr_shard part;
    return s->count > 0 && nxr_shards_part(s->m[0], i, &part) == 0 ? part.domain : NULL;
}
