/*
 * The pool's part of nxr_runtime_describe (one object per domain): how the
 * domain's memory is placed, the arena, and the pool statistics, each named
 * once for both formats (base/emit.h).
 */
#include <stdio.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/pool.h"
#include "alloc/internal/pool_impl.h"

void nxr__pool_describe(struct nxr__pool *p, struct nxr__emit *e)
{
    struct nxr_pool_stats st;
    nxr__pool_stats(p, &st);
    const struct nxr__arena *a = p->arena;
    enum nxr_mem_binding binding = nxr__arena_binding(a);
    nxr__emit_object(e, "pool",
                     "    pool: memory {binding}{binding_reason}, arena {arena}; cached "
                     "{cached_bytes} B in {cached_buffers} buffer(s), cap {cap_bytes} B; "
                     "outstanding {outstanding}; hits {hits}, misses {misses}, drops "
                     "{drops}{release_failures}\n");
    nxr__emit_str(e, "binding", nxr_mem_binding_name(binding), NULL);
    if (binding == NXR_MEM_BOUND) {
        /* No reason to give; text names the node instead. */
        char bound[48];
        snprintf(bound, sizeof(bound), " to node %d (verified)", nxr__arena_node(a));
        nxr__emit_null(e, "binding_reason", bound);
    } else {
        nxr__emit_str(e, "binding_reason", nxr__arena_binding_reason(a), " ({})");
    }
    nxr__emit_uint(e, "arena", nxr__arena_index(a), NULL);
    nxr__emit_uint(e, "cap_bytes", st.cap_bytes, NULL);
    nxr__emit_uint(e, "cached_bytes", st.cached_bytes, NULL);
    nxr__emit_uint(e, "cached_buffers", st.cached_buffers, NULL);
    nxr__emit_uint(e, "outstanding", st.outstanding, NULL);
    nxr__emit_uint(e, "hits", st.hits, NULL);
    nxr__emit_uint(e, "misses", st.misses, NULL);
    nxr__emit_uint(e, "drops", st.drops, NULL);
    /* Text only when it happened: a refused munmap/madvise is rare and worth a look. */
    nxr__emit_uint(e, "release_failures", st.release_failures,
                   st.release_failures != 0 ? ", {} release(s) refused by the kernel" : "");
    nxr__emit_end(e);
}
