/*
 * The bad-input rows of alloc/nxr_alloc.h: the table's rule, and where its
 * other rows live, are in tests/support/bad_input.h.
 */
#include "tests/support/bad_input.h"

TestSuite(alloc_bad_input, .fini = teardown, .timeout = 60);

/* ---- memory ------------------------------------------------------------- */

Test(alloc_bad_input, pool_class_size_of_zero_and_oversized)
{
    cr_assert_eq(nxr_pool_class_size(0), 64);
    cr_assert_eq(nxr_pool_class_size(NXR_POOL_MAX_SIZE + 1), 0);
    cr_assert_eq(nxr_pool_class_size(SIZE_MAX), 0);
}

Test(alloc_bad_input, buffer_acquire_null_arguments_or_zero_size_are_einval)
{
    open_runtime();
    nxr_domain_t *d = nxr_ctx_domain(ctx);
    nxr_buffer_t *b = (nxr_buffer_t *)0x1;
    cr_assert_eq(nxr_buffer_acquire(NULL, 64, &b), -EINVAL);
    cr_assert_null(b);
    cr_assert_eq(nxr_buffer_acquire(d, 64, NULL), -EINVAL);
    b = (nxr_buffer_t *)0x1;
    cr_assert_eq(nxr_buffer_acquire(d, 0, &b), -EINVAL);
    cr_assert_null(b);
}

Test(alloc_bad_input, buffer_acquire_oversized_is_enomem)
{
    open_runtime();
    nxr_buffer_t *b = (nxr_buffer_t *)0x1;
    cr_assert_eq(nxr_buffer_acquire(nxr_ctx_domain(ctx), NXR_POOL_MAX_SIZE + 1, &b), -ENOMEM);
    cr_assert_null(b);
    cr_assert_eq(nxr_buffer_acquire(nxr_ctx_domain(ctx), SIZE_MAX, &b), -ENOMEM);
    cr_assert_null(b);
    struct nxr_pool_stats st;
    cr_assert_eq(nxr_pool_stats(nxr_ctx_domain(ctx), &st), 0);
    cr_assert_eq(st.outstanding, 0);
}

Test(alloc_bad_input, buffer_release_null_is_a_no_op)
{
    open_runtime();
    nxr_buffer_t *held;
    cr_assert_eq(nxr_buffer_acquire(nxr_ctx_domain(ctx), 4096, &held), 0);
    struct nxr_pool_stats before, after;
    cr_assert_eq(nxr_pool_stats(nxr_ctx_domain(ctx), &before), 0);
    EXPECT_NO_OP(nxr_buffer_release(NULL));
    cr_assert_eq(nxr_pool_stats(nxr_ctx_domain(ctx), &after), 0);
    cr_assert_eq(after.outstanding, before.outstanding, "release(NULL) returned a buffer");
    cr_assert_eq(after.cached_buffers, before.cached_buffers);
    nxr_buffer_release(held);
}

Test(alloc_bad_input, pool_calls_with_null_domain_are_einval)
{
    open_runtime();
    struct nxr_pool_stats st;
    cr_assert_eq(nxr_pool_stats(NULL, &st), -EINVAL);
    cr_assert_eq(nxr_pool_stats(nxr_ctx_domain(ctx), NULL), -EINVAL);
    cr_assert_eq(nxr_pool_set_cap(NULL, 0), -EINVAL);
    cr_assert_eq(nxr_pool_trim(NULL), -EINVAL);
}

Test(alloc_bad_input, domain_malloc_null_arguments_zero_size_or_bad_alignment_are_einval)
{
    open_runtime();
    nxr_domain_t *d = nxr_ctx_domain(ctx);
    void *p = (void *)0x1;
    cr_assert_eq(nxr_domain_malloc(NULL, 64, 0, &p), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(nxr_domain_malloc(d, 64, 0, NULL), -EINVAL);
    p = (void *)0x1;
    cr_assert_eq(nxr_domain_malloc(d, 0, 0, &p), -EINVAL);
    cr_assert_null(p);
    p = (void *)0x1;
    cr_assert_eq(nxr_domain_malloc(d, 64, 48, &p), -EINVAL, "alignment not a power of two");
    cr_assert_null(p);
}

Test(alloc_bad_input, domain_malloc_impossible_size_is_enomem)
{
    open_runtime();
    void *p = (void *)0x1;
    cr_assert_eq(nxr_domain_malloc(nxr_ctx_domain(ctx), SIZE_MAX / 2, 0, &p), -ENOMEM);
    cr_assert_null(p);
}

Test(alloc_bad_input, domain_free_null_is_a_no_op)
{
    open_runtime();
    void *p;
    cr_assert_eq(nxr_domain_malloc(nxr_ctx_domain(ctx), 1000, 0, &p), 0);
    struct nxr_pool_stats before, after;
    cr_assert_eq(nxr_pool_stats(nxr_ctx_domain(ctx), &before), 0);
    EXPECT_NO_OP(nxr_domain_free(NULL));
    cr_assert_eq(nxr_pool_stats(nxr_ctx_domain(ctx), &after), 0);
    cr_assert_eq(memcmp(&after, &before, sizeof(before)), 0, "free(NULL) changed the pool");
    nxr_domain_free(p);
}

Test(alloc_bad_input, scope_create_null_arguments_or_oversized_chunk_are_einval)
{
    open_runtime();
    nxr_scope_t *s = (nxr_scope_t *)0x1;
    cr_assert_eq(nxr_scope_create(NULL, NULL, &s), -EINVAL);
    cr_assert_null(s);
    cr_assert_eq(nxr_scope_create(nxr_ctx_domain(ctx), NULL, NULL), -EINVAL);
    struct nxr_scope_opts o;
    nxr_scope_opts_init(&o);
    o.chunk_size = NXR_POOL_MAX_SIZE + 1;
    s = (nxr_scope_t *)0x1;
    cr_assert_eq(nxr_scope_create(nxr_ctx_domain(ctx), &o, &s), -EINVAL);
    cr_assert_null(s);
}

Test(alloc_bad_input, scope_alloc_null_arguments_zero_or_oversized_size)
{
    open_runtime();
    nxr_scope_t *s;
    cr_assert_eq(nxr_scope_create(nxr_ctx_domain(ctx), NULL, &s), 0);
    void *p = (void *)0x1;
    cr_assert_eq(nxr_scope_alloc(NULL, 64, &p), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(nxr_scope_alloc(s, 64, NULL), -EINVAL);
    p = (void *)0x1;
    cr_assert_eq(nxr_scope_alloc(s, 0, &p), -EINVAL);
    cr_assert_null(p);
    p = (void *)0x1;
    cr_assert_eq(nxr_scope_alloc(s, NXR_POOL_MAX_SIZE + 1, &p), -ENOMEM);
    cr_assert_null(p);
    struct nxr_scope_stats st;
    nxr_scope_stats(s, &st);
    cr_assert_eq(st.used_bytes, 0);
    nxr_scope_destroy(s);
    nxr_scope_destroy(NULL);
}

Test(alloc_bad_input, mem_node_of_an_unmapped_address_is_an_errno)
{
    int rc = nxr_mem_node(NULL);
    cr_assert(rc == -EFAULT || rc == -ENOENT || rc == -ENOSYS, "got %d (%s)", rc, nxr_strerror(rc));
}

/* ---- host export (alloc/nxr_alloc.h) ------------------------------------ */

Test(alloc_bad_input, buffer_export_null_arguments_are_einval_and_hand_out_nothing)
{
    open_runtime();
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(nxr_ctx_domain(ctx), 256, &b), 0);
    void *ptr = (void *)0x1;
    size_t len = 7;
    cr_assert_eq(nxr_buffer_export(NULL, &ptr, &len), -EINVAL);
    cr_assert_null(ptr, "a failed export hands out no pointer");
    cr_assert_eq(len, 0u);
    ptr = (void *)0x1;
    cr_assert_eq(nxr_buffer_export(b, &ptr, NULL), -EINVAL);
    cr_assert_null(ptr);
    len = 7;
    cr_assert_eq(nxr_buffer_export(b, NULL, &len), -EINVAL);
    cr_assert_eq(len, 0u);
    cr_assert_eq(nxr_buffer_export(NULL, NULL, NULL), -EINVAL);
    /* The buffer is untouched by the failed calls: still out, still whole. */
    struct nxr_pool_stats st;
    cr_assert_eq(nxr_pool_stats(nxr_ctx_domain(ctx), &st), 0);
    cr_assert_eq(st.outstanding, 1u);
    cr_assert_eq(nxr_buffer_export(b, &ptr, &len), 0);
    cr_assert_geq(len, 256u);
    nxr_buffer_release(b);
}

#if defined(NXR_CHECKED) && NXR_CHECKED
Test(alloc_bad_input, buffer_export_after_release_aborts, .signal = SIGABRT)
{
    open_runtime();
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(nxr_ctx_domain(ctx), 256, &b), 0);
    nxr_buffer_release(b);
    void *ptr;
    size_t len;
    nxr_buffer_export(b, &ptr, &len);
}
#endif
