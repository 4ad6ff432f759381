/*
 * The limit every memory-bound benchmark is measured against: a streaming
 * read of the very bytes the contender reads (the same allocations, so the
 * same pages, huge or not, and the same cache state), on the contender's
 * own threads (nxr_parallel_for on its context, so the same pinning),
 * with AVX2 loads and nothing else (peer_read_bytes).
 *
 * It is an upper bound only if nothing but the memory holds it back, so:
 * the bytes are cut into pieces that any participant may take (a worker
 * that wakes late leaves its share to the others rather than to one
 * caller alone), untimed reads first wake the domain's threads (a read
 * after a pause measured the wake-up, not the memory), and the figure is
 * the best of many reads, not a median: noise from other tenants only ever
 * slows a read down.
 */
#ifndef NXR_BENCH_READ_LIMIT_H
#define NXR_BENCH_READ_LIMIT_H

#include <stddef.h>

#include "runtime/nxr.h"

/* What to read: a list of pieces (see read_limit_add). */
struct read_limit {
    struct read_piece {
        const unsigned char *p;
        size_t bytes;
    } * piece;
    size_t pieces, capacity;
    size_t bytes;               /* the sum over the pieces */
    unsigned long long sink[8]; /* per participant, so the reads are not optimised away */
};

/* Appends [p, p + bytes) to r, cut into pieces of at most 256 KiB. Returns
 * 0 or -ENOMEM. */
int read_limit_add(struct read_limit *r, const void *p, size_t bytes);
void read_limit_free(struct read_limit *r);

/* One read of everything in r on ctx's threads (for a bench that times
 * its own rounds: it keeps the best). Returns 0 or nxr_parallel_for's
 * error. */
int read_limit_run(nxr_ctx_t *ctx, struct read_limit *r);

/* Seconds of one read of everything in r on ctx's threads: the best of
 * `reads` reads (>= 1), after two untimed ones. Returns a negative nxr
 * error from nxr_parallel_for instead (never 0). */
double read_limit_best(nxr_ctx_t *ctx, struct read_limit *r, int reads);

#endif /* NXR_BENCH_READ_LIMIT_H */
