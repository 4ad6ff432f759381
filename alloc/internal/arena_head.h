/*
 * What both arena back ends share (internal/arena.h): the node they bind
 * to, what the binding probe found, the count of refused releases and the
 * record of their extents. Each back end's struct nxr__arena holds one
 * head and hands it out through nxr__arena_head; arena_head.c owns it: its
 * initialisation (the probe) and the accessors of internal/arena.h that
 * read it.
 */
#ifndef NXR_INTERNAL_ARENA_HEAD_H
#define NXR_INTERNAL_ARENA_HEAD_H

#include <stdatomic.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/extent.h"

struct nxr__arena_head {
    unsigned index;  /* distinct per arena (jemalloc's arena index, or a serial) */
    int node;        /* node extents bind to, or -1: do not bind */
    int domain_node; /* the domain's node (NXR_NODE_NONE: none) */
    enum nxr_mem_binding binding;
    char reason[128];
    atomic_ulong release_failures;    /* munmap/madvise calls the kernel refused */
    struct nxr__extent_record record; /* where its extents are recorded */
};

/*
 * Probes `node` (nxr__node_probe) and fills the head: the binding it found,
 * the node to bind to (-1 unless BOUND), recording into `registry` under
 * `tag`; index is the back end's to set. 0, or -ENOMEM with err saying why.
 */
int nxr__arena_head_init(struct nxr__arena_head *h, int node, struct nxr__registry *registry,
                         int tag, char *err, size_t errsz);

/* The arena's head (each back end defines it). */
struct nxr__arena_head *nxr__arena_head(const struct nxr__arena *a);

#endif /* NXR_INTERNAL_ARENA_HEAD_H */
