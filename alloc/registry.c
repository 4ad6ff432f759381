/*
 * The memory registry (see internal/registry.h): a sorted array of disjoint
 * address ranges, each tagged with a domain id, under one mutex (held for a
 * binary search or an array edit, never across a call out).
 */
#include "alloc/internal/registry.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal/lock_rank.h"
#include "base/internal/sys.h"

struct range {
    uintptr_t begin, end; /* [begin, end) */
    int tag;
};

struct nxr__registry {
    pthread_mutex_t lock;
    struct range *v; /* sorted by begin, disjoint */
    size_t count, cap;
};

int nxr__registry_create(struct nxr__registry **out)
{
    *out = NULL;
    struct nxr__registry *r = nxr__calloc(1, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    int rc = nxr__mutex_init(&r->lock);
    if (rc != 0) {
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void nxr__registry_destroy(struct nxr__registry *r)
{
    if (r == NULL)
        return;
    pthread_mutex_destroy(&r->lock);
    free(r->v);
    free(r);
}

/* The first range whose end lies above addr (count when none). */
static size_t first_above(const struct nxr__registry *r, uintptr_t addr)
{
    size_t lo = 0, hi = r->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->v[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Room for `more` ranges beyond count; -ENOMEM leaves the array as it was. */
static int reserve(struct nxr__registry *r, size_t more)
{
    if (r->count + more <= r->cap)
        return 0;
    size_t cap = r->cap != 0 ? 2 * r->cap : 16;
    while (cap < r->count + more)
        cap *= 2;
    struct range *v = nxr__malloc(cap * sizeof(*v));
    if (v == NULL)
        return -ENOMEM;
    if (r->count != 0)
        memcpy(v, r->v, r->count * sizeof(*v));
    free(r->v);
    r->v = v;
    r->cap = cap;
    return 0;
}

/* Whether cutting [b, e) out would split one range in two. */
static bool cut_splits(const struct nxr__registry *r, uintptr_t b, uintptr_t e)
{
    size_t i = first_above(r, b);
    return i < r->count && r->v[i].begin < b && r->v[i].end > e;
}

/* Removes [b, e) from every range; the caller reserved a slot if it splits. */
static void cut(struct nxr__registry *r, uintptr_t b, uintptr_t e)
{
    struct range *v = r->v;
    size_t i = first_above(r, b);
    if (i < r->count && v[i].begin < b && v[i].end > e) {
        memmove(&v[i + 2], &v[i + 1], (r->count - i - 1) * sizeof(*v));
        v[i + 1] = (struct range){.begin = e, .end = v[i].end, .tag = v[i].tag};
        v[i].end = b;
        r->count++;
        return;
    }
    if (i < r->count && v[i].begin < b) {
        v[i].end = b; /* keeps its head; its tail (up to <= e) goes */
        i++;
    }
    size_t j = i;
    while (j < r->count && v[j].end <= e)
        j++; /* wholly inside [b, e) */
    if (j < r->count && v[j].begin < e)
        v[j].begin = e; /* keeps its tail */
    memmove(&v[i], &v[j], (r->count - j) * sizeof(*v));
    r->count -= j - i;
}

int nxr__registry_add(struct nxr__registry *r, uintptr_t begin, uintptr_t end, int tag)
{
    nxr__lock(&r->lock, NXR__RANK_MEM_REGISTRY);
    /* At most one split (a stale overlap) plus the new range. */
    int rc = reserve(r, 2);
    if (rc == 0) {
        cut(r, begin, end);
        struct range *v = r->v;
        size_t i = first_above(r, begin); /* v[i] starts at or after end now */
        bool left = i > 0 && v[i - 1].end == begin && v[i - 1].tag == tag;
        bool right = i < r->count && v[i].begin == end && v[i].tag == tag;
        if (left && right) {
            v[i - 1].end = v[i].end;
            memmove(&v[i], &v[i + 1], (r->count - i - 1) * sizeof(*v));
            r->count--;
        } else if (left) {
            v[i - 1].end = end;
        } else if (right) {
            v[i].begin = begin;
        } else {
            memmove(&v[i + 1], &v[i], (r->count - i) * sizeof(*v));
            v[i] = (struct range){.begin = begin, .end = end, .tag = tag};
            r->count++;
        }
    }
    nxr__unlock(&r->lock, NXR__RANK_MEM_REGISTRY);
    return rc;
}

int nxr__registry_remove(struct nxr__registry *r, uintptr_t begin, uintptr_t end)
{
    nxr__lock(&r->lock, NXR__RANK_MEM_REGISTRY);
    int rc = cut_splits(r, begin, end) ? reserve(r, 1) : 0;
    if (rc == 0)
        cut(r, begin, end);
    nxr__unlock(&r->lock, NXR__RANK_MEM_REGISTRY);
    return rc;
}

void nxr__registry_remove_tag(struct nxr__registry *r, int tag)
{
    nxr__lock(&r->lock, NXR__RANK_MEM_REGISTRY);
    size_t kept = 0;
    for (size_t i = 0; i < r->count; i++) {
        if (r->v[i].tag != tag)
            r->v[kept++] = r->v[i];
    }
    r->count = kept;
    nxr__unlock(&r->lock, NXR__RANK_MEM_REGISTRY);
}

bool nxr__registry_find(struct nxr__registry *r, const void *ptr, int *tag)
{
    uintptr_t p = (uintptr_t)ptr;
    nxr__lock(&r->lock, NXR__RANK_MEM_REGISTRY);
    size_t i = first_above(r, p);
    bool hit = i < r->count && r->v[i].begin <= p;
    if (hit)
        *tag = r->v[i].tag;
    nxr__unlock(&r->lock, NXR__RANK_MEM_REGISTRY);
    return hit;
}

size_t nxr__registry_count(struct nxr__registry *r)
{
    nxr__lock(&r->lock, NXR__RANK_MEM_REGISTRY);
    size_t n = r->count;
    nxr__unlock(&r->lock, NXR__RANK_MEM_REGISTRY);
    return n;
}
