/*
 * nxr_runtime_describe: the diagnostics of DESIGN.md, as text for people and
 * as one JSON object for tools. Both are produced from the same walk so they
 * cannot disagree.
 */
#include <errno.h>
#include <stdlib.h>

#include "domains/internal/cpuset.h"
#include "alloc/internal/pool.h"
#include "runtime/internal/runtime.h"
#include "runtime/internal/strbuf.h"

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

static void describe_json(const nxr_runtime_t *rt, struct nxr__strbuf *sb)
{
    nxr__strbuf_printf(sb,
                       "{\"topology\":{\"source\":\"%s\",\"numa\":%s,\"nodes\":%d,\"cpus\":%d,"
                       "\"allowed\":",
                       nxr__topology_source_name(rt->topo.source),
                       rt->topo.has_numa ? "true" : "false", rt->topo.node_count,
                       rt->topo.cpu_count);
    json_cpu_array(sb, rt->topo.allowed);
    nxr__strbuf_printf(sb, "},\"domains\":[");
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
        nxr__pool_describe(d->pool, sb, true);
        nxr__strbuf_printf(sb, "}");
    }
    nxr__strbuf_printf(sb, "]}\n");
}

static void describe_text(const nxr_runtime_t *rt, struct nxr__strbuf *sb)
{
    char list[1024];
    nxr__strbuf_printf(sb, "topology: %s, %d NUMA node(s)%s, %d CPU(s), allowed %s\n",
                       nxr__topology_source_name(rt->topo.source), rt->topo.node_count,
                       rt->topo.has_numa ? "" : " (no NUMA information: one domain, no node)",
                       rt->topo.cpu_count, nxr__cpuset_list(rt->topo.allowed, list, sizeof(list)));
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
                           ", cpus %s, %s, placement %s, %u worker(s), budget %u, executor %s\n",
                           cpus != NULL ? nxr__cpuset_list(cpus, list, sizeof(list)) : "(none)",
                           nxr_admission_name(d->spec.admission), nxr_placement_name(d->placement),
                           nxr_domain_workers(d), d->spec.budget, executor_owner(d));
        nxr__pool_describe(d->pool, sb, false);
    }
}

int nxr_runtime_describe(const nxr_runtime_t *rt, enum nxr_describe_format format, char **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (rt == NULL || (format != NXR_DESCRIBE_TEXT && format != NXR_DESCRIBE_JSON))
        return -EINVAL;
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
