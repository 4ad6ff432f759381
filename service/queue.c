/* The request queue (see queue.h). */
#include "service/queue.h"

void svc_queue_init(struct svc_queue *q)
{
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->nonempty, NULL);
    q->head = q->tail = NULL;
    q->closed = false;
}

void svc_queue_destroy(struct svc_queue *q)
{
    pthread_cond_destroy(&q->nonempty);
    pthread_mutex_destroy(&q->lock);
}

bool svc_queue_push(struct svc_queue *q, struct svc_request *r)
{
    r->next = NULL;
    pthread_mutex_lock(&q->lock);
    bool ok = !q->closed;
    if (ok) {
        if (q->tail != NULL)
            q->tail->next = r;
        else
            q->head = r;
        q->tail = r;
        pthread_cond_signal(&q->nonempty);
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

struct svc_request *svc_queue_take_all(struct svc_queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->head == NULL && !q->closed)
        pthread_cond_wait(&q->nonempty, &q->lock);
    struct svc_request *all = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    return all;
}

void svc_queue_close(struct svc_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = true;
    pthread_cond_broadcast(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}
