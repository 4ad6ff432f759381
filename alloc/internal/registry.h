/*
 * The memory registry: which domain an address belongs to. One registry per
 * runtime records the address ranges its arenas obtained from the kernel
 * (the extent hooks in arena.c add a range when they map it and remove it
 * before they unmap it), each tagged with the owning domain's id. Every nxr
 * allocation on a domain -- pool buffers and their descriptors, scope
 * chunks (pool buffers), nxr_domain_malloc memory -- lies inside such a
 * range, so one lookup answers "which domain" for all of them
 * (nxr_mem_domain); nothing else ever enters the registry.
 *
 * Layout: a sorted array of disjoint [begin, end) ranges; adjacent ranges of
 * one tag are merged, so it holds about one entry per contiguous run of a
 * domain's mappings (tens, not thousands). One mutex guards it: a lookup
 * holds it for a binary search, an add or remove for an array edit.
 *
 * Lock order (ranks: base/internal/lock_rank.h): the registry's lock is a
 * leaf. The extent hooks take it while
 * jemalloc holds its own arena locks; the registry never calls into
 * jemalloc (its array comes from the system allocator), so the order is
 * always jemalloc -> registry, never the reverse.
 */
#ifndef NXR_INTERNAL_REGISTRY_H
#define NXR_INTERNAL_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nxr__registry;

/* 0 and *out, or -ENOMEM (nothing allocated; also a failed mutex init). */
int nxr__registry_create(struct nxr__registry **out);

/* Frees the registry. NULL is a no-op. No arena may still point at it. */
void nxr__registry_destroy(struct nxr__registry *r);

/*
 * Records [begin, end) (begin < end) as memory of domain `tag`. A part that
 * overlaps an existing range replaces it (a fresh mapping cannot overlap a
 * live one; an overlap means the old entry is stale). 0, or -ENOMEM with the
 * registry unchanged. Any thread.
 */
int nxr__registry_add(struct nxr__registry *r, uintptr_t begin, uintptr_t end, int tag);

/*
 * Forgets [begin, end), whichever ranges it covers or cuts. Cutting a range
 * in two may need one more slot: -ENOMEM when it cannot be had, with the
 * registry unchanged (the caller then keeps the memory mapped). 0 otherwise.
 */
int nxr__registry_remove(struct nxr__registry *r, uintptr_t begin, uintptr_t end);

/* Forgets every range of `tag` (a domain's arena going away). Never fails. */
void nxr__registry_remove_tag(struct nxr__registry *r, int tag);

/* The tag of the range holding ptr: true and *tag, or false. Any thread. */
bool nxr__registry_find(struct nxr__registry *r, const void *ptr, int *tag);

/* Ranges held (tests and diagnostics). */
size_t nxr__registry_count(struct nxr__registry *r);

#endif /* NXR_INTERNAL_REGISTRY_H */
