/* The OpenMP comparison path's serving thread (see omp_path.h). */
#include "service/omp_path.h"

#include <cblas.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

#include "service/queue.h"

struct svc_omp_path {
    struct svc_model_shape shape;
    const float *weights;
    unsigned threads;
    struct svc_queue queue;
    pthread_t thread;
};


static void *omp_serving_thread(void *p)
{
    struct svc_omp_path *path = p;
    /* This thread's OpenMP team: every allowed CPU, as a NUMA-unaware
     * service configures it. */
    omp_set_num_threads((int)path->threads);
    float *scratch = NULL;
    size_t scratch_rows = 0;
    struct svc_request *r;
    while ((r = svc_queue_take_all(&path->queue)) != NULL) {
        while (r != NULL) {
            struct svc_request *next = r->next;
            int rc = 0;
            if (r->rows > scratch_rows) {
                float *grown = realloc(scratch, svc_model_scratch_floats(&path->shape, r->rows) *
                                                    sizeof(float));
                if (grown == NULL) {
                    rc = -ENOMEM;
                    svc_request_set_error(r, "OpenMP path: out of memory for %zu rows of scratch",
                                          r->rows);
                } else {
                    scratch = grown;
                    scratch_rows = r->rows;
                }
            }
            r->slot = 0;
            r->cpu = -1;
            if (rc == 0)
                rc = svc_model_forward(&svc_ops_omp, NULL, &path->shape, path->weights, r->rows,
                                       r->input, r->output, scratch);
            if (rc != 0)
                svc_request_set_error(r, "OpenMP path: model: %s", nxr_strerror(rc));
            svc_request_complete(r, rc);
            r = next;
        }
    }
    free(scratch);
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
    p->shape = *shape;
    p->weights = weights;
    p->threads = threads;
    svc_queue_init(&p->queue);
    openblas_set_num_threads(1);
    int rc = -pthread_create(&p->thread, NULL, omp_serving_thread, p);
    if (rc != 0) {
        svc_queue_destroy(&p->queue);
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int svc_omp_path_submit(void *path, struct svc_request *r)
{
    struct svc_omp_path *p = path;
    return svc_queue_push(&p->queue, r) ? 0 : -ESHUTDOWN;
}

void svc_omp_path_stop(struct svc_omp_path *p)
{
    if (p == NULL)
        return;
    svc_queue_close(&p->queue);
    pthread_join(p->thread, NULL);
    svc_queue_destroy(&p->queue);
    free(p);
}
