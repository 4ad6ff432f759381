/*
 * nxr_runtime_describe: the diagnostics docs/contracts.md promises ("Errors,
 * ownership, diagnostics"), as text for people and as one JSON object for
 * tools. Both are produced from the same walk so they
 * cannot disagree.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "domains/internal/cpuset.h"
#include "alloc/internal/pool.h"
#include "runtime/internal/runtime.h"
#include "base/internal/strbuf.h"

static const char *executor_owner(const struct nxr_domain *d)
{
    return d->exec.executor.owner == NXR_EXECUTOR_OWNED_BY_NXR ? "nxr" : "caller";
}

static void json_cpu_array(struct nxr__strbuf *sb, hwloc_const_bitmap_t cpus)
{
    int cpu, first = 1;
    if (cpus == NULL) { /* caller-managed: no claim at all */
        nxr__strbuf_printf(sb, "null");
        return;
    }
    nxr__strbuf_printf(sb, "[");
    {
        hwloc_bitmap_foreach_begin(cpu, cpus)
        {
            nxr__strbuf_printf(sb, first ? "%d" : ",%d", cpu);
            first = 0;
        }
        hwloc_bitmap_foreach_end();
    }
    nxr__strbuf_printf(sb, "]");
}

static uint64_t placed(const struct nxr_domain *d, enum nxr_route_reason r)
{
    return atomic_load_explicit(&d->placed[r], memory_order_relaxed);
}

/* Open contexts of d; ctx_lock nests inside domains_lock (it is a leaf). */
static unsigned open_contexts(const nxr_runtime_t *rt, const struct nxr_domain *d)
{
    pthread_mutex_lock(&((nxr_runtime_t *)rt)->ctx_lock);
    unsigned n = d->open_contexts;
    pthread_mutex_unlock(&((nxr_runtime_t *)rt)->ctx_lock);
    return n;
}

static void placement_json(const nxr_runtime_t *rt, struct nxr__strbuf *sb)
{
    nxr__strbuf_printf(sb,
                       ",\"placement\":{\"policy\":\"%s\",\"default_domain\":%d,"
                       "\"refused_mixed\":%" PRIu64 "}",
                       nxr_route_policy_name(rt->settings.route),
                       rt->default_domain->spec.id,
                       (uint64_t)atomic_load_explicit(&rt->refused_mixed, memory_order_relaxed));
}

static const char *const family_keys[NXR_FAMILY_COUNT] = {"gemm", "elementwise", "reduction",
                                                          "norm"};

/* The creation-time probe when the process had OpenBLAS then; else a probe
 * now, which loads it: a description was asked for. */
static const struct nxr_openblas_info *openblas_of(const nxr_runtime_t *rt, struct nxr_openblas_info *tmp)
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

/* Providers per family, the policy, OpenBLAS as linked, and the
 * floating-point environment recorded at creation. */
static void providers_json(const nxr_runtime_t *rt, struct nxr__strbuf *sb)
{
    nxr__strbuf_printf(sb, ",\"providers\":{\"policy\":\"%s\"",
                       rt->settings.policy == NXR_PROVIDER_STRICT ? "strict" : "exclusive");
    for (int f = 0; f < NXR_FAMILY_COUNT; f++) {
        const nxr_provider_t *p = nxr_provider_bundle_get(rt->providers, f);
        nxr__strbuf_printf(sb, ",\"%s\":{\"name\":", family_keys[f]);
        nxr__strbuf_json_string(sb, nxr_provider_name(p));
        nxr__strbuf_printf(sb, ",\"count\":\"%s\",\"placement\":\"%s\"}",
                           nxr_count_control_name(nxr_provider_count_control(p)),
                           nxr_provider_runs_on_name(nxr_provider_runs_on(p)));
    }
    struct nxr_openblas_info probed;
    const struct nxr_openblas_info *ob = openblas_of(rt, &probed);
    nxr__strbuf_printf(sb,
                       ",\"openblas\":{\"present\":%s,\"threading\":\"%s\",\"threads\":%d,"
                       "\"core\":",
                       ob->present ? "true" : "false", openblas_threading_name(ob->threading),
                       ob->threads);
    nxr__strbuf_json_string(sb, ob->core);
    nxr__strbuf_printf(sb,
                       ",\"count\":\"%s\",\"placement\":\"%s\",\"core_fallback\":%s,"
                       "\"diagnostic\":",
                       nxr_count_control_name(ob->count),
                       nxr_provider_runs_on_name(ob->runs_on),
                       ob->core_fallback ? "true" : "false");
    nxr__strbuf_json_string(sb, ob->diagnostic);
    const struct nxr_fpenv *env = &rt->fpenv;
    nxr__strbuf_printf(sb,
                       "}},\"fpenv\":{\"supported\":%s,\"default\":%s,\"flush_to_zero\":%s,"
                       "\"denormals_are_zero\":%s,\"rounding\":\"%s\"}",
                       env->supported ? "true" : "false",
                       nxr_fpenv_is_default(env) ? "true" : "false",
                       nxr_fpenv_flush_to_zero(env) ? "true" : "false",
                       nxr_fpenv_denormals_are_zero(env) ? "true" : "false",
                       rounding_name(nxr_fpenv_rounding(env)));
}

static void providers_text(const nxr_runtime_t *rt, struct nxr__strbuf *sb)
{
    nxr__strbuf_printf(sb, "providers (%s policy):",
                       rt->settings.policy == NXR_PROVIDER_STRICT ? "strict" : "exclusive");
    for (int f = 0; f < NXR_FAMILY_COUNT; f++) {
        const nxr_provider_t *p = nxr_provider_bundle_get(rt->providers, f);
        nxr__strbuf_printf(sb, " %s=%s", family_keys[f], nxr_provider_name(p));
    }
    struct nxr_openblas_info probed;
    const struct nxr_openblas_info *ob = openblas_of(rt, &probed);
    nxr__strbuf_printf(sb, "\nopenblas: %s, %d thread(s), core %s, %s x %s\n",
                       openblas_threading_name(ob->threading), ob->threads, ob->core,
                       nxr_count_control_name(ob->count),
                       nxr_provider_runs_on_name(ob->runs_on));
    if (ob->core_fallback)
        nxr__strbuf_printf(sb, "  warning: %s\n", ob->diagnostic);
    if (!nxr_fpenv_is_default(&rt->fpenv))
        nxr__strbuf_printf(sb,
                           "fpenv: not the default (flush-to-zero %s, denormals-are-zero %s, "
                           "rounding %s)\n",
                           nxr_fpenv_flush_to_zero(&rt->fpenv) ? "on" : "off",
                           nxr_fpenv_denormals_are_zero(&rt->fpenv) ? "on" : "off",
                           rounding_name(nxr_fpenv_rounding(&rt->fpenv)));
}

static unsigned long long stalls_reported(const nxr_runtime_t *rt)
{
    /* Relaxed: a counter. */
    return atomic_load_explicit(&((nxr_runtime_t *)rt)->stall.reports, memory_order_relaxed);
}

/* Other nxr processes seen at creation (runtime/peers.c). */
static void peers_json(const nxr_runtime_t *rt, struct nxr__strbuf *sb)
{
    const struct nxr__peers *p = &rt->peers;
    if (rt->settings.peers == NXR_PEERS_OFF) {
        nxr__strbuf_printf(sb, ",\"peers\":null");
        return;
    }
    nxr__strbuf_printf(sb, ",\"peers\":{\"registry\":");
    if (p->dir[0] != '\0')
        nxr__strbuf_json_string(sb, p->dir);
    else
        nxr__strbuf_printf(sb, "null");
    nxr__strbuf_printf(sb, ",\"problem\":");
    if (p->status != 0)
        nxr__strbuf_json_string(sb, p->detail);
    else
        nxr__strbuf_printf(sb, "null");
    nxr__strbuf_printf(sb, ",\"overlapping\":[");
    for (size_t i = 0; i < p->overlapping && i < NXR__PEERS_SHOWN; i++) {
        const struct nxr__peer *q = &p->shown[i];
        nxr__strbuf_printf(sb, "%s{\"pid\":%d,\"budget\":%u,\"cpus\":", i ? "," : "",
                           (int)q->pid, q->budget);
        nxr__strbuf_json_string(sb, q->cpus);
        nxr__strbuf_printf(sb, ",\"shared\":");
        nxr__strbuf_json_string(sb, q->overlap);
        nxr__strbuf_printf(sb, "}");
    }
    nxr__strbuf_printf(sb,
                       "],\"overlapping_count\":%zu,\"others\":%zu,\"refused\":%zu,"
                       "\"stale\":%zu}",
                       p->overlapping, p->others, p->refused, p->stale);
}

static void peers_text(const nxr_runtime_t *rt, struct nxr__strbuf *sb)
{
    const struct nxr__peers *p = &rt->peers;
    if (rt->settings.peers == NXR_PEERS_OFF) {
        nxr__strbuf_printf(sb, "peers: not looked for (NXR_PEERS=off)\n");
        return;
    }
    if (p->dir[0] == '\0') {
        nxr__strbuf_printf(sb, "peers: no registry (%s)\n", p->detail);
        return;
    }
    nxr__strbuf_printf(sb,
                       "peers: %zu runtime(s) of other processes share this runtime's CPUs, %zu "
                       "do not (registry %s; %zu entries refused, %zu stale)%s%s\n",
                       p->overlapping, p->others, p->dir, p->refused, p->stale,
                       p->status != 0 ? "; " : "", p->status != 0 ? p->detail : "");
    for (size_t i = 0; i < p->overlapping && i < NXR__PEERS_SHOWN; i++)
        nxr__strbuf_printf(sb, "  pid %d: CPUs %s, budget %u, shared with this runtime: %s\n",
                           (int)p->shown[i].pid, p->shown[i].cpus, p->shown[i].budget,
                           p->shown[i].overlap);
}

static void describe_json(const nxr_runtime_t *rt, struct nxr__strbuf *sb)
{
    nxr__strbuf_printf(sb,
                       "{\"topology\":{\"source\":\"%s\",\"numa\":%s,\"nodes\":%d,\"cpus\":%d,"
                       "\"allowed\":",
                       nxr__topology_source_name(rt->topo.source),
                       rt->topo.has_numa ? "true" : "false", rt->topo.node_count,
                       rt->topo.cpu_count);
    json_cpu_array(sb, rt->topo.allowed);
    nxr__strbuf_printf(sb, "},\"cpu_quota\":");
    if (rt->quota.cpus == 0) {
        nxr__strbuf_printf(sb, "null");
    } else {
        nxr__strbuf_printf(sb, "{\"cpus\":%u,\"source\":", rt->quota.cpus);
        nxr__strbuf_json_string(sb, rt->quota.source);
        nxr__strbuf_printf(sb, "}");
    }
    nxr__strbuf_printf(sb, ",\"domains\":[");
    for (size_t i = 0; i < rt->domain_count; i++) {
        const struct nxr_domain *d = rt->domains[i];
        nxr__strbuf_printf(sb, "%s{\"id\":%d,\"node\":", i ? "," : "", d->spec.id);
        if (d->spec.node == NXR_NODE_NONE)
            nxr__strbuf_printf(sb, "null");
        else
            nxr__strbuf_printf(sb, "%d", d->spec.node);
        nxr__strbuf_printf(sb, ",\"cpus\":");
        json_cpu_array(sb, nxr_domain_cpuset(d));
        nxr__strbuf_printf(sb,
                           ",\"admission\":\"%s\",\"placement\":\"%s\",\"workers\":%u,"
                           "\"budget\":%u,\"executor_owner\":\"%s\"",
                           nxr_admission_name(d->spec.admission), nxr_placement_name(d->placement),
                           nxr_domain_workers(d), d->spec.budget, executor_owner(d));
        const char *limit = nxr__budget_limit_name(d->spec.limited_by);
        nxr__strbuf_printf(sb, ",\"budget_limited_by\":");
        if (limit != NULL)
            nxr__strbuf_json_string(sb, limit);
        else
            nxr__strbuf_printf(sb, "null");
        nxr__strbuf_printf(sb, ",\"contexts\":%u", open_contexts(rt, d));
        nxr__pool_describe(d->pool, sb, true);
        nxr__strbuf_printf(sb,
                           ",\"placed\":{\"most_bytes\":%" PRIu64 ",\"tie\":%" PRIu64
                           ",\"default\":%" PRIu64 "}}",
                           placed(d, NXR_ROUTE_REASON_MOST_BYTES), placed(d, NXR_ROUTE_REASON_TIE),
                           placed(d, NXR_ROUTE_REASON_DEFAULT));
    }
    nxr__strbuf_printf(sb, "]");
    placement_json(rt, sb);
    peers_json(rt, sb);
    providers_json(rt, sb);
    nxr__strbuf_printf(sb, ",\"stalls\":{\"threshold_ms\":%u,\"reported\":%llu}",
                       rt->settings.stall_ms, stalls_reported(rt));
    nxr__strbuf_printf(sb, "}\n");
}

/* Why a budget is below the domain's CPU count, for the text report. */
static const char *budget_why(const struct nxr_domain *d)
{
    switch (d->spec.limited_by) {
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

static void describe_text(const nxr_runtime_t *rt, struct nxr__strbuf *sb)
{
    char list[1024];
    nxr__strbuf_printf(sb, "topology: %s, %d NUMA node(s)%s, %d CPU(s), allowed %s\n",
                       nxr__topology_source_name(rt->topo.source), rt->topo.node_count,
                       rt->topo.has_numa ? "" : " (no NUMA information: one domain, no node)",
                       rt->topo.cpu_count, nxr__cpuset_list(rt->topo.allowed, list, sizeof(list)));
    nxr__strbuf_printf(sb, "cpu quota: %s\n", rt->quota.source);
    nxr__strbuf_printf(sb, "domains: %zu\n", rt->domain_count);
    for (size_t i = 0; i < rt->domain_count; i++) {
        const struct nxr_domain *d = rt->domains[i];
        hwloc_const_bitmap_t cpus = nxr_domain_cpuset(d);
        nxr__strbuf_printf(sb, "  domain %d: node ", d->spec.id);
        if (d->spec.node == NXR_NODE_NONE)
            nxr__strbuf_printf(sb, "none");
        else
            nxr__strbuf_printf(sb, "%d", d->spec.node);
        nxr__strbuf_printf(sb,
                           ", cpus %s, %s, placement %s, %u worker(s), budget %u%s, executor %s\n",
                           cpus != NULL ? nxr__cpuset_list(cpus, list, sizeof(list)) : "(none)",
                           nxr_admission_name(d->spec.admission), nxr_placement_name(d->placement),
                           nxr_domain_workers(d), d->spec.budget, budget_why(d), executor_owner(d));
        nxr__pool_describe(d->pool, sb, false);
        nxr__strbuf_printf(sb,
                           "    placed calls: most-bytes %" PRIu64 ", tie %" PRIu64
                           ", default %" PRIu64 "; open contexts %u\n",
                           placed(d, NXR_ROUTE_REASON_MOST_BYTES), placed(d, NXR_ROUTE_REASON_TIE),
                           placed(d, NXR_ROUTE_REASON_DEFAULT), open_contexts(rt, d));
    }
    nxr__strbuf_printf(sb,
                       "placement: policy %s, default domain %d, refused as mixed %" PRIu64 "\n",
                       nxr_route_policy_name(rt->settings.route), rt->default_domain->spec.id,
                       (uint64_t)atomic_load_explicit(&rt->refused_mixed, memory_order_relaxed));
    peers_text(rt, sb);
    providers_text(rt, sb);
    if (rt->settings.stall_ms == 0)
        nxr__strbuf_printf(sb, "stalls: reporting off, %llu reported\n", stalls_reported(rt));
    else
        nxr__strbuf_printf(sb, "stalls: waits past %u ms reported, %llu so far\n",
                           rt->settings.stall_ms, stalls_reported(rt));
}

void nxr__runtime_stall_who(void *p, const struct nxr__exec *exec, struct nxr__strbuf *sb)
{
    nxr_runtime_t *rt = p;
    /* Lock order: domains_lock, then each exec->lock (in the stats call),
     * then the arbiter's leaf mutex. The waiter holds none of them. */
    pthread_mutex_lock(&rt->domains_lock);
    for (int pass = 0; pass < 2; pass++) {
        unsigned named = 0;
        nxr__strbuf_printf(sb, pass == 0 ? "; its CPUs are held by" : "; waiting for them");
        for (size_t i = 0; i < rt->domain_count; i++) {
            struct nxr__exec *e = &rt->domains[i]->exec;
            /* The domain itself, and those whose CPUs overlap it. */
            if (e != exec && (e->cpus == NULL || exec->cpus == NULL ||
                              !hwloc_bitmap_intersects(e->cpus, exec->cpus)))
                continue;
            struct nxr__admission_stats st;
            nxr__exec_admission_stats(e, &st);
            if (pass == 0 && st.active > 0) {
                nxr__strbuf_printf(sb, "%s domain %d (%u batch(es), %u region(s) in flight)",
                                   named++ ? "," : ":", e->domain_id, st.batches,
                                   st.active - st.batches);
            } else if (pass == 1 && (st.waiting > 0 || st.deferred > 0 || st.acquiring)) {
                nxr__strbuf_printf(sb, "%s domain %d (%u caller(s) in admission, %u deferred "
                                       "batch(es)%s)",
                                   named++ ? "," : ":", e->domain_id, st.waiting, st.deferred,
                                   st.acquiring ? ", acquiring the permit" : "");
            }
        }
        if (named == 0)
            nxr__strbuf_printf(sb, pass == 0 ? ": no domain of this runtime" : ": nobody else");
    }
    pthread_mutex_unlock(&rt->domains_lock);
    struct nxr__arbiter_stats as;
    nxr__arbiter_stats(rt->arbiter, &as);
    nxr__strbuf_printf(sb, "; process arbiter: %u permit(s) held%s, %u request(s) queued", as.holders,
                       as.exclusive_held ? " and the exclusive one (a provider call)" : "",
                       as.waiters);
}

int nxr_runtime_describe(const nxr_runtime_t *rt, enum nxr_describe_format format, char **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (rt == NULL || (format != NXR_DESCRIBE_TEXT && format != NXR_DESCRIBE_JSON))
        return -EINVAL;
    if (nxr__runtime_forked(rt))
        return NXR_EFORKED; /* its pools' and teams' locks may be a parent thread's */
    struct nxr__strbuf sb = {0};
    /* The table may grow under an attach. */
    pthread_mutex_lock(&((nxr_runtime_t *)rt)->domains_lock);
    if (format == NXR_DESCRIBE_JSON)
        describe_json(rt, &sb);
    else
        describe_text(rt, &sb);
    pthread_mutex_unlock(&((nxr_runtime_t *)rt)->domains_lock);
    return nxr__strbuf_take(&sb, out);
}
