/*
 * The llama decoder's matrices sharded by node, for `nxr demo --span`: one
 * copy of the model over every member of a span (runtime/nxr_span.h), each
 * matrix split by its output rows (NXR_SHARD_BY_OUTPUT: W is out x in, as
 * the checkpoint stores it), part i in member i's node memory, first
 * touched there and checked (nxr_shards_create). A step's products then
 * run on every member at once, each reading only its own node's rows
 * (nxr_span_linear), and need no reduction: each output has one member.
 * The memory is one copy of the weights in all, not one per domain.
 *
 * Why by output rows and not by input rows: the sum of each output stays
 * one GEMM's sum over the whole of k, in the same order as on one domain,
 * so the span path's tokens are the one-domain path's, bit for bit (f32);
 * split by input rows, the partials would be added in another order.
 *
 * f32 only: nxr_span_linear runs the native f32 GEMM on its shards; the
 * packed formats (bf16, 8-bit blocks) have no sharded form.
 */
#ifndef NXR_SERVICE_LLAMA_SHARDS_H
#define NXR_SERVICE_LLAMA_SHARDS_H

#include <stddef.h>

#include "runtime/nxr.h"
#include "service/llama_model.h"

struct svc_llama_shards {
    /* Layer l's Wqkv, Wo, W13, W2 at m[4 l + 0..3] (the order of
     * svc_llama_weights' packed matrices), the classifier last; each
     * nxr_shards_count() == members parts. */
    nxr_shards_t **m;
    size_t count;
    size_t members;
};

/* Shards every matrix of `model` across span's members (driven by the
 * calling thread: the span's thread rule). Returns 0 or nxr_shards_create's
 * error (nxr_last_error() says which); on failure *out is zeroed and
 * nothing stays allocated. The shards outlive the span (any span over the
 * same domains in the same order may run them); destroy them before the
 * runtime. */
int svc_llama_shards_create(struct svc_llama_shards *out, nxr_ctx_t *span,
                            const struct svc_llama *model);

/* Frees every part; a zeroed one is a no-op. */
void svc_llama_shards_destroy(struct svc_llama_shards *s);

/* Matrix `index` (svc_llama_weights' numbering: 4 layer + which, the
 * classifier at count - 1). */
static inline const nxr_shards_t *svc_llama_shard(const struct svc_llama_shards *s, size_t index)
{
    return s->m[index];
}

/* The lowest fraction of member i's parts' pages found on its node when
 * they were made (-1: the member has no node or the system cannot say). */
double svc_llama_shards_on_node(const struct svc_llama_shards *s, size_t i);

/* Member i's domain (NULL: i out of range). */
nxr_domain_t *svc_llama_shards_domain(const struct svc_llama_shards *s, size_t i);

#endif /* NXR_SERVICE_LLAMA_SHARDS_H */
