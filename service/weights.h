/*
 * The model's weights, replicated: one copy per domain in that domain's
 * node-local memory (nxr_domain_malloc: the domain's arena, bound to its
 * node before first touch), and the proof that it is there: every page of
 * every replica asked of the kernel (nxr_mem_pages_on_node, move_pages in query
 * mode), reported as the fraction of pages on the domain's node.
 *
 * With packed weights (svc_packed) the weight matrices are also packed
 * once per domain into the layout nxr's GEMM reads (nxr_weights_create:
 * the domain's arena again), and a replica's page check covers its
 * domain's packed copies too.
 */
#ifndef NXR_SERVICE_WEIGHTS_H
#define NXR_SERVICE_WEIGHTS_H

#include <stddef.h>

#include "runtime/nxr.h"
#include "service/model.h"

/* The model's weight matrices packed once per domain: m[i] is matrix i of
 * svc_model_matrix, with a copy on each domain it was packed for. */
struct svc_packed {
    nxr_weights_t **m; /* owned, svc_model_matrices of them */
    size_t count;
};

/* Packs every weight matrix of `master` for the n domains `ids` (copied
 * by the calling thread into each domain's memory). Returns 0, or
 * nxr_weights_create's error (NXR_EUNSUPPORTED: the runtime's GEMM
 * provider is not nxr's native one; -ENOMEM, NXR_EPLACEMENT) with nothing
 * left allocated. */
int svc_packed_create(struct svc_packed *out, nxr_runtime_t *rt, const struct svc_model_shape *s,
                      const float *master, const int *ids, size_t n);

/* Frees every copy. An empty one is a no-op. Before the runtime goes. */
void svc_packed_destroy(struct svc_packed *p);

struct svc_replica {
    nxr_domain_t *domain;
    const struct svc_packed *packed; /* counted in the page check when set (borrowed) */
    float *w;     /* the copy (owned; nxr_domain_free) */
    size_t bytes;
    size_t pages;           /* pages the copy spans */
    size_t pages_on_node;   /* of which the kernel puts on the domain's node */
    double on_node;         /* pages_on_node / pages; -1 when the domain has no node */
};

/* Copies `bytes` of `master` into d's memory and checks where it lives.
 * Returns 0, or nxr_domain_malloc's error (then out->w is NULL). */
int svc_replica_create(struct svc_replica *out, nxr_domain_t *d, const float *master,
                       size_t bytes);

/* Asks the kernel again where every page of r lives, and of r->packed's
 * copies on r's domain when set (fills pages, pages_on_node and on_node).
 * The memory must have been written (a page reported absent is read once
 * and asked again: it may have been in the middle of a move). */
void svc_replica_verify(struct svc_replica *r);

/* Frees the copy. NULL or an empty replica is a no-op. */
void svc_replica_destroy(struct svc_replica *r);

#endif /* NXR_SERVICE_WEIGHTS_H */
