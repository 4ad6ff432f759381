/*
 * Domain planning and validation (see internal/plan.h).
 */
#include "domains/internal/plan.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domains/internal/cpuset.h"
#include "base/internal/sys.h"
#include "base/nxr_status.h"

#define LIST_MAX 256 /* room for a CPU list in an error message */

void nxr_domain_decl_init(struct nxr_domain_decl *decl)
{
    decl->id = 0;
    decl->cpus = NULL;
    decl->budget = NXR_BUDGET_ALL;
    decl->shared = false;
}

const char *nxr_admission_name(enum nxr_admission mode)
{
    switch (mode) {
    case NXR_ADMISSION_MANAGED:
        return "managed";
    case NXR_ADMISSION_COOPERATIVE:
        return "cooperative";
    case NXR_ADMISSION_CALLER_MANAGED:
        return "caller-managed";
    }
    return "unknown";
}

const char *nxr_placement_name(enum nxr_placement placement)
{
    switch (placement) {
    case NXR_PLACEMENT_VERIFIED:
        return "verified";
    case NXR_PLACEMENT_DECLARED:
        return "declared";
    case NXR_PLACEMENT_NONE:
        return "none";
    }
    return "unknown";
}

static int plan_reserve(struct nxr__plan *plan, size_t n)
{
    memset(plan, 0, sizeof(*plan));
    plan->domains = nxr__calloc(n > 0 ? n : 1, sizeof(*plan->domains));
    return plan->domains == NULL ? -ENOMEM : 0;
}

/* Appends a domain owning a copy of cpus. */
static int plan_append(struct nxr__plan *plan, int id, int node, hwloc_const_bitmap_t cpus,
                       unsigned budget)
{
    hwloc_bitmap_t copy = nxr__cpuset_dup(cpus);
    if (copy == NULL)
        return -ENOMEM;
    plan->domains[plan->count++] = (struct nxr__domain_spec){
        .id = id,
        .node = node,
        .cpus = copy,
        .budget = budget,
        .admission = NXR_ADMISSION_MANAGED,
    };
    return 0;
}

void nxr__plan_fini(struct nxr__plan *plan)
{
    for (size_t i = 0; i < plan->count; i++)
        hwloc_bitmap_free(plan->domains[i].cpus);
    free(plan->domains);
    memset(plan, 0, sizeof(*plan));
}

const char *nxr__budget_limit_name(enum nxr__budget_limit limit)
{
    switch (limit) {
    case NXR_BUDGET_LIMIT_NONE:
        return NULL;
    case NXR_BUDGET_LIMIT_DECLARED:
        return "declared";
    case NXR_BUDGET_LIMIT_QUOTA:
        return "quota";
    case NXR_BUDGET_LIMIT_NUM_THREADS:
        return "num_threads";
    }
    return "unknown";
}

void nxr__plan_cap_budgets(struct nxr__plan *plan, unsigned cap)
{
    for (size_t i = 0; cap > 0 && i < plan->count; i++) {
        if (plan->domains[i].budget > cap) {
            plan->domains[i].budget = cap;
            plan->domains[i].limited_by = NXR_BUDGET_LIMIT_NUM_THREADS;
        }
    }
}

void nxr__plan_fit_cpus(struct nxr__plan *plan, unsigned cpus)
{
    uint64_t sum = 0, total = 0;
    for (size_t i = 0; i < plan->count; i++) {
        sum += plan->domains[i].budget;
        total += (unsigned)hwloc_bitmap_weight(plan->domains[i].cpus);
    }
    if (cpus == 0 || sum <= cpus || total == 0)
        return;
    /* Shares by largest remainder; a plan holds a handful of domains, so
     * the remainders are handed out by repeated scans. */
    uint64_t given = 0;
    unsigned *share = calloc(plan->count, sizeof(*share));
    uint64_t *rest = calloc(plan->count, sizeof(*rest));
    if (share == NULL || rest == NULL) {
        /* Out of memory for two small arrays: one thread per domain still
         * fits any quota that the plan's domain count fits. */
        for (size_t i = 0; i < plan->count; i++) {
            if (plan->domains[i].budget > 1) {
                plan->domains[i].budget = 1;
                plan->domains[i].limited_by = NXR_BUDGET_LIMIT_QUOTA;
            }
        }
        free(share);
        free(rest);
        return;
    }
    for (size_t i = 0; i < plan->count; i++) {
        uint64_t scaled = (uint64_t)cpus * (unsigned)hwloc_bitmap_weight(plan->domains[i].cpus);
        share[i] = (unsigned)(scaled / total);
        rest[i] = scaled % total;
        if (share[i] == 0) {
            share[i] = 1;
            rest[i] = 0;
        }
        given += share[i];
    }
    for (; given < cpus; given++) {
        size_t best = 0;
        for (size_t i = 1; i < plan->count; i++) {
            if (rest[i] > rest[best])
                best = i;
        }
        share[best]++;
        rest[best] = 0;
    }
    for (size_t i = 0; i < plan->count; i++) {
        if (plan->domains[i].budget > share[i]) {
            plan->domains[i].budget = share[i];
            plan->domains[i].limited_by = NXR_BUDGET_LIMIT_QUOTA;
        }
    }
    free(share);
    free(rest);
}

int nxr__plan_default(struct nxr__plan *plan, const struct nxr__topology *topo, char *err,
                      size_t errsz)
{
    int rc = plan_reserve(plan, topo->has_numa ? (size_t)topo->node_count : 1);
    if (rc != 0)
        return rc;
    hwloc_bitmap_t cpus = nxr__cpuset_alloc();
    if (cpus == NULL) {
        rc = -ENOMEM;
        goto out_fail;
    }
    if (!topo->has_numa) {
        /* No NUMA information: one domain over everything allowed, and no
         * node claimed for it. */
        hwloc_bitmap_and(cpus, hwloc_topology_get_topology_cpuset(topo->hw), topo->allowed);
        if (!hwloc_bitmap_iszero(cpus))
            rc = plan_append(plan, 0, NXR_NODE_NONE, cpus, (unsigned)hwloc_bitmap_weight(cpus));
    } else {
        hwloc_obj_t node = NULL;
        while (rc == 0 &&
               (node = hwloc_get_next_obj_by_type(topo->hw, HWLOC_OBJ_NUMANODE, node)) != NULL) {
            if (node->cpuset == NULL)
                continue;
            hwloc_bitmap_and(cpus, node->cpuset, topo->allowed);
            if (hwloc_bitmap_iszero(cpus))
                continue; /* a node with no allowed CPU yields no domain */
            rc = plan_append(plan, (int)node->os_index, (int)node->os_index, cpus,
                             (unsigned)hwloc_bitmap_weight(cpus));
        }
    }
    hwloc_bitmap_free(cpus);
    if (rc != 0)
        goto out_fail;
    if (plan->count == 0) {
        char list[LIST_MAX];
        snprintf(err, errsz, "no NUMA node has an allowed CPU (allowed set: '%s')",
                 nxr__cpuset_list(topo->allowed, list, sizeof(list)));
        rc = NXR_ENODOMAIN;
        goto out_fail;
    }
    return 0;

out_fail:
    nxr__plan_fini(plan);
    return rc;
}

static int validate_one(const struct nxr__topology *topo, const struct nxr_domain_decl *d,
                        char *err, size_t errsz)
{
    char list[LIST_MAX];
    if (d->id < 0) {
        snprintf(err, errsz, "domain id %d: ids must be >= 0", d->id);
        return -EINVAL;
    }
    if (d->cpus == NULL || hwloc_bitmap_iszero(d->cpus)) {
        snprintf(err, errsz, "domain %d: empty CPU set", d->id);
        return NXR_EEMPTYSET;
    }
    if (!hwloc_bitmap_isincluded(d->cpus, topo->allowed)) {
        hwloc_bitmap_t outside = nxr__cpuset_alloc();
        if (outside == NULL)
            return -ENOMEM;
        hwloc_bitmap_andnot(outside, d->cpus, topo->allowed);
        snprintf(err, errsz, "domain %d: CPUs '%s' are outside the allowed set", d->id,
                 nxr__cpuset_list(outside, list, sizeof(list)));
        hwloc_bitmap_free(outside);
        return NXR_EDISALLOWED;
    }
    int weight = hwloc_bitmap_weight(d->cpus);
    if (d->budget != NXR_BUDGET_ALL && (d->budget <= 0 || d->budget > weight)) {
        snprintf(err, errsz, "domain %d: budget %d, but CPUs '%s' allow 1..%d", d->id, d->budget,
                 nxr__cpuset_list(d->cpus, list, sizeof(list)), weight);
        return NXR_EBUDGET;
    }
    return 0;
}

static int validate_pairs(const struct nxr_domain_decl *decls, size_t n, char *err, size_t errsz)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            if (decls[i].id == decls[j].id) {
                snprintf(err, errsz, "domain id %d is declared twice (declarations %zu and %zu)",
                         decls[i].id, i, j);
                return NXR_EDUPID;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            if (decls[i].shared || decls[j].shared ||
                !hwloc_bitmap_intersects(decls[i].cpus, decls[j].cpus))
                continue; /* an overlap by intent is the arbiter's to keep apart */
            char list[LIST_MAX];
            hwloc_bitmap_t shared = nxr__cpuset_alloc();
            if (shared == NULL)
                return -ENOMEM;
            hwloc_bitmap_and(shared, decls[i].cpus, decls[j].cpus);
            snprintf(err, errsz, "managed domains %d and %d overlap on CPUs '%s'", decls[i].id,
                     decls[j].id, nxr__cpuset_list(shared, list, sizeof(list)));
            hwloc_bitmap_free(shared);
            return NXR_EOVERLAP;
        }
    }
    return 0;
}

int nxr__plan_declared(struct nxr__plan *plan, const struct nxr__topology *topo,
                       const struct nxr_domain_decl *decls, size_t n, char *err, size_t errsz)
{
    memset(plan, 0, sizeof(*plan));
    if (n == 0 || decls == NULL) {
        snprintf(err, errsz, "no domain declared");
        return NXR_ENODOMAIN;
    }
    if (n > NXR__DOMAINS_MAX) {
        snprintf(err, errsz, "%zu domains declared; nxr takes at most %d domains", n,
                 NXR__DOMAINS_MAX);
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = validate_one(topo, &decls[i], err, errsz);
        if (rc != 0)
            return rc;
    }
    int rc = validate_pairs(decls, n, err, errsz);
    if (rc != 0)
        return rc;

    rc = plan_reserve(plan, n);
    if (rc != 0)
        return rc;
    plan->declared = true;
    for (size_t i = 0; i < n; i++) {
        const struct nxr_domain_decl *d = &decls[i];
        unsigned weight = (unsigned)hwloc_bitmap_weight(d->cpus);
        unsigned budget = d->budget == NXR_BUDGET_ALL ? weight : (unsigned)d->budget;
        rc = plan_append(plan, d->id, nxr__topology_node_of(topo, d->cpus), d->cpus, budget);
        if (rc == 0 && budget < weight)
            plan->domains[plan->count - 1].limited_by = NXR_BUDGET_LIMIT_DECLARED;
        if (rc != 0) {
            nxr__plan_fini(plan);
            return rc;
        }
    }
    return 0;
}
