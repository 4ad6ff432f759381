/*
 * The model's weights, replicated: one copy per domain in that domain's
 * node-local memory (nxr_domain_malloc: the domain's arena, bound to its
 * node before first touch), and the proof that it is there: every page of
 * every replica asked of the kernel (nxr_mem_node, move_pages in query
 * mode), reported as the fraction of pages on the domain's node.
 */
#ifndef NXR_SERVICE_WEIGHTS_H
#define NXR_SERVICE_WEIGHTS_H

#include <stddef.h>

#include "runtime/nxr.h"

struct svc_replica {
    const nxr_domain_t *domain;
    float *w;     /* the copy (owned; nxr_domain_free) */
    size_t bytes;
    size_t pages;           /* pages the copy spans */
    size_t pages_on_node;   /* of which the kernel puts on the domain's node */
    double on_node;         /* pages_on_node / pages; -1 when the domain has no node */
};

/* Copies `bytes` of `master` into d's memory and checks where it lives.
 * Returns 0, or nxr_domain_malloc's error (then out->w is NULL). */
int svc_replica_create(struct svc_replica *out, const nxr_domain_t *d, const float *master,
                       size_t bytes);

/* Asks the kernel again where every page of r lives (fills pages_on_node
 * and on_node). */
void svc_replica_verify(struct svc_replica *r);

/* Frees the copy. NULL or an empty replica is a no-op. */
void svc_replica_destroy(struct svc_replica *r);

#endif /* NXR_SERVICE_WEIGHTS_H */
