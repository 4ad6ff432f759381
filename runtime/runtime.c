/*
 * Runtime creation and destruction.
 *
 * Creation is staged so that a failure at any step unwinds everything before
 * it: settings -> topology -> domain plan (all validation) -> pools ->
 * teams. No thread starts before the plan is complete and valid.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domains/internal/cpuset.h"
#include "runtime/internal/runtime.h"
#include "runtime/internal/sys.h"

static int build_plan(struct nxr__plan *plan, const nxr_runtime_t *rt,
                      const struct nxr_runtime_opts *opts, char *err, size_t errsz)
{
    if (opts->domain_decls != NULL)
        return nxr__plan_declared(plan, &rt->topo, opts->domain_decls, opts->domain_decl_count,
                                  err, errsz);
    if (rt->settings.domains == NULL)
        return nxr__plan_default(plan, &rt->topo, err, errsz);

    struct nxr_domain_decl *decls;
    size_t n;
    int rc = nxr__decls_parse(rt->settings.domains, &decls, &n, err, errsz);
    if (rc != 0)
        return rc;
    rc = nxr__plan_declared(plan, &rt->topo, decls, n, err, errsz);
    nxr__decls_free(decls, n);
    return rc;
}

/* Moves the plan's specs into the runtime's domain array. */
static int adopt_plan(nxr_runtime_t *rt, struct nxr__plan *plan)
{
    rt->domains = nxr__calloc(plan->count, sizeof(*rt->domains));
    if (rt->domains == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < plan->count; i++) {
        rt->domains[i].spec = plan->domains[i];
        rt->domains[i].rt = rt;
        rt->domains[i].placement = NXR_PLACEMENT_VERIFIED;
    }
    rt->domain_count = plan->count;
    free(plan->domains); /* the bitmaps now belong to rt->domains */
    memset(plan, 0, sizeof(*plan));
    return 0;
}

static int start_teams(nxr_runtime_t *rt, char *err, size_t errsz)
{
    for (size_t i = 0; i < rt->domain_count; i++) {
        struct nxr_domain *d = &rt->domains[i];
        if (d->spec.admission != NXR_ADMISSION_MANAGED)
            continue;
        struct nxr__team_opts topts = {
            .domain_id = d->spec.id,
            .size = d->spec.budget,
            .spin = rt->settings.spin,
        };
        int rc = nxr__team_create(&d->team, d->spec.cpus, &topts, err, errsz);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void display_env(const nxr_runtime_t *rt)
{
    char list[256];
    fprintf(stderr, "NXR: topology=%s numa=%s allowed=%s domains=%zu NXR_NUM_THREADS=%u NXR_SPIN=%u\n",
            nxr__topology_source_name(rt->topo.source), rt->topo.has_numa ? "yes" : "no",
            nxr__cpuset_list(rt->topo.allowed, list, sizeof(list)), rt->domain_count,
            rt->settings.num_threads, rt->settings.spin);
    for (size_t i = 0; i < rt->domain_count; i++) {
        const struct nxr_domain *d = &rt->domains[i];
        fprintf(stderr, "NXR: domain %d node %d cpus %s budget %u %s\n", d->spec.id, d->spec.node,
                nxr__cpuset_list(d->spec.cpus, list, sizeof(list)), d->spec.budget,
                nxr_admission_name(d->spec.admission));
    }
}

int nxr_runtime_create(nxr_runtime_t **out, const struct nxr_runtime_opts *opts)
{
    struct nxr_runtime_opts defaults;
    char scratch[512];
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (opts == NULL) {
        nxr_runtime_opts_init(&defaults);
        opts = &defaults;
    }
    char *err = opts->errbuf != NULL && opts->errbuf_size > 0 ? opts->errbuf : scratch;
    size_t errsz = err == scratch ? sizeof(scratch) : opts->errbuf_size;
    err[0] = '\0';

    nxr_runtime_t *rt = nxr__calloc(1, sizeof(*rt));
    if (rt == NULL)
        return -ENOMEM;
    struct nxr__plan plan = {0};
    int rc = nxr__settings_resolve(&rt->settings, opts, err, errsz);
    if (rc != 0)
        goto out_free;
    rc = nxr__topology_load(&rt->topo, rt->settings.topology, opts->allowed_cpus, err, errsz);
    if (rc != 0)
        goto out_free;
    rc = build_plan(&plan, rt, opts, err, errsz);
    if (rc != 0)
        goto out_topology;
    nxr__plan_cap_budgets(&plan, rt->settings.num_threads);
    rc = adopt_plan(rt, &plan);
    if (rc != 0)
        goto out_plan;
    rc = nxr__runtime_pools_create(rt, err, errsz);
    if (rc != 0)
        goto out_destroy;
    rc = start_teams(rt, err, errsz);
    if (rc != 0)
        goto out_destroy;
    if (rt->settings.display_env)
        display_env(rt);
    *out = rt;
    return 0;

out_destroy:
    nxr_runtime_destroy(rt); /* joins the teams that did start */
    return rc;
out_plan:
    nxr__plan_fini(&plan);
out_topology:
    nxr__topology_fini(&rt->topo);
out_free:
    free(rt);
    return rc;
}

void nxr_runtime_destroy(nxr_runtime_t *rt)
{
    if (rt == NULL)
        return;
    for (size_t i = 0; i < rt->domain_count; i++) {
        nxr__team_destroy(rt->domains[i].team);
        hwloc_bitmap_free(rt->domains[i].spec.cpus);
    }
    /* After the teams: no worker can release a buffer any more. */
    (void)nxr__runtime_pools_destroy(rt);
    free(rt->domains);
    nxr__topology_fini(&rt->topo);
    free(rt);
}
