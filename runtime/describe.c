/*
 * nxr_runtime_describe: the diagnostics docs/contracts.md promises ("Errors,
 * ownership, diagnostics"), as text for people and as one JSON object for
 * tools, from one walk over the runtime's facts (base/emit.h): each
 * fact is named once, with its JSON key and how text shows it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal/lock_rank.h"
#include "domains/internal/cpuset.h"
#include "alloc/internal/huge_pages.h"
#include "alloc/internal/pool.h"
#include "runtime/internal/runtime.h"
#include "base/emit.h"
#include "base/internal/last_error.h"
#include "base/strbuf.h"

/* A CPU set: JSON's list of ids, text's CPU list ("0-3,8"); a
 * caller-managed domain has none (null, "(none)"). */
static void emit_cpus(struct nxr__emit *e, const char *key, hwloc_const_bitmap_t cpus)
{
    char list[1024];
    int cpu;
    if (cpus == NULL) {
        nxr__emit_null(e, key, "(none)");
        return;
    }
    /* Digits, commas and dashes: a template with nothing to fill. */
    nxr__emit_list(e, key, nxr__cpuset_list(cpus, list, sizeof(list)));
    hwloc_bitmap_foreach_begin(cpu, cpus)
    {
        nxr__emit_int(e, NULL, cpu, NULL);
    }
    hwloc_bitmap_foreach_end();
    nxr__emit_end(e);
}

static uint64_t placed(const struct nxr_domain *d, enum nxr_route_reason r)
{
    return atomic_load_explicit(&d->placed[r], memory_order_relaxed);
}

/* Open contexts of d; ctx_lock nests inside domains_lock (it is a leaf). */
static unsigned open_contexts(const nxr_runtime_t *rt, const struct nxr_domain *d)
{
    nxr__lock(&((nxr_runtime_t *)rt)->ctx_lock, NXR__RANK_RUNTIME_CTX);
    unsigned n = d->open_contexts;
    nxr__unlock(&((nxr_runtime_t *)rt)->ctx_lock, NXR__RANK_RUNTIME_CTX);
    return n;
}

static const char *const family_keys[NXR_FAMILY_COUNT] = {"gemm", "elementwise", "reduction",
                                                          "norm"};

/* The creation-time probe when the process had OpenBLAS then; else a probe
 * now, which loads it: a description was asked for. */
static const struct nxr_openblas_info *openblas_of(const nxr_runtime_t *rt,
                                                  struct nxr_openblas_info *tmp)
{
    if (rt->openblas.present)
        return &rt->openblas;
    nxr_openblas_probe(tmp);
    return tmp;
}

static const char *openblas_threading_name(enum nxr_openblas_threading t)
{
    switch (t) {
    case NXR_OPENBLAS_SEQUENTIAL:
        return "sequential";
    case NXR_OPENBLAS_PTHREADS:
        return "pthreads";
    case NXR_OPENBLAS_OPENMP:
        return "openmp";
    case NXR_OPENBLAS_UNKNOWN:
    default:
        return "unknown";
    }
}

static const char *rounding_name(enum nxr_rounding r)
{
    static const char *const names[] = {"nearest", "down", "up", "toward-zero"};
    return (unsigned)r < 4 ? names[r] : "unknown";
}

/* Why a budget is below the domain's CPU count, as text shows it. */
static const char *budget_why(const struct nxr_domain *d)
{
    switch (nxr__domain_limit_now(d)) {
    case NXR_BUDGET_LIMIT_QUOTA:
        return " (lowered by the CPU quota)";
    case NXR_BUDGET_LIMIT_NUM_THREADS:
        return " (lowered by NXR_NUM_THREADS)";
    case NXR_BUDGET_LIMIT_DECLARED:
        return " (as declared)";
    case NXR_BUDGET_LIMIT_NONE:
        break;
    }
    return "";
}

static void emit_topology(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    nxr__emit_object(e, "topology",
                     "topology: {source}, {nodes} NUMA node(s){numa}, {cpus} CPU(s), "
                     "allowed {allowed}\n");
    nxr__emit_str(e, "source", nxr__topology_source_name(rt->topo.source), NULL);
    nxr__emit_bool(e, "numa", rt->topo.has_numa,
                   rt->topo.has_numa ? "" : " (no NUMA information: one domain, no node)");
    nxr__emit_int(e, "nodes", rt->topo.node_count, NULL);
    nxr__emit_int(e, "cpus", rt->topo.cpu_count, NULL);
    emit_cpus(e, "allowed", rt->topo.allowed);
    nxr__emit_end(e);
}

/* The quota that applies; its source is said in text even when none does. */
static void emit_quota(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    /* The quota as last read (runtime/budget.c) and what following it did,
     * copied under quota_lock (the emitter copies every value it is given). */
    struct nxr__cpu_quota q;
    char why[sizeof(rt->budget_why)];
    nxr__lock(&((nxr_runtime_t *)rt)->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    q = rt->quota_now;
    uint64_t changes = rt->budget_changes;
    snprintf(why, sizeof(why), "%s", rt->budget_why);
    nxr__unlock(&((nxr_runtime_t *)rt)->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    if (q.cpus == 0 && changes == 0) {
        nxr__emit_null(e, "cpu_quota", q.source);
        return;
    }
    nxr__emit_object(e, "cpu_quota",
                     changes > 0 ? "{source}{budget_changes}{last_change}" : "{source}");
    nxr__emit_uint(e, "cpus", q.cpus, NULL);
    nxr__emit_str(e, "source", q.source, NULL);
    if (changes > 0) { /* only then: the object is as before for a quota never followed */
        nxr__emit_uint(e, "budget_changes", changes, "; the budgets followed it {} time(s)");
        nxr__emit_str(e, "last_change", why, ", last: {}");
    }
    nxr__emit_end(e);
}

static void emit_domain(const nxr_runtime_t *rt, const struct nxr_domain *d, struct nxr__emit *e)
{
    nxr__emit_object(e, NULL,
                     "  domain {id}: node {node}, cpus {cpus}, {admission}, placement {placement}, "
                     "{workers} worker(s), budget {budget}{budget_limited_by}, executor "
                     "{executor_owner}\n{pool}    placed calls: {placed}; open contexts {contexts}\n");
    nxr__emit_int(e, "id", d->spec.id, NULL);
    if (d->spec.node == NXR_NODE_NONE)
        nxr__emit_null(e, "node", "none");
    else
        nxr__emit_int(e, "node", d->spec.node, NULL);
    emit_cpus(e, "cpus", nxr_domain_cpuset(d));
    nxr__emit_str(e, "admission", nxr_admission_name(d->spec.admission), NULL);
    nxr__emit_str(e, "placement", nxr_placement_name(d->placement), NULL);
    nxr__emit_uint(e, "workers", nxr_domain_workers(d), NULL);
    nxr__emit_uint(e, "budget", nxr_domain_budget(d), NULL);
    nxr__emit_str(e, "executor_owner",
                  d->exec.executor.owner == NXR_EXECUTOR_OWNED_BY_NXR ? "nxr" : "caller", NULL);
    nxr__emit_str(e, "budget_limited_by", nxr__budget_limit_name(nxr__domain_limit_now(d)),
                  budget_why(d));
    nxr__emit_uint(e, "contexts", open_contexts(rt, d), NULL);
    nxr__pool_describe(d->pool, e);
    nxr__emit_object(e, "placed", "most-bytes {most_bytes}, tie {tie}, default {default}");
    nxr__emit_uint(e, "most_bytes", placed(d, NXR_ROUTE_REASON_MOST_BYTES), NULL);
    nxr__emit_uint(e, "tie", placed(d, NXR_ROUTE_REASON_TIE), NULL);
    nxr__emit_uint(e, "default", placed(d, NXR_ROUTE_REASON_DEFAULT), NULL);
    nxr__emit_end(e);
    nxr__emit_end(e);
}

/* Where calls go by their inputs (runtime/nxr_route.h): "route" since
 * schema 2; the same members under "placement", JSON only, for one release
 * (schema 1 readers), since "placement" now means only where threads and
 * memory are bound. */
static void emit_route_members(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    nxr__emit_str(e, "policy", nxr_route_policy_name(rt->settings.route), NULL);
    nxr__emit_int(e, "default_domain", rt->default_domain->spec.id, NULL);
    nxr__emit_uint(e, "refused_mixed",
                   atomic_load_explicit(&rt->refused_mixed, memory_order_relaxed), NULL);
}

static void emit_route(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    nxr__emit_object(e, "route",
                     "route: policy {policy}, default domain {default_domain}, refused as "
                     "mixed {refused_mixed}\n");
    emit_route_members(rt, e);
    nxr__emit_end(e);
    nxr__emit_object(e, "placement", NULL); /* the schema-1 key: JSON only */
    emit_route_members(rt, e);
    nxr__emit_end(e);
}

/* Other nxr processes seen at creation (runtime/runtime.c, peers_open). Without a
 * registry (then p->status says why) text names only the problem. */
static void emit_peers(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    const struct nxr__peers *p = &rt->peers;
    if (rt->settings.peers == NXR_PEERS_OFF) {
        nxr__emit_null(e, "peers", "peers: not looked for (NXR_PEERS=off)\n");
        return;
    }
    bool registry = p->dir[0] != '\0';
    nxr__emit_object(e, "peers",
                     registry ? "peers: {overlapping_count} runtime(s) of other processes share "
                                "this runtime's CPUs, {others} do not (registry {registry}; "
                                "{refused} entries refused, {stale} stale, {other_pidns} of other PID "
                                "namespaces unchecked){problem}\n{overlapping}"
                              : "peers: no registry ({problem})\n");
    nxr__emit_str(e, "registry", registry ? p->dir : NULL, NULL);
    nxr__emit_str(e, "problem", p->status != 0 ? p->detail : NULL,
                  p->status != 0 && registry ? "; {}" : NULL);
    nxr__emit_list(e, "overlapping", NULL);
    for (size_t i = 0; i < p->overlapping && i < NXR__PEERS_SHOWN; i++) {
        const struct nxr__peer *q = &p->shown[i];
        nxr__emit_object(e, NULL,
                         "  pid {pid}{same_process}: CPUs {cpus}, budget {budget}, shared with "
                         "this runtime: {shared}\n");
        nxr__emit_int(e, "pid", q->pid, NULL);
        nxr__emit_bool(e, "same_process", q->same_process,
                       q->same_process ? " (another copy of libnxr in this process)" : "");
        nxr__emit_uint(e, "budget", q->budget, NULL);
        nxr__emit_str(e, "cpus", q->cpus, NULL);
        nxr__emit_str(e, "shared", q->overlap, NULL);
        nxr__emit_end(e);
    }
    nxr__emit_end(e);
    nxr__emit_uint(e, "overlapping_count", p->overlapping, NULL);
    nxr__emit_uint(e, "others", p->others, NULL);
    nxr__emit_uint(e, "refused", p->refused, NULL);
    nxr__emit_uint(e, "stale", p->stale, NULL);
    nxr__emit_uint(e, "other_pidns", p->other_pidns, NULL);
    nxr__emit_end(e);
}

/* Providers per family, the policy, OpenBLAS as linked. */
static void emit_providers(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    /* Text: "providers (strict policy): gemm=... norm=...", one line. */
    char tmpl[256] = "providers ({policy} policy):", family[NXR_FAMILY_COUNT][32];
    for (int f = 0; f < NXR_FAMILY_COUNT; f++) {
        snprintf(family[f], sizeof(family[f]), " %s={name}", family_keys[f]);
        snprintf(tmpl + strlen(tmpl), sizeof(tmpl) - strlen(tmpl), "{%s}", family_keys[f]);
    }
    snprintf(tmpl + strlen(tmpl), sizeof(tmpl) - strlen(tmpl), "\n{openblas}");
    nxr__emit_object(e, "providers", tmpl);
    nxr__emit_str(e, "policy", rt->settings.policy == NXR_PROVIDER_STRICT ? "strict" : "exclusive",
                  NULL);
    for (int f = 0; f < NXR_FAMILY_COUNT; f++) {
        const nxr_provider_t *p = nxr_provider_bundle_get(rt->providers, f);
        nxr__emit_object(e, family_keys[f], family[f]);
        nxr__emit_str(e, "name", nxr_provider_name(p), NULL);
        nxr__emit_str(e, "count", nxr_count_control_name(nxr_provider_count_control(p)), NULL);
        nxr__emit_str(e, "runs_on", nxr_provider_runs_on_name(nxr_provider_runs_on(p)), NULL);
        nxr__emit_str(e, "placement", nxr_provider_runs_on_name(nxr_provider_runs_on(p)),
                      NULL); /* schema 1's key */
        nxr__emit_end(e);
    }
    struct nxr_openblas_info probed;
    const struct nxr_openblas_info *ob = openblas_of(rt, &probed);
    nxr__emit_object(e, "openblas",
                     "openblas: {threading}, {threads} thread(s), core {core}, {count} x "
                     "{runs_on}\n{diagnostic}");
    nxr__emit_bool(e, "present", ob->present, NULL);
    nxr__emit_str(e, "threading", openblas_threading_name(ob->threading), NULL);
    nxr__emit_int(e, "threads", ob->threads, NULL);
    nxr__emit_str(e, "core", ob->core, NULL);
    nxr__emit_str(e, "count", nxr_count_control_name(ob->count), NULL);
    nxr__emit_str(e, "runs_on", nxr_provider_runs_on_name(ob->runs_on), NULL);
    nxr__emit_str(e, "placement", nxr_provider_runs_on_name(ob->runs_on), NULL); /* schema 1 */
    nxr__emit_bool(e, "core_fallback", ob->core_fallback, NULL);
    nxr__emit_str(e, "diagnostic", ob->diagnostic, ob->core_fallback ? "  warning: {}\n" : "");
    nxr__emit_end(e);
    nxr__emit_end(e);
}

/* The floating-point environment recorded at creation; text only says it
 * when it is not the default. */
static void emit_fpenv(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    const struct nxr_fpenv *env = &rt->fpenv;
    bool ftz = nxr_fpenv_flush_to_zero(env), daz = nxr_fpenv_denormals_are_zero(env);
    nxr__emit_object(e, "fpenv",
                     nxr_fpenv_is_default(env)
                         ? ""
                         : "fpenv: not the default (flush-to-zero {flush_to_zero}, "
                           "denormals-are-zero {denormals_are_zero}, rounding {rounding})\n");
    nxr__emit_bool(e, "supported", env->supported, NULL);
    nxr__emit_bool(e, "default", nxr_fpenv_is_default(env), NULL);
    nxr__emit_bool(e, "flush_to_zero", ftz, ftz ? "on" : "off");
    nxr__emit_bool(e, "denormals_are_zero", daz, daz ? "on" : "off");
    nxr__emit_str(e, "rounding", rounding_name(nxr_fpenv_rounding(env)), NULL);
    nxr__emit_end(e);
}

static void emit_stalls(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    /* Relaxed: a counter. */
    uint64_t reported =
        atomic_load_explicit(&((nxr_runtime_t *)rt)->stall.reports, memory_order_relaxed);
    nxr__emit_object(e, "stalls",
                     rt->settings.stall_ms == 0
                         ? "stalls: reporting off, {reported} reported\n"
                         : "stalls: waits past {threshold_ms} ms reported, {reported} so far\n");
    nxr__emit_uint(e, "threshold_ms", rt->settings.stall_ms, NULL);
    nxr__emit_uint(e, "reported", reported, NULL);
    nxr__emit_end(e);
}

/* Huge pages for packed weights (runtime/nxr_weights.h): the setting and
 * the system's THP mode, which decides whether the advice gives any. */
static void emit_huge_pages(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    enum nxr__thp_mode mode = nxr__thp_mode();
    const char *weights = !rt->settings.huge_pages          ? "off"
                          : nxr__thp_mode_advisable(mode) ? "advised"
                                                          : "unavailable";
    nxr__emit_object(e, "huge_pages", "huge pages: packed weights {weights} (THP mode {thp})\n");
    nxr__emit_str(e, "weights", weights, NULL);
    nxr__emit_str(e, "thp", nxr__thp_mode_name(mode), NULL);
    nxr__emit_end(e);
}

/* The one walk: every fact once, in JSON's order; text's layout is in the
 * templates. */
static void describe(const nxr_runtime_t *rt, struct nxr__emit *e)
{
    nxr__emit_object(e, NULL,
                     "{topology}cpu quota: {cpu_quota}\n{domains}{route}{peers}{providers}"
                     "{fpenv}{stalls}{huge_pages}");
    /* 2: "route" and providers' "runs_on" (the schema-1 "placement" keys
     * stay one release, docs/api-1.0.md). JSON only. */
    nxr__emit_uint(e, "schema", 2, NULL);
    emit_topology(rt, e);
    emit_quota(rt, e);
    nxr__emit_list(e, "domains", "domains: {count}\n{items}");
    for (size_t i = 0; i < rt->domain_count; i++)
        emit_domain(rt, rt->domains[i], e);
    nxr__emit_end(e);
    emit_route(rt, e);
    emit_peers(rt, e);
    emit_providers(rt, e);
    emit_fpenv(rt, e);
    emit_stalls(rt, e);
    emit_huge_pages(rt, e);
    nxr__emit_end(e);
}

void nxr__runtime_stall_who(void *p, const struct nxr__exec *exec, struct nxr__strbuf *sb)
{
    nxr_runtime_t *rt = p;
    /* Lock order: domains_lock, then each exec->lock (in the stats call),
     * then the arbiter's leaf mutex. The waiter holds none of them. */
    nxr__lock(&rt->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    for (int pass = 0; pass < 2; pass++) {
        unsigned named = 0;
        nxr__strbuf_printf(sb, pass == 0 ? "; its CPUs are held by" : "; waiting for them");
        for (size_t i = 0; i < rt->domain_count; i++) {
            struct nxr__exec *e = &rt->domains[i]->exec;
            /* The domain itself, and those whose CPUs overlap it. */
            if (e != exec && (e->spec->cpus == NULL || exec->spec->cpus == NULL ||
                              !hwloc_bitmap_intersects(e->spec->cpus, exec->spec->cpus)))
                continue;
            struct nxr__admission_stats st;
            nxr__exec_admission_stats(e, &st);
            const bool acquiring = st.acquiring && !st.handing_over;
            /* A hand-over holds the permit with nothing of its own in
             * flight (its batches may all have ended): a holder, not a
             * waiter. */
            if (pass == 0 && (st.active > 0 || st.handing_over)) {
                nxr__strbuf_printf(sb, "%s domain %d (%u batch(es), %u region(s) in flight%s)",
                                   named++ ? "," : ":", e->spec->id, st.batches,
                                   st.active - st.batches,
                                   st.handing_over ? ", handing deferred batches over" : "");
            } else if (pass == 1 && (st.waiting > 0 || st.deferred > 0 || acquiring)) {
                nxr__strbuf_printf(sb,
                                   "%s domain %d (%u caller(s) in admission, %u deferred "
                                   "batch(es)%s)",
                                   named++ ? "," : ":", e->spec->id, st.waiting, st.deferred,
                                   acquiring ? ", acquiring the permit" : "");
            }
        }
        if (named == 0)
            nxr__strbuf_printf(sb, pass == 0 ? ": no domain of this runtime" : ": nobody else");
    }
    nxr__unlock(&rt->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    struct nxr__arbiter_stats as;
    nxr__arbiter_stats(rt->arbiter, &as);
    nxr__strbuf_printf(sb, "; process arbiter: %u permit(s) held%s, %u request(s) queued", as.holders,
                       as.exclusive_held ? " and the exclusive one (a provider call)" : "",
                       as.waiters);
}

int nxr_runtime_describe(const nxr_runtime_t *rt, enum nxr_describe_format format, char **out)
{
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (out == NULL || rt == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", out == NULL ? "out" : "rt");
    if (format != NXR_DESCRIBE_TEXT && format != NXR_DESCRIBE_JSON &&
        format != NXR_DESCRIBE_PROMETHEUS)
        return nxr__fail(-EINVAL, __func__, "format %d is not an enum nxr_describe_format",
                         (int)format);
    if (nxr__runtime_forked(rt)) /* its pools' and teams' locks may be a parent thread's */
        return nxr__fail(NXR_EFORKED, __func__,
                         "the runtime was created before this process forked");
    if (format == NXR_DESCRIBE_PROMETHEUS) { /* the counters' page: a walk of its own */
        int rc = nxr__runtime_metrics_take(rt, out);
        return rc == 0 ? 0 : nxr__fail(rc, __func__, "the metrics: %s", nxr_strerror(rc));
    }
    struct nxr__strbuf sb = {0};
    struct nxr__emit e;
    nxr__emit_init(&e, format == NXR_DESCRIBE_JSON ? NXR__EMIT_JSON : NXR__EMIT_TEXT, &sb);
    /* The table may grow under an attach. */
    nxr__lock(&((nxr_runtime_t *)rt)->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    describe(rt, &e);
    nxr__unlock(&((nxr_runtime_t *)rt)->domains_lock, NXR__RANK_RUNTIME_DOMAINS);
    int rc = nxr__strbuf_take(&sb, out);
    return rc == 0 ? 0 : nxr__fail(rc, __func__, "the description: %s", nxr_strerror(rc));
}
