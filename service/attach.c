/* Attach mode (see attach.h). */
#include "service/attach.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "executor/nxr_omp.h"
#include "examples/pool_executor.h"

const char *svc_executor_name(enum svc_executor e)
{
    switch (e) {
    case SVC_EXECUTOR_NXR:
        return "nxr";
    case SVC_EXECUTOR_OPENMP:
        return "openmp";
    case SVC_EXECUTOR_POOL:
        return "pool";
    }
    return "?";
}

int svc_executor_parse(const char *name, enum svc_executor *out)
{
    for (int e = SVC_EXECUTOR_NXR; e <= SVC_EXECUTOR_POOL; e++) {
        if (strcmp(name, svc_executor_name((enum svc_executor)e)) == 0) {
            *out = (enum svc_executor)e;
            return 0;
        }
    }
    return -EINVAL;
}

int svc_attached_init(nxr_runtime_t *rt, struct svc_attached *out, char *err, size_t errsz)
{
    memset(out, 0, sizeof(*out));
    size_t n = nxr_runtime_domain_count(rt);
    if (n > sizeof(out->ids) / sizeof(out->ids[0])) {
        snprintf(err, errsz, "%zu domains; attach mode handles at most 64", n);
        return -EINVAL;
    }
    /* Ids above every existing one, fixed now so that a retried domain
     * gets the same id. */
    for (size_t i = 0; i < n; i++) {
        int id = nxr_domain_id(nxr_runtime_domain_at(rt, i));
        if (id >= out->first_id)
            out->first_id = id + 1;
        out->ids[i] = -1;
    }
    out->n = n;
    return 0;
}

static struct host_pool *start_pool(const struct svc_attach_hooks *hooks, size_t i,
                                    unsigned threads, const cpu_set_t *cpus)
{
    if (hooks != NULL && hooks->start_pool != NULL)
        return hooks->start_pool(hooks->arg, i, threads, cpus);
    return host_pool_start(threads, cpus);
}

int svc_attach_domain(nxr_runtime_t *rt, enum svc_executor e, size_t i,
                      const struct svc_attach_hooks *hooks, struct svc_attached *out, char *err,
                      size_t errsz)
{
    if (e == SVC_EXECUTOR_NXR || i >= out->n || out->ids[i] >= 0) {
        snprintf(err, errsz, "domain %zu: nothing to attach", i);
        return -EINVAL;
    }
    nxr_domain_t *d = nxr_runtime_domain_at(rt, i);
    hwloc_const_bitmap_t cpus = nxr_domain_cpuset(d);
    if (cpus == NULL) {
        snprintf(err, errsz, "domain %d has no CPU set", nxr_domain_id(d));
        return -EINVAL;
    }
    unsigned ncpus = (unsigned)hwloc_bitmap_weight(cpus);
    struct nxr_external_decl decl;
    nxr_external_decl_init(&decl);
    decl.id = out->first_id + (int)i;
    struct host_pool *pool = NULL;
    int rc;
    const char *what = "";
    if (e == SVC_EXECUTOR_OPENMP) {
        decl.admission = NXR_ADMISSION_CALLER_MANAGED;
        rc = nxr_omp_executor_init(&decl.executor, (int)ncpus);
    } else {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int c = hwloc_bitmap_first(cpus); c >= 0 && c < CPU_SETSIZE;
             c = hwloc_bitmap_next(cpus, c))
            CPU_SET(c, &set);
        pool = start_pool(hooks, i, ncpus, &set);
        rc = pool == NULL ? -EAGAIN : 0;
        what = pool == NULL ? "its pool's threads could not start" : "";
        decl.admission = NXR_ADMISSION_COOPERATIVE;
        decl.cpus = cpus;
        if (rc == 0)
            pool_executor_init(&decl.executor, pool);
    }
    if (rc == 0 && hooks != NULL && hooks->declare != NULL) {
        rc = hooks->declare(hooks->arg, i, &decl);
        what = rc != 0 ? "the host's declaration hook refused" : "";
    }
    char why[256] = "";
    if (rc == 0 && (rc = nxr_runtime_attach(rt, &decl)) != 0)
        snprintf(why, sizeof(why), "%s", nxr_last_error());
    if (rc != 0) {
        /* A failed attach retained nothing: the pool is ours alone again. */
        host_pool_stop(pool);
        snprintf(err, errsz, "domain %d: %s%s%s%s%s", nxr_domain_id(d), nxr_strerror(rc),
                 what[0] ? ": " : "", what, why[0] ? ": " : "", why);
        return rc;
    }
    out->pools[i] = pool;
    out->ids[i] = decl.id;
    return 0;
}

int svc_attach_executors(nxr_runtime_t *rt, enum svc_executor e, struct svc_attached *out,
                         char *err, size_t errsz)
{
    int rc = svc_attached_init(rt, out, err, errsz);
    if (rc != 0 || e == SVC_EXECUTOR_NXR)
        return rc;
    for (size_t i = 0; i < out->n; i++) {
        if ((rc = svc_attach_domain(rt, e, i, NULL, out, err, errsz)) != 0)
            return rc;
    }
    return 0;
}

void svc_attached_release(struct svc_attached *a)
{
    for (size_t i = 0; i < a->n; i++) {
        host_pool_stop(a->pools[i]);
        a->pools[i] = NULL;
        a->ids[i] = -1;
    }
    a->n = 0;
}
