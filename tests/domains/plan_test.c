/*
 * Domain planning on synthetic topologies: the multi-node logic, tested on a
 * one-node machine. The allowed set is widened to the synthetic machine's
 * CPUs by the test (a process cannot be allowed CPUs this machine lacks), so
 * what is tested is the mapping from nodes and allowed CPUs to domains.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "domains/internal/plan.h"
#include "domains/internal/topology.h"
#include "base/nxr_status.h"

static struct nxr__topology topo;
static char err[512];

/* Loads a synthetic topology and pretends the process may run on `allowed`
 * (a list like "0-7"; NULL: every CPU of the topology). */
static void load(const char *desc, const char *allowed)
{
    char spec[256];
    snprintf(spec, sizeof(spec), "synthetic:%s", desc);
    cr_assert_eq(nxr__topology_load(&topo, spec, NULL, err, sizeof(err)), 0, "%s", err);
    if (allowed == NULL)
        hwloc_bitmap_copy(topo.allowed, hwloc_topology_get_topology_cpuset(topo.hw));
    else
        hwloc_bitmap_list_sscanf(topo.allowed, allowed);
}

static void expect_domain(const struct nxr__plan *plan, size_t i, int id, int node,
                          const char *cpus, unsigned budget)
{
    char list[128];
    cr_assert_lt(i, plan->count);
    const struct nxr__domain_spec *d = &plan->domains[i];
    hwloc_bitmap_list_snprintf(list, sizeof(list), d->cpus);
    cr_expect_eq(d->id, id, "domain %zu id %d, expected %d", i, d->id, id);
    cr_expect_eq(d->node, node, "domain %zu node %d, expected %d", i, d->node, node);
    cr_expect_str_eq(list, cpus, "domain %zu cpus", i);
    cr_expect_eq(d->budget, budget, "domain %zu budget", i);
    cr_expect_eq(d->admission, NXR_ADMISSION_MANAGED);
}

static void teardown(void)
{
    nxr__topology_fini(&topo);
}

TestSuite(domains_plan, .fini = teardown);

Test(domains_plan, two_nodes_one_domain_each)
{
    struct nxr__plan plan;
    load("pack:2 numa:1 core:2 pu:2", NULL);
    cr_assert(topo.has_numa);
    cr_assert_eq(nxr__plan_default(&plan, &topo, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(plan.count, 2);
    expect_domain(&plan, 0, 0, 0, "0-3", 4);
    expect_domain(&plan, 1, 1, 1, "4-7", 4);
    nxr__plan_fini(&plan);
}

Test(domains_plan, four_nodes_one_domain_each)
{
    struct nxr__plan plan;
    load("pack:4 numa:1 pu:3", NULL);
    cr_assert_eq(nxr__plan_default(&plan, &topo, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(plan.count, 4);
    expect_domain(&plan, 0, 0, 0, "0-2", 3);
    expect_domain(&plan, 1, 1, 1, "3-5", 3);
    expect_domain(&plan, 2, 2, 2, "6-8", 3);
    expect_domain(&plan, 3, 3, 3, "9-11", 3);
    nxr__plan_fini(&plan);
}

Test(domains_plan, sparse_node_ids_are_kept)
{
    struct nxr__plan plan;
    load("pack:2 numa:1(indexes=0,2) pu:2", NULL);
    cr_assert_eq(nxr__plan_default(&plan, &topo, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(plan.count, 2);
    expect_domain(&plan, 0, 0, 0, "0-1", 2);
    expect_domain(&plan, 1, 2, 2, "2-3", 2); /* node 2, not a dense index 1 */
    nxr__plan_fini(&plan);
}

Test(domains_plan, allowed_set_shrinks_domains)
{
    struct nxr__plan plan;
    load("pack:2 numa:1 pu:4", "1-2,6");
    cr_assert_eq(nxr__plan_default(&plan, &topo, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(plan.count, 2);
    expect_domain(&plan, 0, 0, 0, "1-2", 2);
    expect_domain(&plan, 1, 1, 1, "6", 1);
    nxr__plan_fini(&plan);
}

Test(domains_plan, node_without_allowed_cpu_yields_no_domain)
{
    struct nxr__plan plan;
    load("pack:4 numa:1 pu:2", "0-1,6-7");
    cr_assert_eq(nxr__plan_default(&plan, &topo, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(plan.count, 2);
    expect_domain(&plan, 0, 0, 0, "0-1", 2);
    expect_domain(&plan, 1, 3, 3, "6-7", 2);
    nxr__plan_fini(&plan);
}

Test(domains_plan, no_allowed_cpu_at_all_is_enodomain)
{
    struct nxr__plan plan;
    load("pack:2 numa:1 pu:2", "");
    cr_assert_eq(nxr__plan_default(&plan, &topo, err, sizeof(err)), NXR_ENODOMAIN);
    cr_assert_null(plan.domains);
}

Test(domains_plan, no_numa_information_gives_one_nodeless_domain)
{
    struct nxr__plan plan;
    load("pu:4", NULL);
    cr_assert_not(topo.has_numa);
    cr_assert_eq(nxr__plan_default(&plan, &topo, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(plan.count, 1);
    expect_domain(&plan, 0, 0, NXR_NODE_NONE, "0-3", 4);
    nxr__plan_fini(&plan);
}

Test(domains_plan, declared_domain_gets_the_node_that_contains_it)
{
    struct nxr__plan plan;
    struct nxr_domain_decl d[2];
    load("pack:2 numa:1 pu:4", NULL);
    hwloc_bitmap_t a = hwloc_bitmap_alloc(), b = hwloc_bitmap_alloc();
    hwloc_bitmap_list_sscanf(a, "4-5");
    hwloc_bitmap_list_sscanf(b, "2-5"); /* straddles nodes 0 and 1 */
    nxr_domain_decl_init(&d[0]);
    nxr_domain_decl_init(&d[1]);
    d[0].id = 7, d[0].cpus = a, d[0].budget = 1;
    d[1].id = 3, d[1].cpus = b;
    /* Overlapping: plan them one at a time. */
    cr_assert_eq(nxr__plan_declared(&plan, &topo, &d[0], 1, err, sizeof(err)), 0, "%s", err);
    expect_domain(&plan, 0, 7, 1, "4-5", 1);
    nxr__plan_fini(&plan);
    cr_assert_eq(nxr__plan_declared(&plan, &topo, &d[1], 1, err, sizeof(err)), 0, "%s", err);
    expect_domain(&plan, 0, 3, NXR_NODE_NONE, "2-5", 4);
    nxr__plan_fini(&plan);
    hwloc_bitmap_free(a);
    hwloc_bitmap_free(b);
}

Test(domains_plan, budget_cap_lowers_never_raises)
{
    struct nxr__plan plan;
    load("pack:2 numa:1 pu:4", "0-4");
    cr_assert_eq(nxr__plan_default(&plan, &topo, err, sizeof(err)), 0, "%s", err);
    nxr__plan_cap_budgets(&plan, 2);
    cr_expect_eq(plan.domains[0].budget, 2);
    cr_expect_eq(plan.domains[1].budget, 1); /* already below the cap */
    nxr__plan_fini(&plan);
}

/* The CPU quota on a synthetic two-node machine whose nodes the allowed set
 * cuts unevenly (4 + 2 CPUs): shares in proportion to the CPUs, written out
 * by hand (largest remainder, at least 1 each, never raised). */
static void quota_plan(struct nxr__plan *plan)
{
    load("pack:2 numa:1 core:2 pu:2", "0-3,4-5");
    cr_assert_eq(nxr__plan_default(plan, &topo, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(plan->count, 2);
    expect_domain(plan, 0, 0, 0, "0-3", 4);
    expect_domain(plan, 1, 1, 1, "4-5", 2);
}

static void expect_budgets(const struct nxr__plan *plan, unsigned b0, enum nxr__budget_limit l0,
                           unsigned b1, enum nxr__budget_limit l1)
{
    cr_expect_eq(plan->domains[0].budget, b0, "domain 0 budget %u, expected %u",
                 plan->domains[0].budget, b0);
    cr_expect_eq(plan->domains[1].budget, b1, "domain 1 budget %u, expected %u",
                 plan->domains[1].budget, b1);
    cr_expect_eq(plan->domains[0].limited_by, l0, "domain 0 limited by %d",
                 plan->domains[0].limited_by);
    cr_expect_eq(plan->domains[1].limited_by, l1, "domain 1 limited by %d",
                 plan->domains[1].limited_by);
}

Test(domains_plan, quota_lowers_budgets_in_proportion)
{
    static const struct {
        unsigned quota, b0, b1;
    } cases[] = {
        {3, 2, 1}, /* 3 * 4/6 = 2, 3 * 2/6 = 1 */
        {5, 3, 2}, /* 3.33 and 1.67: the larger remainder (domain 1) gets the last CPU */
        {4, 3, 1}, /* 2.67 and 1.33: the larger remainder is domain 0's */
        {1, 1, 1}, /* more domains than CPUs: one thread each */
        {2, 1, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct nxr__plan plan;
        quota_plan(&plan);
        nxr__plan_fit_cpus(&plan, cases[i].quota);
        cr_expect_eq(plan.domains[0].budget, cases[i].b0, "quota %u: domain 0 budget %u, want %u",
                     cases[i].quota, plan.domains[0].budget, cases[i].b0);
        cr_expect_eq(plan.domains[1].budget, cases[i].b1, "quota %u: domain 1 budget %u, want %u",
                     cases[i].quota, plan.domains[1].budget, cases[i].b1);
        nxr__plan_fini(&plan);
        nxr__topology_fini(&topo);
    }
}

Test(domains_plan, quota_that_fits_changes_nothing)
{
    struct nxr__plan plan;
    quota_plan(&plan);
    nxr__plan_fit_cpus(&plan, 6);
    expect_budgets(&plan, 4, NXR_BUDGET_LIMIT_NONE, 2, NXR_BUDGET_LIMIT_NONE);
    nxr__plan_fit_cpus(&plan, 0); /* no quota */
    nxr__plan_fit_cpus(&plan, 1000);
    expect_budgets(&plan, 4, NXR_BUDGET_LIMIT_NONE, 2, NXR_BUDGET_LIMIT_NONE);
    nxr__plan_fini(&plan);
}

Test(domains_plan, quota_marks_what_it_lowered_then_num_threads)
{
    struct nxr__plan plan;
    quota_plan(&plan);
    nxr__plan_fit_cpus(&plan, 3);
    expect_budgets(&plan, 2, NXR_BUDGET_LIMIT_QUOTA, 1, NXR_BUDGET_LIMIT_QUOTA);
    nxr__plan_cap_budgets(&plan, 1); /* NXR_NUM_THREADS=1 lowers domain 0 further */
    expect_budgets(&plan, 1, NXR_BUDGET_LIMIT_NUM_THREADS, 1, NXR_BUDGET_LIMIT_QUOTA);
    cr_expect_str_eq(nxr__budget_limit_name(NXR_BUDGET_LIMIT_QUOTA), "quota");
    cr_expect_str_eq(nxr__budget_limit_name(NXR_BUDGET_LIMIT_NUM_THREADS), "num_threads");
    cr_expect_null(nxr__budget_limit_name(NXR_BUDGET_LIMIT_NONE));
    nxr__plan_fini(&plan);
}

/* Declared budgets below their share stay as declared (never raised). */
Test(domains_plan, quota_never_raises_a_budget)
{
    load("pack:2 numa:1 core:2 pu:2", "0-3,4-5");
    struct nxr_domain_decl decls[2];
    hwloc_bitmap_t a = hwloc_bitmap_alloc(), b = hwloc_bitmap_alloc();
    hwloc_bitmap_list_sscanf(a, "0-3");
    hwloc_bitmap_list_sscanf(b, "4-5");
    nxr_domain_decl_init(&decls[0]);
    nxr_domain_decl_init(&decls[1]);
    decls[0] = (struct nxr_domain_decl){.id = 0, .cpus = a, .budget = 1};
    decls[1] = (struct nxr_domain_decl){.id = 1, .cpus = b, .budget = NXR_BUDGET_ALL};
    struct nxr__plan plan;
    cr_assert_eq(nxr__plan_declared(&plan, &topo, decls, 2, err, sizeof(err)), 0, "%s", err);
    expect_budgets(&plan, 1, NXR_BUDGET_LIMIT_DECLARED, 2, NXR_BUDGET_LIMIT_NONE);
    nxr__plan_fit_cpus(&plan, 3); /* the sum, 3, fits already */
    expect_budgets(&plan, 1, NXR_BUDGET_LIMIT_DECLARED, 2, NXR_BUDGET_LIMIT_NONE);
    nxr__plan_fit_cpus(&plan, 2); /* shares 1 (of 1.33) and 1 (of 0.67, raised to 1) */
    expect_budgets(&plan, 1, NXR_BUDGET_LIMIT_DECLARED, 1, NXR_BUDGET_LIMIT_QUOTA);
    nxr__plan_fini(&plan);
    hwloc_bitmap_free(a);
    hwloc_bitmap_free(b);
}

/* Declarations through the struct API are bounded as NXR_DOMAINS is. */
Test(domains_plan, the_declared_domain_count_is_bounded)
{
    load("pack:2 numa:1 core:2 pu:2", "0-7");
    const size_t n = NXR__DOMAINS_MAX + 1;
    struct nxr_domain_decl *decls = calloc(n, sizeof(*decls));
    hwloc_bitmap_t cpu = hwloc_bitmap_alloc();
    cr_assert(decls != NULL && cpu != NULL);
    hwloc_bitmap_only(cpu, 0);
    for (size_t i = 0; i < n; i++)
        decls[i] = (struct nxr_domain_decl){.id = (int)i, .cpus = cpu, .shared = true};
    struct nxr__plan plan;
    cr_expect_eq(nxr__plan_declared(&plan, &topo, decls, n, err, sizeof(err)), -EINVAL);
    cr_expect_neq(strstr(err, "at most 256 domains"), NULL, "%s", err);
    cr_assert_eq(nxr__plan_declared(&plan, &topo, decls, n - 1, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(plan.count, n - 1);
    nxr__plan_fini(&plan);
    hwloc_bitmap_free(cpu);
    free(decls);
}
