/*
 * A serving thread's request queue: FIFO, many producers (client threads),
 * one consumer that sleeps when there is nothing it may take (no
 * busy-waiting: the CPUs belong to the workers). The consumer takes
 * everything at once, or one request at a time under an admission test.
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
    /* The consumer sleeps on an empty queue: only then does a push wake it
     * (asleep on a request it may not take yet, it waits for an update). */
    bool consumer_waits_for_push;
};

void svc_queue_init(struct svc_queue *q);
void svc_queue_destroy(struct svc_queue *q);

/* Appends r. false (r not queued) once the queue is closed. Any thread. */
bool svc_queue_push(struct svc_queue *q, struct svc_request *r);

/* Takes every queued request, oldest first (linked through ->next), waiting
 * while there is none; NULL once the queue is closed and empty. */
struct svc_request *svc_queue_take_all(struct svc_queue *q);

/* Takes the oldest request once admit(arg, it) says it may go, waiting
 * (when `wait`) until then; NULL when the queue is closed and empty, or,
 * without `wait`, when the oldest may not go now. admit runs under the
 * queue's lock and may update state of the caller's that svc_queue_update
 * guards (e.g. take a worker credit). */
struct svc_request *svc_queue_take_if(struct svc_queue *q,
                                      bool (*admit)(void *arg, const struct svc_request *r),
                                      void *arg, bool wait);

/* Runs fn(q, arg) under the queue's lock (fn may pop the head, see
 * svc_queue_pop_locked) and wakes the consumer when fn returns true: how
 * state that admit reads changes (a worker credit given back). */
void svc_queue_update(struct svc_queue *q, bool (*fn)(struct svc_queue *q, void *arg), void *arg);

/* The oldest request, removed (NULL when empty). Only inside
 * svc_queue_update's fn. */
struct svc_request *svc_queue_pop_locked(struct svc_queue *q);

/* Wakes the consumer; later pushes fail. Queued requests are still taken. */
void svc_queue_close(struct svc_queue *q);

#endif /* NXR_SERVICE_QUEUE_H */
