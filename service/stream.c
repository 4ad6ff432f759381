/* The request stream (see stream.h). */
#include "service/stream.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t svc_stream_rows(const struct svc_stream *s, uint64_t index)
{
    if (s->batch_min == s->batch_max)
        return s->batch_min;
    /* splitmix64 of (seed, index): a uniform u in [0, 1). */
    uint64_t z = s->seed + (index + 1) * UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    double u = (double)(z >> 11) / 9007199254740992.0;
    /* log-uniform over [min, max + 1), floored: every size in range is hit. */
    double lo = log((double)s->batch_min), hi = log((double)s->batch_max + 1.0);
    size_t rows = (size_t)exp(lo + u * (hi - lo));
    if (rows < s->batch_min)
        rows = s->batch_min;
    if (rows > s->batch_max)
        rows = s->batch_max;
    return rows;
}

int svc_round_make(struct svc_round *r, const struct svc_stream *s, uint64_t first, size_t count)
{
    memset(r, 0, sizeof(*r));
    r->first = first;
    r->count = count;
    r->rows = calloc(count, sizeof(*r->rows));
    r->offset = calloc(count, sizeof(*r->offset));
    if (r->rows == NULL || r->offset == NULL)
        goto out_nomem;
    for (size_t i = 0; i < count; i++) {
        r->rows[i] = svc_stream_rows(s, first + i);
        r->offset[i] = r->total_rows;
        r->total_rows += r->rows[i];
    }
    r->input = malloc(r->total_rows * s->shape.hidden * sizeof(float));
    if (r->input == NULL)
        goto out_nomem;
    for (size_t i = 0; i < count; i++)
        svc_model_input(&s->shape, s->seed, first + i, r->rows[i],
                        r->input + r->offset[i] * s->shape.hidden);
    return 0;
out_nomem:
    svc_round_free(r);
    return -ENOMEM;
}

void svc_round_free(struct svc_round *r)
{
    free(r->rows);
    free(r->offset);
    free(r->input);
    memset(r, 0, sizeof(*r));
}
