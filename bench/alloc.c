/*
 * bench/alloc: what a domain's pool and scopes buy over the general-purpose
 * allocators, in one run.
 *
 *   bazel run //bench:alloc [-- --json] [--short]
 *
 * Cases (same-size acquire/release of 4 KiB, 64 KiB and 4 MiB):
 *   pool         nxr_buffer_acquire + nxr_buffer_release (steady state: the
 *                buffer comes back from the cache, already placed);
 *   pool_touch   the same, plus a store to every page (like-for-like with
 *                the two below);
 *   malloc       glibc malloc + first touch of every page + free, glibc's
 *                defaults (its dynamic mmap threshold recycles large blocks
 *                after the first free);
 *   malloc_fresh the same with M_MMAP_THRESHOLD pinned at 128 KiB, so every
 *                4 MiB block is a fresh mapping: the cost of placing pages;
 *   jemalloc     nxr_domain_malloc + touch + nxr_domain_free (mallocx/
 *                dallocx on the domain's arena, no thread cache); in a build
 *                with --//alloc:arena=mmap (the arena libnxr.so ships,
 *                //bench:alloc_mmap_arena) the same calls map and unmap an
 *                extent each time. The output names the arena it measured.
 * Then a request-shaped step (108 allocations of 64 B .. 200 KiB, first and
 * last byte written): a scope (alloc + reset) against malloc + free.
 *
 * Each figure is the median over SAMPLES samples of the mean time per
 * operation within a sample. Ratios are malloc (or jemalloc) over pool:
 * higher is better for the pool. Steady-state system calls are the mmap,
 * munmap, mbind, madvise and mprotect calls made by nxr and its jemalloc
 * during the measured pool and scope loops, counted by wrapping those
 * functions at link time (-Wl,--wrap; glibc's own internal calls are not
 * seen), with minor page faults from getrusage alongside.
 */
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/timing.h"
#include "runtime/nxr.h"

#ifndef NXR_BENCH_ARENA
#error "bench/BUILD.bazel defines NXR_BENCH_ARENA: the arena back end of this build"
#endif

#define SAMPLES 11
#define PAGE    4096u

/* ---------------------------------------------------- syscall counting */

static atomic_long syscalls;

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);
int __real_madvise(void *addr, size_t len, int advice);
int __real_mprotect(void *addr, size_t len, int prot);
long __real_mbind(void *addr, unsigned long len, int mode, const unsigned long *mask,
                  unsigned long maxnode, unsigned flags);

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_munmap(void *addr, size_t len);
int __wrap_madvise(void *addr, size_t len, int advice);
int __wrap_mprotect(void *addr, size_t len, int prot);
long __wrap_mbind(void *addr, unsigned long len, int mode, const unsigned long *mask,
                  unsigned long maxnode, unsigned flags);

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    atomic_fetch_add_explicit(&syscalls, 1, memory_order_relaxed);
    return __real_mmap(addr, len, prot, flags, fd, off);
}

int __wrap_munmap(void *addr, size_t len)
{
    atomic_fetch_add_explicit(&syscalls, 1, memory_order_relaxed);
    return __real_munmap(addr, len);
}

int __wrap_madvise(void *addr, size_t len, int advice)
{
    atomic_fetch_add_explicit(&syscalls, 1, memory_order_relaxed);
    return __real_madvise(addr, len, advice);
}

int __wrap_mprotect(void *addr, size_t len, int prot)
{
    atomic_fetch_add_explicit(&syscalls, 1, memory_order_relaxed);
    return __real_mprotect(addr, len, prot);
}

long __wrap_mbind(void *addr, unsigned long len, int mode, const unsigned long *mask,
                  unsigned long maxnode, unsigned flags)
{
    atomic_fetch_add_explicit(&syscalls, 1, memory_order_relaxed);
    return __real_mbind(addr, len, mode, mask, maxnode, flags);
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* ------------------------------------------------------------- timing */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef void (*op_fn)(void *ctx);

/* What one measured loop cost. */
struct cost {
    double ns;              /* median over SAMPLES of the mean ns per op */
    double syscalls_per_op; /* wrapped memory system calls, over all samples */
    double faults_per_op;   /* minor page faults, over all samples */
    long syscalls;
    long faults;
};

/* Runs op once to warm up (the pool's only miss, the scope's chunks), then
 * SAMPLES samples of `iters` ops. */
static struct cost measure(op_fn op, void *ctx, long iters)
{
    double s[SAMPLES];
    op(ctx);
    long sys0 = atomic_load_explicit(&syscalls, memory_order_relaxed);
    long flt0 = minor_faults();
    for (int i = 0; i < SAMPLES; i++) {
        double t0 = now_ns();
        for (long k = 0; k < iters; k++)
            op(ctx);
        s[i] = (now_ns() - t0) / (double)iters;
    }
    struct cost c;
    c.syscalls = atomic_load_explicit(&syscalls, memory_order_relaxed) - sys0;
    c.faults = minor_faults() - flt0;
    c.syscalls_per_op = (double)c.syscalls / (double)(SAMPLES * iters);
    c.faults_per_op = (double)c.faults / (double)(SAMPLES * iters);
    qsort(s, SAMPLES, sizeof(s[0]), bench_cmp_double);
    c.ns = s[SAMPLES / 2];
    return c;
}

/* -------------------------------------------------------------- cases */

struct sized {
    nxr_domain_t *d;
    size_t size;
};

static void touch(char *p, size_t size)
{
    for (size_t off = 0; off < size; off += PAGE)
        ((volatile char *)p)[off] = 1;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench/alloc: %s: %s\n", what, nxr_strerror(rc));
    exit(1);
}

static void op_pool(void *arg)
{
    struct sized *c = arg;
    nxr_buffer_t *b;
    int rc = nxr_buffer_acquire(c->d, c->size, &b);
    if (rc != 0)
        die("acquire", rc);
    nxr_buffer_release(b);
}

static void op_pool_touch(void *arg)
{
    struct sized *c = arg;
    nxr_buffer_t *b;
    int rc = nxr_buffer_acquire(c->d, c->size, &b);
    if (rc != 0)
        die("acquire", rc);
    touch(nxr_buffer_data(b), c->size);
    nxr_buffer_release(b);
}

static void op_malloc(void *arg)
{
    struct sized *c = arg;
    char *p = malloc(c->size);
    if (p == NULL)
        die("malloc", -ENOMEM);
    touch(p, c->size);
    free(p);
}

static void op_jemalloc(void *arg)
{
    struct sized *c = arg;
    void *p;
    int rc = nxr_domain_malloc(c->d, c->size, 0, &p);
    if (rc != 0)
        die("nxr_domain_malloc", rc);
    touch(p, c->size);
    nxr_domain_free(p);
}

/* A request: 12 layers of 9 allocations each. */
static const size_t step_sizes[] = {4096, 256, 65536, 1024, 200000, 64, 16384, 131072, 3000};
#define STEP_ALLOCS (12 * sizeof(step_sizes) / sizeof(step_sizes[0]))

static void op_scope_step(void *arg)
{
    nxr_scope_t *s = arg;
    for (size_t i = 0; i < STEP_ALLOCS; i++) {
        size_t n = step_sizes[i % 9];
        char *p;
        int rc = nxr_scope_alloc(s, n, (void **)&p);
        if (rc != 0)
            die("nxr_scope_alloc", rc);
        ((volatile char *)p)[0] = 1;
        ((volatile char *)p)[n - 1] = 2;
    }
    nxr_scope_reset(s);
}

static void op_malloc_step(void *arg)
{
    (void)arg;
    char *ptrs[STEP_ALLOCS];
    for (size_t i = 0; i < STEP_ALLOCS; i++) {
        size_t n = step_sizes[i % 9];
        ptrs[i] = malloc(n);
        if (ptrs[i] == NULL)
            die("malloc", -ENOMEM);
        ((volatile char *)ptrs[i])[0] = 1;
        ((volatile char *)ptrs[i])[n - 1] = 2;
    }
    for (size_t i = 0; i < STEP_ALLOCS; i++)
        free(ptrs[i]);
}

/* --------------------------------------------------------------- main */

struct row {
    const char *name;
    size_t size;
    long iters;
    struct cost pool, pool_touch, mall, jem;
};

static void json_row(const struct row *r)
{
    const char *n = r->name;
    printf("\"pool_%s_ns\":%.1f,\"pool_touch_%s_ns\":%.1f,\"malloc_%s_ns\":%.1f,"
           "\"jemalloc_%s_ns\":%.1f,\"ratio_%s\":%.2f,\"ratio_touch_%s\":%.2f,"
           "\"ratio_jemalloc_%s\":%.2f,\"malloc_%s_faults_per_op\":%.2f,"
           "\"jemalloc_%s_faults_per_op\":%.2f,\"jemalloc_%s_syscalls_per_op\":%.3f,",
           n, r->pool.ns, n, r->pool_touch.ns, n, r->mall.ns, n, r->jem.ns, n,
           r->mall.ns / r->pool.ns, n, r->mall.ns / r->pool_touch.ns, n, r->jem.ns / r->pool.ns, n,
           r->mall.faults_per_op, n, r->jem.faults_per_op, n, r->jem.syscalls_per_op);
}

int main(int argc, char **argv)
{
    int json = 0;
    long scale = 1; /* --short: a tenth of the iterations (a loaded machine, bench:alloc_arenas) */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--short") == 0)
            scale = 10;
        else {
            fprintf(stderr, "usage: alloc [--json] [--short]\n");
            return 2;
        }
    }
    nxr_runtime_t *rt;
    int rc = nxr_runtime_create(NULL, &rt);
    if (rc != 0)
        die("nxr_runtime_create", rc);
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);

    struct row rows[] = {
        {.name = "4k", .size = 4096, .iters = 100000},
        {.name = "64k", .size = 65536, .iters = 20000},
        {.name = "4m", .size = 4u << 20, .iters = 300},
    };
    long ss_sys = 0, ss_flt = 0;
    for (size_t i = 0; i < 3; i++) {
        rows[i].iters /= scale;
        struct sized c = {d, rows[i].size};
        op_pool_touch(&c); /* the one miss, and the first touch, happen here */
        rows[i].pool = measure(op_pool, &c, rows[i].iters);
        rows[i].pool_touch = measure(op_pool_touch, &c, rows[i].iters);
        ss_sys += rows[i].pool.syscalls + rows[i].pool_touch.syscalls;
        ss_flt += rows[i].pool.faults + rows[i].pool_touch.faults;
        rows[i].mall = measure(op_malloc, &c, rows[i].iters);
        rows[i].jem = measure(op_jemalloc, &c, rows[i].iters);
    }

    nxr_scope_t *scope;
    rc = nxr_scope_create(d, NULL, &scope);
    if (rc != 0)
        die("nxr_scope_create", rc);
    struct cost scope_step = measure(op_scope_step, scope, 2000 / scale);
    ss_sys += scope_step.syscalls;
    ss_flt += scope_step.faults;
    struct cost malloc_step = measure(op_malloc_step, NULL, 2000 / scale);
    nxr_scope_destroy(scope);

    /* Fresh 4 MiB mappings: pin glibc's threshold so it stops recycling. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    struct sized c4m = {d, 4u << 20};
    struct cost fresh = measure(op_malloc, &c4m, 100 / scale);

    const char *binding = nxr_mem_binding_name(nxr_domain_mem_binding(d));
    if (json) {
        printf("{");
        for (size_t i = 0; i < 3; i++)
            json_row(&rows[i]);
        printf("\"malloc_fresh_4m_ns\":%.1f,\"ratio_fresh_4m\":%.2f,"
               "\"malloc_fresh_4m_faults_per_op\":%.1f,\"scope_step_ns\":%.1f,"
               "\"malloc_step_ns\":%.1f,\"ratio_scope\":%.2f,\"steady_state_syscalls\":%ld,"
               "\"steady_state_minor_faults\":%ld,\"binding\":\"%s\",\"arena\":\"%s\","
               "\"samples\":%d}\n",
               fresh.ns, fresh.ns / rows[2].pool.ns, fresh.faults_per_op, scope_step.ns,
               malloc_step.ns, malloc_step.ns / scope_step.ns, ss_sys, ss_flt, binding,
               NXR_BENCH_ARENA, SAMPLES);
    } else {
        printf("domain 0 memory: %s; arena: %s (jemalloc+t: nxr_domain_malloc on it); "
               "medians of %d samples, ns per operation\n",
               binding, NXR_BENCH_ARENA, SAMPLES);
        printf("%-5s %9s %11s %13s %12s | %8s %10s %12s\n", "size", "pool", "pool+touch",
               "malloc+touch", "jemalloc+t", "malloc+t", "malloc+t", "jemalloc+t");
        printf("%-5s %9s %11s %13s %12s | %8s %10s %12s\n", "", "", "", "", "", "/pool", "/pool+t",
               "/pool");
        for (size_t i = 0; i < 3; i++) {
            const struct row *r = &rows[i];
            printf("%-5s %9.1f %11.1f %13.1f %12.1f | %8.1f %10.1f %12.1f\n", r->name, r->pool.ns,
                   r->pool_touch.ns, r->mall.ns, r->jem.ns, r->mall.ns / r->pool.ns,
                   r->mall.ns / r->pool_touch.ns, r->jem.ns / r->pool.ns);
        }
        printf("page faults per op, malloc+touch: 4k %.2f, 64k %.2f, 4m %.2f; "
               "jemalloc+touch: 4k %.2f, 64k %.2f, 4m %.2f\n",
               rows[0].mall.faults_per_op, rows[1].mall.faults_per_op, rows[2].mall.faults_per_op,
               rows[0].jem.faults_per_op, rows[1].jem.faults_per_op, rows[2].jem.faults_per_op);
        printf("4m, fresh mappings (M_MMAP_THRESHOLD pinned): malloc+touch %.1f ns "
               "(%.0f page faults/op), %.1fx the pool\n",
               fresh.ns, fresh.faults_per_op, fresh.ns / rows[2].pool.ns);
        printf("request step (%zu allocations): scope %.1f ns, malloc+free %.1f ns, %.1fx\n",
               (size_t)STEP_ALLOCS, scope_step.ns, malloc_step.ns, malloc_step.ns / scope_step.ns);
        printf("steady state (pool and scope loops): %ld mmap/munmap/mbind/madvise/mprotect "
               "call(s), %ld minor page fault(s)\n",
               ss_sys, ss_flt);
    }
    nxr_runtime_destroy(rt);
    return 0;
}
