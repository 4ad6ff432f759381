/*
 * Host export (nxr_buffer_export): a buffer's memory handed to another
 * library without a copy and without a change of owner, and its use after
 * release caught in checked builds.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "runtime/nxr.h"
#include "tests/support/runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define NXR_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NXR_TEST_ASAN 1
#endif
#endif

static nxr_runtime_t *rt;
static nxr_domain_t *dom;

static void setup(void)
{
    static struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_PARK);
    rt = fx.rt;
    dom = nxr_runtime_domain_at(rt, 0);
}

static void teardown(void)
{
    nxr_runtime_destroy(rt);
    rt = NULL;
}

TestSuite(alloc_export, .init = setup, .fini = teardown, .timeout = 30);

/* A library that takes (pointer, length): it fills the range with a
 * pattern, as MPI_Allreduce writes its result in place. */
static void library_fill(void *ptr, size_t len)
{
    unsigned char *p = ptr;
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)(i * 31u + 7u);
}

Test(alloc_export, the_range_is_the_buffer_itself_and_covers_the_request)
{
    const size_t want = 10000; /* not a class size: the class is larger */
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(dom, want, &b), 0);
    void *ptr;
    size_t len;
    cr_assert_eq(nxr_buffer_export(b, &ptr, &len), 0);
    cr_assert_geq(len, want);
    cr_assert_eq((uintptr_t)ptr % NXR_POOL_ALIGN, 0u);
    /* What the library writes through the exported range is what the
     * buffer holds: the same memory, not a copy of it. */
    library_fill(ptr, len);
    const unsigned char *data = nxr_buffer_data(b);
    for (size_t i = 0; i < len; i++)
        cr_assert_eq(data[i], (unsigned char)(i * 31u + 7u), "byte %zu", i);
    /* And the other way round: a write through the buffer is seen there. */
    memset(nxr_buffer_data(b), 0x5a, want);
    cr_assert_eq(((unsigned char *)ptr)[want - 1], 0x5a);
    /* Exported twice, the same range. */
    void *again;
    size_t len2;
    cr_assert_eq(nxr_buffer_export(b, &again, &len2), 0);
    cr_assert_eq(again, ptr);
    cr_assert_eq(len2, len);
    nxr_buffer_release(b);
}

Test(alloc_export, ownership_does_not_change)
{
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(dom, 65536, &b), 0);
    struct nxr_pool_stats before, after;
    cr_assert_eq(nxr_pool_stats(dom, &before), 0);
    void *ptr;
    size_t len;
    cr_assert_eq(nxr_buffer_export(b, &ptr, &len), 0);
    cr_assert_eq(nxr_pool_stats(dom, &after), 0);
    cr_assert_eq(after.outstanding, before.outstanding, "still the caller's, still out");
    cr_assert_eq(after.hits, before.hits);
    cr_assert_eq(after.misses, before.misses, "no memory was allocated for it");
    cr_assert_eq(nxr_buffer_domain(b), nxr_domain_id(dom));
    /* Released as usual, it goes back to its pool and comes back LIFO: the
     * export left nothing behind that would keep it. */
    nxr_buffer_release(b);
    cr_assert_eq(nxr_pool_stats(dom, &after), 0);
    cr_assert_eq(after.outstanding, before.outstanding - 1);
    nxr_buffer_t *c;
    cr_assert_eq(nxr_buffer_acquire(dom, 65536, &c), 0);
    cr_assert_eq(nxr_buffer_data(c), ptr);
    nxr_buffer_release(c);
}

Test(alloc_export, the_range_lives_on_the_domains_node)
{
    if (nxr_domain_mem_binding(dom) != NXR_MEM_BOUND)
        cr_skip_test("domain memory is not bound here (%s)",
                     nxr_mem_binding_name(nxr_domain_mem_binding(dom)));
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(dom, 1 << 20, &b), 0);
    void *ptr;
    size_t len;
    cr_assert_eq(nxr_buffer_export(b, &ptr, &len), 0);
    library_fill(ptr, len); /* the library's thread touches the pages first */
    size_t pages, on;
    cr_assert_eq(nxr_mem_pages_on_node(ptr, len, nxr_domain_node(dom), &pages, &on), 0, "%s",
                 nxr_last_error());
    cr_assert_eq(on, pages, "%zu of the buffer's %zu pages on node %d", on, pages,
                 nxr_domain_node(dom));
    nxr_buffer_release(b);
}

#if defined(NXR_CHECKED) && NXR_CHECKED
Test(alloc_export, exporting_a_released_buffer_aborts, .signal = SIGABRT)
{
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(dom, 4096, &b), 0);
    nxr_buffer_release(b); /* cached: its descriptor is still the pool's */
    void *ptr;
    size_t len;
    nxr_buffer_export(b, &ptr, &len);
    cr_assert_fail("an export after release went unnoticed");
}
#endif

#ifdef NXR_TEST_ASAN
/* The library keeps the pointer past the release (an MPI request that was
 * never waited for): its next write lands in the pool's cache. */
Test(alloc_export, a_write_through_an_export_after_release_is_reported, .exit_code = 1)
{
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(dom, 4096, &b), 0);
    void *ptr;
    size_t len;
    cr_assert_eq(nxr_buffer_export(b, &ptr, &len), 0);
    nxr_buffer_release(b);
    library_fill(ptr, 1); /* must not return */
    cr_assert_fail("a write after release went unnoticed");
}
#endif
