/*
 * The pool's layout, shared by the files of alloc/ only (pool.c, scope.c,
 * describe.c). Everything else goes through internal/pool.h.
 */
#ifndef NXR_INTERNAL_POOL_IMPL_H
#define NXR_INTERNAL_POOL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/internal/size_class.h"
#include "alloc/nxr_alloc.h"

struct nxr__arena;
struct nxr__pool;

/* A buffer descriptor: one cache line, so that descriptors released by
 * different threads never share one. */
struct nxr_buffer {
    _Alignas(64) void *data;
    size_t size;             /* class size */
    struct nxr__pool *owner; /* the pool it returns to */
    struct nxr_buffer *next; /* free-list link while cached */
    unsigned cls;            /* class index */
    atomic_uint state;       /* out or cached: catches a double release */
};
_Static_assert(sizeof(struct nxr_buffer) == 64, "a descriptor is one cache line");

/* One size class: a LIFO free list and its counters, all under `lock`. */
struct nxr__pool_class {
    _Alignas(64) pthread_mutex_t lock;
    struct nxr_buffer *top; /* the buffer released last */
    size_t count;
    uint64_t hits;
    uint64_t misses;
};

struct nxr__pool {
    /* Read-mostly. */
    _Alignas(64) struct nxr__arena *arena;
    int domain_id;
    atomic_size_t cap;
    atomic_bool closed; /* destroyed with buffers out: release frees */
    /* Updated by every cached release and every hit. */
    _Alignas(64) atomic_size_t cached_bytes;
    /* Updated by every acquire and release. */
    _Alignas(64) atomic_long outstanding;
    /* Rare: releases that found the cache full. */
    _Alignas(64) atomic_uint_fast64_t drops;
    struct nxr__pool_class classes[NXR__CLASS_COUNT];
};

#endif /* NXR_INTERNAL_POOL_IMPL_H */
