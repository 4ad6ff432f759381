/*
 * The pool's part of nxr_runtime_describe (one object per domain): how the
 * domain's memory is placed, the arena, and the pool statistics.
 */
#include <inttypes.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/pool.h"
#include "alloc/internal/pool_impl.h"

void nxr__pool_describe(struct nxr__pool *p, struct nxr__strbuf *sb, bool json)
{
    struct nxr_pool_stats st;
    nxr__pool_stats(p, &st);
    const struct nxr__arena *a = p->arena;
    enum nxr_mem_binding binding = nxr__arena_binding(a);
    if (json) {
        nxr__strbuf_printf(
            sb, ",\"pool\":{\"binding\":\"%s\",\"binding_reason\":", nxr_mem_binding_name(binding));
        if (binding == NXR_MEM_BOUND)
            nxr__strbuf_printf(sb, "null");
        else
            nxr__strbuf_json_string(sb, nxr__arena_binding_reason(a));
        nxr__strbuf_printf(sb,
                           ",\"arena\":%u,\"cap_bytes\":%zu,\"cached_bytes\":%zu,"
                           "\"cached_buffers\":%zu,\"outstanding\":%zu,\"hits\":%" PRIu64
                           ",\"misses\":%" PRIu64 ",\"drops\":%" PRIu64
                           ",\"release_failures\":%" PRIu64 "}",
                           nxr__arena_index(a), st.cap_bytes, st.cached_bytes, st.cached_buffers,
                           st.outstanding, st.hits, st.misses, st.drops, st.release_failures);
        return;
    }
    nxr__strbuf_printf(sb, "    pool: memory %s", nxr_mem_binding_name(binding));
    if (binding == NXR_MEM_BOUND)
        nxr__strbuf_printf(sb, " to node %d (verified)", nxr__arena_node(a));
    else
        nxr__strbuf_printf(sb, " (%s)", nxr__arena_binding_reason(a));
    nxr__strbuf_printf(sb,
                       ", arena %u; cached %zu B in %zu buffer(s), cap %zu B; outstanding %zu; "
                       "hits %" PRIu64 ", misses %" PRIu64 ", drops %" PRIu64,
                       nxr__arena_index(a), st.cached_bytes, st.cached_buffers, st.cap_bytes,
                       st.outstanding, st.hits, st.misses, st.drops);
    /* Only when it happened: a refused munmap/madvise is rare and worth a look. */
    if (st.release_failures != 0)
        nxr__strbuf_printf(sb, ", %" PRIu64 " release(s) refused by the kernel",
                           st.release_failures);
    nxr__strbuf_printf(sb, "\n");
}
