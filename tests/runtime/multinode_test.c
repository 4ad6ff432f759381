/*
 * Default domains on a machine with several NUMA nodes: one domain per node,
 * its CPU set exactly the node's (as the kernel's libnuma reports it, not as
 * nxr computed it), every worker confined there (read back with
 * sched_getaffinity per thread), every chunk of a loop run on one of those
 * CPUs, and memory handed out on that domain's node. On a one-node machine
 * these tests skip; tools/vm_test.sh runs them in 2- and 4-node VMs, with
 * NXR_TEST_NEED_NODE1=1 so that a skip there fails instead.
 */
#include <criterion/criterion.h>
#include <numa.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/nxr.h"
#include "tests/support/procfs.h"
#include "tests/support/runtime.h"

static void need_nodes(int want)
{
    int nodes = numa_available() < 0 ? 0 : numa_max_node() + 1;
    if (nodes >= want)
        return;
    cr_assert_null(getenv("NXR_TEST_NEED_NODE1"), "the VM has %d node(s), not %d", nodes, want);
    cr_skip_test("needs %d NUMA nodes (this machine has %d); run tools/vm_test.sh", want, nodes);
}

/* Node `node`'s CPUs that this process may use, from libnuma. */
static hwloc_bitmap_t node_cpus(int node)
{
    struct bitmask *m = numa_allocate_cpumask();
    cr_assert_eq(numa_node_to_cpus(node, m), 0);
    cpu_set_t mine;
    cr_assert_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    for (unsigned cpu = 0; cpu < m->size && cpu < CPU_SETSIZE; cpu++) {
        if (numa_bitmask_isbitset(m, cpu) && CPU_ISSET(cpu, &mine))
            hwloc_bitmap_set(set, cpu);
    }
    numa_free_cpumask(m);
    return set;
}

static nxr_runtime_t *default_runtime(void)
{
    struct nxr_test_runtime fx;
    NXR_TEST_RUNTIME(&fx, NULL, NXR_TEST_PARK);
    return fx.rt;
}

#define MAX_CPU 256

struct where {
    atomic_uint seen[MAX_CPU]; /* iterations run per CPU */
};

static void record_cpu(void *arg, size_t b, size_t e, unsigned worker)
{
    struct where *w = arg;
    (void)worker;
    for (size_t i = b; i < e; i++) {
        int cpu = sched_getcpu();
        if (cpu >= 0 && cpu < MAX_CPU)
            atomic_fetch_add_explicit(&w->seen[cpu], 1, memory_order_relaxed);
    }
}

/* Domain `node` is node `node`: its set, its workers, its loop's CPUs. */
static void check_node_domain(nxr_runtime_t *rt, int node)
{
    nxr_domain_t *d;
    cr_assert_eq(nxr_runtime_domain(rt, node, &d), 0, "no domain for node %d", node);
    hwloc_bitmap_t want = node_cpus(node);
    char got_list[128], want_list[128];
    hwloc_bitmap_list_snprintf(got_list, sizeof(got_list), nxr_domain_cpuset(d));
    hwloc_bitmap_list_snprintf(want_list, sizeof(want_list), want);
    cr_assert(hwloc_bitmap_isequal(nxr_domain_cpuset(d), want),
              "domain %d has CPUs %s, node %d has %s", node, got_list, node, want_list);
    cr_assert_eq(nxr_domain_node(d), node);
    cr_assert_eq(nxr_domain_placement(d), NXR_PLACEMENT_VERIFIED);
    cr_assert_eq(nxr_domain_workers(d), (unsigned)hwloc_bitmap_weight(want));

    /* The workers, as the kernel sees them. */
    char prefix[32];
    pid_t tids[64];
    snprintf(prefix, sizeof(prefix), "nxr-d%d-w", node);
    size_t n = nxr_test_threads_named(prefix, tids, 64);
    cr_assert_eq(n, nxr_domain_workers(d), "domain %d: %zu threads named %s", node, n, prefix);
    hwloc_bitmap_t actual = hwloc_bitmap_alloc();
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(nxr_test_thread_affinity(tids[i], actual), 0);
        cr_assert(hwloc_bitmap_isequal(actual, want), "node %d worker %d: wrong affinity", node,
                  (int)tids[i]);
    }
    hwloc_bitmap_free(actual);

    /* A loop on the domain runs every iteration on the node's CPUs,
     * whichever CPU the calling thread is on. */
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(rt, node, &ctx), 0);
    struct where *w = calloc(1, sizeof(*w));
    cr_assert_eq(nxr_parallel_for(ctx, 0, 4096, 16, record_cpu, w), 0);
    unsigned total = 0;
    for (int cpu = 0; cpu < MAX_CPU; cpu++) {
        unsigned k = atomic_load(&w->seen[cpu]);
        total += k;
        cr_assert(k == 0 || hwloc_bitmap_isset(want, (unsigned)cpu),
                  "node %d: %u iterations ran on CPU %d, outside the node", node, k, cpu);
        cr_assert(k == 0 || numa_node_of_cpu(cpu) == node, "CPU %d is not on node %d", cpu, node);
    }
    cr_assert_eq(total, 4096, "every iteration ran once on a known CPU");

    /* And its memory is on the node. */
    nxr_buffer_t *b;
    cr_assert_eq(nxr_buffer_acquire(d, 1 << 20, &b), 0);
    memset(nxr_buffer_data(b), 7, nxr_buffer_size(b));
    cr_assert_eq(nxr_mem_node(nxr_buffer_data(b)), node);
    nxr_buffer_release(b);

    free(w);
    nxr_ctx_destroy(ctx);
    hwloc_bitmap_free(want);
}

Test(runtime_multinode, default_domain_1_is_node_1_with_workers_there, .timeout = 120)
{
    need_nodes(2);
    nxr_runtime_t *rt = default_runtime();
    check_node_domain(rt, 1);
    nxr_runtime_destroy(rt);
}

Test(runtime_multinode, every_node_is_a_domain_with_its_own_workers, .timeout = 120)
{
    need_nodes(2);
    nxr_runtime_t *rt = default_runtime();
    int nodes = numa_max_node() + 1;
    size_t with_cpus = 0;
    for (int node = 0; node < nodes; node++) {
        hwloc_bitmap_t cpus = node_cpus(node);
        if (!hwloc_bitmap_iszero(cpus)) {
            with_cpus++;
            check_node_domain(rt, node);
        }
        hwloc_bitmap_free(cpus);
    }
    cr_assert_eq(nxr_runtime_domain_count(rt), with_cpus, "one domain per node with CPUs");
    nxr_runtime_destroy(rt);
}

/* Loops on every node at once: disjoint domains run concurrently and each
 * stays on its node. Concurrency is shown, not assumed: the first loop of
 * every domain holds a rendezvous in one of its chunks, which every
 * domain's chunk must reach while the others wait there. Run one after
 * another, the first would wait alone until the bound (10 s, which only
 * turns a hang into a failure) and report it. */
struct meeting {
    atomic_int arrived; /* domains whose chunk reached the rendezvous */
    int expected;       /* every domain */
};

struct concurrent {
    nxr_runtime_t *rt;
    int node;
    int status;
    struct meeting *meeting;
    atomic_int met; /* this domain's chunk saw every domain arrive */
    struct where *where;
};

static void meet_body(void *arg, size_t b, size_t e, unsigned worker)
{
    struct concurrent *c = arg;
    record_cpu(c->where, b, e, worker);
    if (b != 0)
        return; /* one chunk per domain meets */
    atomic_fetch_add(&c->meeting->arrived, 1);
    nxr_test_wait_at_least(&c->meeting->arrived, c->meeting->expected, 10000);
    if (atomic_load(&c->meeting->arrived) >= c->meeting->expected)
        atomic_store(&c->met, 1);
}

static void *loop_on_node(void *p)
{
    struct concurrent *c = p;
    nxr_ctx_t *ctx;
    c->status = nxr_ctx_create(c->rt, c->node, &ctx);
    if (c->status != 0)
        return NULL;
    struct where *w = calloc(1, sizeof(*w));
    c->where = w;
    c->status = nxr_parallel_for(ctx, 0, 1024, 8, meet_body, c);
    for (int round = 0; round < 50 && c->status == 0; round++)
        c->status = nxr_parallel_for(ctx, 0, 1024, 8, record_cpu, w);
    for (int cpu = 0; cpu < MAX_CPU && c->status == 0; cpu++) {
        if (atomic_load(&w->seen[cpu]) != 0 && numa_node_of_cpu(cpu) != c->node)
            c->status = NXR_EPLACEMENT;
    }
    free(w);
    nxr_ctx_destroy(ctx);
    return NULL;
}

Test(runtime_multinode, nodes_run_loops_concurrently_each_on_its_own_cpus, .timeout = 120)
{
    need_nodes(2);
    nxr_runtime_t *rt = default_runtime();
    size_t n = nxr_runtime_domain_count(rt);
    struct concurrent c[16];
    pthread_t threads[16];
    cr_assert_leq(n, 16);
    struct meeting meeting = {.expected = (int)n};
    atomic_init(&meeting.arrived, 0);
    for (size_t i = 0; i < n; i++) {
        c[i] = (struct concurrent){.rt = rt,
                                   .node = nxr_domain_id(nxr_runtime_domain_at(rt, i)),
                                   .meeting = &meeting};
        atomic_init(&c[i].met, 0);
        cr_assert_eq(pthread_create(&threads[i], NULL, loop_on_node, &c[i]), 0);
    }
    for (size_t i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        cr_assert_eq(c[i].status, 0, "node %d: %s", c[i].node, nxr_strerror(c[i].status));
        cr_assert(atomic_load(&c[i].met), "node %d ran its loop without the others (%d of %d met)",
                  c[i].node, atomic_load(&meeting.arrived), (int)n);
    }
    nxr_runtime_destroy(rt);
}
