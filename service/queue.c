/* The request queue (see queue.h). */
#include "service/queue.h"

void svc_queue_init(struct svc_queue *q)
{
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->nonempty, NULL);
    q->head = q->tail = NULL;
    q->closed = false;
    q->consumer_waits_for_push = false;
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
        if (q->consumer_waits_for_push) {
            q->consumer_waits_for_push = false;
            pthread_cond_signal(&q->nonempty);
        }
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

struct svc_request *svc_queue_take_all(struct svc_queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->head == NULL && !q->closed) {
        q->consumer_waits_for_push = true;
        pthread_cond_wait(&q->nonempty, &q->lock);
    }
    struct svc_request *all = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    return all;
}

struct svc_request *svc_batch_end(const struct svc_request *first, size_t max_rows)
{
    size_t rows = first->rows;
    const struct svc_request *r = first->next;
    if (!first->alone)
        for (; r != NULL && !r->alone && r->rows <= max_rows && rows <= max_rows - r->rows;
             r = r->next)
            rows += r->rows;
    return (struct svc_request *)r;
}

size_t svc_batch_rows(const struct svc_request *first)
{
    size_t rows = 0;
    for (const struct svc_request *r = first; r != NULL; r = r->next)
        rows += r->rows;
    return rows;
}

struct svc_request *svc_queue_take_batch_if(struct svc_queue *q, size_t max_rows,
                                            bool (*admit)(void *arg,
                                                          const struct svc_request *first,
                                                          const struct svc_request *behind),
                                            void *arg, bool wait)
{
    pthread_mutex_lock(&q->lock);
    struct svc_request *r = NULL;
    for (;;) {
        if (q->head != NULL && admit(arg, q->head, svc_batch_end(q->head, max_rows))) {
            r = svc_queue_pop_batch_locked(q, max_rows);
            break;
        }
        if (!wait || (q->head == NULL && q->closed))
            break;
        q->consumer_waits_for_push = q->head == NULL;
        pthread_cond_wait(&q->nonempty, &q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return r;
}

void svc_queue_update(struct svc_queue *q, bool (*fn)(struct svc_queue *q, void *arg), void *arg)
{
    pthread_mutex_lock(&q->lock);
    if (fn(q, arg))
        pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}

struct svc_request *svc_queue_pop_batch_locked(struct svc_queue *q, size_t max_rows)
{
    struct svc_request *first = q->head;
    if (first == NULL)
        return NULL;
    struct svc_request *end = svc_batch_end(first, max_rows), *last = first;
    while (last->next != end)
        last = last->next;
    last->next = NULL;
    q->head = end;
    if (end == NULL) {
        q->tail = NULL;
        /* Empty now: if the consumer sleeps (on a request someone else
         * just took), only a push can give it work. */
        q->consumer_waits_for_push = true;
    }
    return first;
}

void svc_queue_requeue(struct svc_queue *q, struct svc_request *first)
{
    if (first == NULL)
        return;
    struct svc_request *last = first;
    while (last->next != NULL)
        last = last->next;
    pthread_mutex_lock(&q->lock);
    last->next = q->head;
    q->head = first;
    if (q->tail == NULL)
        q->tail = last;
    pthread_mutex_unlock(&q->lock);
}

void svc_queue_close(struct svc_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = true;
    pthread_cond_broadcast(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}
