/*
 * Node-bound arenas: one per domain. Everything nxr allocates on a domain --
 * pool buffers, their descriptors, nxr_domain_malloc memory -- comes from
 * here, and every page of it from the extent source (internal/extent.h:
 * mmap, then mbind to the domain's node before anyone touches it).
 *
 * Two back ends implement this interface:
 *  - arena.c, the default: a private jemalloc arena per domain whose extent
 *    hooks call the extent source, always without a thread cache
 *    (MALLOCX_TCACHE_NONE) so that memory freed by one thread never serves
 *    another node's allocation from a cache;
 *  - arena_mmap.c, with --//alloc:arena=mmap (arena_backend.bzl): one
 *    extent per allocation, no allocator in between. Two builds use it:
 *    --config=tsan, since nxr's jemalloc is Debian's uninstrumented
 *    libjemalloc_pic.a, whose own locks ThreadSanitizer cannot see (it
 *    reports them as double locks, one report per path), so TSan checks
 *    what nxr adds above the arena: the pool's locks, its LIFO and its
 *    counters, which are the same code in both builds; and libnxr.so
 *    (dist/defs.bzl), since that jemalloc's thread-local state is
 *    initial-exec TLS, which makes a shared library holding it fail to
 *    dlopen() ("cannot allocate memory in static TLS block").
 *    Same binding, same probe, same errors.
 *
 * Threads: every function may be called from any thread, except destroy.
 */
#ifndef NXR_INTERNAL_ARENA_H
#define NXR_INTERNAL_ARENA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "alloc/nxr_alloc.h"

struct nxr__arena;
struct nxr__registry;

/*
 * Probes whether `node` can be bound (node < 0: the domain has none), then
 * creates the arena; its binding is what the probe found (see nxr_alloc.h).
 * Every extent the arena maps is recorded in `registry` (NULL: none) under
 * `tag` (internal/extent.h) until it is unmapped or the arena is detached.
 * Returns 0 and *out, or -ENOMEM (mapping the probe page, the arena or its
 * bookkeeping failed; err says which). On failure nothing is left behind.
 */
int nxr__arena_create(struct nxr__arena **out, int node, struct nxr__registry *registry, int tag,
                      char *err, size_t errsz);

/* Removes the arena's ranges from its registry and stops recording: before
 * the registry goes away while the arena is kept (memory still live). No
 * other thread may use the arena meanwhile. Idempotent. */
void nxr__arena_detach(struct nxr__arena *a);

/*
 * Detaches the arena (above), then destroys it, returning all of its memory
 * to the kernel, when no allocation from it is live; returns true. Otherwise keeps it (so that the
 * live memory stays valid and can still be freed), stores the live bytes in
 * *live and returns false. NULL is a no-op that returns true.
 */
bool nxr__arena_destroy(struct nxr__arena *a, size_t *live);

/*
 * size bytes aligned to align (a power of two >= 1), from the arena. The
 * NXR_FAULT_ALLOC point can fail it. Returns 0 and *out, -ENOMEM, or
 * NXR_EPLACEMENT (the new memory could not be bound to the node).
 */
int nxr__arena_alloc(struct nxr__arena *a, size_t size, size_t align, void **out);

/* Gives the arena's unused pages back to the system now (the default back
 * end's purge; the mmap back end unmaps the freed mappings it kept). A
 * refused madvise or munmap is counted (internal/extent.h), never an error. */
void nxr__arena_purge(struct nxr__arena *a);

/* Frees memory of any nxr arena (jemalloc, or the mmap back end's header,
 * finds the owner). NULL: no-op. */
void nxr__arena_free(void *ptr);

/* Frees memory of a known size and alignment (cheaper: no size lookup). */
void nxr__arena_free_sized(void *ptr, size_t size, size_t align);

/* Bytes currently allocated from the arena (jemalloc statistics, or the
 * mmap back end's counter). */
size_t nxr__arena_allocated(const struct nxr__arena *a);

/* munmap/madvise calls the kernel refused for this arena (internal/extent.h). */
unsigned long nxr__arena_release_failures(const struct nxr__arena *a);

/* The back end this build has: "jemalloc" (arena.c) or "mmap" (arena_mmap.c);
 * what tests of one back end's own rules check before they run. */
const char *nxr__arena_kind(void);

unsigned nxr__arena_index(const struct nxr__arena *a);
int nxr__arena_node(const struct nxr__arena *a);
enum nxr_mem_binding nxr__arena_binding(const struct nxr__arena *a);
/* Why binding is not BOUND ("" when it is). */
const char *nxr__arena_binding_reason(const struct nxr__arena *a);

/*
 * Decides how `node` can be bound: maps a page, binds it (unless node < 0),
 * touches it and asks the kernel where it landed. Returns 0 with *binding
 * and a reason in why (empty when BOUND), or -ENOMEM when the probe page
 * cannot be mapped. A refused unmap of the page is counted in
 * *release_failures.
 */
int nxr__node_probe(int node, enum nxr_mem_binding *binding, char *why, size_t whysz,
                    atomic_ulong *release_failures);

#endif /* NXR_INTERNAL_ARENA_H */
