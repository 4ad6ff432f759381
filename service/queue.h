/*
 * A serving thread's request queue: FIFO, many producers (client threads),
 * one consumer that sleeps when there is nothing it may take (no
 * busy-waiting: the CPUs belong to the workers). The consumer takes
 * everything at once, or one batch at a time under an admission test: a
 * batch is the oldest request and those queued behind it while their rows
 * together fit in a bound (svc_batch_end), taken as one forward pass.
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

/* Where the batch that starts at `first` ends: the first request not in
 * it (NULL: the batch runs to the queue's end). A batch is `first`, then
 * the requests behind it while the rows of all together stay within
 * max_rows; `first` always belongs, whatever its size, so a request bigger
 * than max_rows is a batch alone, as is every request with max_rows <= 1.
 * A request marked `alone` is a batch by itself and ends the one before it.
 * Reads the links: under the queue's lock while the requests are queued. */
struct svc_request *svc_batch_end(const struct svc_request *first, size_t max_rows);

/* Rows of the batch `first` (linked through ->next, NULL-terminated). */
size_t svc_batch_rows(const struct svc_request *first);

/* Takes the oldest batch (svc_batch_end; linked through ->next, the last
 * one's next NULL) once admit(arg, first, behind) says it may go, `behind`
 * being the oldest request left queued after it (NULL: none), waiting (when
 * `wait`) until then; NULL when the queue is closed and empty, or, without
 * `wait`, when the batch may not go now. admit runs under the queue's lock
 * and may update state of the caller's that svc_queue_update guards (e.g.
 * take a worker credit). */
struct svc_request *svc_queue_take_batch_if(struct svc_queue *q, size_t max_rows,
                                            bool (*admit)(void *arg,
                                                          const struct svc_request *first,
                                                          const struct svc_request *behind),
                                            void *arg, bool wait);

/* Runs fn(q, arg) under the queue's lock (fn may pop the oldest batch,
 * see svc_queue_pop_batch_locked, or put requests back) and wakes the consumer when fn returns true: how
 * state that admit reads changes (a worker credit given back). */
void svc_queue_update(struct svc_queue *q, bool (*fn)(struct svc_queue *q, void *arg), void *arg);

/* The oldest batch (svc_batch_end), removed (NULL when empty). Only
 * inside svc_queue_update's fn. */
struct svc_request *svc_queue_pop_batch_locked(struct svc_queue *q, size_t max_rows);

/* Puts the requests `first` (linked through ->next) back at the front, in
 * their order, even after svc_queue_close: they were accepted before and
 * must still be taken. Only the consumer, which takes them next. */
void svc_queue_requeue(struct svc_queue *q, struct svc_request *first);

/* Wakes the consumer; later pushes fail. Queued requests are still taken. */
void svc_queue_close(struct svc_queue *q);

#endif /* NXR_SERVICE_QUEUE_H */
