/* Attach mode (see attach.h). */
#include "service/attach.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "executor/nxr_omp.h"
#include "service/pool_executor.h"

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

int svc_attach_executors(nxr_runtime_t *rt, enum svc_executor e, struct svc_attached *out,
                         char *err, size_t errsz)
{
    memset(out, 0, sizeof(*out));
    size_t n = nxr_runtime_domain_count(rt);
    if (e == SVC_EXECUTOR_NXR)
        return 0;
    if (n > sizeof(out->ids) / sizeof(out->ids[0])) {
        snprintf(err, errsz, "%zu domains; attach mode handles at most 64", n);
        return -EINVAL;
    }
    int next_id = 0;
    for (size_t i = 0; i < n; i++) {
        int id = nxr_domain_id(nxr_runtime_domain_at(rt, i));
        if (id >= next_id)
            next_id = id + 1;
    }
    for (size_t i = 0; i < n; i++) {
        const nxr_domain_t *d = nxr_runtime_domain_at(rt, i);
        hwloc_const_bitmap_t cpus = nxr_domain_cpuset(d);
        if (cpus == NULL) {
            snprintf(err, errsz, "domain %d has no CPU set", nxr_domain_id(d));
            return -EINVAL;
        }
        unsigned ncpus = (unsigned)hwloc_bitmap_weight(cpus);
        struct nxr_external_decl decl;
        nxr_external_decl_init(&decl);
        decl.id = next_id + (int)i;
        int rc;
        if (e == SVC_EXECUTOR_OPENMP) {
            decl.admission = NXR_ADMISSION_CALLER_MANAGED;
            rc = nxr_omp_executor_init(&decl.executor, (int)ncpus);
        } else {
            cpu_set_t set;
            CPU_ZERO(&set);
            for (int c = hwloc_bitmap_first(cpus); c >= 0 && c < CPU_SETSIZE;
                 c = hwloc_bitmap_next(cpus, c))
                CPU_SET(c, &set);
            out->pools[i] = host_pool_start(ncpus, &set);
            rc = out->pools[i] == NULL ? -EAGAIN : 0;
            decl.admission = NXR_ADMISSION_COOPERATIVE;
            decl.cpus = cpus;
            if (rc == 0)
                pool_executor_init(&decl.executor, out->pools[i]);
        }
        out->n = i + 1;
        char why[256] = "";
        if (rc == 0)
            rc = nxr_runtime_attach(rt, &decl, why, sizeof(why));
        if (rc != 0) {
            snprintf(err, errsz, "domain %d: %s%s%s", nxr_domain_id(d), nxr_strerror(rc),
                     why[0] ? ": " : "", why);
            return rc;
        }
        out->ids[i] = decl.id;
    }
    return 0;
}

void svc_attached_release(struct svc_attached *a)
{
    for (size_t i = 0; i < a->n; i++) {
        host_pool_stop(a->pools[i]);
        a->pools[i] = NULL;
    }
    a->n = 0;
}
