/* One serving thread, each request alone (see lone_path.h). */
#include "service/lone_path.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/nxr_status.h"
#include "service/queue.h"

struct svc_lone_path {
    struct svc_lone_path_desc d;
    struct svc_queue queue;
    pthread_t thread;
};

static void *lone_serving_thread(void *arg)
{
    struct svc_lone_path *p = arg;
    const struct svc_lone_path_desc *d = &p->d;
    void *entered = d->enter != NULL ? d->enter(d->ops_self) : NULL;
    float *scratch = NULL;
    size_t scratch_rows = 0;
    struct svc_request *r;
    while ((r = svc_queue_take_all(&p->queue)) != NULL) {
        while (r != NULL) {
            struct svc_request *next = r->next;
            int rc = 0;
            if (r->rows > scratch_rows) {
                float *grown =
                    realloc(scratch, svc_model_scratch_floats(&d->shape, r->rows) * sizeof(float));
                if (grown == NULL) {
                    rc = -ENOMEM;
                    svc_request_set_error(r, "%s: out of memory for %zu rows of scratch", d->name,
                                          r->rows);
                } else {
                    scratch = grown;
                    scratch_rows = r->rows;
                }
            }
            r->slot = 0;
            r->cpu = -1;
            if (rc == 0) {
                rc = svc_model_forward(d->ops, d->ops_self, &d->shape, d->weights, r->rows,
                                       r->input, r->output, scratch);
                if (rc != 0)
                    svc_request_set_error(r, "%s: %s", d->name,
                                          d->detail != NULL ? d->detail(d->ops_self, rc)
                                                            : nxr_strerror(rc));
            }
            svc_request_complete(r, rc);
            r = next;
        }
    }
    free(scratch);
    if (d->leave != NULL)
        d->leave(d->ops_self, entered);
    return NULL;
}

int svc_lone_path_start(struct svc_lone_path **out, const struct svc_lone_path_desc *desc)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (desc == NULL || desc->name == NULL || desc->ops == NULL || desc->weights == NULL)
        return -EINVAL;
    struct svc_lone_path *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->d = *desc;
    svc_queue_init(&p->queue);
    int rc = -pthread_create(&p->thread, NULL, lone_serving_thread, p);
    if (rc != 0) {
        svc_queue_destroy(&p->queue);
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int svc_lone_path_submit(void *path, struct svc_request *r)
{
    struct svc_lone_path *p = path;
    return svc_queue_push(&p->queue, r) ? 0 : -ESHUTDOWN;
}

void svc_lone_path_stop(struct svc_lone_path *p)
{
    if (p == NULL)
        return;
    svc_queue_close(&p->queue);
    pthread_join(p->thread, NULL);
    svc_queue_destroy(&p->queue);
    free(p);
}
