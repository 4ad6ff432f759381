/*
 * The node-local buffer pool (see internal/pool.h and nxr_alloc.h).
 *
 * A buffer is a descriptor (64 bytes, its own cache line) plus its memory,
 * both from the domain's arena. The descriptor names its owner pool, so a
 * release from any thread finds the right free list. Cached descriptors form
 * a LIFO per size class: push and pop at the top, which is what makes the
 * most recently released buffer the next one handed out.
 *
 * Counters and memory orders: the free lists are published through the class
 * mutexes, which order everything about a buffer's hand-over. The atomics
 * below only count (outstanding, drops) or bound (cached_bytes against cap),
 * so they are relaxed: no other memory is read on the strength of their
 * values. cached_bytes is reserved before a push and given back after a pop,
 * so at every instant it is >= the bytes actually on the free lists, and the
 * reservation itself (a CAS loop) never lets it pass the cap.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/debug.h"
#include "alloc/internal/pool.h"
#include "alloc/internal/pool_impl.h"
#include "alloc/internal/size_class.h"
#include "base/internal/last_error.h"
#include "base/internal/lock_rank.h"
#include "base/internal/sys.h"
#include "domains/nxr_domains.h"

enum { BUF_OUT = 1, BUF_CACHED = 2 };

/* A call on a released buffer (checked builds): the caller keeps using
 * memory it gave back, which the pool may already have handed to someone
 * else. */
static void __attribute__((noreturn)) buffer_dead(const char *what, const nxr_buffer_t *b)
{
    fprintf(stderr, "nxr: buffer %p %s after its release (it belongs to its pool again)\n",
            (const void *)b, what);
    abort();
}

static int class_init(struct nxr__pool_class *c)
{
    c->top = NULL;
    c->count = 0;
    c->hits = 0;
    c->misses = 0;
    return nxr__mutex_init(&c->lock);
}

int nxr__pool_create(struct nxr__pool **out, const struct nxr__pool_opts *opts, char *err,
                     size_t errsz)
{
    *out = NULL;
    struct nxr__arena *arena;
    char why[256];
    int rc = nxr__arena_create(&arena, opts->node, opts->registry, opts->domain_id, why,
                               sizeof(why));
    if (rc != 0) {
        snprintf(err, errsz, "domain %d: %s", opts->domain_id, why);
        return rc;
    }
    /* The pool itself lives in its arena: node-local and cache-line aligned. */
    struct nxr__pool *p;
    rc = nxr__arena_alloc(arena, sizeof(*p), _Alignof(struct nxr__pool), (void **)&p);
    if (rc != 0) {
        size_t live;
        nxr__arena_destroy(arena, &live);
        snprintf(err, errsz, "domain %d: no memory for its pool: %s", opts->domain_id,
                 nxr_strerror(rc));
        return rc;
    }
    memset(p, 0, sizeof(*p));
    p->arena = arena;
    p->domain_id = opts->domain_id;
    atomic_init(&p->cap, opts->cap_bytes);
    atomic_init(&p->cached_bytes, 0);
    atomic_init(&p->outstanding, 0);
    atomic_init(&p->drops, 0);
    atomic_init(&p->closed, false);
    for (unsigned i = 0; i < NXR__CLASS_COUNT; i++) {
        if ((rc = class_init(&p->classes[i])) != 0) {
            while (i-- > 0)
                pthread_mutex_destroy(&p->classes[i].lock);
            nxr__arena_free_sized(p, sizeof(*p), _Alignof(struct nxr__pool));
            size_t live;
            nxr__arena_destroy(arena, &live);
            snprintf(err, errsz, "domain %d: could not initialise its pool's locks: %s",
                     opts->domain_id, nxr_strerror(rc));
            return rc;
        }
    }
    *out = p;
    return 0;
}

/* Gives a buffer's memory and descriptor back to the arena. */
static void buffer_free(nxr_buffer_t *b)
{
    nxr__asan_unpoison(b->data, b->size); /* the arena reuses it unpoisoned */
    nxr__arena_free_sized(b->data, b->size, nxr__class_align(b->size));
    nxr__arena_free_sized(b, sizeof(*b), _Alignof(nxr_buffer_t));
}

/* Pops the top of class cls, or NULL. An acquire (`count`) also records the
 * hit or miss; trimming does not. */
static nxr_buffer_t *class_pop(struct nxr__pool *p, unsigned cls, bool count)
{
    struct nxr__pool_class *c = &p->classes[cls];
    nxr__lock(&c->lock, NXR__RANK_POOL);
    nxr_buffer_t *b = c->top;
    if (b != NULL) {
        c->top = b->next;
        c->count--;
    }
    if (count) {
        if (b != NULL)
            c->hits++;
        else
            c->misses++;
    }
    nxr__unlock(&c->lock, NXR__RANK_POOL);
    if (b != NULL)
        atomic_fetch_sub_explicit(&p->cached_bytes, b->size, memory_order_relaxed);
    return b;
}

/* Frees cached buffers, largest classes first, until cached bytes <= limit. */
static void trim_to(struct nxr__pool *p, size_t limit)
{
    for (unsigned cls = NXR__CLASS_COUNT; cls-- > 0;) {
        while (atomic_load_explicit(&p->cached_bytes, memory_order_relaxed) > limit) {
            nxr_buffer_t *b = class_pop(p, cls, false);
            if (b == NULL)
                break;
            buffer_free(b);
        }
    }
}

int nxr__pool_destroy(struct nxr__pool *p)
{
    if (p == NULL)
        return 0;
    trim_to(p, 0);
    long out = atomic_load_explicit(&p->outstanding, memory_order_relaxed);
    if (out != 0) {
        /* Keep the pool and its arena: a late release then frees the buffer
         * into the arena (see nxr_buffer_release) instead of touching freed
         * memory. Both are leaked on purpose. */
        atomic_store_explicit(&p->closed, true, memory_order_release);
        nxr__arena_detach(p->arena); /* the registry goes with the runtime */
        fprintf(stderr,
                "nxr: domain %d: runtime destroyed with %ld buffer(s) outstanding; "
                "its pool and arena are kept so that their release stays safe (%s)\n",
                p->domain_id, out, nxr_strerror(NXR_EOUTSTANDING));
        return NXR_EOUTSTANDING;
    }
    struct nxr__arena *arena = p->arena;
    int id = p->domain_id;
    for (unsigned i = 0; i < NXR__CLASS_COUNT; i++)
        pthread_mutex_destroy(&p->classes[i].lock);
    nxr__arena_free_sized(p, sizeof(*p), _Alignof(struct nxr__pool));
    size_t live;
    if (!nxr__arena_destroy(arena, &live)) {
        fprintf(stderr,
                "nxr: domain %d: runtime destroyed with %zu byte(s) of nxr_domain_malloc memory "
                "still allocated; the arena is kept so that it stays valid (%s)\n",
                id, live, nxr_strerror(NXR_EOUTSTANDING));
        return NXR_EOUTSTANDING;
    }
    return 0;
}

int nxr__pool_acquire(struct nxr__pool *p, size_t size, nxr_buffer_t **out)
{
    *out = NULL;
    if (size == 0)
        return -EINVAL;
    if (size > NXR_POOL_MAX_SIZE)
        return -ENOMEM;
    size_t csize;
    unsigned cls = nxr__size_class(size, &csize);
    nxr_buffer_t *b = class_pop(p, cls, true);
    if (b != NULL) {
        nxr__asan_unpoison(b->data, b->size);
    } else {
        int rc = nxr__arena_alloc(p->arena, sizeof(*b), _Alignof(nxr_buffer_t), (void **)&b);
        if (rc != 0)
            return rc;
        rc = nxr__arena_alloc(p->arena, csize, nxr__class_align(csize), &b->data);
        if (rc != 0) {
            nxr__arena_free_sized(b, sizeof(*b), _Alignof(nxr_buffer_t));
            return rc;
        }
        b->size = csize;
        b->owner = p;
        b->cls = cls;
    }
    b->next = NULL;
    atomic_store_explicit(&b->state, BUF_OUT, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->outstanding, 1, memory_order_relaxed);
    *out = b;
    return 0;
}

/* Reserves b->size bytes of cache under the cap; false when it does not fit. */
static bool reserve_cache(struct nxr__pool *p, size_t size)
{
    size_t cap = atomic_load_explicit(&p->cap, memory_order_relaxed);
    size_t cur = atomic_load_explicit(&p->cached_bytes, memory_order_relaxed);
    do {
        if (cur > cap || size > cap - cur)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&p->cached_bytes, &cur, cur + size,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

void nxr_buffer_release(nxr_buffer_t *b)
{
    if (b == NULL)
        return;
    /* Always on: a second release would put one buffer on the free list
     * twice and hand it to two owners. */
    unsigned was = atomic_exchange_explicit(&b->state, BUF_CACHED, memory_order_relaxed);
    if (was != BUF_OUT) {
        fprintf(stderr, "nxr: buffer %p released twice (or not an nxr buffer)\n", (void *)b);
        abort();
    }
    struct nxr__pool *p = b->owner;
    atomic_fetch_sub_explicit(&p->outstanding, 1, memory_order_relaxed);
    /* Acquire pairs with the release store in nxr__pool_destroy. */
    if (atomic_load_explicit(&p->closed, memory_order_acquire) || !reserve_cache(p, b->size)) {
        atomic_fetch_add_explicit(&p->drops, 1, memory_order_relaxed);
        buffer_free(b);
        return;
    }
    nxr__asan_poison(b->data, b->size);
    struct nxr__pool_class *c = &p->classes[b->cls];
    nxr__lock(&c->lock, NXR__RANK_POOL);
    b->next = c->top;
    c->top = b;
    c->count++;
    nxr__unlock(&c->lock, NXR__RANK_POOL);
}

void *nxr_buffer_data(const nxr_buffer_t *b)
{
    return b != NULL ? b->data : NULL;
}

size_t nxr_buffer_size(const nxr_buffer_t *b)
{
    return b != NULL ? b->size : 0;
}

int nxr_buffer_export(const nxr_buffer_t *b, void **ptr, size_t *len)
{
    nxr__call_begin();
    if (ptr != NULL)
        *ptr = NULL;
    if (len != NULL)
        *len = 0;
    if (b == NULL || ptr == NULL || len == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL",
                         b == NULL     ? "b"
                         : ptr == NULL ? "ptr"
                                       : "len");
    /* Relaxed: only the owner may export, and it is the thread that acquired
     * (or was handed) the buffer, so it sees its own store of BUF_OUT. */
    if (NXR__BUFFER_CHECKED && atomic_load_explicit(&b->state, memory_order_relaxed) != BUF_OUT)
        buffer_dead("exported", b);
    *ptr = b->data;
    *len = b->size;
    return 0;
}

int nxr_buffer_domain(const nxr_buffer_t *b)
{
    return b != NULL ? b->owner->domain_id : -1;
}

void nxr__pool_stats(struct nxr__pool *p, struct nxr_pool_stats *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < NXR__CLASS_COUNT; i++) {
        struct nxr__pool_class *c = &p->classes[i];
        nxr__lock(&c->lock, NXR__RANK_POOL);
        out->cached_buffers += c->count;
        out->hits += c->hits;
        out->misses += c->misses;
        nxr__unlock(&c->lock, NXR__RANK_POOL);
    }
    out->cap_bytes = atomic_load_explicit(&p->cap, memory_order_relaxed);
    out->cached_bytes = atomic_load_explicit(&p->cached_bytes, memory_order_relaxed);
    long n = atomic_load_explicit(&p->outstanding, memory_order_relaxed);
    out->outstanding = n > 0 ? (size_t)n : 0;
    out->drops = atomic_load_explicit(&p->drops, memory_order_relaxed);
    out->release_failures = nxr__arena_release_failures(p->arena);
}

void nxr__pool_set_cap(struct nxr__pool *p, size_t cap_bytes)
{
    atomic_store_explicit(&p->cap, cap_bytes, memory_order_relaxed);
    trim_to(p, cap_bytes);
}

void nxr__pool_trim(struct nxr__pool *p)
{
    trim_to(p, 0);
    nxr__arena_purge(p->arena); /* and what the arena kept of them */
}

struct nxr__arena *nxr__pool_arena(const struct nxr__pool *p)
{
    return p->arena;
}

int nxr__pool_domain_id(const struct nxr__pool *p)
{
    return p->domain_id;
}
