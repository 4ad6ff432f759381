/*
 * Failure injection through the system seam: the Nth underlying allocation,
 * mapping or binding fails; the caller sees -ENOMEM or NXR_EPLACEMENT and the
 * pool stays consistent (and usable once the fault is gone).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "runtime/internal/runtime.h"
#include "base/internal/sys.h"
#include "runtime/nxr.h"
#include "tests/support/cpus.h"
#include "tests/support/runtime.h"

static nxr_runtime_t *make_runtime(void)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_PARK);
    return fx.rt;
}

static struct nxr_pool_stats stats_of(nxr_domain_t *d)
{
    struct nxr_pool_stats st;
    cr_assert_eq(nxr_pool_stats(d, &st), 0);
    return st;
}

/* Loops N over every underlying allocation of three acquires (a cache hit
 * and two misses) until none fails. */
Test(alloc_fault, nth_allocation_failure_is_enomem_and_pool_stays_consistent)
{
    nxr_runtime_t *rt = make_runtime();
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    const size_t sizes[3] = {4096, 65536, 1u << 20};
    long n;
    for (n = 1;; n++) {
        cr_assert_eq(nxr_pool_trim(d), 0);
        nxr_buffer_t *warm;
        cr_assert_eq(nxr_buffer_acquire(d, sizes[0], &warm), 0);
        nxr_buffer_release(warm); /* sizes[0] is now a cache hit */
        struct nxr_pool_stats before = stats_of(d);

        nxr__fault_arm(NXR_FAULT_ALLOC, n);
        nxr_buffer_t *b[3];
        int rc[3], ok = 0;
        for (int i = 0; i < 3; i++) {
            rc[i] = nxr_buffer_acquire(d, sizes[i], &b[i]);
            ok += rc[i] == 0;
        }
        long calls = nxr__fault_calls();
        nxr__fault_arm(0, 0);

        for (int i = 0; i < 3; i++) {
            cr_assert(rc[i] == 0 || rc[i] == -ENOMEM, "n=%ld acquire %d: %s", n, i,
                      nxr_strerror(rc[i]));
            if (rc[i] != 0)
                cr_assert_null(b[i]);
            else
                memset(nxr_buffer_data(b[i]), 0x5a, nxr_buffer_size(b[i]));
        }
        cr_assert_eq(rc[0], 0, "a cache hit allocates nothing");
        struct nxr_pool_stats mid = stats_of(d);
        cr_assert_eq(mid.outstanding, (size_t)ok, "n=%ld", n);
        cr_assert_eq(mid.cached_buffers, before.cached_buffers - 1);
        cr_assert_eq(mid.hits + mid.misses, before.hits + before.misses + 3);
        for (int i = 0; i < 3; i++)
            nxr_buffer_release(b[i]);
        struct nxr_pool_stats after = stats_of(d);
        cr_assert_eq(after.outstanding, 0);
        cr_assert_eq(after.cached_buffers, before.cached_buffers - 1 + (size_t)ok);
        if (calls < n)
            break; /* the Nth call never came: every allocation was covered */
    }
    cr_assert_geq(n, 5, "two misses make at least four allocations");
    /* Usable afterwards. */
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(d, 1u << 20, &b), 0);
    nxr_buffer_release(b);
    nxr_runtime_destroy(rt);
}

/* Mapping fails in the arena's extent hook (a size jemalloc has never mapped
 * for this arena, so it must ask the hook; every call fails, since jemalloc
 * retries a failed hook). */
Test(alloc_fault, mmap_failure_is_enomem)
{
    nxr_runtime_t *rt = make_runtime();
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr__fault_arm_from(NXR_FAULT_MMAP, 1);
    nxr_buffer_t *b = (nxr_buffer_t *)1;
    int rc = nxr_buffer_acquire(d, 64u << 20, &b);
    nxr__fault_arm(0, 0);
    cr_assert_eq(rc, -ENOMEM, "%s", nxr_strerror(rc));
    cr_assert_null(b);
    struct nxr_pool_stats st = stats_of(d);
    cr_assert_eq(st.outstanding, 0);
    cr_assert_eq(st.misses, 1);
    cr_assert_eq(nxr_buffer_acquire(d, 64u << 20, &b), 0);
    memset(nxr_buffer_data(b), 1, 64u << 20);
    nxr_buffer_release(b);
    nxr_runtime_destroy(rt);
}

/* A binding failure after a successful probe fails the allocation instead of
 * handing out memory that is not on the node. */
Test(alloc_fault, mbind_failure_on_a_bound_domain_is_eplacement)
{
    nxr_runtime_t *rt = make_runtime();
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    if (nxr_domain_mem_binding(d) != NXR_MEM_BOUND)
        cr_skip_test("domain 0's memory is not bound on this machine");
    nxr__fault_arm_from(NXR_FAULT_MBIND, 1);
    nxr_buffer_t *b = (nxr_buffer_t *)1;
    int rc = nxr_buffer_acquire(d, 64u << 20, &b);
    nxr__fault_arm(0, 0);
    cr_assert_eq(rc, NXR_EPLACEMENT, "%s", nxr_strerror(rc));
    cr_assert_null(b);
    cr_assert_eq(stats_of(d).outstanding, 0);
    void *p = (void *)1;
    nxr__fault_arm_from(NXR_FAULT_MBIND, 1);
    rc = nxr_domain_malloc(d, 48u << 20, 0, &p);
    nxr__fault_arm(0, 0);
    cr_assert_eq(rc, NXR_EPLACEMENT, "%s", nxr_strerror(rc));
    cr_assert_null(p);
    nxr_runtime_destroy(rt);
}

/* Runtime creation fails cleanly at every allocation or mapping its pools
 * make (probe page, arena, pool) -- or succeeds when jemalloc absorbed the
 * failure by retrying -- until N passes them all. */
Test(alloc_fault, runtime_creation_unwinds_at_every_memory_failure)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.domains = nxr_test_expand("0:%0;1:%0 shared"); /* two pools, any CPUs */
    long n, failures = 0;
    for (n = 1;; n++) {
        nxr_runtime_t *rt = (nxr_runtime_t *)1;
        nxr__fault_arm(NXR_FAULT_ALLOC | NXR_FAULT_MMAP, n);
        int rc = nxr_runtime_create(&o, &rt);
        long calls = nxr__fault_calls();
        nxr__fault_arm(0, 0);
        if (rc == 0) {
            cr_assert_not_null(rt);
            nxr_runtime_destroy(rt);
        } else {
            /* Allocation failures past the pools belong to the teams, which
             * report some of them as placement failures. */
            cr_assert(rc == -ENOMEM || rc == NXR_EPLACEMENT, "n=%ld: %s (%s)", n, nxr_strerror(rc),
                      nxr_last_error());
            cr_assert_null(rt);
            failures += rc == -ENOMEM;
        }
        if (calls < n)
            break;
    }
    cr_assert_gt(failures, 4, "two pools make several allocations that can fail");
}

Test(alloc_fault, domain_malloc_allocation_failure_is_enomem)
{
    nxr_runtime_t *rt = make_runtime();
    void *p = (void *)1;
    nxr__fault_arm(NXR_FAULT_ALLOC, 1);
    int rc = nxr_domain_malloc(nxr_runtime_domain_at(rt, 0), 1000, 0, &p);
    nxr__fault_arm(0, 0);
    cr_assert_eq(rc, -ENOMEM, "%s", nxr_strerror(rc));
    cr_assert_null(p);
    nxr_runtime_destroy(rt);
}

Test(alloc_fault, scope_create_without_memory_is_enomem)
{
    nxr_runtime_t *rt = make_runtime();
    nxr_scope_t *s = (nxr_scope_t *)1;
    nxr__fault_arm(NXR_FAULT_ALLOC, 1);
    int rc = nxr_scope_create(nxr_runtime_domain_at(rt, 0), NULL, &s);
    nxr__fault_arm(0, 0);
    cr_assert_eq(rc, -ENOMEM, "%s", nxr_strerror(rc));
    cr_assert_null(s);
    nxr_runtime_destroy(rt);
}

/* A scope whose next chunk cannot be had reports it and stays usable. */
Test(alloc_fault, scope_chunk_failures_are_enomem_or_eplacement)
{
    nxr_runtime_t *rt = make_runtime();
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_scope_t *s;
    cr_assert_eq(nxr_scope_create(d, NULL, &s), 0);
    void *p = (void *)1;
    cr_assert_eq(nxr_scope_alloc(s, NXR_POOL_MAX_SIZE + 1, &p), -ENOMEM);
    cr_assert_null(p);
    nxr__fault_arm(NXR_FAULT_ALLOC, 1);
    int rc = nxr_scope_alloc(s, 100, &p);
    nxr__fault_arm(0, 0);
    cr_assert_eq(rc, -ENOMEM, "%s", nxr_strerror(rc));
    if (nxr_domain_mem_binding(d) == NXR_MEM_BOUND) {
        nxr__fault_arm_from(NXR_FAULT_MBIND, 1);
        rc = nxr_scope_alloc(s, 96u << 20, &p); /* a chunk of its own, never mapped yet */
        nxr__fault_arm(0, 0);
        cr_assert_eq(rc, NXR_EPLACEMENT, "%s", nxr_strerror(rc));
    }
    cr_assert_eq(nxr_scope_alloc(s, 100, &p), 0);
    memset(p, 1, 100);
    nxr_scope_destroy(s);
    struct nxr_pool_stats st = stats_of(d);
    cr_assert_eq(st.outstanding, 0);
    nxr_runtime_destroy(rt);
}

/* ---- checked scopes when the kernel refuses an mprotect ----------------- */

static nxr_scope_t *checked_scope(nxr_domain_t *d)
{
    struct nxr_scope_opts o;
    nxr_scope_opts_init(&o);
    o.check = NXR_SCOPE_CHECK_ON;
    o.chunk_size = 4096;
    nxr_scope_t *s;
    cr_assert_eq(nxr_scope_create(d, &o, &s), 0);
    return s;
}

static uint64_t check_failures(const nxr_scope_t *s)
{
    struct nxr_scope_stats st;
    nxr_scope_stats(s, &st);
    return st.check_failures;
}

/* Steps 0 and 1 use banks 0 and 1; the reset after step 1 first opens bank
 * 0 (one mprotect per chunk), then closes bank 1. */
static void two_steps(nxr_scope_t *s, void **step1)
{
    void *p;
    cr_assert_eq(nxr_scope_alloc(s, 100, &p), 0);
    memset(p, 1, 100);
    nxr_scope_reset(s);
    cr_assert_eq(nxr_scope_alloc(s, 100, step1), 0);
    memset(*step1, 2, 100);
}

/* Opening the other bank refused: the scope stays on the bank it has, which
 * is accessible (a write to the next step's memory does not fault), counts
 * the unchecked reset, and switches at the next reset that works. */
Test(alloc_fault, checked_scope_reset_with_open_refused_stays_usable)
{
    nxr_runtime_t *rt = make_runtime();
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_scope_t *s = checked_scope(d);
    void *q, *r;
    two_steps(s, &q);
    nxr__fault_arm(NXR_FAULT_MPROTECT, 1); /* opening bank 0 */
    nxr_scope_reset(s);
    long calls = nxr__fault_calls();
    nxr__fault_arm(0, 0);
    cr_assert_geq(calls, 1, "the reset made no mprotect call");
    cr_assert_eq(check_failures(s), 1);
    cr_assert_eq(nxr_scope_alloc(s, 100, &r), 0);
    cr_assert_eq(r, q, "still on bank 1: the same chunk again");
    memset(r, 3, 100); /* accessible */
    nxr_scope_reset(s); /* unarmed: bank 0 opens now */
    cr_assert_eq(check_failures(s), 1);
    cr_assert_eq(nxr_scope_alloc(s, 100, &r), 0);
    cr_assert_neq(r, q, "on bank 0 again");
    memset(r, 4, 100);
    nxr_scope_destroy(s);
    cr_assert_eq(stats_of(d).outstanding, 0);
    nxr_runtime_destroy(rt);
}

/* Closing the bank just used refused: counted, and the next step's bank
 * is open and accessible. */
Test(alloc_fault, checked_scope_reset_with_close_refused_counts)
{
    nxr_runtime_t *rt = make_runtime();
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_scope_t *s = checked_scope(d);
    void *q, *r;
    two_steps(s, &q);
    nxr__fault_arm(NXR_FAULT_MPROTECT, 2); /* opening bank 0 works, closing bank 1 does not */
    nxr_scope_reset(s);
    long calls = nxr__fault_calls();
    nxr__fault_arm(0, 0);
    cr_assert_eq(calls, 2, "one chunk opened, one closed");
    cr_assert_eq(check_failures(s), 1);
    cr_assert_eq(nxr_scope_alloc(s, 100, &r), 0);
    cr_assert_neq(r, q, "on bank 0");
    memset(r, 3, 100);
    nxr_scope_destroy(s);
    cr_assert_eq(stats_of(d).outstanding, 0);
    nxr_runtime_destroy(rt);
}

/* At destroy a protected chunk must be opened before its pool hands it out:
 * a transient refusal is retried; a lasting one keeps the chunk out of the
 * pool (outstanding, said on stderr) rather than give a faulting buffer to
 * the pool's next user. */
Test(alloc_fault, checked_scope_destroy_retries_then_keeps_a_protected_chunk)
{
    nxr_runtime_t *rt = make_runtime();
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_scope_t *s = checked_scope(d);
    void *q;
    two_steps(s, &q);
    nxr_scope_reset(s); /* bank 1 protected, bank 0 active */
    nxr__fault_arm(NXR_FAULT_MPROTECT, 1);
    nxr_scope_destroy(s);
    nxr__fault_arm(0, 0);
    cr_assert_eq(stats_of(d).outstanding, 0, "one refusal: retried, every chunk returned");
    /* The pool's next buffer of that class is the chunk: accessible. */
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(d, 4096, &b), 0);
    memset(nxr_buffer_data(b), 5, 4096);
    nxr_buffer_release(b);

    s = checked_scope(d);
    two_steps(s, &q);
    nxr_scope_reset(s);
    nxr__fault_arm_from(NXR_FAULT_MPROTECT, 1);
    nxr_scope_destroy(s);
    nxr__fault_arm(0, 0);
    cr_assert_eq(stats_of(d).outstanding, 1, "the protected chunk is not back in the pool");
    for (int i = 0; i < 4; i++) { /* and the pool never hands it out */
        nxr_buffer_t *c;
        cr_assert_eq(nxr_buffer_acquire(d, 4096, &c), 0);
        memset(nxr_buffer_data(c), 6, 4096);
        nxr_buffer_release(c);
    }
    nxr_runtime_destroy(rt);
}
