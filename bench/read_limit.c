/* bench/read_limit (see read_limit.h). */
#include "bench/read_limit.h"

#include <errno.h>
#include <stdlib.h>

#include "bench/kernels_peers.h"
#include "bench/timing.h"

/* Small enough that two participants share a 1 MiB matrix, large enough
 * that a piece costs ~10 us against the ~0.1 us of taking it. */
#define PIECE_BYTES ((size_t)256 << 10)

int read_limit_add(struct read_limit *r, const void *p, size_t bytes)
{
    const unsigned char *b = p;
    while (bytes > 0) {
        if (r->pieces == r->capacity) {
            size_t cap = r->capacity ? 2 * r->capacity : 64;
            struct read_piece *grown = realloc(r->piece, cap * sizeof *grown);
            if (grown == NULL)
                return -ENOMEM;
            r->piece = grown;
            r->capacity = cap;
        }
        const size_t len = bytes < PIECE_BYTES ? bytes : PIECE_BYTES;
        r->piece[r->pieces++] = (struct read_piece){.p = b, .bytes = len};
        r->bytes += len;
        b += len;
        bytes -= len;
    }
    return 0;
}

void read_limit_free(struct read_limit *r)
{
    free(r->piece);
    *r = (struct read_limit){0};
}

static void read_pieces(void *arg, size_t begin, size_t end, unsigned worker)
{
    struct read_limit *r = arg;
    unsigned long long s = 0;
    for (size_t i = begin; i < end; i++)
        s ^= peer_read_bytes(r->piece[i].p, r->piece[i].bytes);
    r->sink[worker % 8] ^= s;
}

int read_limit_run(nxr_ctx_t *ctx, struct read_limit *r)
{
    /* Grain 1: every piece is up for grabs by whoever is free. */
    return nxr_parallel_for(ctx, 0, r->pieces, 1, read_pieces, r);
}

double read_limit_best(nxr_ctx_t *ctx, struct read_limit *r, int reads)
{
    double best = 0;
    for (int i = -2; i < reads; i++) {
        const double t0 = bench_now();
        int rc = read_limit_run(ctx, r);
        const double t = bench_now() - t0;
        if (rc != 0)
            return rc;
        if (i >= 0 && (best == 0 || t < best))
            best = t;
    }
    return best;
}
