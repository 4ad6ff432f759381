/*
 * A path with one serving thread that computes each request alone, in
 * arrival order: the OpenMP comparison path and the span path (each
 * request over every node) are this loop with their own model ops. The
 * thread grows one scratch buffer to the largest request seen, runs the
 * model's forward pass through the ops, and answers every request exactly
 * once (its output, or a typed error with the path's detail).
 */
#ifndef NXR_SERVICE_LONE_PATH_H
#define NXR_SERVICE_LONE_PATH_H

#include "service/model.h"
#include "service/ops.h"
#include "service/request.h"

struct svc_lone_path;

struct svc_lone_path_desc {
    const char *name; /* in error details: "OpenMP path", "span path" */
    const struct svc_ops *ops;
    void *ops_self; /* the ops' self argument, and every hook's */
    struct svc_model_shape shape;
    const float *weights;
    /* Optional, on the serving thread: before its first request (its team
     * size, its CPUs) and after its last; enter's result goes to leave. */
    void *(*enter)(void *self);
    void (*leave)(void *self, void *entered);
    /* Optional: the detail of a failed forward pass (else nxr_strerror). */
    const char *(*detail)(void *self, int rc);
};

/* Starts the serving thread. 0 and *out, -EINVAL, -ENOMEM or -EAGAIN
 * (nothing left running). The desc is copied; ops_self must outlive the
 * path. */
int svc_lone_path_start(struct svc_lone_path **out, const struct svc_lone_path_desc *desc);

/* Queues r (FIFO): the svc_submit_fn of service/load.h. -ESHUTDOWN once
 * stopping. */
int svc_lone_path_submit(void *path, struct svc_request *r);

/* Stops the serving thread after the queue drained (every queued request
 * is answered first: bounded by their forward passes). NULL is a no-op. */
void svc_lone_path_stop(struct svc_lone_path *p);

#endif /* NXR_SERVICE_LONE_PATH_H */
