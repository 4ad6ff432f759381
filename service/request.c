/* Requests and their completion (see request.h). */
#include "service/request.h"

#include <stdarg.h>
#include <stdio.h>

void svc_request_init(struct svc_request *r)
{
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    svc_request_arm(r);
}

void svc_request_destroy(struct svc_request *r)
{
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
}

void svc_request_arm(struct svc_request *r)
{
    r->status = 0;
    r->error[0] = '\0';
    r->answers = 0;
    r->slot = -1;
    r->cpu = -1;
    r->split = false;
    r->alone = false;
    r->batch = 0;
    r->next = NULL;
    r->done = false;
}

void svc_request_set_error(struct svc_request *r, const char *fmt, ...)
{
    if (r->error[0] != '\0')
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof(r->error), fmt, ap);
    va_end(ap);
}

void svc_request_complete(struct svc_request *r, int status)
{
    pthread_mutex_lock(&r->lock);
    r->status = status;
    r->answers++;
    r->done = true;
    /* Signal under the lock: the client may destroy r as soon as it sees
     * done, which it can only read after this unlock. */
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

int svc_request_wait(struct svc_request *r)
{
    pthread_mutex_lock(&r->lock);
    while (!r->done)
        pthread_cond_wait(&r->cond, &r->lock);
    int status = r->status;
    pthread_mutex_unlock(&r->lock);
    return status;
}
