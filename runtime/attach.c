/*
 * Attaching external executors: a host's pool becomes a domain, cooperative
 * (declared CPU set, arbitrated) or caller-managed (no set, guarded).
 * Everything is validated before anything is allocated or retained, so a
 * failed attach leaves the runtime exactly as it was.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/pool.h"
#include "base/internal/lock_rank.h"
#include "domains/internal/cpuset.h"
#include "runtime/internal/runtime.h"
#include "base/internal/last_error.h"
#include "base/internal/sys.h"

void nxr_external_decl_init(struct nxr_external_decl *decl)
{
    memset(decl, 0, sizeof(*decl));
    decl->admission = NXR_ADMISSION_CALLER_MANAGED;
    decl->budget = NXR_BUDGET_ALL;
}

static int validate_executor(const struct nxr_executor *ex, int id, char *err, size_t errsz)
{
    const char *why = nxr__executor_broken_rule(ex);
    if (why == NULL)
        return 0;
    snprintf(err, errsz, "external domain %d: executor %s", id, why);
    return NXR_EEXECUTOR;
}

static int validate_cpus(const nxr_runtime_t *rt, const struct nxr_external_decl *decl, char *err,
                         size_t errsz)
{
    char list[256];
    if (decl->admission == NXR_ADMISSION_CALLER_MANAGED) {
        if (decl->cpus == NULL)
            return 0;
        snprintf(err, errsz, "external domain %d: a caller-managed domain declares no CPU set",
                 decl->id);
        return -EINVAL;
    }
    if (decl->cpus == NULL || hwloc_bitmap_iszero(decl->cpus)) {
        snprintf(err, errsz, "external domain %d: a cooperative domain needs a non-empty CPU set",
                 decl->id);
        return NXR_EEMPTYSET;
    }
    if (!hwloc_bitmap_isincluded(decl->cpus, rt->topo.allowed)) {
        snprintf(err, errsz, "external domain %d: CPUs '%s' reach outside the allowed set",
                 decl->id, nxr__cpuset_list(decl->cpus, list, sizeof(list)));
        return NXR_EDISALLOWED;
    }
    return 0;
}

static int validate(const nxr_runtime_t *rt, const struct nxr_external_decl *decl, char *err,
                    size_t errsz)
{
    if (decl->id < 0 || (decl->admission != NXR_ADMISSION_COOPERATIVE &&
                         decl->admission != NXR_ADMISSION_CALLER_MANAGED)) {
        snprintf(err, errsz, "external domain %d: bad id or admission mode", decl->id);
        return -EINVAL;
    }
    int rc = validate_executor(&decl->executor, decl->id, err, errsz);
    if (rc == 0)
        rc = validate_cpus(rt, decl, err, errsz);
    if (rc != 0)
        return rc;
    unsigned limit = decl->executor.workers;
    if (decl->cpus != NULL && (unsigned)hwloc_bitmap_weight(decl->cpus) < limit)
        limit = (unsigned)hwloc_bitmap_weight(decl->cpus);
    if (decl->budget != NXR_BUDGET_ALL && (decl->budget <= 0 || (unsigned)decl->budget > limit)) {
        snprintf(err, errsz, "external domain %d: budget %d, allowed 1..%u", decl->id, decl->budget,
                 limit);
        return NXR_EBUDGET;
    }
    for (size_t i = 0; i < rt->domain_count; i++) {
        if (rt->domains[i]->spec.id == decl->id) {
            snprintf(err, errsz, "external domain %d: the id is taken", decl->id);
            return NXR_EDUPID;
        }
    }
    return 0;
}

/* A cooperative pool on CPUs a managed team spins on would be starved by the
 * spinning: those teams park at once from now on. */
static void quiet_overlapping_teams(nxr_runtime_t *rt, hwloc_const_bitmap_t cpus)
{
    for (size_t i = 0; cpus != NULL && i < rt->domain_count; i++) {
        struct nxr_domain *d = rt->domains[i];
        if (d->team != NULL && hwloc_bitmap_intersects(d->spec.cpus, cpus))
            nxr__team_set_spin(d->team, 0);
    }
}

/* nxr_runtime_attach, its detail written into err. */
static int attach(nxr_runtime_t *rt, const struct nxr_external_decl *decl, char *err, size_t errsz)
{
    if (rt == NULL || decl == NULL) {
        snprintf(err, errsz, "%s is NULL", rt == NULL ? "rt" : "decl");
        return -EINVAL;
    }
    NXR__HANDLE_CHECK(rt, "runtime");
    if (nxr__runtime_forked(rt)) {
        snprintf(err, errsz, "the runtime was created before this process forked");
        return NXR_EFORKED;
    }
    nxr__lock(&rt->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    int rc = validate(rt, decl, err, errsz);
    if (rc != 0)
        goto out_unlock;
    struct nxr_domain *d = nxr__calloc(1, sizeof(*d));
    rc = -ENOMEM;
    if (d == NULL)
        goto out_unlock;
    bool coop = decl->admission == NXR_ADMISSION_COOPERATIVE;
    d->rt = rt;
    d->spec.id = decl->id;
    d->spec.admission = decl->admission;
    d->spec.budget =
        decl->budget == NXR_BUDGET_ALL ? decl->executor.workers : (unsigned)decl->budget;
    if (coop && d->spec.budget > (unsigned)hwloc_bitmap_weight(decl->cpus))
        d->spec.budget = (unsigned)hwloc_bitmap_weight(decl->cpus);
    d->spec.cpus = coop ? nxr__cpuset_dup(decl->cpus) : NULL;
    d->spec.node = coop ? nxr__topology_node_of(&rt->topo, decl->cpus) : NXR_NODE_NONE;
    d->placement = coop ? NXR_PLACEMENT_DECLARED : NXR_PLACEMENT_NONE;
    nxr__exec_use_attached(&d->exec, &decl->executor);
    d->exec.spec = &d->spec;
    d->exec.stall = &rt->stall;
    if (coop && d->spec.cpus == NULL)
        goto out_free;
    rc = nxr__exec_admission_init(&d->exec, rt->arbiter);
    if (rc != 0)
        goto out_free;
    d->admission_ready = true;
    /* Memory on behalf of the domain: bound to its node when it has one. */
    struct nxr__pool_opts popts = {
        .domain_id = d->spec.id,
        .node = d->spec.node,
        .cap_bytes = rt->settings.pool_cap,
        .registry = rt->registry,
    };
    rc = nxr__pool_create(&d->pool, &popts, err, errsz);
    if (rc != 0)
        goto out_free;
    rc = nxr__runtime_add_domain(rt, d);
    if (rc != 0)
        goto out_free;
    /* Held until nxr__domain_free releases it, after the domain drained. */
    nxr__exec_hold_executor(&d->exec);
    quiet_overlapping_teams(rt, d->spec.cpus);
    /* nxr top sees it from now on (it cannot fail: no page, no entry). */
    nxr__runtime_page_add_domain(rt, d);
    nxr__unlock(&rt->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    return 0;

out_free:
    nxr__pool_destroy(d->pool); /* fresh and unused: nothing outstanding */
    nxr__domain_free(d);
out_unlock:
    nxr__unlock(&rt->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    return rc;
}

int nxr_runtime_attach(nxr_runtime_t *rt, const struct nxr_external_decl *decl)
{
    nxr__call_begin();
    char err[NXR__LAST_ERROR_BYTES] = "";
    int rc = attach(rt, decl, err, sizeof(err));
    if (rc == 0)
        return 0;
    return nxr__fail(rc, __func__, "%s", err[0] != '\0' ? err : nxr_strerror(rc));
}
