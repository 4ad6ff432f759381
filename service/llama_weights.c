/* The llama decoder's packed and replicated weights (see llama_weights.h). */
#include "service/llama_weights.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int svc_llama_format_named(const char *name)
{
    if (strcmp(name, "f32") == 0)
        return SVC_LLAMA_F32;
    if (strcmp(name, "bf16") == 0)
        return SVC_LLAMA_BF16;
    if (strcmp(name, "int8") == 0)
        return SVC_LLAMA_INT8;
    return -1;
}

static enum nxr_weights_format nxr_format_of(enum svc_llama_format f)
{
    return f == SVC_LLAMA_BF16   ? NXR_WEIGHTS_BF16
           : f == SVC_LLAMA_INT8 ? NXR_WEIGHTS_Q8_BLOCK32
                                 : NXR_WEIGHTS_F32;
}

const char *svc_llama_format_name(enum svc_llama_format f)
{
    return f == SVC_LLAMA_BF16 ? "bf16" : f == SVC_LLAMA_INT8 ? "int8" : "f32";
}

/* w^T (in x out) from w (out x in), in tiles that keep both sides' lines in
 * cache. */
static void transpose(const float *w, size_t out, size_t in, float *t)
{
    enum { TILE = 32 };
    for (size_t r0 = 0; r0 < out; r0 += TILE)
        for (size_t c0 = 0; c0 < in; c0 += TILE)
            for (size_t r = r0; r < out && r < r0 + TILE; r++)
                for (size_t c = c0; c < in && c < c0 + TILE; c++)
                    t[c * out + r] = w[r * in + c];
}

/* f32 from W^T, untransposed: see llama_weights.h. */
int svc_llama_pack(nxr_runtime_t *rt, enum nxr_weights_format format, const float *w, size_t out,
                   size_t in, const int *ids, size_t n, nxr_weights_t **pw)
{
    struct nxr_weights_desc d;
    nxr_weights_desc_init(&d);
    d.w = w;
    d.trans = true;
    d.k = in;
    d.n = out;
    d.ldw = in;
    d.domain_ids = ids;
    d.domain_count = n;
    float *t = NULL;
    if (format == NXR_WEIGHTS_F32) {
        if ((t = malloc(out * in * sizeof(float))) == NULL)
            return -ENOMEM;
        transpose(w, out, in, t);
        d.w = t;
        d.trans = false;
        d.ldw = out;
    }
    int rc = nxr_weights_create_format(rt, &d, format, pw);
    free(t);
    return rc;
}

static int pack_all(struct svc_llama_weights *w, nxr_runtime_t *rt, const int *ids, size_t n)
{
    const struct svc_llama_shape *s = &w->model->shape;
    const size_t dim = s->dim, kv = svc_llama_kv_dim(s), hid = s->hidden;
    const size_t count = s->layers * SVC_LLAMA_MATRICES + 1;
    w->packed.m = calloc(count, sizeof(w->packed.m[0]));
    if (w->packed.m == NULL)
        return -ENOMEM;
    const enum nxr_weights_format f = nxr_format_of(w->format);
    int rc = 0;
    for (size_t l = 0; l < s->layers && rc == 0; l++) {
        const struct svc_llama_layer *L = &w->model->layer[l];
        nxr_weights_t **m = w->packed.m + l * SVC_LLAMA_MATRICES;
        if ((rc = svc_llama_pack(rt, f, L->wqkv, dim + 2 * kv, dim, ids, n, &m[SVC_LLAMA_WQKV])) !=
                0 ||
            (rc = svc_llama_pack(rt, f, L->wo, dim, dim, ids, n, &m[SVC_LLAMA_WO])) != 0 ||
            (rc = svc_llama_pack(rt, f, L->w13, 2 * hid, dim, ids, n, &m[SVC_LLAMA_W13])) != 0)
            break;
        rc = svc_llama_pack(rt, f, L->w2, dim, hid, ids, n, &m[SVC_LLAMA_W2]);
    }
    if (rc == 0)
        rc = svc_llama_pack(rt, f, w->model->wcls, s->vocab, dim, ids, n, &w->packed.m[count - 1]);
    w->packed.count = count; /* destroy skips the NULL ones of a failure */
    return rc;
}

/* Domain d's side weights: a master laid out as svc_llama_side says,
 * replicated into d's memory. */
static int replicate_side(struct svc_llama_side *side, const struct svc_llama *m,
                          const float *master, size_t floats, nxr_domain_t *d,
                          const struct svc_packed *packed)
{
    const struct svc_llama_shape *s = &m->shape;
    int rc = svc_replica_create(&side->replica, d, master, floats * sizeof(float));
    if (rc != 0)
        return rc;
    side->replica.packed = packed;
    svc_replica_verify(&side->replica);
    side->embed = side->replica.w;
    side->rms_att0 = side->embed + s->vocab * s->dim;
    side->rms_final = side->rms_att0 + 2 * s->layers * s->dim;
    return 0;
}

int svc_llama_weights_create(struct svc_llama_weights *out, nxr_runtime_t *rt,
                             const struct svc_llama *m, enum svc_llama_format format,
                             nxr_domain_t *const *domains, size_t n)
{
    memset(out, 0, sizeof *out);
    if (format != SVC_LLAMA_F32 && format != SVC_LLAMA_BF16 && format != SVC_LLAMA_INT8)
        return -EINVAL;
    out->model = m;
    out->format = format;
    const struct svc_llama_shape *s = &m->shape;
    const size_t floats = s->vocab * s->dim + (2 * s->layers + 1) * s->dim;
    float *master = malloc(floats * sizeof(float));
    int *ids = malloc(n * sizeof *ids);
    out->side = calloc(n, sizeof *out->side);
    for (size_t i = 0; ids != NULL && i < n; i++)
        ids[i] = nxr_domain_id(domains[i]);
    int rc =
        master == NULL || ids == NULL || out->side == NULL ? -ENOMEM : pack_all(out, rt, ids, n);
    if (rc == 0) {
        memcpy(master, m->embed, s->vocab * s->dim * sizeof(float));
        float *g = master + s->vocab * s->dim;
        for (size_t l = 0; l < s->layers; l++, g += 2 * s->dim) {
            memcpy(g, m->layer[l].rms_att, s->dim * sizeof(float));
            memcpy(g + s->dim, m->layer[l].rms_ffn, s->dim * sizeof(float));
        }
        memcpy(g, m->rms_final, s->dim * sizeof(float));
    }
    for (; rc == 0 && out->domains < n; out->domains++) {
        rc = replicate_side(&out->side[out->domains], m, master, floats, domains[out->domains],
                            &out->packed);
    }
    free(master);
    free(ids);
    if (rc != 0)
        svc_llama_weights_destroy(out);
    return rc;
}

void svc_llama_weights_destroy(struct svc_llama_weights *w)
{
    for (size_t i = 0; w->side != NULL && i < w->domains; i++)
        svc_replica_destroy(&w->side[i].replica);
    free(w->side);
    svc_packed_destroy(&w->packed);
    memset(w, 0, sizeof *w);
}

double svc_llama_weights_on_node(struct svc_llama_weights *w, size_t i)
{
    svc_replica_verify(&w->side[i].replica);
    return w->side[i].replica.on_node;
}

double svc_llama_weights_huge(const struct svc_llama_weights *w, size_t i)
{
    const nxr_domain_t *d = w->side[i].replica.domain;
    size_t huge = 0, total = 0;
    for (size_t j = 0; j < w->packed.count; j++) {
        const void *data;
        size_t bytes, h;
        bool advised;
        if (nxr_weights_copy(w->packed.m[j], d, &data, &bytes) != 0 ||
            nxr_weights_huge_pages(w->packed.m[j], d, &advised, &h) != 0)
            return -1;
        huge += h;
        total += bytes;
    }
    return total > 0 ? (double)huge / (double)total : 0.0;
}

size_t svc_llama_weights_step_bytes(const struct svc_llama_weights *w)
{
    /* What a step streams of each matrix in its format (runtime/nxr_weights.h):
     * f32 4 bytes a weight, bf16 2, the 8-bit blocks 36 bytes per 32 along k. */
    size_t bytes = 0;
    for (size_t i = 0; i < w->packed.count; i++) {
        const nxr_weights_t *m = w->packed.m[i];
        const size_t k = nxr_weights_k(m), n = nxr_weights_n(m);
        switch (nxr_weights_format(m)) {
        case NXR_WEIGHTS_BF16:
            bytes += k * n * 2;
            break;
        case NXR_WEIGHTS_Q8_BLOCK32:
            bytes += (k + 31) / 32 * 36 * n;
            break;
        default:
            bytes += k * n * sizeof(float);
            break;
        }
    }
    return bytes;
}
