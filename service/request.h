/*
 * One inference request as it travels from a client to a serving path and
 * back: what to compute (rows of input, where the output goes) and how it
 * went (status, which domain and CPU served it). The client owns it; a
 * path borrows it from svc_*_submit until svc_request_complete.
 *
 * Completion is a mutex and condition variable per request: the client
 * sleeps while its request runs (no spinning on the CPUs the workers need).
 *
 * Every request that a path accepted is answered exactly once, with its
 * output or with a typed error (a negative errno or an nxr code) and a line
 * saying what failed; `answers` counts the answers, so a test can prove
 * that none was lost or given twice.
 */
#ifndef NXR_SERVICE_REQUEST_H
#define NXR_SERVICE_REQUEST_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct svc_request {
    /* What: filled by the client. */
    size_t index;        /* position in the request stream */
    size_t rows;         /* batch size */
    const float *input;  /* rows x hidden */
    float *output;       /* rows x vocab */
    /* How it went: filled by the path. */
    int status;          /* 0 or the first error */
    char error[160];     /* on failure: what failed, for the client ("" on success) */
    unsigned answers;    /* times the path answered (svc_request_complete) */
    int slot;            /* the serving slot (domain) that took it, -1 none */
    int cpu;             /* CPU its computation started on, -1 unknown */
    bool split;          /* computed over the domain's team (INNER) */
    bool alone;          /* not to be batched with others (a failed batch's member, retried) */
    unsigned batch;      /* requests in the forward pass that computed it (1: alone) */
    void *path_data;     /* the path's own (which slot holds it) */
    /* Queue link and completion; the path's. */
    struct svc_request *next;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
};

/* Initialises the completion state (once per request object). */
void svc_request_init(struct svc_request *r);
void svc_request_destroy(struct svc_request *r);

/* Arms r for another trip (clears the outcome fields, answers and done). */
void svc_request_arm(struct svc_request *r);

/* Says what failed (printf format), unless an earlier step already did: the
 * first failure is the one the client hears about. The path's, before
 * svc_request_complete. */
void svc_request_set_error(struct svc_request *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Records status, counts the answer and wakes the client. The path must not
 * touch r after. */
void svc_request_complete(struct svc_request *r, int status);

/* Blocks (sleeping) until r completed; returns its status. */
int svc_request_wait(struct svc_request *r);

#endif /* NXR_SERVICE_REQUEST_H */
