/* The KV cache's blocks (see kv_blocks.h). */
#include "service/kv_blocks.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void poison(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
}

int svc_kv_blocks_create(struct svc_kv_blocks *out, nxr_domain_t *d, size_t bytes,
                         size_t block_tokens, size_t layers, size_t kv_dim)
{
    memset(out, 0, sizeof *out);
    if (block_tokens == 0 || layers == 0 || kv_dim == 0)
        return -EINVAL;
    const size_t block_floats = layers * 2 * block_tokens * kv_dim;
    const size_t count = bytes / (block_floats * sizeof(float));
    if (count == 0)
        return -EINVAL;
    void *base = NULL;
    int rc = nxr_domain_malloc(d, count * block_floats * sizeof(float), 64, &base);
    if (rc != 0)
        return rc;
    size_t *free_list = malloc(count * sizeof *free_list);
    const void **owner = calloc(count, sizeof *owner);
    if (free_list == NULL || owner == NULL) {
        free(free_list);
        free(owner);
        nxr_domain_free(base);
        return -ENOMEM;
    }
    /* Touched now, on the serving thread's behalf: the arena's pages are
     * bound to the domain's node, so this first write places them there. */
    if (svc_kv_poisons())
        poison(base, count * block_floats);
    else
        memset(base, 0, count * block_floats * sizeof(float));
    /* Low indices on top of the stack: a lone sequence gets blocks 0, 1, ... */
    for (size_t i = 0; i < count; i++)
        free_list[i] = count - 1 - i;
    *out = (struct svc_kv_blocks){.domain = d,
                                  .base = base,
                                  .block_tokens = block_tokens,
                                  .block_floats = block_floats,
                                  .layers = layers,
                                  .kv_dim = kv_dim,
                                  .count = count,
                                  .free_count = count,
                                  .free_list = free_list,
                                  .owner = owner};
    return 0;
}

void svc_kv_blocks_destroy(struct svc_kv_blocks *p)
{
    if (p->base != NULL)
        nxr_domain_free(p->base);
    free(p->free_list);
    free(p->owner);
    memset(p, 0, sizeof *p);
}

bool svc_kv_take(struct svc_kv_blocks *p, const void *owner, size_t n, size_t *table)
{
    if (n > p->free_count)
        return false;
    for (size_t i = 0; i < n; i++) {
        const size_t b = p->free_list[--p->free_count];
        p->owner[b] = owner;
        table[i] = b;
    }
    return true;
}

void svc_kv_give(struct svc_kv_blocks *p, const void *owner, size_t n, const size_t *table)
{
    for (size_t i = 0; i < n; i++) {
        const size_t b = table[i];
        assert(p->owner[b] == owner);
        (void)owner;
        p->owner[b] = NULL;
        if (svc_kv_poisons())
            poison(p->base + b * p->block_floats, p->block_floats);
        p->free_list[p->free_count++] = b;
    }
}
