/*
 * The node-local buffer pool of one domain (see alloc/nxr_alloc.h for the
 * behaviour users rely on). The runtime creates one per domain and reaches
 * it through struct nxr_domain's `pool`; runtime/memory.c forwards the
 * public domain-level calls here.
 *
 * Layout and locking: one LIFO free list per size class, each guarded by its
 * own mutex (held for a pointer swap and two counter updates, never across a
 * system call or a jemalloc call); the cached-bytes total, the cap and the
 * outstanding count are atomics on their own cache lines. No lock nests in
 * another.
 */
#ifndef NXR_INTERNAL_POOL_H
#define NXR_INTERNAL_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/nxr_alloc.h"
#include "base/emit.h"

struct nxr__pool;
struct nxr__arena;
struct nxr__registry;

struct nxr__pool_opts {
    int domain_id;
    int node;         /* OS node id, or NXR_NODE_NONE */
    size_t cap_bytes; /* cap on cached bytes */
    /* Where the pool's arena records its extents under domain_id (the
     * runtime's registry; NULL: nowhere). */
    struct nxr__registry *registry;
};

/*
 * Creates the pool and its node-bound arena. Returns 0 and *out, or -ENOMEM
 * (err names the domain and the step). On failure nothing is left behind.
 */
int nxr__pool_create(struct nxr__pool **out, const struct nxr__pool_opts *opts, char *err,
                     size_t errsz);

/*
 * Frees the cached buffers, then the pool and its arena. When buffers are
 * still outstanding, or nxr_domain_malloc memory is still live, it prints a
 * diagnostic on stderr, keeps what they need (the pool, the arena, detached
 * from the registry) so that a later release or free is still safe, and
 * returns NXR_EOUTSTANDING;
 * otherwise 0. NULL is a no-op returning 0. No other thread may use the pool
 * meanwhile.
 */
int nxr__pool_destroy(struct nxr__pool *p);

int nxr__pool_acquire(struct nxr__pool *p, size_t size, nxr_buffer_t **out);
void nxr__pool_stats(struct nxr__pool *p, struct nxr_pool_stats *out);
void nxr__pool_set_cap(struct nxr__pool *p, size_t cap_bytes);
void nxr__pool_trim(struct nxr__pool *p);
struct nxr__arena *nxr__pool_arena(const struct nxr__pool *p);
int nxr__pool_domain_id(const struct nxr__pool *p);

/* Scopes on the pool (forwarded from nxr_scope_create). */
int nxr__scope_create(struct nxr__pool *p, const struct nxr_scope_opts *opts, nxr_scope_t **out);

/*
 * The pool's part of nxr_runtime_describe: member "pool" of the domain's
 * object open in e (JSON: binding, arena and statistics; text: one indented
 * line). Takes the pool's lock for the statistics.
 */
void nxr__pool_describe(struct nxr__pool *p, struct nxr__emit *e);

#endif /* NXR_INTERNAL_POOL_H */
