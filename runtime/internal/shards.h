/*
 * The layout of a sharded allocation (runtime/nxr_span.h), shared by
 * runtime/shards.c, which makes it, and runtime/span_kernels.c, which hands
 * each member its own part. Owned by the caller, immutable once made.
 */
#ifndef NXR_INTERNAL_SHARDS_H
#define NXR_INTERNAL_SHARDS_H

#include <stddef.h>

#include "runtime/nxr_span.h"

struct nxr_shards {
    size_t n;         /* parts = the span's members, in its order */
    size_t rows;      /* of the whole */
    size_t row_bytes;
    struct nxr_shard parts[]; /* part i on member i */
};

#endif /* NXR_INTERNAL_SHARDS_H */
