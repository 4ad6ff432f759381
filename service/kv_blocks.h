/*
 * The KV cache's blocks: one allocation from a domain's memory
 * (nxr_domain_malloc: the domain's arena, bound to its node before first
 * touch), cut into fixed-size blocks, each holding `block_tokens` positions
 * of every layer's keys and values for one sequence. A sequence takes the
 * blocks its whole length needs when it is admitted (svc_kv_take) and gives
 * them back when it leaves (svc_kv_give), so a running sequence never waits
 * for cache; the budget (the number of blocks) is what admission checks.
 *
 * Each block records its owner. Checked builds (-DNXR_CHECKED=1) fill the
 * pool and every returned block with NaN, so that a sequence reading a
 * position it did not write (another's block, a freed one) turns its
 * logits to NaN and its tokens visibly wrong.
 *
 * Not thread-safe: one serving thread owns a pool.
 */
#ifndef NXR_SERVICE_KV_BLOCKS_H
#define NXR_SERVICE_KV_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/nxr.h"

struct svc_kv_blocks {
    nxr_domain_t *domain;
    float *base;         /* count * block_floats floats (owned; nxr_domain_free) */
    size_t block_tokens; /* positions per block */
    size_t block_floats; /* layers * 2 * block_tokens * kv_dim */
    size_t layers, kv_dim;
    size_t count;       /* blocks in the pool */
    size_t free_count;  /* of which free */
    size_t *free_list;  /* free block indices, free_count of them (a stack) */
    const void **owner; /* per block: its sequence, NULL when free */
};

/* Whether freed blocks are poisoned (checked builds). */
static inline bool svc_kv_poisons(void)
{
#ifdef NXR_CHECKED
    return NXR_CHECKED != 0;
#else
    return false;
#endif
}

/* A pool of as many blocks of block_tokens positions as fit in `bytes` of
 * d's memory, for a model of `layers` layers with kv_dim floats of keys
 * (and as many of values) per position. Returns 0, -EINVAL (a size of 0,
 * or `bytes` too small for one block) or nxr_domain_malloc's error; on
 * failure *out is zeroed and nothing stays allocated. */
int svc_kv_blocks_create(struct svc_kv_blocks *out, nxr_domain_t *d, size_t bytes,
                         size_t block_tokens, size_t layers, size_t kv_dim);

/* Frees the pool; a zeroed one is a no-op. */
void svc_kv_blocks_destroy(struct svc_kv_blocks *p);

/* Blocks that hold `tokens` positions. */
static inline size_t svc_kv_blocks_for(const struct svc_kv_blocks *p, size_t tokens)
{
    return (tokens + p->block_tokens - 1) / p->block_tokens;
}

/* Takes n free blocks for `owner` into table[0, n). Returns false (and
 * takes nothing) when fewer than n are free. */
bool svc_kv_take(struct svc_kv_blocks *p, const void *owner, size_t n, size_t *table);

/* Gives back table[0, n), which `owner` took (poisoned in checked builds). */
void svc_kv_give(struct svc_kv_blocks *p, const void *owner, size_t n, const size_t *table);

/* Within a block, each layer holds its keys transposed, kv_dim rows of
 * block_tokens floats (element d of position t at d * block_tokens +
 * t % block_tokens), so that attention scores a block's positions side by
 * side, a vector of positions per multiply-add with no sum across lanes;
 * then its values, block_tokens rows of kv_dim floats, which attention adds
 * up a row at a time. */

/* The key tile (kv_dim x block_tokens) of `layer` in the block that holds
 * position `pos` of the sequence whose blocks are table. */
static inline float *svc_kv_keys(const struct svc_kv_blocks *p, const size_t *table, size_t layer,
                                 size_t pos)
{
    return p->base + table[pos / p->block_tokens] * p->block_floats +
           layer * 2 * p->block_tokens * p->kv_dim;
}

/* Writes position pos's keys (kv_dim floats) into their column of the tile. */
static inline void svc_kv_put_key(const struct svc_kv_blocks *p, const size_t *table, size_t layer,
                                  size_t pos, const float *k)
{
    float *tile = svc_kv_keys(p, table, layer, pos) + pos % p->block_tokens;
    for (size_t d = 0; d < p->kv_dim; d++)
        tile[d * p->block_tokens] = k[d];
}

/* The values of `layer` at position `pos`: kv_dim floats. */
static inline float *svc_kv_value(const struct svc_kv_blocks *p, const size_t *table, size_t layer,
                                  size_t pos)
{
    return svc_kv_keys(p, table, layer, pos) +
           (p->block_tokens + pos % p->block_tokens) * p->kv_dim;
}

/* The owner of block b (NULL when free). */
static inline const void *svc_kv_owner(const struct svc_kv_blocks *p, size_t b)
{
    return p->owner[b];
}

#endif /* NXR_SERVICE_KV_BLOCKS_H */
