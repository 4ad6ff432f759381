/*
 * Runtime creation: domains as built for real (threads started, pinned and
 * verified), every validation error with nothing left running, and failures
 * injected at thread creation and pinning.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "runtime/internal/runtime.h"
#include "base/internal/sys.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"


/* topology and domains are templates of tests/support/cpus.h ("%0" is the
 * first allowed CPU); a test that needs more CPUs than it has skips. */
static void opts_for(struct nxr_runtime_opts *o, const char *topology, const char *domains)
{
    nxr_runtime_opts_init(o);
    o->ignore_env = true;
    if (topology != NULL) {
        NXR_TEST_NEED_CPUS(nxr_test_cpus_needed(topology));
        o->topology = nxr_test_expand(topology);
    }
    if (domains != NULL) {
        NXR_TEST_NEED_CPUS(nxr_test_cpus_needed(domains));
        o->domains = nxr_test_expand(domains);
    }
}

/* Creation must fail with `want` and leave the thread count as it was. */
static void expect_create_fails(const char *topology, const char *domains, int want)
{
    struct nxr_runtime_opts o;
    opts_for(&o, topology, domains);
    int before = nxr_test_thread_count();
    nxr_runtime_t *rt = (nxr_runtime_t *)0x1;
    int rc = nxr_runtime_create(&o, &rt);
    cr_assert_eq(rc, want, "domains '%s': got %d (%s), want %d (%s); message: %s",
                 domains ? domains : "", rc, nxr_strerror(rc), want, nxr_strerror(want), nxr_last_error());
    cr_assert_null(rt);
    cr_assert_neq(nxr_last_error()[0], '\0', "a failed create explains itself");
    cr_assert_eq(nxr_test_wait_thread_count(before), before, "threads left running");
}

/* Every worker of every domain is confined to exactly its domain's set. */
static void expect_workers_pinned(const nxr_runtime_t *rt)
{
    for (size_t i = 0; i < nxr_runtime_domain_count(rt); i++) {
        nxr_domain_t *d = nxr_runtime_domain_at(rt, i);
        char prefix[16];
        pid_t tids[64];
        snprintf(prefix, sizeof(prefix), "nxr-d%d-w", nxr_domain_id(d));
        size_t n = nxr_test_threads_named(prefix, tids, 64);
        cr_assert_eq(n, nxr_domain_workers(d), "domain %d: %zu threads named %s, %u workers",
                     nxr_domain_id(d), n, prefix, nxr_domain_workers(d));
        hwloc_bitmap_t actual = hwloc_bitmap_alloc();
        for (size_t k = 0; k < n; k++) {
            cr_assert_eq(nxr_test_thread_affinity(tids[k], actual), 0);
            cr_expect(hwloc_bitmap_isequal(actual, nxr_domain_cpuset(d)),
                      "domain %d worker tid %d has a different affinity", nxr_domain_id(d),
                      (int)tids[k]);
        }
        hwloc_bitmap_free(actual);
    }
}

Test(runtime_create, default_domains_cover_the_allowed_set)
{
    struct nxr_runtime_opts o;
    opts_for(&o, NULL, NULL);
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    hwloc_bitmap_t all = hwloc_bitmap_alloc();
    for (size_t i = 0; i < nxr_runtime_domain_count(rt); i++) {
        nxr_domain_t *d = nxr_runtime_domain_at(rt, i);
        cr_expect(hwloc_bitmap_isincluded(nxr_domain_cpuset(d), nxr_runtime_allowed_cpus(rt)));
        cr_expect_eq(nxr_domain_budget(d), (unsigned)hwloc_bitmap_weight(nxr_domain_cpuset(d)));
        cr_expect_eq(nxr_domain_workers(d), nxr_domain_budget(d));
        cr_expect_eq(nxr_domain_placement(d), NXR_PLACEMENT_VERIFIED);
        hwloc_bitmap_or(all, all, nxr_domain_cpuset(d));
    }
    cr_expect(hwloc_bitmap_isequal(all, nxr_runtime_allowed_cpus(rt)));
    expect_workers_pinned(rt);
    hwloc_bitmap_free(all);
    nxr_runtime_destroy(rt);
}

Test(runtime_create, synthetic_two_nodes_run_real_pinned_teams)
{
    struct nxr_runtime_opts o;
    /* One CPU per node, so both nodes exist on a 2-CPU machine. */
    opts_for(&o, "synthetic:pack:2 numa:1(indexes=0,2) pu:1(indexes=%0,%1)", NULL);
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    cr_assert_eq(nxr_runtime_domain_count(rt), 2);
    nxr_domain_t *d0, *d2, *none;
    cr_assert_eq(nxr_runtime_domain(rt, 0, &d0), 0);
    cr_assert_eq(nxr_runtime_domain(rt, 2, &d2), 0);
    cr_assert_eq(nxr_runtime_domain(rt, 1, &none), NXR_ENODOMAIN, "node ids are sparse");
    cr_assert_null(none);
    cr_expect_eq(nxr_domain_node(d2), 2);
    cr_expect_eq(hwloc_bitmap_first(nxr_domain_cpuset(d2)), nxr_test_cpu(1));
    cr_expect_str_eq(nxr_runtime_topology_source(rt), "synthetic");
    expect_workers_pinned(rt);
    nxr_runtime_destroy(rt);
}

Test(runtime_create, narrowed_process_affinity_shrinks_domains)
{
    /* The test narrows its own affinity: what taskset or a cgroup would do. */
    NXR_TEST_NEED_CPUS(2);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(nxr_test_cpu(1), &one);
    cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
    struct nxr_runtime_opts o;
    opts_for(&o, "synthetic:pack:2 numa:1 pu:1(indexes=%0,%1)", NULL);
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    cr_assert_eq(nxr_runtime_domain_count(rt), 1, "node 0 has no allowed CPU: no domain");
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    cr_expect_eq(nxr_domain_id(d), 1);
    cr_expect_eq(hwloc_bitmap_weight(nxr_domain_cpuset(d)), 1);
    cr_expect_eq(hwloc_bitmap_first(nxr_domain_cpuset(d)), nxr_test_cpu(1));
    expect_workers_pinned(rt);
    nxr_runtime_destroy(rt);
}

Test(runtime_create, allowed_cpus_option_narrows_never_widens)
{
    hwloc_bitmap_t narrow = hwloc_bitmap_alloc();
    /* The first allowed CPU and five that do not exist here. */
    hwloc_bitmap_list_sscanf(narrow, nxr_test_expand("%0,60000-60004"));
    struct nxr_runtime_opts o;
    opts_for(&o, NULL, NULL);
    o.allowed_cpus = narrow;
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    char list[64];
    hwloc_bitmap_list_snprintf(list, sizeof(list), nxr_runtime_allowed_cpus(rt));
    char want[16];
    snprintf(want, sizeof(want), "%d", nxr_test_cpu(0));
    cr_expect_str_eq(list, want);
    cr_expect_eq(nxr_domain_budget(nxr_runtime_domain_at(rt, 0)), 1);
    nxr_runtime_destroy(rt);
    hwloc_bitmap_free(narrow);
}

Test(runtime_create, num_threads_lowers_budgets)
{
    struct nxr_runtime_opts o;
    opts_for(&o, NULL, "0:%0,%1");
    o.num_threads = 1;
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    nxr_domain_t *d = nxr_runtime_domain_at(rt, 0);
    cr_expect_eq(nxr_domain_budget(d), 1);
    cr_expect_eq(nxr_domain_workers(d), 1);
    expect_workers_pinned(rt);
    nxr_runtime_destroy(rt);
}

Test(runtime_create, no_numa_information_is_reported)
{
    struct nxr_runtime_opts o;
    opts_for(&o, "synthetic:pu:1(indexes=%0)", NULL);
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    cr_expect_not(nxr_runtime_has_numa(rt));
    cr_assert_eq(nxr_runtime_domain_count(rt), 1);
    cr_expect_eq(nxr_domain_node(nxr_runtime_domain_at(rt, 0)), NXR_NODE_NONE);
    char *text;
    cr_assert_eq(nxr_runtime_describe(rt, NXR_DESCRIBE_TEXT, &text), 0);
    cr_expect_neq(strstr(text, "no NUMA information"), NULL, "%s", text);
    free(text);
    nxr_runtime_destroy(rt);
}

/* One test per validation error, each leaving no thread behind. */
Test(runtime_create, empty_set_is_eemptyset)
{
    hwloc_bitmap_t empty = hwloc_bitmap_alloc();
    struct nxr_domain_decl d;
    nxr_domain_decl_init(&d);
    d.cpus = empty;
    struct nxr_runtime_opts o;
    opts_for(&o, NULL, NULL);
    o.domain_decls = &d;
    o.domain_decl_count = 1;
    int before = nxr_test_thread_count();
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), NXR_EEMPTYSET);
    cr_assert_null(rt);
    cr_assert_neq(strstr(nxr_last_error(), "domain 0"), NULL, "%s", nxr_last_error());
    cr_assert_eq(nxr_test_thread_count(), before);
    hwloc_bitmap_free(empty);
}

Test(runtime_create, cpu_outside_allowed_set_is_edisallowed)
{
    expect_create_fails(NULL, "0:%0;1:4000", NXR_EDISALLOWED);
    cr_expect_neq(strstr(nxr_last_error(), "domain 1: CPUs '4000'"), NULL, "%s", nxr_last_error());
}

Test(runtime_create, duplicate_id_is_edupid)
{
    expect_create_fails(NULL, "3:%0;3:%0", NXR_EDUPID);
    cr_expect_neq(strstr(nxr_last_error(), "3"), NULL, "%s", nxr_last_error());
}

Test(runtime_create, overlap_between_managed_domains_is_eoverlap)
{
    expect_create_fails(NULL, "0:%0;1:%0", NXR_EOVERLAP);
    cr_expect_neq(strstr(nxr_last_error(), nxr_test_expand("domains 0 and 1 overlap on CPUs '%0'")), NULL, "%s",
                  nxr_last_error());
}

Test(runtime_create, zero_budget_is_ebudget)
{
    expect_create_fails(NULL, "0:%0/0", NXR_EBUDGET);
}

Test(runtime_create, budget_above_set_is_ebudget)
{
    expect_create_fails(NULL, "0:%0/2", NXR_EBUDGET);
    cr_expect_neq(strstr(nxr_last_error(), "budget 2"), NULL, "%s", nxr_last_error());
}

Test(runtime_create, malformed_domains_is_esyntax)
{
    expect_create_fails(NULL, "0:1-", NXR_ESYNTAX);
}

Test(runtime_create, malformed_topology_is_esyntax)
{
    expect_create_fails("carrier-pigeon:", NULL, NXR_ESYNTAX);
}

Test(runtime_create, unloadable_topology_is_etopology)
{
    expect_create_fails("synthetic:not a topology", NULL, NXR_ETOPOLOGY);
    expect_create_fails("xml:/nonexistent/topology.xml", NULL, NXR_ETOPOLOGY);
}

Test(runtime_create, both_domain_forms_is_einval)
{
    struct nxr_domain_decl d;
    nxr_domain_decl_init(&d);
    struct nxr_runtime_opts o;
    opts_for(&o, NULL, "0:%0");
    o.domain_decls = &d;
    o.domain_decl_count = 1;
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), -EINVAL);
    cr_assert_null(rt);
    cr_assert_eq(nxr_runtime_create(&o, NULL), -EINVAL);
}

Test(runtime_create, bad_environment_knob_is_esyntax)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    setenv("NXR_NUM_THREADS", "two", 1);
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), NXR_ESYNTAX);
    cr_assert_neq(strstr(nxr_last_error(), "NXR_NUM_THREADS"), NULL, "%s", nxr_last_error());
    unsetenv("NXR_NUM_THREADS");
}

Test(runtime_create, environment_declares_domains)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    setenv("NXR_DOMAINS", nxr_test_expand("5:%0"), 1);
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
    nxr_domain_t *d;
    cr_expect_eq(nxr_runtime_domain(rt, 5, &d), 0);
    nxr_runtime_destroy(rt);
    unsetenv("NXR_DOMAINS");
}

/* Fault injection: the n-th thread creation or pinning fails; creation
 * reports it, and every worker started before it is joined. */
static void expect_injected_failure(unsigned point, long nth, int want)
{
    struct nxr_runtime_opts o;
    opts_for(&o, NULL, "0:%0;1:%1");
    int before = nxr_test_thread_count();
    nxr__fault_arm(point, nth);
    nxr_runtime_t *rt;
    int rc = nxr_runtime_create(&o, &rt);
    nxr__fault_arm(0, 0);
    cr_assert_eq(rc, want, "fault %u #%ld: got %d (%s)", point, nth, rc, nxr_strerror(rc));
    cr_assert_null(rt);
    cr_assert_eq(nxr_test_wait_thread_count(before), before, "threads left running");
}

Test(runtime_create, thread_creation_failure_leaves_nothing_running)
{
    expect_injected_failure(NXR_FAULT_THREAD_CREATE, 1, -EAGAIN);
    expect_injected_failure(NXR_FAULT_THREAD_CREATE, 2, -EAGAIN); /* after one team started */
}

Test(runtime_create, pinning_failure_is_eplacement)
{
    expect_injected_failure(NXR_FAULT_SETAFFINITY, 2, NXR_EPLACEMENT);
    cr_expect_neq(strstr(nxr_last_error(), "sched_setaffinity"), NULL, "%s", nxr_last_error());
}

Test(runtime_create, affinity_mismatch_is_eplacement)
{
    /* Every affinity read-back during creation, failed in turn (whatever the
     * order nxr makes them in): each failure is a typed error with nothing
     * left running, and each worker's own check reports the mismatch. */
    NXR_TEST_NEED_CPUS(2);
    int before = nxr_test_thread_count();
    long n, mismatches = 0;
    for (n = 1;; n++) {
        struct nxr_runtime_opts o;
        opts_for(&o, NULL, "0:%0;1:%1");
        nxr_runtime_t *rt;
        nxr__fault_arm(NXR_FAULT_VERIFY_AFFINITY, n);
        int rc = nxr_runtime_create(&o, &rt);
        long seen = nxr__fault_calls();
        nxr__fault_arm(0, 0);
        if (rc == 0) {
            cr_assert_lt(seen, n, "read-back %ld was failed and ignored", n);
            nxr_runtime_destroy(rt);
            break;
        }
        cr_assert_null(rt);
        cr_assert_lt(rc, 0, "read-back %ld: %d", n, rc);
        cr_assert_neq(nxr_last_error()[0], '\0', "read-back %ld: no message", n);
        cr_assert_eq(nxr_test_wait_thread_count(before), before, "read-back %ld", n);
        if (rc == NXR_EPLACEMENT && strstr(nxr_last_error(), "reads back as") != NULL)
            mismatches++;
    }
    /* One domain of one worker each: two workers verify themselves. */
    cr_expect_geq(mismatches, 2, "%ld worker mismatches caught over %ld read-backs", mismatches,
                  n - 1);
}

Test(runtime_create, allocation_failures_never_leak_threads)
{
    /* Every allocation during creation, failed in turn. */
    int before = nxr_test_thread_count();
    long n = 1;
    for (;; n++) {
        struct nxr_runtime_opts o;
        opts_for(&o, NULL, "0:%0;1:%1");
        nxr_runtime_t *rt;
        nxr__fault_arm(NXR_FAULT_ALLOC, n);
        int rc = nxr_runtime_create(&o, &rt);
        long seen = nxr__fault_calls();
        nxr__fault_arm(0, 0);
        if (rc == 0) {
            cr_assert_lt(seen, n, "the armed failure was ignored");
            nxr_runtime_destroy(rt);
            break;
        }
        cr_assert_eq(rc, -ENOMEM, "allocation %ld: %d (%s)", n, rc, nxr_strerror(rc));
        cr_assert_null(rt);
        cr_assert_eq(nxr_test_wait_thread_count(before), before, "allocation %ld", n);
    }
    cr_assert_gt(n, 3, "creation makes several allocations");
}

Test(runtime_destroy, null_is_a_no_op)
{
    /* A no-op touches nothing: no system call through the seam (every
     * point armed to fail from the first call) and no thread. */
    int before = nxr_test_thread_count();
    nxr__fault_arm_from(NXR_FAULT_ALL, 1);
    nxr_runtime_destroy(NULL);
    long calls = nxr__fault_calls();
    nxr__fault_arm(0, 0);
    cr_assert_eq(calls, 0, "destroy(NULL) made %ld system calls", calls);
    cr_assert_eq(nxr_test_thread_count(), before);
}

Test(runtime_destroy, joins_every_worker)
{
    int before = nxr_test_thread_count();
    nxr_runtime_t *rt;
    struct nxr_runtime_opts o;
    opts_for(&o, NULL, "0:%0;1:%1");
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    cr_assert_eq(nxr_test_thread_count(), before + 2);
    nxr_runtime_destroy(rt);
    cr_assert_eq(nxr_test_wait_thread_count(before), before);
}

Test(runtime_spin, teams_with_their_own_cpus_spin_as_configured)
{
    struct nxr_runtime_opts o;
    opts_for(&o, NULL, "0:%0;1:%1");
    o.spin = 777;
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    for (size_t i = 0; i < rt->domain_count; i++)
        cr_expect_eq(nxr__team_spin_for(rt, rt->domains[i]), 777);
    /* Make domain 1 share domain 0's CPU, as an overlapping declared domain
     * would: both must then park at once. */
    hwloc_bitmap_set(rt->domains[1]->spec.cpus, (unsigned)nxr_test_cpu(0));
    cr_expect_eq(nxr__team_spin_for(rt, rt->domains[0]), 0);
    cr_expect_eq(nxr__team_spin_for(rt, rt->domains[1]), 0);
    hwloc_bitmap_clr(rt->domains[1]->spec.cpus, (unsigned)nxr_test_cpu(0));
    /* A team larger than its CPU set parks at once too. */
    rt->domains[0]->spec.budget = 2;
    cr_expect_eq(nxr__team_spin_for(rt, rt->domains[0]), 0);
    rt->domains[0]->spec.budget = 1;
    nxr_runtime_destroy(rt);
}

Test(runtime_spin, environment_sets_the_spin_bound)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    setenv("NXR_SPIN", "0", 1);
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
    cr_expect_eq(rt->settings.spin, 0);
    nxr_runtime_destroy(rt);
    unsetenv("NXR_SPIN");
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
    cr_expect_eq(rt->settings.spin, NXR_SPIN_DEFAULT);
    nxr_runtime_destroy(rt);
}

static void redirect_stderr(void)
{
    cr_redirect_stderr();
}

Test(runtime_display_env, prints_the_resolved_settings_once, .init = redirect_stderr)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    NXR_TEST_NEED_CPUS(2);
    o.domains = nxr_test_expand("0:%0,%1/1");
    setenv("NXR_DISPLAY_ENV", "1", 1);
    setenv("NXR_SPIN", "12", 1);
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
    nxr_runtime_destroy(rt);
    fflush(stderr);
    char text[1024] = "";
    FILE *f = cr_get_redirected_stderr();
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    cr_expect_eq(strncmp(text, "NXR: topology=hwloc ", 20), 0, "%s", text);
    cr_expect_neq(strstr(text, "NXR_SPIN=12\n"), NULL, "%s", text);
    /* The two CPUs are one node here; in a VM with a node per CPU, none. */
    int c0 = nxr_test_cpu(0), c1 = nxr_test_cpu(1);
    int node = numa_available() < 0 || numa_node_of_cpu(c0) != numa_node_of_cpu(c1)
                   ? -1
                   : numa_node_of_cpu(c0);
    char want[128], list[32];
    hwloc_bitmap_t two = nxr_test_cpus(0, 2);
    hwloc_bitmap_list_snprintf(list, sizeof(list), two);
    hwloc_bitmap_free(two);
    snprintf(want, sizeof(want), "NXR: domain 0 node %d cpus %s budget 1 managed\n", node, list);
    cr_expect_neq(strstr(text, want), NULL, "%s", text);
    cr_expect_eq(strstr(text + 1, "NXR: topology"), NULL, "printed once: %s", text);
    unsetenv("NXR_DISPLAY_ENV");
    unsetenv("NXR_SPIN");
}

Test(runtime_pool_cap, option_and_environment_set_the_cap)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.domains = nxr_test_expand("0:%0");
    setenv("NXR_POOL_CAP", "64M", 1);
    nxr_runtime_t *rt;
    struct nxr_pool_stats st;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
    cr_assert_eq(nxr_pool_stats(nxr_runtime_domain_at(rt, 0), &st), 0);
    cr_expect_eq(st.cap_bytes, (size_t)64 << 20);
    nxr_runtime_destroy(rt);
    o.has_pool_cap = true;
    o.pool_cap = 4096; /* the struct wins over the environment */
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0);
    cr_assert_eq(nxr_pool_stats(nxr_runtime_domain_at(rt, 0), &st), 0);
    cr_expect_eq(st.cap_bytes, 4096);
    nxr_runtime_destroy(rt);
    setenv("NXR_POOL_CAP", "12Q", 1);
    o.has_pool_cap = false;
    cr_expect_eq(nxr_runtime_create(&o, &rt), NXR_ESYNTAX);
    unsetenv("NXR_POOL_CAP");
}

/* ---- the error detail (nxr_last_error) --------------------------------- */

/* Copies what the thread it runs on sees (its slot dies with it). */
static void *read_detail(void *out)
{
    snprintf(out, 128, "%s", nxr_last_error());
    return NULL;
}

/* The detail is the failing thread's own, and the next call that reports
 * detail empties it when it succeeds. */
Test(runtime_create, the_detail_is_the_calling_threads_and_a_success_clears_it)
{
    struct nxr_runtime_opts o;
    opts_for(&o, NULL, NULL);
    o.spin = -2;
    nxr_runtime_t *rt;
    cr_assert_eq(nxr_runtime_create(&o, &rt), -EINVAL);
    cr_assert_not_null(strstr(nxr_last_error(), "opts.spin"), "%s", nxr_last_error());
    char other[128] = "unread";
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, read_detail, other), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_str_eq(other, "", "another thread sees its own (empty) detail");
    o.spin = 0;
    cr_assert_eq(nxr_runtime_create(&o, &rt), 0, "%s", nxr_last_error());
    cr_assert_str_eq(nxr_last_error(), "", "a success leaves no detail");
    nxr_runtime_destroy(rt);
}
