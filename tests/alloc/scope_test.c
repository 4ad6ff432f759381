/*
 * Scopes: bump allocation, reset at step boundaries without growth, and
 * use-after-reset detection in checked scopes.
 *
 * Checked mode is a per-scope option (on by default in checked builds of
 * nxr), so the detection is tested in the ordinary `bazel test //...` run by
 * asking for it; under ASan the poisoned access is reported by ASan (exit
 * status 1) before the protected page faults.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "runtime/nxr.h"
#include "tests/support/runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define UAR_CAUGHT .exit_code = 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UAR_CAUGHT .exit_code = 1
#endif
#endif
#ifndef UAR_CAUGHT
#define UAR_CAUGHT .signal = SIGSEGV
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
}

static nxr_scope_t *make_scope(size_t chunk, bool checked)
{
    struct nxr_scope_opts o;
    nxr_scope_opts_init(&o);
    o.chunk_size = chunk;
    o.check = checked ? NXR_SCOPE_CHECK_ON : NXR_SCOPE_CHECK_OFF;
    nxr_scope_t *s;
    cr_assert_eq(nxr_scope_create(dom, &o, &s), 0);
    return s;
}

TestSuite(alloc_scope, .init = setup, .fini = teardown);

Test(alloc_scope, allocations_are_aligned_distinct_and_bumped)
{
    nxr_scope_t *s = make_scope(65536, false);
    char *prev = NULL;
    for (size_t size = 1; size < 3000; size += 97) {
        void *p;
        cr_assert_eq(nxr_scope_alloc(s, size, &p), 0);
        cr_assert_eq((uintptr_t)p % 64, 0);
        memset(p, 0x11, size);
        if (prev != NULL && (char *)p > prev)
            cr_assert_geq((size_t)((char *)p - prev), 64, "overlap");
        prev = p;
    }
    struct nxr_scope_stats st;
    nxr_scope_stats(s, &st);
    cr_assert_gt(st.used_bytes, 0);
    cr_assert_geq(st.reserved_bytes, st.used_bytes);
    nxr_scope_destroy(s);
}

Test(alloc_scope, reset_hands_out_the_same_memory_again)
{
    nxr_scope_t *s = make_scope(65536, false);
    void *a, *b;
    cr_assert_eq(nxr_scope_alloc(s, 1000, &a), 0);
    nxr_scope_reset(s);
    cr_assert_eq(nxr_scope_alloc(s, 1000, &b), 0);
    cr_assert_eq(a, b);
    nxr_scope_destroy(s);
}

Test(alloc_scope, allocation_larger_than_a_chunk_gets_its_own)
{
    nxr_scope_t *s = make_scope(65536, false);
    void *p;
    cr_assert_eq(nxr_scope_alloc(s, 1u << 20, &p), 0);
    memset(p, 1, 1u << 20);
    struct nxr_scope_stats st;
    nxr_scope_stats(s, &st);
    cr_assert_eq(st.chunks, 1);
    cr_assert_geq(st.reserved_bytes, 1u << 20);
    nxr_scope_destroy(s);
}

Test(alloc_scope, invalid_arguments_are_einval)
{
    nxr_scope_t *s = make_scope(0, false);
    void *p = (void *)1;
    cr_assert_eq(nxr_scope_alloc(s, 0, &p), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(nxr_scope_alloc(s, 8, NULL), -EINVAL);
    cr_assert_eq(nxr_scope_alloc(NULL, 8, &p), -EINVAL);
    cr_assert_eq(nxr_scope_create(NULL, NULL, &s), -EINVAL);
    cr_assert_eq(nxr_scope_create(dom, NULL, NULL), -EINVAL);
    nxr_scope_destroy(s);
    nxr_scope_destroy(NULL);
}

/* One "request": activations and scratch of a few sizes, as a forward pass
 * of a small model would ask for them. */
static size_t run_step(nxr_scope_t *s)
{
    static const size_t sizes[] = {4096, 256, 65536, 1024, 200000, 64, 16384, 131072, 3000};
    size_t bytes = 0;
    for (int layer = 0; layer < 12; layer++) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            void *p;
            cr_assert_eq(nxr_scope_alloc(s, sizes[i], &p), 0);
            ((volatile char *)p)[0] = 1;
            ((volatile char *)p)[sizes[i] - 1] = 2;
            bytes += sizes[i];
        }
    }
    return bytes;
}

static void assert_no_growth(bool checked)
{
    nxr_scope_t *s = make_scope(1u << 20, checked);
    /* Warm up: one step per bank. */
    for (int i = 0; i < 2; i++) {
        run_step(s);
        nxr_scope_reset(s);
    }
    struct nxr_scope_stats warm;
    nxr_scope_stats(s, &warm);
    struct nxr_pool_stats pool_warm;
    cr_assert_eq(nxr_pool_stats(dom, &pool_warm), 0);
    for (int step = 0; step < 1000; step++) {
        run_step(s);
        nxr_scope_reset(s);
    }
    struct nxr_scope_stats st;
    nxr_scope_stats(s, &st);
    cr_assert_eq(st.reserved_bytes, warm.reserved_bytes, "the scope grew");
    cr_assert_eq(st.chunks, warm.chunks);
    cr_assert_eq(st.resets, 1002);
    struct nxr_pool_stats pool;
    cr_assert_eq(nxr_pool_stats(dom, &pool), 0);
    cr_assert_eq(pool.misses, pool_warm.misses, "new memory was allocated in steady state");
    cr_assert_eq(pool.hits, pool_warm.hits, "the scope went back to the pool in steady state");
    nxr_scope_destroy(s);
}

Test(alloc_scope, steady_state_steps_do_not_grow_over_1000_steps, .timeout = 60)
{
    assert_no_growth(false);
}

Test(alloc_scope, checked_steady_state_does_not_grow_either, .timeout = 60)
{
    assert_no_growth(true);
}

Test(alloc_scope, destroy_returns_every_chunk_to_the_pool)
{
    nxr_scope_t *s = make_scope(65536, true);
    run_step(s);
    nxr_scope_reset(s);
    run_step(s);
    struct nxr_pool_stats st;
    cr_assert_eq(nxr_pool_stats(dom, &st), 0);
    cr_assert_gt(st.outstanding, 0);
    nxr_scope_destroy(s);
    cr_assert_eq(nxr_pool_stats(dom, &st), 0);
    cr_assert_eq(st.outstanding, 0);
}

Test(alloc_scope, use_after_reset_is_caught_in_a_checked_scope, UAR_CAUGHT)
{
    nxr_scope_t *s = make_scope(65536, true);
    char *p;
    cr_assert_eq(nxr_scope_alloc(s, 256, (void **)&p), 0);
    p[0] = 1;
    nxr_scope_reset(s);
    /* A new step is under way; p belongs to the last one. */
    void *q;
    cr_assert_eq(nxr_scope_alloc(s, 256, &q), 0);
    p[0] = 2; /* must not return */
    cr_assert_fail("a write through a pointer from before the reset went unnoticed");
}

Test(alloc_scope, read_after_reset_is_caught_too, UAR_CAUGHT)
{
    nxr_scope_t *s = make_scope(65536, true);
    volatile char *p;
    cr_assert_eq(nxr_scope_alloc(s, 64, (void **)&p), 0);
    p[10] = 3;
    nxr_scope_reset(s);
    char c = p[10];
    cr_assert_fail("read %d through a stale pointer", c);
}

/* In a checked build of nxr the default scope is checked; a zeroed options
 * struct, the initialised one and NULL are the same defaults. */
Test(alloc_scope, default_is_checked_exactly_in_checked_builds)
{
#if defined(NXR_CHECKED) && NXR_CHECKED
    const bool want_checked = true;
#else
    const bool want_checked = false;
#endif
    struct nxr_scope_opts zeroed = {0}, inited;
    nxr_scope_opts_init(&inited);
    const struct nxr_scope_opts *each[3] = {&zeroed, &inited, NULL};
    for (int i = 0; i < 3; i++) {
        nxr_scope_t *s;
        cr_assert_eq(nxr_scope_create(dom, each[i], &s), 0);
        struct nxr_scope_stats st;
        nxr_scope_stats(s, &st);
        cr_expect_eq(st.checked, want_checked, "options %d", i);
        cr_expect_eq(st.chunk_size, (size_t)1 << 20, "options %d: chunk %zu", i, st.chunk_size);
        nxr_scope_destroy(s);
    }
    struct nxr_scope_opts bad = {.check = (enum nxr_scope_check)3};
    nxr_scope_t *s = (nxr_scope_t *)&bad;
    cr_expect_eq(nxr_scope_create(dom, &bad, &s), -EINVAL);
    cr_expect_null(s);
}
