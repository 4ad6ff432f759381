/*
 * A serving thread's request queue: FIFO, many producers (client threads),
 * one consumer that takes everything queued at once and sleeps when there
 * is nothing (no busy-waiting: the CPUs belong to the workers).
 */
#ifndef NXR_SERVICE_QUEUE_H
#define NXR_SERVICE_QUEUE_H

#include <pthread.h>
#include <stdbool.h>

#include "service/request.h"

struct svc_queue {
    pthread_mutex_t lock;
    pthread_cond_t nonempty;
    struct svc_request *head, *tail;
    bool closed;
};

void svc_queue_init(struct svc_queue *q);
void svc_queue_destroy(struct svc_queue *q);

/* Appends r. false (r not queued) once the queue is closed. Any thread. */
bool svc_queue_push(struct svc_queue *q, struct svc_request *r);

/* Takes every queued request, oldest first (linked through ->next), waiting
 * while there is none; NULL once the queue is closed and empty. */
struct svc_request *svc_queue_take_all(struct svc_queue *q);

/* Wakes the consumer; later pushes fail. Queued requests are still taken. */
void svc_queue_close(struct svc_queue *q);

#endif /* NXR_SERVICE_QUEUE_H */
