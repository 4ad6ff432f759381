/*
 * The llama decoder's weights as the service serves them: every matrix
 * packed once per serving domain (nxr_weights_create: a copy in each
 * domain's node memory, the layout nxr's GEMM reads), and the rest (the
 * embedding table and the norms' gains) replicated per domain
 * (svc_replica: node memory, every page checked). The format of the packed
 * matrices is one argument: f32, bf16 or 8-bit blocks
 * (nxr_weights_create_format); activations, sums and the cache stay f32.
 */
#ifndef NXR_SERVICE_LLAMA_WEIGHTS_H
#define NXR_SERVICE_LLAMA_WEIGHTS_H

#include <stddef.h>

#include "runtime/nxr.h"
#include "service/llama_model.h"
#include "service/weights.h"

enum svc_llama_format {
    SVC_LLAMA_F32,
    SVC_LLAMA_BF16, /* NXR_WEIGHTS_BF16 */
    SVC_LLAMA_INT8, /* NXR_WEIGHTS_Q8_BLOCK32 */
};

/* "f32", "bf16", "int8" -> the format; -1 for another name. */
int svc_llama_format_named(const char *name);
/* The name of a format, as --weights takes it. */
const char *svc_llama_format_name(enum svc_llama_format f);

/* One matrix W, stored out x in (a row per output), packed for y = x W^T
 * (k = in, n = out) in `format` on domains ids[0..n) (NULL, 0: every
 * domain). f32 is packed from W^T itself (in x out), untransposed: nxr lays
 * that out in panels of output columns, whose kernel multiplies every row of
 * the batch by each panel as it streams, one fma chain along k per output
 * whatever the number of rows: 1.12-1.25x the transposed copy's dot
 * products at 1-32 rows (a 110m layer's four products, 2 threads,
 * alternated runs). The 8-bit and bf16 formats block along k either way and
 * are packed from W as it is. 0 or the packing's error. */
int svc_llama_pack(nxr_runtime_t *rt, enum nxr_weights_format format, const float *w, size_t out,
                   size_t in, const int *ids, size_t n, nxr_weights_t **pw);

/* The side weights one domain reads by pointer: embed (vocab x dim), then
 * per layer the attention and FFN norms' gains (dim each), then the final
 * norm's. */
struct svc_llama_side {
    struct svc_replica replica; /* owns the floats */
    const float *embed, *rms_final;
    const float *rms_att0; /* layer l's: rms_att0 + 2 l dim; its FFN gains + dim */
};

struct svc_llama_weights {
    const struct svc_llama *model; /* borrowed: its shape and master weights */
    enum svc_llama_format format;
    /* The packed matrices (op(W) = W^T: k = in, n = out), layer l's Wqkv,
     * Wo, W13, W2 at m[4 l + 0..3], the classifier last (owned). */
    struct svc_packed packed;
    struct svc_llama_side *side; /* one per domain of `ids` (owned) */
    size_t domains;
};

enum { SVC_LLAMA_WQKV, SVC_LLAMA_WO, SVC_LLAMA_W13, SVC_LLAMA_W2, SVC_LLAMA_MATRICES };

static inline const nxr_weights_t *svc_llama_matrix(const struct svc_llama_weights *w, size_t layer,
                                                    int which)
{
    return w->packed.m[layer * SVC_LLAMA_MATRICES + (size_t)which];
}

static inline const nxr_weights_t *svc_llama_classifier(const struct svc_llama_weights *w)
{
    return w->packed.m[w->packed.count - 1];
}

/* Packs and replicates m for the n domains of rt in `domains` (side[i] is
 * domains[i]'s). Returns 0; -EINVAL for a format not in the enum;
 * NXR_EUNSUPPORTED for a runtime whose GEMM provider is not nxr's;
 * nxr_weights_create's and nxr_domain_malloc's errors. On failure *out is
 * zeroed and nothing stays allocated. m may be destroyed afterwards only
 * if the caller no longer asks for out->model's master weights. */
int svc_llama_weights_create(struct svc_llama_weights *out, nxr_runtime_t *rt,
                             const struct svc_llama *m, enum svc_llama_format format,
                             nxr_domain_t *const *domains, size_t n);

/* Frees every copy; a zeroed one is a no-op. Before the runtime goes. */
void svc_llama_weights_destroy(struct svc_llama_weights *w);

/* The fraction of the pages of domain i's copies (side and packed) on the
 * domain's node (svc_replica's check; -1 when the domain has no node). */
double svc_llama_weights_on_node(struct svc_llama_weights *w, size_t i);

/* The fraction of the bytes of domain i's packed matrices that the kernel
 * backs with huge pages now (nxr_weights_huge_pages, summed over the
 * matrices): a decode step walks every one of them, and on 4 KiB pages
 * that is a TLB miss per 4 KiB. 0 when nothing was advised (copies under
 * 2 MiB, NXR_HUGEPAGES=off, THP off); -1 when the kernel cannot say. */
double svc_llama_weights_huge(const struct svc_llama_weights *w, size_t i);

/* The weight bytes one decode step streams (the packed matrices). */
size_t svc_llama_weights_step_bytes(const struct svc_llama_weights *w);

#endif /* NXR_SERVICE_LLAMA_WEIGHTS_H */
