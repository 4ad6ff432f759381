/*
 * The request stream: request i's batch size and input are functions of
 * (seed, i) only, so every path serves exactly the same requests. Batch
 * sizes are log-uniform over [min, max] (as many requests of 1-4 rows as of
 * 4-16 when the range is 1-16): mostly small requests, a tail of big ones,
 * the shape of interactive inference traffic.
 *
 * A round is a contiguous slice of the stream with its inputs generated up
 * front (outside any timing) and an output area per path.
 */
#ifndef NXR_SERVICE_STREAM_H
#define NXR_SERVICE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "service/model.h"

struct svc_stream {
    struct svc_model_shape shape;
    uint64_t seed;
    size_t batch_min, batch_max;
};

/* Rows of request `index` (in [batch_min, batch_max]). */
size_t svc_stream_rows(const struct svc_stream *s, uint64_t index);

struct svc_round {
    uint64_t first;   /* stream index of the round's first request */
    size_t count;     /* requests */
    size_t *rows;     /* rows[i] of request first + i */
    size_t *offset;   /* row offset of request i in input and outputs */
    size_t total_rows;
    float *input;     /* total_rows x hidden */
};

/* Generates requests [first, first + count). 0 or -ENOMEM (nothing kept). */
int svc_round_make(struct svc_round *r, const struct svc_stream *s, uint64_t first, size_t count);
void svc_round_free(struct svc_round *r);

#endif /* NXR_SERVICE_STREAM_H */
