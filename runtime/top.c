/*
 * nxr_top_read (runtime/nxr_top.h): the counters pages of every runtime of
 * this user (domains/internal/stats_page.h) into the caller's arrays, and
 * which of their domains share CPUs across processes.
 */
#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal/last_error.h"
#include "domains/internal/cpuset.h"
#include "domains/internal/peers.h"
#include "domains/internal/plan.h"
#include "domains/internal/stats_page.h"
#include "runtime/nxr_top.h"

/* The smallest sizes a caller may pass: the first version's structs. */
#define TOP_V1_SIZE     (offsetof(struct nxr_top, other_pidns) + sizeof(size_t))
#define RUNTIME_V1_SIZE (offsetof(struct nxr_top_runtime, domain_count) + sizeof(size_t))
#define DOMAIN_V1_SIZE  (offsetof(struct nxr_top_domain, weight_bytes) + sizeof(uint64_t))

void nxr_top_init(struct nxr_top *t, struct nxr_top_runtime *runtimes, size_t runtime_cap,
                  struct nxr_top_domain *domains, size_t domain_cap)
{
    if (t == NULL)
        return;
    memset(t, 0, sizeof(*t));
    t->size = sizeof(*t);
    t->runtime_size = sizeof(struct nxr_top_runtime);
    t->domain_size = sizeof(struct nxr_top_domain);
    t->runtimes = runtimes;
    t->runtime_cap = runtime_cap;
    t->domains = domains;
    t->domain_cap = domain_cap;
}

struct reading {
    struct nxr_top *t;
    /* This library's view of what it filled (the caller's structs may be
     * smaller): the pid of each filled domain, and the domains themselves. */
    struct nxr_top_domain *domains;
    int *pids;
    size_t filled;
};

static void put_domain(struct reading *r, const struct nxr__page_domain *p, int pid)
{
    struct nxr_top *t = r->t;
    if (t->domain_count++ >= t->domain_cap)
        return;
    struct nxr_top_domain d;
    memset(&d, 0, sizeof(d));
    d.id = p->id;
    d.node = p->node;
    d.workers = p->workers;
    d.budget = p->budget;
    d.budget_created = p->budget_created;
    const char *why = nxr__budget_limit_name((enum nxr__budget_limit)p->limited_by);
    snprintf(d.budget_limit, sizeof(d.budget_limit), "%s", why != NULL ? why : "");
    snprintf(d.cpus, sizeof(d.cpus), "%s", p->cpus);
    d.regions = p->regions;
    d.tasks = p->tasks;
    d.busy_ns = p->busy_ns;
    d.spin_ns = p->spin_ns;
    d.admission_waits = p->admission_waits;
    d.admission_wait_ns = p->admission_wait_ns;
    d.weight_bytes = p->weight_bytes;
    r->domains[r->filled] = d;
    r->pids[r->filled] = pid;
    r->filled++;
}

static void take(void *arg, const struct nxr__page *c, bool answered, unsigned serial)
{
    struct reading *r = arg;
    struct nxr_top *t = r->t;
    size_t first = t->domain_count < t->domain_cap ? t->domain_count : t->domain_cap;
    for (uint32_t i = 0; i < c->domain_count; i++)
        put_domain(r, &c->domains[i], c->pid);
    if (t->runtime_count++ >= t->runtime_cap)
        return;
    struct nxr_top_runtime rt;
    memset(&rt, 0, sizeof(rt));
    rt.pid = c->pid;
    rt.serial = serial;
    snprintf(rt.command, sizeof(rt.command), "%s", c->command);
    rt.sampled_ns = c->sampled_ns;
    rt.answered = answered;
    rt.cpu_quota = c->cpu_quota;
    rt.stalls = c->stalls;
    rt.domain_first = first;
    rt.domain_filled = (t->domain_count < t->domain_cap ? t->domain_count : t->domain_cap) - first;
    rt.domain_count = c->domain_count;
    size_t sz = t->runtime_size < sizeof(rt) ? t->runtime_size : sizeof(rt);
    memcpy((char *)t->runtimes + (t->runtime_count - 1) * t->runtime_size, &rt, sz);
}

/* Appends "pid P: CPUS" to d->overlap for every other process's domain
 * sharing CPUs with d. */
static int overlaps(struct reading *r)
{
    hwloc_bitmap_t *sets = calloc(r->filled > 0 ? r->filled : 1, sizeof(*sets));
    hwloc_bitmap_t shared = hwloc_bitmap_alloc();
    int rc = sets == NULL || shared == NULL ? -ENOMEM : 0;
    for (size_t i = 0; rc == 0 && i < r->filled; i++) {
        sets[i] = hwloc_bitmap_alloc();
        if (sets[i] == NULL)
            rc = -ENOMEM;
        else if (nxr__cpuset_parse_into(r->domains[i].cpus, sets[i], "page", NULL, 0) != 0)
            hwloc_bitmap_zero(sets[i]); /* a list cut short: compared as none */
    }
    for (size_t i = 0; rc == 0 && i < r->filled; i++) {
        struct nxr_top_domain *d = &r->domains[i];
        for (size_t j = 0; j < r->filled; j++) {
            if (r->pids[j] == r->pids[i])
                continue;
            hwloc_bitmap_and(shared, sets[i], sets[j]);
            if (hwloc_bitmap_iszero(shared))
                continue;
            char list[64];
            hwloc_bitmap_list_snprintf(list, sizeof(list), shared);
            size_t used = strlen(d->overlap);
            snprintf(d->overlap + used, sizeof(d->overlap) - used, "%spid %d: %s",
                     used > 0 ? "; " : "", r->pids[j], list);
        }
    }
    for (size_t i = 0; sets != NULL && i < r->filled; i++)
        if (sets[i] != NULL)
            hwloc_bitmap_free(sets[i]);
    free(sets);
    if (shared != NULL)
        hwloc_bitmap_free(shared);
    return rc;
}

int nxr_top_read(const char *dir, unsigned wait_ms, struct nxr_top *t)
{
    nxr__call_begin();
    if (t == NULL)
        return nxr__fail(-EINVAL, __func__, "t is NULL");
    if (t->size < TOP_V1_SIZE)
        return nxr__fail(-EINVAL, __func__,
                         "t->size is %zu, below the first version's %zu (call nxr_top_init first)",
                         t->size, (size_t)TOP_V1_SIZE);
    if (t->runtime_cap > 0 && (t->runtimes == NULL || t->runtime_size < RUNTIME_V1_SIZE))
        return nxr__fail(
            -EINVAL, __func__,
            "t->runtimes is NULL or t->runtime_size %zu below %zu with runtime_cap %zu",
            t->runtime_size, (size_t)RUNTIME_V1_SIZE, t->runtime_cap);
    if (t->domain_cap > 0 && (t->domains == NULL || t->domain_size < DOMAIN_V1_SIZE))
        return nxr__fail(-EINVAL, __func__,
                         "t->domains is NULL or t->domain_size %zu below %zu with domain_cap %zu",
                         t->domain_size, (size_t)DOMAIN_V1_SIZE, t->domain_cap);
    struct nxr__peers *p = malloc(sizeof(*p)); /* 5 KiB: not on a caller's stack */
    if (p == NULL)
        return nxr__fail(-ENOMEM, __func__, "the registry's state");
    int rc = nxr__peers_open_dir(p, dir);
    if (rc != 0) {
        rc = nxr__fail(rc, __func__, "the peer registry: %s", p->detail);
        free(p);
        return rc;
    }
    struct reading r = {.t = t};
    r.domains = calloc(t->domain_cap > 0 ? t->domain_cap : 1, sizeof(*r.domains));
    r.pids = calloc(t->domain_cap > 0 ? t->domain_cap : 1, sizeof(*r.pids));
    /* The caller's own fields (sizes, arrays) stay; counts start at 0. */
    t->version = NXR_TOP_VERSION;
    t->runtime_count = t->domain_count = 0;
    t->refused = t->stale = t->other_pidns = 0;
    struct nxr__pages_seen seen;
    rc = r.domains == NULL || r.pids == NULL ? -ENOMEM
                                             : nxr__pages_read(p->dirfd, wait_ms, take, &r, &seen);
    nxr__peers_close(p);
    free(p);
    if (rc == 0)
        rc = overlaps(&r);
    if (rc == 0) {
        size_t sz = t->domain_size < sizeof(struct nxr_top_domain) ? t->domain_size
                                                                   : sizeof(struct nxr_top_domain);
        for (size_t i = 0; i < r.filled; i++)
            memcpy((char *)t->domains + i * t->domain_size, &r.domains[i], sz);
        t->refused = seen.refused;
        t->stale = seen.stale;
        t->other_pidns = seen.other_pidns;
    }
    free(r.domains);
    free(r.pids);
    if (rc != 0)
        return nxr__fail(rc, __func__, "%s", rc == -ENOMEM ? "out of memory" : strerror(-rc));
    return 0;
}
