/*
 * The nxr serving path: one serving thread per slot (a slot is one domain:
 * a context, the thread bound to the domain's CPUs, a request queue and the
 * weight replica on the domain's node). Clients submit requests; the
 * server routes each to the slot with the fewest rows outstanding (ties
 * round-robin). The slot's unit of work is a batch: the oldest request
 * queued, and the requests waiting behind it while their rows together fit
 * in max_batch (svc_batch_end), computed as one forward pass, each
 * request's rows answered to its own client. Whoever takes work (the
 * serving thread, or a worker that just finished) takes what is queued at
 * that moment: a lone request is never held back waiting for company, it
 * simply finds none. The slot's serving thread takes batches in arrival
 * order and
 *   - submits each as one task (nxr_submit): it runs on one of the
 *     domain's workers, its kernels sequentially in place, so the domain
 *     runs as many batches at once as it has workers, with no fork-join
 *     per kernel. At most `budget` are out at once (one credit per
 *     worker); a worker that finishes one takes the next itself;
 *   - except a batch (of at least split_rows rows) that finds every worker
 *     free and nobody behind it: that one the serving thread runs itself,
 *     its kernels split over the whole domain (INNER), the serving thread
 *     taking part, because no other batch could use the idle workers.
 * A batch fails alone, never its neighbours: when a pass of several
 * requests fails (its scratch, a kernel), each of them is computed again
 * by itself and answered with its own output or its own error; when the
 * hand-off of a batch to the domain's executor fails, its requests go back
 * to the front of the queue marked to run alone.
 * Nothing spins: serving threads sleep on their queue, clients on their
 * request, workers park (NXR_SPIN) when idle.
 *
 * The same server runs on managed domains (nxr's teams), on a declared
 * domain covering the allowed set (the flat path) and on attached
 * executors (--executor openmp|pool).
 */
#ifndef NXR_SERVICE_SERVER_H
#define NXR_SERVICE_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/nxr.h"
#include "service/model.h"
#include "service/request.h"

struct svc_server;

struct svc_slot_decl {
    int domain_id;        /* the domain the slot's context runs on */
    const float *weights; /* the slot's replica (borrowed) */
    /* The weight matrices packed for the slot's context's domain (borrowed;
     * svc_model_matrices of them), or NULL: the matrices of `weights`. */
    const nxr_weights_t *const *packed;
    /* The slot's home: whose pool request scratch comes from, and whose CPUs
     * the serving thread is bound to (nxr_ctx_bind). NULL: the context's
     * domain. In attach mode the context's domain is the attached executor
     * (caller-managed: no CPU set) and the home is the original domain. */
    nxr_domain_t *memory;
};

struct svc_server_opts {
    struct svc_model_shape shape;
    size_t split_rows; /* a lone batch with at least this many rows runs INNER (0: never) */
    /* Rows one forward pass may coalesce (0 or 1: every request alone). A
     * request bigger than this is a batch by itself. */
    size_t max_batch;
    /* Called once for each batch of two or more requests that had to be
     * retried alone: its pass failed with `status` (its members are then
     * computed again one by one), or its hand-off to the executor did (its
     * members go back to the queue, to run alone). On the thread that saw
     * the failure, before any member is answered; must not block. NULL:
     * not called. Accounting, e.g. for a test that matches every injected
     * failure to a request or a retried batch. */
    void (*on_retry)(void *arg, int status);
    void *on_retry_arg;
};

/* Passes by the requests they computed: [k] for k = 1..15, [16] for 16
 * or more ([0] unused). */
#define SVC_PASS_SIZES 17

/* Per-slot counters, read after a run. */
struct svc_slot_stats {
    uint64_t served;     /* requests completed */
    uint64_t split;      /* of which ran INNER */
    uint64_t errors;     /* of which failed */
    uint64_t passes;     /* forward passes run (failed ones and retries included) */
    uint64_t batched;    /* requests answered from a pass shared with others */
    uint64_t retried;    /* batches retried alone (see on_retry) */
    uint64_t pass_sizes[SVC_PASS_SIZES];
};

/* Opens a context per slot and starts its serving thread, which binds
 * itself and reports back before this returns. Returns 0 and *out, or the
 * first error (-EINVAL, NXR_ENODOMAIN, NXR_EPLACEMENT: a serving thread
 * could not be bound, -EAGAIN, -ENOMEM) with err naming the slot; then
 * nothing is left running. The runtime must outlive the server. */
int svc_server_start(struct svc_server **out, nxr_runtime_t *rt, const struct svc_slot_decl *slots,
                     size_t n, const struct svc_server_opts *opts, char *err, size_t errsz);

/* Routes r to a slot (fewest outstanding rows; ties: round-robin) and
 * queues it. Returns 0: r will be answered exactly once (svc_request_wait),
 * with its output or a typed error and r->error saying what failed (the
 * scratch buffer, handing it to the domain's executor, a kernel). Or, with
 * r not taken: -EINVAL (NULL, no rows, no input or output) or -ESHUTDOWN
 * after stop began. Any thread; the signature of svc_submit_fn
 * (service/load.h). */
int svc_server_submit(void *server, struct svc_request *r);

size_t svc_server_slots(const struct svc_server *s);
/* Fills *out with slot's counters and, when cpus is not NULL, sets cpus to
 * the CPUs its requests' computations started on (read with sched_getcpu
 * on the thread that computed them). */
void svc_server_slot_stats(const struct svc_server *s, size_t slot, struct svc_slot_stats *out,
                           hwloc_bitmap_t cpus);
nxr_domain_t *svc_server_slot_domain(const struct svc_server *s, size_t slot);

/* Clears every slot's counters (between warm-up and measurement). Only
 * while no request is in flight. */
void svc_server_reset_stats(struct svc_server *s);

/* Stops the serving threads after they took every queued request, closes
 * the contexts and frees the server. Requests already handed to workers
 * complete on their own (the runtime drains them at destroy). NULL is a
 * no-op. */
void svc_server_stop(struct svc_server *s);

#endif /* NXR_SERVICE_SERVER_H */
