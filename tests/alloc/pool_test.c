/*
 * The buffer pool: LIFO reuse, rounding and alignment, the byte cap, exact
 * outstanding counts under concurrency, ownership across domains, statistics
 * in describe, and teardown with buffers outstanding.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

static struct nxr_pool_stats stats_of(nxr_domain_t *d)
{
    struct nxr_pool_stats st;
    cr_assert_eq(nxr_pool_stats(d, &st), 0);
    return st;
}

Test(alloc_pool, release_then_acquire_returns_the_same_buffer_lifo)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_buffer_t *a, *b, *c;
    cr_assert_eq(nxr_buffer_acquire(d, 65536, &a), 0);
    cr_assert_eq(nxr_buffer_acquire(d, 65536, &b), 0);
    void *pa = nxr_buffer_data(a), *pb = nxr_buffer_data(b);
    cr_assert_neq(pa, pb);
    nxr_buffer_release(a);
    nxr_buffer_release(b); /* released last: handed out next */
    cr_assert_eq(nxr_buffer_acquire(d, 65536, &c), 0);
    cr_assert_eq(nxr_buffer_data(c), pb);
    nxr_buffer_t *e;
    cr_assert_eq(nxr_buffer_acquire(d, 60000, &e), 0, "same class, smaller request");
    cr_assert_eq(nxr_buffer_data(e), pa);
    struct nxr_pool_stats st = stats_of(d);
    cr_assert_eq(st.hits, 2);
    cr_assert_eq(st.misses, 2);
    nxr_buffer_release(c);
    nxr_buffer_release(e);
    nxr_runtime_destroy(rt);
}

Test(alloc_pool, sizes_round_to_their_class_and_align)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    const size_t sizes[] = {1, 63, 100, 4095, 4097, 20000, 1000000, 4u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        nxr_buffer_t *b;
        cr_assert_eq(nxr_buffer_acquire(d, sizes[i], &b), 0);
        size_t cs = nxr_buffer_size(b);
        cr_assert_eq(cs, nxr_pool_class_size(sizes[i]));
        cr_assert_geq(cs, sizes[i]);
        uintptr_t p = (uintptr_t)nxr_buffer_data(b);
        cr_assert_eq(p % NXR_POOL_ALIGN, 0, "size %zu at %p", sizes[i], (void *)p);
        if (cs >= NXR_POOL_PAGE_CLASS)
            cr_assert_eq(p % 4096, 0, "size %zu at %p not page-aligned", sizes[i], (void *)p);
        memset((void *)p, 0xa5, cs); /* the whole class is usable */
        cr_assert_eq(nxr_buffer_domain(b), nxr_domain_id(d));
        nxr_buffer_release(b);
    }
    nxr_runtime_destroy(rt);
}

Test(alloc_pool, invalid_arguments_are_einval)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_buffer_t *b = (nxr_buffer_t *)1;
    cr_assert_eq(nxr_buffer_acquire(d, 0, &b), -EINVAL);
    cr_assert_null(b);
    cr_assert_eq(nxr_buffer_acquire(NULL, 64, &b), -EINVAL);
    cr_assert_eq(nxr_buffer_acquire(d, 64, NULL), -EINVAL);
    cr_assert_eq(nxr_pool_stats(d, NULL), -EINVAL);
    cr_assert_eq(nxr_pool_set_cap(NULL, 0), -EINVAL);
    cr_assert_eq(nxr_pool_trim(NULL), -EINVAL);
    nxr_buffer_release(NULL); /* no-op */
    nxr_runtime_destroy(rt);
}

Test(alloc_pool, size_above_the_largest_class_is_enomem)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_buffer_t *b = (nxr_buffer_t *)1;
    cr_assert_eq(nxr_buffer_acquire(d, NXR_POOL_MAX_SIZE + 1, &b), -ENOMEM);
    cr_assert_null(b);
    cr_assert_eq(stats_of(d).outstanding, 0);
    nxr_runtime_destroy(rt);
}

Test(alloc_pool, default_cap_is_documented_value)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    cr_assert_eq(stats_of(nxr_runtime_domain_at(rt, 0)).cap_bytes, NXR_POOL_DEFAULT_CAP);
    nxr_runtime_destroy(rt);
}

/* With a 160 KiB cap, two 64 KiB buffers fit and the third release frees. */
Test(alloc_pool, release_beyond_the_cap_frees_instead_of_caching)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    cr_assert_eq(nxr_pool_set_cap(d, 160 * 1024), 0);
    nxr_buffer_t *b[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(nxr_buffer_acquire(d, 65536, &b[i]), 0);
    void *third = nxr_buffer_data(b[2]);
    nxr_buffer_release(b[0]);
    nxr_buffer_release(b[1]);
    struct nxr_pool_stats st = stats_of(d);
    cr_assert_eq(st.cached_bytes, 2 * 65536);
    cr_assert_eq(st.drops, 0);
    nxr_buffer_release(b[2]);
    st = stats_of(d);
    cr_assert_eq(st.cached_bytes, 2 * 65536, "the cap was passed");
    cr_assert_eq(st.cached_buffers, 2);
    cr_assert_eq(st.drops, 1);
    cr_assert_eq(st.outstanding, 0);
    /* The dropped buffer is not in the cache: the next one is b[1]'s. */
    nxr_buffer_t *again;
    cr_assert_eq(nxr_buffer_acquire(d, 65536, &again), 0);
    cr_assert_neq(nxr_buffer_data(again), third);
    nxr_buffer_release(again);
    nxr_runtime_destroy(rt);
}

Test(alloc_pool, a_buffer_larger_than_the_cap_is_never_cached)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    cr_assert_eq(nxr_pool_set_cap(d, 4096), 0);
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(d, 8192, &b), 0);
    nxr_buffer_release(b);
    struct nxr_pool_stats st = stats_of(d);
    cr_assert_eq(st.cached_bytes, 0);
    cr_assert_eq(st.drops, 1);
    nxr_runtime_destroy(rt);
}

Test(alloc_pool, lowering_the_cap_and_trim_free_cached_buffers)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_buffer_t *b[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(nxr_buffer_acquire(d, 65536, &b[i]), 0);
    for (int i = 0; i < 4; i++)
        nxr_buffer_release(b[i]);
    cr_assert_eq(stats_of(d).cached_bytes, 4 * 65536);
    cr_assert_eq(nxr_pool_set_cap(d, 2 * 65536), 0);
    cr_assert_eq(stats_of(d).cached_bytes, 2 * 65536);
    cr_assert_eq(nxr_pool_trim(d), 0);
    cr_assert_eq(stats_of(d).cached_bytes, 0);
    cr_assert_eq(stats_of(d).cached_buffers, 0);
    nxr_runtime_destroy(rt);
}

/* ------------------------------------------------------------ concurrency */

#define THREADS 4
#define HELD    8
#define ROUNDS  50

struct churn {
    nxr_domain_t *d;
    pthread_barrier_t *barrier;
    unsigned id;
    int failures;
};

static void *churn_main(void *arg)
{
    struct churn *c = arg;
    static const size_t sizes[] = {64, 1000, 4096, 20000, 65536};
    nxr_buffer_t *held[HELD];
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < HELD; i++) {
            if (nxr_buffer_acquire(c->d, sizes[(i + round + c->id) % 5], &held[i]) != 0) {
                c->failures++;
                held[i] = NULL;
                continue;
            }
            /* Stamp it: a buffer handed to two threads at once shows up below. */
            memset(nxr_buffer_data(held[i]), (int)c->id + 1, 64);
        }
        pthread_barrier_wait(c->barrier); /* the main thread counts now */
        pthread_barrier_wait(c->barrier);
        for (int i = 0; i < HELD; i++) {
            if (held[i] == NULL)
                continue;
            unsigned char *p = nxr_buffer_data(held[i]);
            for (int k = 0; k < 64; k++)
                if (p[k] != c->id + 1)
                    c->failures++;
            nxr_buffer_release(held[i]);
        }
        /* Free-running churn between the checkpoints. */
        for (int k = 0; k < 200; k++) {
            nxr_buffer_t *b;
            if (nxr_buffer_acquire(c->d, sizes[k % 5], &b) != 0) {
                c->failures++;
                continue;
            }
            nxr_buffer_release(b);
        }
        pthread_barrier_wait(c->barrier); /* the main thread counts again */
        pthread_barrier_wait(c->barrier);
    }
    return NULL;
}

Test(alloc_pool, outstanding_is_exact_under_concurrent_acquire_release, .timeout = 60)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS + 1);
    pthread_t th[THREADS];
    struct churn c[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        c[i] = (struct churn){.d = d, .barrier = &barrier, .id = i};
        cr_assert_eq(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
    }
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&barrier); /* every thread holds HELD buffers */
        cr_assert_eq(stats_of(d).outstanding, THREADS * HELD, "round %d", round);
        pthread_barrier_wait(&barrier);
        pthread_barrier_wait(&barrier); /* every thread released all */
        cr_assert_eq(stats_of(d).outstanding, 0, "round %d", round);
        pthread_barrier_wait(&barrier);
    }
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(c[i].failures, 0, "thread %u", i);
    }
    struct nxr_pool_stats st = stats_of(d);
    cr_assert_eq(st.hits + st.misses, (uint64_t)THREADS * ROUNDS * (HELD + 200));
    cr_assert_eq(st.drops, 0);
    pthread_barrier_destroy(&barrier);
    nxr_runtime_destroy(rt);
}

/* ------------------------------------------------------------ ownership */

static void release_on_worker(void *arg, unsigned index, unsigned n)
{
    (void)index, (void)n;
    nxr_buffer_release(arg);
}

Test(alloc_pool, buffer_released_on_another_domains_worker_returns_to_its_owner, .timeout = 30)
{
    nxr_runtime_t *rt = make_runtime("0:%0;1:%0 shared");
    nxr_domain_t *d0, *d1;
    cr_assert_eq(nxr_runtime_domain(rt, 0, &d0), 0);
    cr_assert_eq(nxr_runtime_domain(rt, 1, &d1), 0);
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(d0, 65536, &b), 0);
    void *p = nxr_buffer_data(b);
    cr_assert_eq(nxr_buffer_domain(b), 0);
    nxr__team_run(d1->team, release_on_worker, b, 1, false);
    struct nxr_pool_stats s0 = stats_of(d0), s1 = stats_of(d1);
    cr_assert_eq(s0.outstanding, 0);
    cr_assert_eq(s0.cached_buffers, 1);
    cr_assert_eq(s0.cached_bytes, 65536);
    cr_assert_eq(s1.cached_buffers, 0, "domain 1 must not have kept it");
    cr_assert_eq(s1.hits + s1.misses, 0);
    nxr_buffer_t *again;
    cr_assert_eq(nxr_buffer_acquire(d0, 65536, &again), 0);
    cr_assert_eq(nxr_buffer_data(again), p);
    nxr_buffer_release(again);
    nxr_runtime_destroy(rt);
}

/* ------------------------------------------------------------- describe */

Test(alloc_pool, describe_reports_pool_statistics_per_domain)
{
    nxr_runtime_t *rt = make_runtime("0:%0;1:%0 shared");
    nxr_domain_t *d0 = nxr_runtime_domain_at(rt, 0);
    nxr_buffer_t *a, *b;
    cr_assert_eq(nxr_buffer_acquire(d0, 4096, &a), 0);
    cr_assert_eq(nxr_buffer_acquire(d0, 4096, &b), 0);
    nxr_buffer_release(a);
    char *json;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_JSON, &json), 0);
    const char *pool0 = strstr(json, "\"pool\":{");
    cr_assert_not_null(pool0, "%s", json);
    cr_assert_not_null(strstr(pool0, "\"cached_bytes\":4096,\"cached_buffers\":1,\"outstanding\":1,"
                                     "\"hits\":0,\"misses\":2,\"drops\":0,\"release_failures\":0}"),
                       "%s", json);
    cr_assert_not_null(strstr(pool0 + 1, "\"pool\":{"), "domain 1 has a pool object: %s", json);
    free(json);
    char *text;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_TEXT, &text), 0);
    cr_assert_not_null(strstr(text, "cached 4096 B in 1 buffer(s)"), "%s", text);
    cr_assert_not_null(strstr(text, "outstanding 1;"), "%s", text);
    free(text);
    nxr_buffer_release(b);
    nxr_runtime_destroy(rt);
}

/* -------------------------------------------------------------- teardown */

Test(alloc_pool, destroy_with_buffers_outstanding_reports_and_stays_safe)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(d, 65536, &b), 0);
    memset(nxr_buffer_data(b), 1, 65536);
    /* The internal status a shutdown call can return. */
    cr_assert_eq(nxr__runtime_pools_destroy(rt), NXR_EOUTSTANDING);
    nxr_runtime_destroy(rt);
    /* Still usable and releasable after the runtime is gone. */
    memset(nxr_buffer_data(b), 2, 65536);
    nxr_buffer_release(b);
}

Test(alloc_pool, double_release_aborts, .signal = SIGABRT)
{
    nxr_runtime_t *rt = make_runtime(NULL);
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(nxr_runtime_domain_at(rt, 0), 64, &b), 0);
    nxr_buffer_release(b);
    nxr_buffer_release(b);
}
