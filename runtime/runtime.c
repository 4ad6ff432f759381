/*
 * Runtime creation and destruction.
 *
 * Creation is staged so that a failure at any step unwinds everything before
 * it: settings -> topology -> domain plan (all validation) -> a reference
 * to the process's arbiter -> providers -> domains (admission state) ->
 * pools -> teams. No thread starts before the plan is complete and valid.
 * Last, the runtime's entry in the peer registry.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/registry.h"
#include "domains/internal/cpuset.h"
#include "runtime/internal/ctx.h"
#include "kernels/internal/openblas.h"
#include "runtime/internal/runtime.h"
#include "base/internal/last_error.h"
#include "base/internal/sys.h"

/*
 * The runtime in the peer registry (domains/internal/peers.h): after its
 * teams started, a runtime publishes the CPUs its managed domains cover and
 * their budgets' sum, reads the entries of other processes' runtimes, and
 * under NXR_PEERS=warn says on stderr when any overlap its own CPUs: two
 * processes whose teams share CPUs compete for them and neither arbiter
 * sees the other (docs/deployment.md). Nothing here changes a budget. Never
 * fails; the entry is removed at destroy (nxr__peers_close).
 */
static void peers_open(nxr_runtime_t *rt)
{
    if (rt->settings.peers == NXR_PEERS_OFF)
        return;
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    if (cpus == NULL)
        return;
    unsigned budget = 0;
    for (size_t i = 0; i < rt->domain_count; i++) {
        hwloc_bitmap_or(cpus, cpus, rt->domains[i]->spec.cpus);
        budget += rt->domains[i]->spec.budget;
    }
    nxr__peers_open(&rt->peers, rt->settings.peers_dir, cpus, budget, true);
    hwloc_bitmap_free(cpus);
    const struct nxr__peers *p = &rt->peers;
    if (rt->settings.peers != NXR_PEERS_WARN)
        return;
    /* A directory that exists and is refused (another user's: anyone can
     * make /dev/shm/nxr-peers-<uid> for someone else) turns the registry
     * off for this user until it is removed: worth more than a line in
     * nxr info. */
    if (p->dir_refused)
        fprintf(stderr,
                "nxr: warning: the peer registry is off for this runtime (%s); remove or fix "
                "that directory, or set NXR_PEERS=quiet\n",
                p->detail);
    /* Another copy of libnxr loaded in this process (its own arbiter). */
    size_t copies = 0;
    for (size_t i = 0; i < p->overlapping && i < NXR__PEERS_SHOWN; i++) {
        const struct nxr__peer *q = &p->shown[i];
        if (!q->same_process)
            continue;
        copies++;
        fprintf(stderr,
                "nxr: warning: another copy of libnxr loaded in this process (pid %d) has a "
                "runtime over CPUs %s (budget %u, shared %s): the two copies' arbiters do not "
                "see each other, so their teams compete for those CPUs; load one libnxr per "
                "process (docs/deployment.md) or set NXR_PEERS=quiet\n",
                (int)q->pid, q->cpus, q->budget, q->overlap);
    }
    if (p->overlapping == copies)
        return;
    const struct nxr__peer *first = &p->shown[0];
    for (size_t i = 0; i < p->overlapping && i < NXR__PEERS_SHOWN; i++)
        if (!p->shown[i].same_process) {
            first = &p->shown[i];
            break;
        }
    fprintf(stderr,
            "nxr: warning: %zu runtime(s) of other processes use this runtime's CPUs (pid %d: "
            "CPUs %s, budget %u, shared %s%s): their teams and this one's compete for those "
            "CPUs; bind each process to CPUs of its own (docs/deployment.md) or set "
            "NXR_PEERS=quiet\n",
            p->overlapping - copies, (int)first->pid, first->cpus, first->budget, first->overlap,
            p->overlapping - copies > 1 ? "; nxr info lists the others" : "");
}

static int build_plan(struct nxr__plan *plan, const nxr_runtime_t *rt,
                      const struct nxr_runtime_opts *opts, char *err, size_t errsz)
{
    if (opts->domain_decls != NULL)
        return nxr__plan_declared(plan, &rt->topo, opts->domain_decls, opts->domain_decl_count, err,
                                  errsz);
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

int nxr__runtime_add_domain(nxr_runtime_t *rt, struct nxr_domain *d)
{
    if (rt->domain_count == rt->domain_cap) {
        size_t cap = rt->domain_cap ? rt->domain_cap * 2 : 4;
        struct nxr_domain **table =
            nxr__fault_hit(NXR_FAULT_ALLOC) ? NULL : realloc(rt->domains, cap * sizeof(*table));
        if (table == NULL)
            return -ENOMEM;
        rt->domains = table;
        rt->domain_cap = cap;
    }
    rt->domains[rt->domain_count++] = d;
    return 0;
}

void nxr__domain_free(struct nxr_domain *d)
{
    nxr__team_destroy(d->team);
    /* The reference an attach took (none for the built-in team's). */
    nxr__exec_drop_executor(&d->exec);
    if (d->admission_ready)
        nxr__exec_admission_fini(&d->exec);
    if (d->spec.cpus != NULL)
        hwloc_bitmap_free(d->spec.cpus);
    free(d);
}

/* Moves the plan's specs into managed domains with their admission state. */
static int adopt_plan(nxr_runtime_t *rt, struct nxr__plan *plan)
{
    int rc = 0;
    size_t i = 0;
    for (; i < plan->count && rc == 0; i++) {
        struct nxr_domain *d = nxr__calloc(1, sizeof(*d));
        if (d == NULL) {
            rc = -ENOMEM;
            break;
        }
        d->spec = plan->domains[i];
        plan->domains[i].cpus = NULL; /* the domain owns it now */
        d->rt = rt;
        d->placement = NXR_PLACEMENT_VERIFIED;
        d->exec.spec = &d->spec; /* the plan's admission: MANAGED */
        d->exec.stall = &rt->stall;
        rc = nxr__exec_admission_init(&d->exec, rt->arbiter);
        d->admission_ready = rc == 0;
        if (rc == 0)
            rc = nxr__runtime_add_domain(rt, d);
        if (rc != 0)
            nxr__domain_free(d);
    }
    return rc;
}

/*
 * The oversubscription guard: a team spins between regions only when it has
 * its CPUs to itself. When another domain's set overlaps its own (allowed
 * only where arbitration keeps them from running at once) or the team is
 * larger than its set, a spinning worker would steal the CPU from the thread
 * that has work, so its workers park at once.
 */
unsigned nxr__team_spin_for(const nxr_runtime_t *rt, const struct nxr_domain *d)
{
    if (d->spec.budget > (unsigned)hwloc_bitmap_weight(d->spec.cpus))
        return 0;
    for (size_t i = 0; i < rt->domain_count; i++) {
        const struct nxr_domain *other = rt->domains[i];
        if (other != d && other->spec.cpus != NULL &&
            hwloc_bitmap_intersects(other->spec.cpus, d->spec.cpus))
            return 0;
    }
    return rt->settings.spin;
}

/* The bundle: the caller's providers, else native, except that NXR_GEMM
 * selects OpenBLAS for GEMM. Also the environment and OpenBLAS as found. */
static int make_providers(nxr_runtime_t *rt, const struct nxr_runtime_opts *opts)
{
    struct nxr_provider_bundle_opts bopts;
    nxr_provider_bundle_opts_init(&bopts);
    for (int f = 0; f < NXR_FAMILY_COUNT; f++)
        bopts.providers[f] = opts->providers[f];
    nxr_provider_t *openblas = NULL;
    if (bopts.providers[NXR_FAMILY_GEMM] == NULL && rt->settings.gemm_openblas) {
        int rc = nxr_provider_openblas_create(&openblas);
        if (rc != 0)
            return rc;
        bopts.providers[NXR_FAMILY_GEMM] = openblas;
    }
    int rc = nxr_provider_bundle_create(&bopts, &rt->providers);
    nxr_provider_destroy(openblas); /* the bundle holds its own reference */
    nxr_fpenv_get(&rt->fpenv);
    /* Only an OpenBLAS the process already has: loading one would start its
     * threads in every process that links nxr (kernels/openblas.c). */
    nxr__openblas_probe_loaded(&rt->openblas);
    return rc;
}

static int start_teams(nxr_runtime_t *rt, char *err, size_t errsz)
{
    for (size_t i = 0; i < rt->domain_count; i++) {
        struct nxr_domain *d = rt->domains[i];
        struct nxr__team_opts topts = {
            .domain_id = d->spec.id,
            .size = d->spec.budget,
            .spin = nxr__team_spin_for(rt, d),
        };
        int rc = nxr__team_create(&d->team, d->spec.cpus, &topts, err, errsz);
        if (rc != 0)
            return rc;
        nxr__exec_use_team(&d->exec, d->team);
    }
    return 0;
}

static void display_env(const nxr_runtime_t *rt)
{
    char list[256], spin[16] = "adaptive";
    if (rt->settings.spin != NXR_SPIN_DEFAULT)
        snprintf(spin, sizeof(spin), "%u", rt->settings.spin);
    fprintf(stderr,
            "NXR: topology=%s numa=%s allowed=%s domains=%zu NXR_NUM_THREADS=%u NXR_SPIN=%s\n",
            nxr__topology_source_name(rt->topo.source), rt->topo.has_numa ? "yes" : "no",
            nxr__cpuset_list(rt->topo.allowed, list, sizeof(list)), rt->domain_count,
            rt->settings.num_threads, spin);
    for (size_t i = 0; i < rt->domain_count; i++) {
        const struct nxr_domain *d = rt->domains[i];
        fprintf(stderr, "NXR: domain %d node %d cpus %s budget %u %s\n", d->spec.id, d->spec.node,
                nxr__cpuset_list(d->spec.cpus, list, sizeof(list)), d->spec.budget,
                nxr_admission_name(d->spec.admission));
    }
}

/* Every failed create explains itself: the stage's own message, or (out of
 * memory deep in a stage) the status. */
static int explain(int rc, char *err, size_t errsz)
{
    if (err[0] == '\0')
        snprintf(err, errsz, "runtime creation failed: %s", nxr_strerror(rc));
    return rc;
}

/* nxr_runtime_create; every stage writes its detail into err. */
static int create(const struct nxr_runtime_opts *opts, nxr_runtime_t **out, char *err, size_t errsz)
{
    struct nxr_runtime_opts defaults;
    *out = NULL;
    if (opts == NULL) {
        nxr_runtime_opts_init(&defaults);
        opts = &defaults;
    }

    nxr_runtime_t *rt = nxr__calloc(1, sizeof(*rt));
    if (rt == NULL)
        return explain(-ENOMEM, err, errsz);
    rt->magic = NXR__HANDLE_LIVE;
    nxr__fork_watch();
    rt->fork_gen = nxr__fork_generation();
    int rc = nxr__mutex_init(&rt->domains_lock);
    if (rc != 0) {
        free(rt);
        return explain(rc, err, errsz);
    }
    if ((rc = nxr__mutex_init(&rt->ctx_lock)) != 0) {
        pthread_mutex_destroy(&rt->domains_lock);
        free(rt);
        return explain(rc, err, errsz);
    }
    if ((rc = nxr__mutex_init(&rt->quota_lock)) != 0) {
        pthread_mutex_destroy(&rt->domains_lock);
        pthread_mutex_destroy(&rt->ctx_lock);
        free(rt);
        return explain(rc, err, errsz);
    }
    atomic_init(&rt->refused_mixed, 0);
    struct nxr__plan plan = {0};
    rc = nxr__settings_resolve(&rt->settings, opts, err, errsz);
    if (rc != 0)
        goto out_free;
    rt->stall.after_ns = (uint64_t)rt->settings.stall_ms * 1000000u;
    atomic_init(&rt->stall.reports, 0);
    rt->stall.who = nxr__runtime_stall_who;
    rt->stall.who_ctx = rt;
    rc = nxr__topology_load(&rt->topo, rt->settings.topology, opts->allowed_cpus, err, errsz);
    if (rc != 0)
        goto out_free;
    rc = build_plan(&plan, rt, opts, err, errsz);
    if (rc != 0)
        goto out_topology;
    /* The allowed set sized the plan; the quota, then NXR_NUM_THREADS,
     * lower it (each only lowers). */
    nxr__runtime_fit_quota(rt, &plan);
    rt->quota_now = rt->quota; /* what the budgets follow from here on */
    nxr__plan_cap_budgets(&plan, rt->settings.num_threads);
    /* The process's arbiter, shared with every other runtime of the process:
     * permits (the exclusive one included) exclude across runtimes. */
    rc = nxr__arbiter_process_get(&rt->arbiter);
    if (rc != 0)
        goto out_plan;
    rc = make_providers(rt, opts);
    if (rc != 0)
        goto out_arbiter;
    rc = nxr__registry_create(&rt->registry);
    if (rc != 0) {
        nxr__plan_fini(&plan);
        goto out_destroy;
    }
    rc = adopt_plan(rt, &plan);
    nxr__plan_fini(&plan); /* what was not adopted */
    if (rc != 0)
        goto out_destroy;
    for (size_t i = 0; i < rt->domain_count; i++) {
        if (rt->default_domain == NULL || rt->domains[i]->spec.id < rt->default_domain->spec.id)
            rt->default_domain = rt->domains[i];
    }
    rc = nxr__runtime_pools_create(rt, err, errsz);
    if (rc != 0)
        goto out_destroy;
    rc = start_teams(rt, err, errsz);
    if (rc != 0)
        goto out_destroy;
    if (rt->settings.display_env)
        display_env(rt);
    rc = nxr__runtime_quota_follow_start(rt);
    if (rc != 0) {
        snprintf(err, errsz, "could not start the CPU quota follower (NXR_QUOTA_FOLLOW_MS): %s",
                 nxr_strerror(rc));
        goto out_destroy;
    }
    peers_open(rt);             /* last: a failed create leaves no entry */
    nxr__runtime_page_open(rt); /* beside the entry, when there is one */
    *out = rt;
    return 0;

out_destroy:
    nxr_runtime_destroy(rt); /* joins the teams that did start */
    return explain(rc, err, errsz);
out_arbiter:
    nxr_provider_bundle_destroy(rt->providers);
    nxr__arbiter_process_put(rt->arbiter);
out_plan:
    nxr__plan_fini(&plan);
out_topology:
    nxr__topology_fini(&rt->topo);
out_free:
    pthread_mutex_destroy(&rt->domains_lock);
    pthread_mutex_destroy(&rt->ctx_lock);
    pthread_mutex_destroy(&rt->quota_lock);
    free(rt);
    return explain(rc, err, errsz);
}

int nxr_runtime_create(const struct nxr_runtime_opts *opts, nxr_runtime_t **out)
{
    nxr__call_begin();
    if (out == NULL)
        return nxr__fail(-EINVAL, __func__, "out is NULL");
    /* Aside, not in the slot: a stage may make calls that empty it. */
    char err[NXR__LAST_ERROR_BYTES] = "";
    int rc = create(opts, out, err, sizeof(err));
    return rc == 0 ? 0 : nxr__fail(rc, __func__, "%s", err);
}

/* Waits until no domain has an operation in flight. A job may submit to
 * another domain, so passes repeat until one finds every domain idle. */
static void drain_all(nxr_runtime_t *rt)
{
    bool waited;
    do {
        waited = false;
        for (size_t i = 0; i < rt->domain_count; i++) {
            if (rt->domains[i]->admission_ready && nxr__exec_drain(&rt->domains[i]->exec))
                waited = true;
        }
    } while (waited);
}

/* Contexts still open at destroy are a caller bug whose next use would touch
 * freed memory: checked builds stop here; others say so and orphan them, so
 * that the late nxr_ctx_destroy this bug usually comes with is harmless. */
static void report_open_contexts(nxr_runtime_t *rt)
{
    char where[256];
    size_t open = nxr__ctx_orphan_all(rt, where, sizeof(where));
    if (open == 0)
        return;
    fprintf(stderr,
            "nxr: runtime %p destroyed with %zu context(s) still open (%s); destroy every "
            "context before its runtime (runtime/nxr.h)%s\n",
            (void *)rt, open, where,
            NXR__CHECKED_BUILD ? "" : "; they are orphaned: later calls on them are NXR_EBROKEN");
    if (NXR__CHECKED_BUILD)
        abort();
}

/*
 * Destroying a runtime inherited through fork, in the child. Its workers do
 * not exist here (nothing to join or drain), and any of its locks may have
 * been held by a parent thread at the fork (the team's, the pools', the
 * registry's, ctx_lock, domains_lock): nothing here takes one. What is freed
 * needs no lock and is referenced by nothing that can still run: the domain
 * table, the topology, the providers' references and the runtime itself
 * (inherited contexts check the generation before they look at it). What is
 * left allocated, because freeing it would take a lock, touch the parent's
 * workers or pull memory from under a context: the domains (contexts still
 * open point at them: nxr_ctx_domain, nxr_ctx_budget), the teams, the pools
 * and their arenas (the memory mapped for them stays mapped), the registry,
 * and the contexts still open (nxr_ctx_destroy frees each).
 */
static void destroy_inherited(nxr_runtime_t *rt)
{
    free(rt->domains);
    nxr_provider_bundle_destroy(rt->providers);
    /* The arbiter reference is not put: the child's process arbiter was
     * reset at the fork and never held this one (domains/process_arbiter.c). */
    nxr__topology_fini(&rt->topo);
    rt->magic = NXR__HANDLE_DEAD;
    free(rt);
}

void nxr_runtime_destroy(nxr_runtime_t *rt)
{
    if (rt == NULL)
        return;
    NXR__HANDLE_CHECK(rt, "runtime");
    if (nxr__runtime_forked(rt)) {
        destroy_inherited(rt);
        return;
    }
    if (nxr__tls.depth > 0) {
        /* Inside a body (a task, a chunk, a provider call on a worker or a
         * joining caller): the drain below would wait for the operation
         * running this very call. Refused, reported, nothing changed. */
        fprintf(stderr,
                "nxr: nxr_runtime_destroy(%p) called inside a body of domain %d: refused "
                "(NXR_EREENTRANT: it would wait for the operation running it); the runtime is "
                "left as it was, destroy it from outside every body (runtime/nxr.h)\n",
                (void *)rt, nxr__tls.exec != NULL ? nxr__tls.exec->spec->id : -1);
        if (NXR__CHECKED_BUILD)
            abort();
        return;
    }
    nxr__runtime_quota_follow_stop(rt); /* before the domains it moves go */
    nxr__peers_close(&rt->peers);
    /* Drained first: a task still running may use its client's context. */
    drain_all(rt);
    report_open_contexts(rt);
    for (size_t i = 0; i < rt->domain_count; i++) {
        nxr__team_destroy(rt->domains[i]->team);
        rt->domains[i]->team = NULL;
    }
    nxr__runtime_page_close(rt); /* no operation can end any more */
    /* After every team: no worker can release a buffer any more. */
    (void)nxr__runtime_pools_destroy(rt);
    for (size_t i = 0; i < rt->domain_count; i++)
        nxr__domain_free(rt->domains[i]);
    free(rt->domains);
    nxr__registry_destroy(rt->registry); /* every arena is destroyed or detached */
    nxr_provider_bundle_destroy(rt->providers);
    nxr__arbiter_process_put(rt->arbiter);
    nxr__topology_fini(&rt->topo);
    pthread_mutex_destroy(&rt->domains_lock);
    pthread_mutex_destroy(&rt->ctx_lock);
    pthread_mutex_destroy(&rt->quota_lock);
    nxr__handle_retire(&rt->magic, rt);
}
