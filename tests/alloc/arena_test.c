/*
 * nxr_domain_malloc/free: general allocations from the domain's jemalloc
 * arena, freed from any thread; live allocations keep the arena alive past
 * runtime destruction.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/arena.h"
#include "alloc/internal/pool.h"
#include "base/internal/sys.h"
#include "runtime/internal/runtime.h"
#include "runtime/nxr.h"
#include "tests/support/cpus.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *make_runtime(const char *domains)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, domains, NXR_TEST_PARK); /* tests/support/cpus.h, or NULL */
    return fx.rt;
}

Test(alloc_arena, malloc_honours_size_and_alignment)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    const size_t aligns[] = {0, 16, 64, 4096, 1u << 21};
    for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
        for (size_t size = 1; size <= (1u << 22); size *= 7) {
            void *p;
            cr_assert_eq(nxr_domain_malloc(d, size, aligns[i], &p), 0);
            size_t a = aligns[i] != 0 ? aligns[i] : 16;
            cr_assert_eq((uintptr_t)p % a, 0, "size %zu align %zu", size, a);
            memset(p, 0x77, size);
            nxr_domain_free(p);
        }
    }
    nxr_domain_free(NULL);
    nxr_runtime_destroy(rt);
}

Test(alloc_arena, invalid_arguments_are_einval)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    void *p = (void *)1;
    cr_assert_eq(nxr_domain_malloc(d, 0, 0, &p), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(nxr_domain_malloc(d, 8, 48, &p), -EINVAL);
    cr_assert_eq(nxr_domain_malloc(NULL, 8, 0, &p), -EINVAL);
    cr_assert_eq(nxr_domain_malloc(d, 8, 0, NULL), -EINVAL);
    nxr_runtime_destroy(rt);
}

Test(alloc_arena, each_domain_has_its_own_arena)
{
    nxr_runtime_t *rt = make_runtime("0:%0;1:%0 shared");
    struct nxr__arena *a0 = nxr__pool_arena(nxr_runtime_domain_at(rt, 0)->pool);
    struct nxr__arena *a1 = nxr__pool_arena(nxr_runtime_domain_at(rt, 1)->pool);
    cr_assert_neq(nxr__arena_index(a0), nxr__arena_index(a1));
    size_t before = nxr__arena_allocated(a1);
    void *p;
    cr_assert_eq(nxr_domain_malloc(nxr_runtime_domain_at(rt, 1), 100000, 0, &p), 0);
    cr_assert_geq(nxr__arena_allocated(a1), before + 100000);
    nxr_domain_free(p);
    cr_assert_eq(nxr__arena_allocated(a1), before);
    nxr_runtime_destroy(rt);
}

static void *free_elsewhere(void *p)
{
    nxr_domain_free(p);
    return NULL;
}

Test(alloc_arena, free_from_another_thread_returns_to_the_arena, .timeout = 30)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    struct nxr__arena *a = nxr__pool_arena(d->pool);
    size_t before = nxr__arena_allocated(a);
    void *p;
    cr_assert_eq(nxr_domain_malloc(d, 50000, 0, &p), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, free_elsewhere, p), 0);
    pthread_join(t, NULL);
    cr_assert_eq(nxr__arena_allocated(a), before);
    nxr_runtime_destroy(rt);
}

/* Skips a test of a rule of jemalloc's arenas in a build with the other back
 * end (alloc/internal/arena.h: libnxr.so's, --//alloc:arena=mmap). */
static void need_jemalloc_arena(void)
{
    if (strcmp(nxr__arena_kind(), "jemalloc") != 0)
        cr_skip_test("a rule of the jemalloc arena; this build's arena is %s", nxr__arena_kind());
}

/* Arena indices are reused: creating and destroying many runtimes does not
 * run out of jemalloc's arena slots (each new runtime's arenas take slots
 * the first runtime had). */
Test(alloc_arena, runtimes_come_and_go_without_leaking_arenas, .timeout = 60)
{
    need_jemalloc_arena();
    nxr_runtime_t *rt = make_runtime(NULL);
    unsigned max_index = 0;
    for (size_t i = 0; i < rt->domain_count; i++) {
        unsigned index = nxr__arena_index(nxr__pool_arena(rt->domains[i]->pool));
        max_index = index > max_index ? index : max_index;
    }
    nxr_runtime_destroy(rt);
    for (int round = 0; round < 50; round++) {
        rt = make_runtime(NULL);
        for (size_t i = 0; i < rt->domain_count; i++)
            cr_assert_leq(nxr__arena_index(nxr__pool_arena(rt->domains[i]->pool)), max_index,
                          "round %d", round);
        nxr_runtime_destroy(rt);
    }
}

Test(alloc_arena, destroy_with_live_memory_keeps_the_arena)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    void *p;
    cr_assert_eq(nxr_domain_malloc(nxr_runtime_domain_at(rt, 0), 1u << 20, 0, &p), 0);
    memset(p, 1, 1u << 20);
    cr_assert_eq(nxr__runtime_pools_destroy(rt), NXR_EOUTSTANDING);
    nxr_runtime_destroy(rt);
    memset(p, 2, 1u << 20); /* still valid */
    nxr_domain_free(p);
}

/* jemalloc (with retain, its default on 64-bit Linux) takes the address
 * space the hooks gave it to stay its own until the arena goes: it keeps
 * arenas' extents apart by head flags only. So the dalloc hook must never
 * unmap a decayed piece (another arena's mmap could land in the hole and be
 * merged with this arena's neighbour). Counted through the seam: MUNMAP
 * armed at a call that never comes fails nothing and counts every call. */
Test(alloc_arena, purged_extents_stay_mapped_until_the_arena_goes)
{
    need_jemalloc_arena();
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    void *p[8];
    for (size_t i = 0; i < 8; i++) {
        cr_assert_eq(nxr_domain_malloc(d, (i + 1) << 18, 0, &p[i]), 0);
        memset(p[i], 1, (i + 1) << 18);
    }
    nxr__fault_arm(NXR_FAULT_MUNMAP, LONG_MAX);
    for (size_t i = 0; i < 8; i++)
        nxr_domain_free(p[i]);
    cr_assert_eq(nxr_pool_trim(d), 0); /* the arena purged: decayed extents dalloc'ed */
    long unmapped = nxr__fault_calls();
    nxr__fault_arm(0, 0);
    cr_expect_eq(unmapped, 0, "freeing and purging unmapped %ld ranges before the arena went",
                 unmapped);
    nxr_runtime_destroy(rt);
}

/* The mmap back end's rules (libnxr.so's arena): a free keeps its mapping
 * for the next allocation of the same length -- still recorded as the
 * domain's, no system call -- up to 16 mappings; the rest are unmapped at
 * once, and a trim unmaps what was kept. Counted through the seam as above. */
Test(alloc_arena, mmap_arena_keeps_a_few_freed_mappings_until_a_trim)
{
    if (strcmp(nxr__arena_kind(), "mmap") != 0)
        cr_skip_test("a rule of the mmap arena; this build's arena is %s", nxr__arena_kind());
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0), *owner;
    void *p[20];
    for (size_t i = 0; i < 20; i++) {
        cr_assert_eq(nxr_domain_malloc(d, (i % 4 + 1) << 16, 0, &p[i]), 0);
        memset(p[i], 1, (i % 4 + 1) << 16);
    }
    nxr__fault_arm(NXR_FAULT_MUNMAP, LONG_MAX);
    for (size_t i = 0; i < 20; i++)
        nxr_domain_free(p[i]);
    long unmapped = nxr__fault_calls();
    cr_expect_eq(unmapped, 4, "20 frees unmapped %ld ranges (16 are kept)", unmapped);
    /* The last freed of a size comes back for it, without a new mapping. */
    void *again;
    cr_assert_eq(nxr_domain_malloc(d, 4u << 16, 0, &again), 0);
    bool reused = false;
    for (size_t i = 0; i < 20; i++)
        reused = reused || again == p[i];
    cr_expect(reused, "a 256 KiB allocation did not reuse a kept mapping");
    cr_expect_eq(nxr_mem_domain(rt, again, &owner), 0);
    nxr_domain_free(again);
    long before_trim = nxr__fault_calls();
    cr_assert_eq(nxr_pool_trim(d), 0);
    long trimmed = nxr__fault_calls() - before_trim;
    nxr__fault_arm(0, 0);
    cr_expect_eq(trimmed, 16, "the trim unmapped %ld kept ranges", trimmed);
    for (size_t i = 0; i < 20; i++)
        cr_expect_eq(nxr_mem_domain(rt, p[i], &owner), NXR_ENODOMAIN,
                     "allocation %zu still recorded after the trim", i);
    nxr_runtime_destroy(rt);
}

/* The failure the rule above prevents, end to end: two domains' pools in
 * use from three threads while a fourth trims both (each trim purges the
 * arena). Every buffer's contents survive until its release. */
struct churn {
    nxr_runtime_t *rt;
    atomic_bool stop;
    atomic_uint corrupted;
};

static void *churn_thread(void *p)
{
    struct churn *c = p;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    const size_t n = nxr_runtime_domain_count(c->rt);
    while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
        nxr_domain_t *d = nxr_runtime_domain_at(c->rt, (size_t)rand_r(&seed) % n);
        size_t size = 448u * (1 + (size_t)rand_r(&seed) % 1536);
        nxr_buffer_t *b;
        if (nxr_buffer_acquire(d, size, &b) != 0)
            continue;
        unsigned char *data = nxr_buffer_data(b), tag = (unsigned char)rand_r(&seed);
        memset(data, tag, size);
        for (size_t i = 0; i < size; i += 512)
            if (data[i] != tag)
                atomic_fetch_add(&c->corrupted, 1);
        nxr_buffer_release(b);
    }
    return NULL;
}

Test(alloc_arena, two_domains_trimmed_while_in_use, .timeout = 120)
{
    NXR_TEST_NEED_CPUS(2); /* two one-CPU domains */
    /* A stress of the host's CPUs: under the VMs' emulation (tools/vm_test.sh
     * sets NXR_TEST_NEED_NODE1) its 40,000 purges take minutes, and the
     * rule it guards is checked there by purged_extents_stay_mapped_... */
    if (getenv("NXR_TEST_NEED_NODE1") != NULL)
        cr_skip_test("a host stress test; in the VM the deterministic test above covers it");
    struct churn c = {.rt = make_runtime("0:%0;1:%1")};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, churn_thread, &c), 0);
    for (int k = 0; k < 20000; k++)
        for (size_t i = 0; i < nxr_runtime_domain_count(c.rt); i++)
            nxr_pool_trim(nxr_runtime_domain_at(c.rt, i));
    atomic_store(&c.stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    cr_expect_eq(atomic_load(&c.corrupted), 0);
    nxr_runtime_destroy(c.rt);
}
