/*
 * nxr memory: node-local buffer pools, per-node jemalloc arenas, request
 * scopes and a placement query. The calls that take a domain (acquire a
 * buffer, allocate, create a scope, pool statistics) are the runtime's, in
 * runtime/nxr_memory.h; this header has the types and the calls on buffers
 * and scopes themselves. Both are included by runtime/nxr.h.
 *
 * Every domain of a runtime owns a pool and a jemalloc arena whose memory
 * comes from the domain's NUMA node (see "Binding" below). Three ways to get
 * memory on a domain:
 *   - buffers (nxr_buffer_acquire/release): same-size, reused LIFO, cached up
 *     to a byte cap; the tool for transient tensors and scratch;
 *   - general allocations (nxr_domain_malloc/free): any size, from the
 *     domain's arena, for long-lived variable-size data;
 *   - scopes (nxr_scope_*): bump allocation that dies at a step boundary (one
 *     inference request), backed by pool buffers.
 *
 * Binding. When the domain has a NUMA node, the arena's memory is mapped by
 * nxr and bound to that node with mbind(MPOL_BIND) before any page is
 * touched, so pages land on the node whichever thread touches them first
 * (binding is chosen over first touch because the first toucher of a pool
 * buffer is the caller's thread, which may run anywhere). At runtime creation
 * each pool binds and touches one probe page and asks the kernel where it
 * landed (move_pages). nxr_domain_mem_binding() reports the outcome:
 *   BOUND        memory is bound to the node and the probe confirmed it;
 *   NO_NODE      the domain has no node (no NUMA information): the kernel's
 *                default policy applies, nothing is claimed;
 *   UNAVAILABLE  the domain names a node but binding failed (kernel without
 *                NUMA support, a synthetic or XML topology naming a node the
 *                kernel does not have, a cpuset that excludes the node): the
 *                pool still works with the kernel's default policy, and
 *                describe / `nxr info` say "unavailable" with the reason.
 *                nxr never reports such memory as node-local.
 * When binding was BOUND at creation but a later mbind fails, that
 * allocation fails with NXR_EPLACEMENT; unbound memory is never handed out
 * under a BOUND claim. MPOL_BIND is strict: when the node itself runs out of
 * memory the kernel does not fall back to another node (it reclaims, and in
 * the end OOM-kills), which is the price of placement that holds.
 *
 * The arena back end depends on the library:
 * libnxr.a (and Bazel's targets but --config=tsan's) use a private jemalloc copy (its
 * symbols are local to libnxr), so the
 * host's malloc stays the host's, whether that is glibc's or the host's own
 * jemalloc; like any jemalloc, that copy reads MALLOC_CONF at start-up.
 * Its thread-local state uses the initial-exec TLS model, which a
 * dlopen()ed library cannot have, so libnxr.so is built without it: there
 * every arena allocation is an extent of its own (mmap'ed),
 * and libnxr.so loads with dlopen / ctypes at any time. The pools and
 * scopes above are the same code in both; what differs is the cost of
 * nxr_domain_malloc/free and of a pool or scope miss (docs/guide.md, "dlopen").
 */
#ifndef NXR_ALLOC_H
#define NXR_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/nxr_fwd.h"
#include "base/nxr_status.h"

#ifdef __cplusplus
extern "C" {
#endif


/* ------------------------------------------------------------------ pools */

/* Every buffer's data is aligned to this; buffers of NXR_POOL_PAGE_CLASS
 * bytes or more are aligned to the page size (4096). */
#define NXR_POOL_ALIGN      64
#define NXR_POOL_PAGE_CLASS 4096
/* Largest buffer a pool hands out (1 TiB). */
#define NXR_POOL_MAX_SIZE ((size_t)1 << 40)
/* Default cap on a pool's cached (free) bytes: 1 GiB per domain. */
#define NXR_POOL_DEFAULT_CAP ((size_t)1 << 30)

/*
 * The size class a request of `size` bytes is served from (what
 * nxr_buffer_size reports):
 *   size <= 4 KiB:        the next power of two, at least 64;
 *   4 KiB < size <= 16 KiB: the next multiple of 4 KiB (8, 12, 16 KiB);
 *   size > 16 KiB:        four classes per power of two: for
 *                         2^k < size <= 2^(k+1), the next multiple of
 *                         2^(k-2) (20, 24, 28, 32, 40, 48, ... KiB),
 *                         so at most 25% above the request.
 * Sizes above 4 KiB are multiples of the page. 0 maps to 64; a size above
 * NXR_POOL_MAX_SIZE returns 0. Any thread; no side effects.
 */
NXR_API size_t nxr_pool_class_size(size_t size);

/*
 * Returns a buffer to the pool of the domain that allocated it, whichever
 * thread or domain calls this. It is cached (pushed on its class's LIFO)
 * unless that would take the pool's cached bytes above its cap, in which
 * case its memory is freed. NULL is a no-op. Releasing a buffer twice aborts
 * the process (it would hand one buffer to two owners). Any thread; takes
 * one short per-class lock.
 */
NXR_API void nxr_buffer_release(nxr_buffer_t *b);

/* The buffer's memory (NXR_POOL_ALIGN-aligned; page-aligned from 4 KiB);
 * NULL for NULL. */
NXR_API void *nxr_buffer_data(const nxr_buffer_t *b);

/* The buffer's usable size: its class size, >= the size acquired (0 for
 * NULL). */
NXR_API size_t nxr_buffer_size(const nxr_buffer_t *b);

/* The id of the domain whose pool the buffer belongs to (-1 for NULL). */
NXR_API int nxr_buffer_domain(const nxr_buffer_t *b);

/*
 * Host export: hands a buffer's memory to another library -- MPI
 * (MPI_Allreduce(MPI_IN_PLACE, ptr, ...)), a BLAS, read(2) -- with no copy.
 * A buffer is one contiguous range of host memory on its domain's node, so
 * export is always zero-copy: *ptr is nxr_buffer_data(b) and *len is
 * nxr_buffer_size(b) (the class size, >= what was acquired).
 * Ownership does not change: the caller still owns b, nxr keeps no record of
 * the export, and the range is valid exactly while b is acquired. Keep b
 * until the library is done with the memory (for MPI: until the blocking
 * call returned, or the request of a non-blocking one completed), then
 * release it as usual; the library must not touch the range after that.
 * Returns 0, or -EINVAL (NULL b, ptr or len; then *ptr is NULL and *len 0
 * where they can be written). Any thread; no lock, no system call.
 * Checked builds (-DNXR_CHECKED=1): exporting a released buffer aborts with a
 * message; under ASan (--config=asan) any access through an exported pointer
 * after the release is reported, as for every buffer (released buffers are
 * poisoned while cached).
 */
NXR_API int nxr_buffer_export(const nxr_buffer_t *b, void **ptr, size_t *len);

struct nxr_pool_stats {
    size_t cap_bytes;      /* cap on cached bytes */
    size_t cached_bytes;   /* bytes in cached (free) buffers */
    size_t cached_buffers; /* buffers cached */
    size_t outstanding;    /* buffers acquired and not yet released */
    uint64_t hits;         /* acquires served from the cache */
    uint64_t misses;       /* acquires that needed fresh memory */
    uint64_t drops;        /* releases that freed because of the cap */
    /* munmap or madvise calls on the domain's memory that the kernel
     * refused. Nothing fails because of one (the memory stays mapped, or
     * resident, and valid); a count that grows means memory is not going
     * back to the system (e.g. vm.max_map_count reached). */
    uint64_t release_failures;
};

/* ------------------------------------------------ binding and placement */

enum nxr_mem_binding {
    NXR_MEM_BOUND = 0,       /* bound to the domain's node and verified */
    NXR_MEM_NO_NODE = 1,     /* the domain has no node */
    NXR_MEM_UNAVAILABLE = 2, /* the node could not be bound (see above) */
};

/* "bound", "no-node", "unavailable". */
NXR_API const char *nxr_mem_binding_name(enum nxr_mem_binding binding);

/*
 * The NUMA node the page holding ptr lives on, asked of the kernel
 * (move_pages in query mode; nothing moves). Returns the node id (>= 0), or
 * -ENOENT or -EFAULT (the page has not been touched yet, so it lives
 * nowhere -- kernels differ in which -- or it is not mapped), -ENOSYS (no
 * NUMA support), another negative errno. Any thread; one system call.
 */
NXR_API int nxr_mem_node(const void *ptr);

/*
 * How many pages of [ptr, ptr + bytes) live on `node`: *pages gets the
 * count of pages the range touches, *on_node those the kernel reports on
 * `node` (nxr_mem_node, page by page). For memory the caller has written
 * (a page never touched has no node, or maps the shared zero page, which
 * the kernel reports wherever that lives). A page the kernel is moving when
 * asked (a huge-page collapse, compaction) is reported absent for that
 * moment: it is read once, which waits for most moves, and asked again; if
 * a page is still absent, the whole range is asked again (at most three
 * passes; the pass with the fewest absent pages is the answer), and a page
 * absent in every pass counts as not on the node. Returns 0; -EINVAL (ptr,
 * pages or on_node NULL, bytes 0, node < 0; nothing written), or the
 * query's own failure (-ENOSYS without NUMA support, another negative
 * errno; *pages and *on_node then count the pages asked before it). Any
 * thread; a system call per page.
 */
NXR_API int nxr_mem_pages_on_node(const void *ptr, size_t bytes, int node, size_t *pages,
                                  size_t *on_node);

/* ----------------------------------------------------------------- scopes */

/* Whether a scope detects use after reset (nxr_scope_opts.check). */
enum nxr_scope_check {
    /* On exactly when nxr itself was built checked (-DNXR_CHECKED=1,
     * `bazel ... --config=checked` or `--config=asan`). */
    NXR_SCOPE_CHECK_DEFAULT = 0,
    NXR_SCOPE_CHECK_ON = 1,
    NXR_SCOPE_CHECK_OFF = 2,
};

/* Scope options; a zeroed struct (or nxr_scope_opts_init) is every default. */
struct nxr_scope_opts {
    /* Bytes per chunk taken from the pool (0: 1 MiB; rounded to a pool
     * class, at least 4 KiB). An allocation larger than a chunk gets a chunk
     * of its own size. */
    size_t chunk_size;
    /* Detect use after reset: at each reset the step's memory is made
     * inaccessible (mprotect PROT_NONE, and ASan-poisoned under ASan), so a
     * stale pointer faults (SIGSEGV) at its first use in the next step; a
     * pointer kept across two resets is live memory again and not caught.
     * Costs two mprotect calls per chunk per reset and twice the memory (two
     * banks of chunks alternate). A caller may turn it on in any build. */
    enum nxr_scope_check check;
};

/* Zeroes opts: every default, the same as `= {0}`. */
NXR_API void nxr_scope_opts_init(struct nxr_scope_opts *opts);

/*
 * Allocates `size` bytes (rounded up to a multiple of 64; the result is
 * 64-byte aligned) valid until the next reset or destroy. Returns 0 and
 * *out, or -EINVAL (NULL argument, size 0), -ENOMEM, NXR_EPLACEMENT (a new
 * chunk could not be acquired). Constant time: a bump and a compare, unless
 * the current chunk is full.
 */
NXR_API int nxr_scope_alloc(nxr_scope_t *s, size_t size, void **out);

/* Ends a step: every allocation of the scope dies; its chunks are kept for
 * the next step. Using memory from before the reset is a bug, caught (the
 * process faults) when the scope is checked. In a checked scope the check
 * needs mprotect; when the kernel refuses one (out of mappings), the reset
 * still ends the step and the next step's memory is still accessible, but
 * the check is off for it (counted in nxr_scope_stats.check_failures).
 * NULL is a no-op. */
NXR_API void nxr_scope_reset(nxr_scope_t *s);

struct nxr_scope_stats {
    size_t reserved_bytes; /* bytes of all chunks the scope holds */
    size_t used_bytes;     /* bytes handed out since the last reset */
    size_t chunks;         /* chunks held */
    uint64_t resets;       /* resets so far */
    /* Checked scopes: resets after which use-after-reset was not (fully)
     * armed because the kernel refused an mprotect. */
    uint64_t check_failures;
    size_t chunk_size; /* the chunk size the scope uses (its class size) */
    bool checked;      /* use after reset is detected */
};

/* Fills *out with the scope's statistics (zeros for a NULL scope; nothing
 * for a NULL out). */
NXR_API void nxr_scope_stats(const nxr_scope_t *s, struct nxr_scope_stats *out);

/* Returns every chunk to the pool and frees the scope. NULL is a no-op. A
 * checked scope's protected chunk that the kernel will not make accessible
 * again (mprotect refused twice) is not returned: handing it out would fault
 * its next user. It stays outstanding, and a line on stderr says so. */
NXR_API void nxr_scope_destroy(nxr_scope_t *s);

#ifdef __cplusplus
}
#endif

#endif /* NXR_ALLOC_H */
