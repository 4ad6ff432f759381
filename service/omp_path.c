/* The OpenMP comparison path's serving thread (see omp_path.h). */
#include "service/omp_path.h"

#include <cblas.h>
#include <errno.h>
#include <omp.h>
#include <stdlib.h>

#include "service/lone_path.h"

struct svc_omp_path {
    unsigned threads;
    struct svc_lone_path *lone;
};

/* The serving thread's OpenMP team: every allowed CPU, as a NUMA-unaware
 * service configures it. */
static void *omp_enter(void *self)
{
    const struct svc_omp_path *p = self;
    omp_set_num_threads((int)p->threads);
    return NULL;
}

int svc_omp_path_start(struct svc_omp_path **out, const struct svc_model_shape *shape,
                       const float *weights, unsigned threads)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (shape == NULL || weights == NULL || threads == 0)
        return -EINVAL;
    struct svc_omp_path *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->threads = threads;
    openblas_set_num_threads(1);
    struct svc_lone_path_desc d = {.name = "OpenMP path",
                                   .ops = &svc_ops_omp,
                                   .ops_self = p,
                                   .shape = *shape,
                                   .weights = weights,
                                   .enter = omp_enter};
    int rc = svc_lone_path_start(&p->lone, &d);
    if (rc != 0) {
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int svc_omp_path_submit(void *path, struct svc_request *r)
{
    struct svc_omp_path *p = path;
    return svc_lone_path_submit(p->lone, r);
}

void svc_omp_path_stop(struct svc_omp_path *p)
{
    if (p == NULL)
        return;
    svc_lone_path_stop(p->lone);
    free(p);
}
