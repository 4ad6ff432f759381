/*
 * Scopes: bump allocation through chunks borrowed from a domain's pool,
 * reset at a step boundary (see nxr_alloc.h).
 *
 * A scope keeps its chunks in a bank, in the order it first needed them.
 * A step walks the bank from the start: it bumps a pointer through the
 * current chunk and, when an allocation does not fit, opens the next chunk
 * that is large enough (acquiring a new one only past the end of the bank).
 * Reset rewinds to the first chunk. A step shaped like an earlier one
 * therefore walks the same chunks and allocates nothing.
 *
 * Checked scopes (use-after-reset detection) alternate two banks: reset
 * makes every chunk of the bank just used inaccessible (mprotect PROT_NONE,
 * plus ASan poisoning in ASan builds) and makes the other bank accessible for
 * the next step. A pointer kept across a reset therefore faults at its first
 * use during the following step. One step later the memory is live again,
 * so a pointer kept across two resets is not caught; the page granularity of
 * mprotect is why chunks are whole pages.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc/internal/debug.h"
#include "alloc/internal/pool.h"
#include "alloc/internal/pool_impl.h"
#include "base/internal/last_error.h"
#include "base/internal/sys.h"

#define SCOPE_ALIGN   64u
#define DEFAULT_CHUNK ((size_t)1 << 20)
#define MIN_CHUNK     ((size_t)4096)

struct bank {
    nxr_buffer_t **chunks;
    size_t count;
    size_t cap;
};

struct nxr_scope {
    uintptr_t cur; /* next free byte of the current chunk */
    uintptr_t end; /* end of the current chunk (cur == end: none open) */
    size_t next;   /* index in the active bank of the next chunk to open */
    struct bank banks[2];
    unsigned active; /* the bank this step uses (always 0 when unchecked) */
    struct nxr__pool *pool;
    size_t chunk_size;
    size_t used; /* bytes handed out since the last reset */
    uint64_t resets;
    uint64_t check_failures; /* resets whose mprotect the kernel refused */
    bool checked;
};

void nxr_scope_opts_init(struct nxr_scope_opts *opts)
{
    memset(opts, 0, sizeof(*opts));
}

int nxr__scope_create(struct nxr__pool *p, const struct nxr_scope_opts *opts, nxr_scope_t **out)
{
    struct nxr_scope_opts defaults;
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (opts == NULL) {
        nxr_scope_opts_init(&defaults);
        opts = &defaults;
    }
    if ((int)opts->check < NXR_SCOPE_CHECK_DEFAULT || (int)opts->check > NXR_SCOPE_CHECK_OFF)
        return -EINVAL;
    size_t chunk = opts->chunk_size == 0 ? DEFAULT_CHUNK : opts->chunk_size;
    if (chunk < MIN_CHUNK)
        chunk = MIN_CHUNK;
    if (chunk > NXR_POOL_MAX_SIZE)
        return -EINVAL;
    nxr_scope_t *s = nxr__calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->pool = p;
    s->chunk_size = nxr_pool_class_size(chunk);
    s->checked = opts->check == NXR_SCOPE_CHECK_ON ||
                 (opts->check == NXR_SCOPE_CHECK_DEFAULT && NXR__SCOPE_CHECKED_DEFAULT);
    *out = s;
    return 0;
}

/* Opens chunk i of the active bank for bumping. */
static void open_chunk(nxr_scope_t *s, size_t i)
{
    nxr_buffer_t *b = s->banks[s->active].chunks[i];
    s->cur = (uintptr_t)b->data;
    s->end = s->cur + b->size;
    s->next = i + 1;
}

/* Appends a new chunk of at least `size` bytes to the active bank. */
static int grow(nxr_scope_t *s, size_t size)
{
    struct bank *bank = &s->banks[s->active];
    if (bank->count == bank->cap) {
        size_t cap = bank->cap != 0 ? 2 * bank->cap : 8;
        nxr_buffer_t **chunks = nxr__malloc(cap * sizeof(*chunks));
        if (chunks == NULL)
            return -ENOMEM;
        if (bank->count != 0)
            memcpy(chunks, bank->chunks, bank->count * sizeof(*chunks));
        free(bank->chunks);
        bank->chunks = chunks;
        bank->cap = cap;
    }
    nxr_buffer_t *b;
    int rc = nxr__pool_acquire(s->pool, size > s->chunk_size ? size : s->chunk_size, &b);
    if (rc != 0)
        return rc;
    nxr__asan_poison(b->data, b->size); /* nothing in it is allocated yet */
    bank->chunks[bank->count++] = b;
    return 0;
}

/* The slow path: the current chunk cannot hold `size` bytes. */
static int alloc_slow(nxr_scope_t *s, size_t size, void **out)
{
    struct bank *bank = &s->banks[s->active];
    size_t i = s->next;
    while (i < bank->count && bank->chunks[i]->size < size)
        i++; /* too small for this one: skipped for the rest of the step */
    if (i == bank->count) {
        int rc = grow(s, size);
        if (rc != 0)
            return rc;
    }
    open_chunk(s, i);
    *out = (void *)s->cur;
    s->cur += size;
    s->used += size;
    nxr__asan_unpoison(*out, size);
    return 0;
}

int nxr_scope_alloc(nxr_scope_t *s, size_t size, void **out)
{
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (out == NULL || s == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", out == NULL ? "out" : "s");
    if (size == 0)
        return nxr__fail(-EINVAL, __func__, "size is 0");
    if (size > NXR_POOL_MAX_SIZE)
        return nxr__fail(-ENOMEM, __func__, "size %zu is past the largest pool class (%zu)", size,
                         (size_t)NXR_POOL_MAX_SIZE);
    size = (size + SCOPE_ALIGN - 1) & ~(size_t)(SCOPE_ALIGN - 1);
    if (s->end - s->cur >= size) {
        *out = (void *)s->cur;
        s->cur += size;
        s->used += size;
        nxr__asan_unpoison(*out, size);
        return 0;
    }
    int rc = alloc_slow(s, size, out);
    return rc == 0
               ? 0
               : nxr__fail(rc, __func__, "a new chunk for %zu bytes: %s", size, nxr_strerror(rc));
}

/* Sets a bank's protection; checked scopes only. 0, or the first refusal
 * (the kernel out of mappings, say): the chunks from there on are then in
 * an unknown state, which is why a bank is only used again after a call
 * that succeeded over all of it. */
static int bank_protect(struct bank *bank, int prot)
{
    for (size_t i = 0; i < bank->count; i++) {
        nxr_buffer_t *b = bank->chunks[i];
        int rc = nxr__mprotect(b->data, b->size, prot);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void nxr_scope_reset(nxr_scope_t *s)
{
    if (s == NULL)
        return;
    struct bank *bank = &s->banks[s->active];
    /* ASan: everything handed out this step is dead now. */
    for (size_t i = 0; i < s->next && i < bank->count; i++)
        nxr__asan_poison(bank->chunks[i]->data, bank->chunks[i]->size);
    if (s->checked) {
        /* The other bank first: the next step may only use a bank that is
         * wholly accessible. If the kernel refuses, the scope stays on this
         * bank (accessible, unchecked for a step); the other is retried at
         * the next reset. Closing this bank failing only weakens the check. */
        if (bank_protect(&s->banks[s->active ^ 1u], PROT_READ | PROT_WRITE) != 0) {
            s->check_failures++;
        } else {
            if (bank_protect(bank, PROT_NONE) != 0)
                s->check_failures++;
            s->active ^= 1u;
        }
    }
    s->cur = s->end = 0;
    s->next = 0;
    s->used = 0;
    s->resets++;
}

void nxr_scope_stats(const nxr_scope_t *s, struct nxr_scope_stats *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof(*out));
    if (s == NULL)
        return;
    for (unsigned k = 0; k < 2; k++) {
        for (size_t i = 0; i < s->banks[k].count; i++)
            out->reserved_bytes += s->banks[k].chunks[i]->size;
        out->chunks += s->banks[k].count;
    }
    out->used_bytes = s->used;
    out->resets = s->resets;
    out->check_failures = s->check_failures;
    out->chunk_size = s->chunk_size;
    out->checked = s->checked;
}

void nxr_scope_destroy(nxr_scope_t *s)
{
    if (s == NULL)
        return;
    for (unsigned k = 0; k < 2; k++) {
        struct bank *bank = &s->banks[k];
        for (size_t i = 0; i < bank->count; i++) {
            nxr_buffer_t *b = bank->chunks[i];
            /* The inactive bank may be PROT_NONE (wholly or in part): back
             * to read-write before the pool hands it to anyone. One retry
             * for a transient refusal; then keep it out of the pool. */
            if (s->checked && k != s->active &&
                nxr__mprotect(b->data, b->size, PROT_READ | PROT_WRITE) != 0) {
                int rc = nxr__mprotect(b->data, b->size, PROT_READ | PROT_WRITE);
                if (rc != 0) {
                    fprintf(stderr,
                            "nxr: checked scope: a chunk of %zu bytes stays protected "
                            "(mprotect: %s); it is not returned to its pool\n",
                            b->size, nxr_strerror(rc));
                    continue;
                }
            }
            nxr__asan_unpoison(b->data, b->size);
            nxr_buffer_release(b);
        }
        free(bank->chunks);
    }
    free(s);
}
