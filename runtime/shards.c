/*
 * Sharded memory (runtime/nxr_span.h): rows split across a span's members,
 * each part in its member's node memory (nxr_domain_malloc: the arena binds
 * pages to the node before their first touch), checked after the touch:
 * the registry must name the member (nxr_mem_domain) and, where the
 * binding is BOUND, the kernel must report every page on the node.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>

#include "base/internal/last_error.h"
#include "base/internal/sys.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/shards.h"
#include "runtime/internal/span.h"

static const char call[] = "nxr_shards_create";

void nxr_shards_destroy(nxr_shards_t *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        nxr_domain_free(s->parts[i].data);
    free(s);
}

/* Whether the page check applies to d: a node, and memory BOUND to it. */
static bool checkable(const nxr_domain_t *d)
{
    return nxr_domain_node(d) != NXR_NODE_NONE && nxr_domain_mem_binding(d) == NXR_MEM_BOUND;
}

/* A refusal of nxr_shards_create on domain d: the reason to c->why. */
static int refuse(struct nxr__ctx_call *c, const struct nxr_domain **at, const struct nxr_domain *d,
                  int rc, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int refuse(struct nxr__ctx_call *c, const struct nxr_domain **at, const struct nxr_domain *d,
                  int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
    *at = d;
    return rc;
}

/* The shards, or the refusal (its reason in c->why, its domain in *at). */
static int make(struct nxr__ctx_call *c, const struct nxr_domain **at, nxr_ctx_t *span, size_t rows,
                size_t row_bytes, const size_t *part_rows, size_t nparts, nxr_shards_t **out)
{
    size_t n = nxr_span_domain_count(span);
    const struct nxr_domain *home = span->domain;
    *at = home;
    if (out == NULL)
        return refuse(c, at, home, -EINVAL, "out is NULL");
    if (nxr__tls.depth > 0)
        return refuse(c, at, home, NXR_EREENTRANT,
                      "inside a body: shards are made by the span's driver");
    if (rows == 0 || row_bytes == 0)
        return refuse(c, at, home, -EINVAL, "rows (%zu) and row_bytes (%zu) must be > 0", rows,
                      row_bytes);
    if (nparts != n)
        return refuse(c, at, home, -EINVAL, "nparts (%zu) is not the span's member count (%zu)",
                      nparts, n);
    size_t bounds[NXR__SPAN_MAX + 1];
    if (part_rows != NULL) {
        bounds[0] = 0;
        for (size_t i = 0; i < n; i++) {
            if (part_rows[i] > rows - bounds[i])
                return refuse(c, at, home, -EINVAL, "part_rows sum past rows (%zu) at part %zu",
                              rows, i);
            bounds[i + 1] = bounds[i] + part_rows[i];
        }
        if (bounds[n] != rows)
            return refuse(c, at, home, -EINVAL, "part_rows sum to %zu, not rows (%zu)", bounds[n],
                          rows);
    } else {
        for (size_t i = 0; i < n; i++)
            nxr_span_share(span, rows, i, &bounds[i], &bounds[i + 1]);
    }
    if (rows > SIZE_MAX / row_bytes)
        return refuse(c, at, home, -ENOMEM, "rows * row_bytes overflows");
    nxr_shards_t *s = nxr__calloc(1, sizeof(*s) + n * sizeof(s->parts[0]));
    if (s == NULL)
        return -ENOMEM; /* the status says it */
    s->n = n;
    s->rows = rows;
    s->row_bytes = row_bytes;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        nxr_domain_t *d = nxr_span_domain_at(span, i);
        size_t bytes = (bounds[i + 1] - bounds[i]) * row_bytes;
        s->parts[i] = (struct nxr_shard){
            .row0 = bounds[i], .rows = bounds[i + 1] - bounds[i], .domain = d, .on_node = -1.0};
        if (bytes == 0)
            continue;
        rc = nxr_domain_malloc(d, bytes, 64, &s->parts[i].data);
        if (rc != 0) {
            refuse(c, at, d, rc, "part %zu (%zu bytes) on domain %d: %s", i, bytes,
                   nxr_domain_id(d), nxr_strerror(rc));
            break;
        }
        /* The first touch: the arena bound the pages to d's node already. */
        memset(s->parts[i].data, 0, bytes);
        nxr_domain_t *owner = NULL;
        if (nxr_mem_domain(span->rt, s->parts[i].data, &owner) != 0 || owner != d) {
            rc = refuse(c, at, d, NXR_EPLACEMENT, "part %zu is not domain %d's memory", i,
                        nxr_domain_id(d));
            break;
        }
        if (!checkable(d))
            continue;
        /* Written just above: a page caught moving (a huge-page collapse)
         * is asked again by nxr_mem_pages_on_node, so it is no refusal. */
        size_t pages, on;
        int q = nxr_mem_pages_on_node(s->parts[i].data, bytes, nxr_domain_node(d), &pages, &on);
        if (q != 0) {
            rc = refuse(c, at, d, NXR_EPLACEMENT, "part %zu: the page check failed: %s", i,
                        nxr_strerror(q));
            break;
        }
        s->parts[i].on_node = (double)on / (double)pages;
        if (on < pages)
            rc = refuse(c, at, d, NXR_EPLACEMENT,
                        "part %zu: %.1f%% of its pages on domain %d's node %d (bound)", i,
                        100.0 * s->parts[i].on_node, nxr_domain_id(d), nxr_domain_node(d));
    }
    if (rc != 0) {
        nxr_shards_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

int nxr_shards_create(nxr_ctx_t *span, size_t rows, size_t row_bytes, const size_t *part_rows,
                      size_t nparts, nxr_shards_t **out)
{
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (span == NULL)
        return nxr__fail(-EINVAL, call, "span is NULL");
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, span, call);
    if (rc != 0)
        return rc;
    const struct nxr_domain *at;
    rc = make(&c, &at, span, rows, row_bytes, part_rows, nparts, out);
    return nxr__ctx_call_close(&c, at, rc);
}

size_t nxr_shards_count(const nxr_shards_t *s)
{
    return s != NULL ? s->n : 0;
}

int nxr_shards_part(const nxr_shards_t *s, size_t i, struct nxr_shard *out)
{
    nxr__call_begin();
    if (s == NULL || out == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", s == NULL ? "s" : "out");
    if (i >= s->n)
        return nxr__fail(-EINVAL, __func__, "part %zu of %zu", i, s->n);
    *out = s->parts[i];
    return 0;
}

void *nxr_shards_row(const nxr_shards_t *s, size_t r)
{
    if (s == NULL || r >= s->rows)
        return NULL;
    for (size_t i = 0; i < s->n; i++) {
        const struct nxr_shard *p = &s->parts[i];
        if (r < p->row0 + p->rows)
            return (unsigned char *)p->data + (r - p->row0) * s->row_bytes;
    }
    return NULL;
}
