/*
 * Which domain owns a piece of nxr memory (nxr_mem_domain): one lookup for
 * pool buffers, nxr_domain_malloc memory, scope memory and a context's step
 * memory, consistent with nxr_buffer_domain; memory nxr did not allocate
 * (stack, host heap, static data, another runtime's) has no domain; and the
 * explicit rehome copies to the target domain and leaves the source alone.
 * Two domains share the first allowed CPU ("shared"), so this runs on one
 * CPU too: the lookup is about memory, not CPUs.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/nxr.h"
#include "tests/support/cpus.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *rt;
static nxr_domain_t *d0, *d1;

static nxr_runtime_t *two_domains(void)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, "0:%0;1:%0 shared", NXR_TEST_PARK);
    return fx.rt;
}

static void setup(void)
{
    rt = two_domains();
    cr_assert_eq(nxr_runtime_domain(rt, 0, &d0), 0);
    cr_assert_eq(nxr_runtime_domain(rt, 1, &d1), 0);
}

static void teardown(void)
{
    nxr_runtime_destroy(rt);
    rt = NULL;
}

TestSuite(runtime_memory, .init = setup, .fini = teardown, .timeout = 60);

/* The id of the domain owning p, or the status as a negative number. */
static int owner(const void *p)
{
    nxr_domain_t *d = (nxr_domain_t *)0x1;
    int rc = nxr_mem_domain(rt, p, &d);
    if (rc != 0) {
        cr_assert_null(d, "a failed lookup hands nothing out");
        return rc;
    }
    return nxr_domain_id(d);
}

/* Every byte we probe of [p, p + n) belongs to domain id. */
static void expect_owned(const void *p, size_t n, int id, const char *what)
{
    const char *c = p;
    cr_assert_eq(owner(c), id, "%s: first byte", what);
    cr_assert_eq(owner(c + n / 2), id, "%s: middle", what);
    cr_assert_eq(owner(c + n - 1), id, "%s: last byte", what);
}

Test(runtime_memory, pool_buffers_are_their_pools_domain_and_agree_with_buffer_domain)
{
    const size_t sizes[] = {64, 65536, 4u << 20};
    nxr_domain_t *ds[] = {d0, d1};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < 3; i++) {
            nxr_buffer_t *b;
            cr_assert_eq(nxr_buffer_acquire(ds[k], sizes[i], &b), 0);
            cr_assert_eq(nxr_buffer_domain(b), k);
            expect_owned(nxr_buffer_data(b), nxr_buffer_size(b), nxr_buffer_domain(b), "buffer");
            nxr_buffer_release(b);
        }
    }
}

Test(runtime_memory, domain_malloc_memory_small_and_large)
{
    const size_t sizes[] = {16, 3000, 3u << 20};
    for (size_t i = 0; i < 3; i++) {
        void *p0, *p1;
        cr_assert_eq(nxr_domain_malloc(d0, sizes[i], 0, &p0), 0);
        cr_assert_eq(nxr_domain_malloc(d1, sizes[i], 64, &p1), 0);
        expect_owned(p0, sizes[i], 0, "nxr_domain_malloc on 0");
        expect_owned(p1, sizes[i], 1, "nxr_domain_malloc on 1");
        nxr_domain_free(p0);
        nxr_domain_free(p1);
    }
}

Test(runtime_memory, scope_and_context_step_memory)
{
    nxr_scope_t *s;
    cr_assert_eq(nxr_scope_create(d1, NULL, &s), 0);
    void *p;
    cr_assert_eq(nxr_scope_alloc(s, 1000, &p), 0);
    expect_owned(p, 1000, 1, "scope on 1");
    cr_assert_eq(nxr_scope_alloc(s, 3u << 20, &p), 0, "a chunk of its own");
    expect_owned(p, 3u << 20, 1, "large scope allocation on 1");
    nxr_scope_destroy(s);

    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, 0, &ctx), 0);
    cr_assert_eq(nxr_ctx_alloc(ctx, 4096, &p), 0);
    expect_owned(p, 4096, 0, "nxr_ctx_alloc on 0");
    nxr_ctx_reset(ctx);
    nxr_ctx_destroy(ctx);
}

static int static_data[64];

Test(runtime_memory, memory_nxr_did_not_allocate_has_no_domain)
{
    int on_stack[16];
    void *heap = malloc(1u << 20); /* the host's allocator, even when large */
    cr_assert_not_null(heap);
    cr_assert_eq(owner(on_stack), NXR_ENODOMAIN, "the stack");
    cr_assert_eq(owner(heap), NXR_ENODOMAIN, "the host heap");
    cr_assert_eq(owner(static_data), NXR_ENODOMAIN, "static data");
    cr_assert_eq(owner(NULL), NXR_ENODOMAIN, "NULL");
    free(heap);
}

Test(runtime_memory, another_runtimes_memory_is_not_this_ones)
{
    nxr_runtime_t *other = two_domains();
    nxr_domain_t *od;
    cr_assert_eq(nxr_runtime_domain(other, 1, &od), 0);
    void *p;
    cr_assert_eq(nxr_domain_malloc(od, 256, 0, &p), 0);
    nxr_domain_t *d;
    cr_assert_eq(nxr_mem_domain(other, p, &d), 0);
    cr_assert_eq(d, od, "the owning runtime knows it");
    cr_assert_eq(owner(p), NXR_ENODOMAIN, "this runtime does not claim it");
    nxr_domain_free(p);
    nxr_runtime_destroy(other);
}

Test(runtime_memory, bad_arguments_are_einval)
{
    nxr_domain_t *d = (nxr_domain_t *)0x1;
    cr_assert_eq(nxr_mem_domain(NULL, static_data, &d), -EINVAL);
    cr_assert_null(d);
    cr_assert_eq(nxr_mem_domain(rt, static_data, NULL), -EINVAL);
}

Test(runtime_memory, rehome_copies_onto_the_target_and_leaves_the_source)
{
    float *src;
    const size_t n = 100000;
    cr_assert_eq(nxr_domain_malloc(d0, n * sizeof(float), 0, (void **)&src), 0);
    for (size_t i = 0; i < n; i++)
        src[i] = (float)i * 0.5f;
    float *dst;
    cr_assert_eq(nxr_mem_rehome(d1, src, n * sizeof(float), 64, (void **)&dst), 0);
    cr_assert_neq(dst, src, "a copy, not the same memory");
    cr_assert_eq((uintptr_t)dst % 64, 0, "aligned as asked");
    expect_owned(dst, n * sizeof(float), 1, "the copy");
    expect_owned(src, n * sizeof(float), 0, "the source stays on 0");
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(dst[i], (float)i * 0.5f, "copy[%zu]", i);
        cr_assert_eq(src[i], (float)i * 0.5f, "source[%zu] unchanged", i);
    }
    nxr_domain_free(dst);
    nxr_domain_free(src);
    void *out = (void *)0x1;
    cr_assert_eq(nxr_mem_rehome(d1, NULL, 16, 0, &out), -EINVAL);
    cr_assert_null(out);
    cr_assert_eq(nxr_mem_rehome(d1, static_data, 0, 0, &out), -EINVAL, "size 0");
    cr_assert_null(out);
}
