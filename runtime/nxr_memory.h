/*
 * nxr domain memory: the per-domain calls over nxr_alloc.h's pools, arenas and
 * scopes (alloc/nxr_alloc.h has the types, the buffer and scope calls that
 * need no domain, and how binding works). Each domain of a runtime owns one
 * pool and one arena whose memory lives on the domain's NUMA node.
 */
#ifndef NXR_MEMORY_H
#define NXR_MEMORY_H

#include <stddef.h>

#include "alloc/nxr_alloc.h"
#include "base/nxr_status.h"
#include "runtime/nxr_route.h" /* nxr_runtime_t, nxr_domain_t */

#ifdef __cplusplus
extern "C" {
#endif


/* ------------------------------------------------- which domain owns memory */

/*
 * The domain whose memory holds ptr: any byte of a pool buffer (its data),
 * of nxr_domain_malloc memory or of scope memory of rt. One lookup serves
 * all three: every domain's arena records the address ranges it maps (and
 * forgets them before it unmaps them), so the answer is the arena's, never a
 * guess from where pages happen to sit (nxr_mem_node asks that). For a pool
 * buffer it equals nxr_buffer_domain. Returns 0 and *out, NXR_ENODOMAIN
 * (ptr is not in memory of rt: the host's heap, a stack, another runtime's
 * memory, freed memory whose range was returned to the kernel) or -EINVAL
 * (NULL rt or out). Freed memory that nxr still keeps mapped is reported as
 * its domain's: the answer is about addresses, not about liveness. Any
 * thread; takes one short lock (a binary search in a small table).
 */
NXR_API int nxr_mem_domain(const nxr_runtime_t *rt, const void *ptr, nxr_domain_t **out);

/*
 * The explicit rehome: copies `size` bytes from src (any readable memory, on
 * any domain or none) into new memory from domain d's arena, aligned to
 * `alignment` (0: 16; else a power of two), and returns it in *out; free it
 * with nxr_domain_free. nxr never does this on its own: a kernel reads its
 * inputs where they are (remote NUMA reads), whatever domain it runs on.
 * The copy is made by the calling thread; the new pages are bound to d's
 * node whoever writes them (when d's binding is BOUND). src is unchanged.
 * Returns 0 and *out, or nxr_domain_malloc's errors (-EINVAL also for a
 * NULL src); on failure *out is NULL. Any thread.
 */
NXR_API int nxr_mem_rehome(nxr_domain_t *d, const void *src, size_t size, size_t alignment,
                           void **out);

/* ------------------------------------------------------------------ buffers */

/*
 * Hands out a buffer of at least `size` bytes (its class size, see above)
 * from domain d's pool: the most recently released buffer of that class if
 * one is cached (LIFO: the same address comes back), else fresh memory from
 * the domain's node. The contents are undefined. Returns 0 and *out, or
 * -EINVAL (NULL argument, size 0), -ENOMEM (size above NXR_POOL_MAX_SIZE, or
 * out of memory), NXR_EPLACEMENT (binding the new memory to the node
 * failed). On failure *out is NULL and the pool is unchanged apart from its
 * miss count. Any thread; takes one short per-class lock; blocks only inside
 * the kernel on a miss. The caller owns the buffer until it releases it.
 */
NXR_API int nxr_buffer_acquire(nxr_domain_t *d, size_t size, nxr_buffer_t **out);

/* Fills *out with d's pool statistics: 0 or -EINVAL. Any thread; the fields
 * are read one by one, so under concurrent use they are each exact but not
 * one snapshot. */
NXR_API int nxr_pool_stats(const nxr_domain_t *d, struct nxr_pool_stats *out);

/* Sets d's cap on cached bytes (default NXR_POOL_DEFAULT_CAP; 0 caches
 * nothing) and frees cached buffers, largest classes first, until the cache
 * fits under it. 0 or -EINVAL. Any thread. */
NXR_API int nxr_pool_set_cap(nxr_domain_t *d, size_t cap_bytes);

/* Frees every cached buffer of d's pool (outstanding ones are untouched) and
 * gives the domain's unused pages back to the system (madvise; a refusal is
 * counted in nxr_pool_stats.release_failures). 0 or -EINVAL. Any thread. */
NXR_API int nxr_pool_trim(nxr_domain_t *d);

/* ------------------------------------------------ binding */

/* How d's memory is placed (decided once, at runtime creation;
 * NXR_MEM_NO_NODE for NULL). */
NXR_API enum nxr_mem_binding nxr_domain_mem_binding(const nxr_domain_t *d);

/* --------------------------------------------- general allocations (arena) */

/*
 * Allocates `size` bytes from domain d's arena (memory bound to d's node as
 * described above), aligned to `alignment` (0: 16; otherwise a power of
 * two). No thread cache is used, so memory of one node never serves
 * another's requests. Returns 0 and *out, or -EINVAL (NULL argument, size 0,
 * bad alignment), -ENOMEM, NXR_EPLACEMENT. Any thread. In libnxr.a the arena
 * is a private jemalloc arena: takes its locks, and maps memory (mmap +
 * mbind) when it has none free; in libnxr.so (which must dlopen, so has no
 * jemalloc) every call maps its own extent and nxr_domain_free unmaps it --
 * slower, see docs/guide.md, "dlopen".
 * The caller owns the memory until nxr_domain_free.
 */
NXR_API int nxr_domain_malloc(nxr_domain_t *d, size_t size, size_t alignment, void **out);

/* Frees memory from nxr_domain_malloc back to the arena it came from, from any
 * thread. NULL is a no-op. Anything else is undefined. */
NXR_API void nxr_domain_free(void *ptr);

/* ----------------------------------------------------------------- scopes */

/*
 * Creates a scope on domain d (opts may be NULL). A scope hands out memory
 * by bumping a pointer through chunks acquired from d's pool; everything it
 * handed out dies together at nxr_scope_reset, which keeps the chunks, so a
 * steady state of same-shaped steps allocates no new memory. Returns 0 and
 * *out, or -EINVAL, -ENOMEM. No chunk is acquired before the first
 * allocation. A scope is used by one thread at a time (no internal lock);
 * it must be destroyed before the runtime.
 */
NXR_API int nxr_scope_create(nxr_domain_t *d, const struct nxr_scope_opts *opts,
                             nxr_scope_t **out);

#ifdef __cplusplus
}
#endif

#endif /* NXR_MEMORY_H */
