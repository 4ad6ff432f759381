/*
 * The soak: the demo's inference service (service/: weight replicas,
 * serving threads, the request queue, attach mode) under load from
 * closed-loop clients while faults are injected, then checked for what a
 * service must never do under faults.
 *
 * Four epochs, each a service started afresh and a quarter of the requests:
 *   nxr     nxr's own teams, one domain per NUMA node (the embedded default);
 *   nxr-2   nxr's own teams on two declared one-CPU domains (two slots the
 *           router spreads requests over; one domain on a one-CPU machine);
 *   pool    attach mode: a cooperative host pool per domain, wrapped in a
 *           failing executor (soak_faults.h);
 *   caller  the same pool declared caller-managed, its executor synchronous.
 * The GEMM provider of every runtime is a foreign one that wraps the native
 * provider and fails on a schedule.
 *
 * Each start is failed once per stage and restarted: the first worker
 * thread (nxr_runtime_create: -EAGAIN), the first weight replica and the
 * first context (-ENOMEM), and in attach mode each domain's pool (its last
 * thread cannot start: -EAGAIN) and then its nxr attach (-ENOMEM); every
 * failed start must leave no thread, no domain and no executor reference.
 *
 * While serving, a schedule keyed on request ids (never on time; an action
 * runs before the first request at or past its id is submitted) opens, as
 * parts of each epoch's requests:
 *   5-10%   ALLOC failing on every call (the pools trimmed first, so that
 *           scratch comes from the arena): nxr__malloc and the arenas;
 *   12-17%  ALLOC failing once every 5 requests;
 *   20-25%  MMAP failing on every call, 28-33% MBIND: jumbo requests (8192
 *           and 16384 rows, more scratch than the arena holds) make it map
 *           and bind new extents; one more right after each window must be
 *           answered with its output;
 *   36-56%  the provider failing every 37th GEMM call;
 *   60-80%  the executor failing every 3rd install or submit (attach: a
 *           synchronous job serves requests until the queue is empty, so
 *           the caller-managed domain sees few submissions);
 *   82-88%  all at once (provider every 11th, executor every 2nd, ALLOC
 *           once every 9 requests);
 *   90-100% nothing: the service must have recovered (no error at all).
 *
 * The server batches: requests waiting at a domain together run as one
 * forward pass (up to MAX_BATCH rows); a batch whose pass or hand-off fails
 * is retried alone, request by request (svc_server_opts.on_retry counts
 * those failures by code), so a fault inside a batch reaches one request,
 * or none, never its neighbours.
 *
 * Invariants, counted:
 *   - every request submitted is answered exactly once (svc_request.answers),
 *     with an output bit-identical to the reference (the same model computed
 *     beforehand on a clean runtime: nxr's kernels give the same bits
 *     whatever the split), or with a typed error that an injected fault
 *     explains (-ENOMEM, NXR_EPLACEMENT, the provider's -EIO, the
 *     executor's -EAGAIN) and a line saying what failed (for the
 *     injectors' errors, the nxr call that returned them: nxr_last_error);
 *   - injected failures reach exactly the requests they should: requests
 *     answered -EIO + batches retried after -EIO = GEMM calls the provider
 *     failed; -EAGAIN (requests + retried batches) = items of failed
 *     submissions + failed installs; -ENOMEM and NXR_EPLACEMENT (requests
 *     or retried batches) appear when and only when the seam failed a call
 *     of theirs; no batch is retried for any other error;
 *   - at each epoch's end no permit is held or waited for, no guard is set,
 *     no operation is in flight, no pool buffer is out, no executor
 *     reference is held, and no thread is left (/proc/self/task);
 *   - at the very end nothing leaked: LeakSanitizer's own check, when the
 *     build has it (.ci/run's soak stage builds --config=asan).
 * A request unanswered while the whole service makes no progress for 30 s
 * is lost: a failure detector, so a dropped request fails the soak (the
 * epoch then sends no more) instead of hanging it; it orders nothing in a
 * run that passes.
 *
 * Output: "soak ..." lines, one per epoch and a table at the end, then
 * "1 passed, 0 failed" (or "0 passed, 1 failed"); .ci/run prints them.
 * NXR_SOAK_REQUESTS sets the number of requests (default 8000: the short
 * version in `bazel test //...`; .ci/run's soak stage runs 500000).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/internal/sys.h"
#include "runtime/internal/runtime.h"
#include "service/attach.h"
#include "examples/host_pool.h"
#include "examples/pool_executor.h"
#include "service/server.h"
#include "service/stream.h"
#include "service/weights.h"
#include "tests/reliability/soak_faults.h"
#include "tests/support/cpus.h"
#include "tests/support/procfs.h"
#include "tests/support/check.h"

/* A small model, so that the soak serves its requests in CI time. */
#define HIDDEN 16
#define LAYERS 2
#define VOCAB 16
#define BATCH_MAX 6
#define SPLIT_ROWS 4   /* batches of 4 rows and more split over an idle domain */
#define MAX_BATCH 16   /* rows one forward pass coalesces: requests waiting together */
#define DISTINCT 512   /* distinct ordinary requests; request i is i mod DISTINCT */
#define CLIENTS 4
#define MAX_DOMAINS 8
#define LOST_AFTER_S 30
#define DEFAULT_REQUESTS 8000

/* Jumbo requests, one size per growth window: bigger than everything a
 * fresh arena holds (about 2 MiB; 8192 rows need 3.5 MiB of scratch, 16384
 * rows 7 MiB), so that they make the arena map and bind new extents. */
static const size_t jumbo_rows[] = {8192, 16384};
#define JUMBOS (sizeof(jumbo_rows) / sizeof(jumbo_rows[0]))
#define MAX_ROWS 16384

/* What the injectors answer with. */
#define PROVIDER_ERROR (-EIO)
#define EXECUTOR_ERROR (-EAGAIN)


/* ---- the workload and its reference ------------------------------------ */

static struct svc_model_shape shape;
static float *weights;        /* the master copy (seed 7) */
static struct svc_round round_; /* the DISTINCT ordinary requests */
static float *ref;            /* their reference outputs, round_.total_rows x VOCAB */
static float *jumbo_in[JUMBOS], *jumbo_ref[JUMBOS];

/* The model on one request through ctx, on this thread: the reference. */
static void reference(nxr_ctx_t *ctx, float *scratch, size_t rows, const float *in, float *out)
{
    int rc = svc_model_forward(&svc_ops_nxr, ctx, &shape, weights, rows, in, out, scratch);
    CHECK(rc == 0, "reference: %s", nxr_strerror(rc));
}

static void workload_make(void)
{
    shape = svc_model_shape_make(HIDDEN, LAYERS, VOCAB);
    weights = malloc(svc_model_floats(&shape) * sizeof(float));
    svc_model_fill(&shape, 7, weights);
    struct svc_stream stream = {.shape = shape, .seed = 7, .batch_min = 1, .batch_max = BATCH_MAX};
    CHECK(svc_round_make(&round_, &stream, 0, DISTINCT) == 0, "round");
    ref = malloc(round_.total_rows * VOCAB * sizeof(float));
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    nxr_runtime_t *rt;
    nxr_ctx_t *ctx;
    CHECK(nxr_runtime_create(&o, &rt) == 0, "reference runtime");
    CHECK(nxr_ctx_create(rt, nxr_domain_id(nxr_runtime_domain_at(rt, 0)), &ctx) == 0, "ctx");
    float *scratch = malloc(svc_model_scratch_floats(&shape, MAX_ROWS) * sizeof(float));
    for (size_t i = 0; i < DISTINCT; i++)
        reference(ctx, scratch, round_.rows[i], round_.input + round_.offset[i] * HIDDEN,
                  ref + round_.offset[i] * VOCAB);
    for (size_t j = 0; j < JUMBOS; j++) {
        jumbo_in[j] = malloc(jumbo_rows[j] * HIDDEN * sizeof(float));
        jumbo_ref[j] = malloc(jumbo_rows[j] * VOCAB * sizeof(float));
        svc_model_input(&shape, 7, 1000000 + j, jumbo_rows[j], jumbo_in[j]);
        reference(ctx, scratch, jumbo_rows[j], jumbo_in[j], jumbo_ref[j]);
    }
    free(scratch);
    nxr_ctx_destroy(ctx);
    nxr_runtime_destroy(rt);
}

static void workload_free(void)
{
    for (size_t j = 0; j < JUMBOS; j++) {
        free(jumbo_in[j]);
        free(jumbo_ref[j]);
    }
    free(ref);
    svc_round_free(&round_);
    free(weights);
}

/* ---- what an epoch counts ---------------------------------------------- */

#define MAX_CODES 16

struct tally {
    size_t requests, ok, errors, refused, lost, duplicated, wrong;
    /* Requests answered from a shared pass; batches retried alone, by the
     * code their pass or hand-off failed with. */
    long batched, retried_eio, retried_eagain, retried_enomem, retried_eplacement, retried_other;
    size_t untyped, unexplained, undetailed, tail_errors;
    int codes[MAX_CODES];
    size_t code_n[MAX_CODES];
    char example[MAX_CODES][160]; /* the first line a client got for each code */
    size_t ncodes;
    /* Injected while serving, and failed starts. */
    long alloc, mmap, mbind, provider, executor, restarts;
    /* Left at the end. */
    long threads, permits, guards, active, buffers, refs;
};

static void tally_code(struct tally *t, int code, size_t n, const char *example)
{
    for (size_t k = 0; k < t->ncodes; k++) {
        if (t->codes[k] == code) {
            t->code_n[k] += n;
            return;
        }
    }
    if (t->ncodes < MAX_CODES) {
        t->codes[t->ncodes] = code;
        snprintf(t->example[t->ncodes], sizeof(t->example[0]), "%s", example);
        t->code_n[t->ncodes++] = n;
    } else {
        t->untyped += n; /* more distinct codes than any fault explains */
    }
}

static size_t tally_of(const struct tally *t, int code)
{
    for (size_t k = 0; k < t->ncodes; k++)
        if (t->codes[k] == code)
            return t->code_n[k];
    return 0;
}

static void tally_add(struct tally *to, const struct tally *t)
{
    to->requests += t->requests, to->ok += t->ok, to->errors += t->errors;
    to->refused += t->refused, to->lost += t->lost, to->duplicated += t->duplicated;
    to->wrong += t->wrong, to->untyped += t->untyped, to->unexplained += t->unexplained;
    to->undetailed += t->undetailed, to->tail_errors += t->tail_errors;
    for (size_t k = 0; k < t->ncodes; k++)
        tally_code(to, t->codes[k], t->code_n[k], t->example[k]);
    to->alloc += t->alloc, to->mmap += t->mmap, to->mbind += t->mbind;
    to->provider += t->provider, to->executor += t->executor, to->restarts += t->restarts;
    to->batched += t->batched, to->retried_eio += t->retried_eio;
    to->retried_eagain += t->retried_eagain, to->retried_enomem += t->retried_enomem;
    to->retried_eplacement += t->retried_eplacement, to->retried_other += t->retried_other;
    to->threads += t->threads, to->permits += t->permits, to->guards += t->guards;
    to->active += t->active, to->buffers += t->buffers, to->refs += t->refs;
}

/* "ENOMEM", "NXR_EPLACEMENT": the code's name (nxr_strerror names nxr codes
 * "NXR_X: ..."; errnos by their description, so name those here). */
static const char *code_name(int code, char *buf, size_t n)
{
    switch (code) {
    case -ENOMEM: return "ENOMEM";
    case -EIO: return "EIO";
    case -EAGAIN: return "EAGAIN";
    case -EINVAL: return "EINVAL";
    case -EBUSY: return "EBUSY";
    case -ESHUTDOWN: return "ESHUTDOWN";
    default: break;
    }
    const char *s = nxr_strerror(code);
    size_t len = strcspn(s, ":");
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), s);
    return buf;
}

/* ---- the schedule ------------------------------------------------------ */

enum action_kind {
    ARM_STICKY,  /* the seam fails every call through `points` */
    ARM_ONE,     /* the seam fails the next call through `points` */
    DISARM,
    TRIM,        /* every pool back to the arena, and the arena purged */
    PROVIDER_ON, /* the provider fails every period-th GEMM call */
    PROVIDER_OFF,
    EXECUTOR_ON, /* the executors fail every period-th install or submit */
    EXECUTOR_OFF,
};

struct action {
    size_t at; /* runs before request `at` is submitted */
    enum action_kind kind;
    unsigned points;
    long period;
};

struct request_rec {
    struct svc_request r;
    bool submitted, refused, gave_up;
};

struct epoch {
    const char *name;
    enum svc_executor executor; /* NXR: nxr's teams; POOL: attach mode */
    bool caller_managed;        /* attach: the pool declared caller-managed */
    const char *domains;        /* declared domains (template), NULL: the default */
    size_t n;                   /* requests */
    nxr_runtime_t *rt;
    size_t ndomains;
    struct svc_replica replicas[MAX_DOMAINS];
    struct svc_attached attached;
    struct soak_executor execs[MAX_DOMAINS];
    struct svc_server *server;
    struct request_rec *recs;
    atomic_size_t next;     /* the next request id to hand out */
    atomic_size_t answered; /* progress, for the lost-request detector */
    atomic_bool abandoned;  /* a request was lost: send no more (the epoch failed) */
    pthread_mutex_t sched_lock;
    struct action *actions;
    size_t nactions, cap, next_action;
    /* Batches retried alone, by code (the server's on_retry, any thread). */
    atomic_long retried_eio, retried_eagain, retried_enomem, retried_eplacement, retried_other;
    struct tally t;
};

static void count_retry(void *arg, int status)
{
    struct epoch *E = arg;
    atomic_long *c = status == PROVIDER_ERROR   ? &E->retried_eio
                     : status == EXECUTOR_ERROR ? &E->retried_eagain
                     : status == -ENOMEM        ? &E->retried_enomem
                     : status == NXR_EPLACEMENT ? &E->retried_eplacement
                                                : &E->retried_other;
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static struct soak_gate provider_gate, executor_gate;
static struct soak_provider provider;
static nxr_provider_t *provider_handle;

static void add_action(struct epoch *E, size_t at, enum action_kind kind, unsigned points,
                       long period)
{
    if (E->nactions == E->cap) {
        E->cap = E->cap ? 2 * E->cap : 256;
        E->actions = realloc(E->actions, E->cap * sizeof(*E->actions));
    }
    E->actions[E->nactions++] = (struct action){at, kind, points, period};
}

static int by_id(const void *a, const void *b)
{
    const struct action *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return x < y ? -1 : x > y; /* stable: keep the order actions were added in */
}

/* Request id at permille pm of the epoch. */
static size_t at_pm(const struct epoch *E, unsigned pm)
{
    return E->n * pm / 1000;
}

/* The windows where jumbo requests make the arena grow: MMAP, then MBIND.
 * Inside, every JUMBO_EVERY-th request is a jumbo (answered with the
 * window's error: the arena cannot grow); one more comes right after the
 * window closes, and must be answered with its output. */
static const unsigned grow_windows[JUMBOS][2] = {{200, 250}, {280, 330}};
#define JUMBO_EVERY 8

static void build_schedule(struct epoch *E)
{
    /* ALLOC on every call; trimmed pools send scratch to the arena. */
    add_action(E, at_pm(E, 50), TRIM, 0, 0);
    add_action(E, at_pm(E, 50), ARM_STICKY, NXR_FAULT_ALLOC, 0);
    add_action(E, at_pm(E, 100), DISARM, 0, 0);
    /* ALLOC once every 5 requests. */
    for (size_t i = at_pm(E, 120); i < at_pm(E, 170); i += 5)
        add_action(E, i, ARM_ONE, NXR_FAULT_ALLOC, 0);
    add_action(E, at_pm(E, 170), DISARM, 0, 0);
    /* MMAP, then MBIND, on every call while jumbo requests grow the arena. */
    static const unsigned grow_points[JUMBOS] = {NXR_FAULT_MMAP, NXR_FAULT_MBIND};
    for (size_t w = 0; w < JUMBOS; w++) {
        add_action(E, at_pm(E, grow_windows[w][0]), ARM_STICKY, grow_points[w], 0);
        add_action(E, at_pm(E, grow_windows[w][1]), DISARM, 0, 0);
    }
    add_action(E, at_pm(E, 360), PROVIDER_ON, 0, 37);
    add_action(E, at_pm(E, 560), PROVIDER_OFF, 0, 0);
    add_action(E, at_pm(E, 600), EXECUTOR_ON, 0, 3);
    add_action(E, at_pm(E, 800), EXECUTOR_OFF, 0, 0);
    /* Everything at once. */
    add_action(E, at_pm(E, 820), PROVIDER_ON, 0, 11);
    add_action(E, at_pm(E, 820), EXECUTOR_ON, 0, 2);
    for (size_t i = at_pm(E, 820); i < at_pm(E, 880); i += 9)
        add_action(E, i, ARM_ONE, NXR_FAULT_ALLOC, 0);
    add_action(E, at_pm(E, 880), DISARM, 0, 0);
    add_action(E, at_pm(E, 880), PROVIDER_OFF, 0, 0);
    add_action(E, at_pm(E, 880), EXECUTOR_OFF, 0, 0);
    qsort(E->actions, E->nactions, sizeof(*E->actions), by_id);
}

static void trim_pools(struct epoch *E)
{
    for (size_t i = 0; i < nxr_runtime_domain_count(E->rt); i++)
        nxr_pool_trim(nxr_runtime_domain_at(E->rt, i));
}

/* Runs every action due at or before request i, in order, once. */
static void advance_schedule(struct epoch *E, size_t i)
{
    pthread_mutex_lock(&E->sched_lock);
    for (; E->next_action < E->nactions && E->actions[E->next_action].at <= i; E->next_action++) {
        const struct action *a = &E->actions[E->next_action];
        switch (a->kind) {
        case ARM_STICKY: nxr__fault_arm_from(a->points, 1); break;
        case ARM_ONE: nxr__fault_arm(a->points, 1); break;
        case DISARM: nxr__fault_arm(0, 0); break;
        case TRIM: trim_pools(E); break;
        case PROVIDER_ON: soak_gate_open(&provider_gate, a->period); break;
        case PROVIDER_OFF: soak_gate_close(&provider_gate); break;
        case EXECUTOR_ON: soak_gate_open(&executor_gate, a->period); break;
        case EXECUTOR_OFF: soak_gate_close(&executor_gate); break;
        }
    }
    pthread_mutex_unlock(&E->sched_lock);
}

/* What request i is: its rows, input and reference output. */
static void request_of(const struct epoch *E, size_t i, size_t *rows, const float **in,
                       const float **want)
{
    for (size_t w = 0; w < JUMBOS; w++) {
        size_t from = at_pm(E, grow_windows[w][0]), to = at_pm(E, grow_windows[w][1]);
        if ((i >= from && i < to && (i - from) % JUMBO_EVERY == JUMBO_EVERY / 2) ||
            i == to + JUMBO_EVERY / 2) {
            *rows = jumbo_rows[w], *in = jumbo_in[w], *want = jumbo_ref[w];
            return;
        }
    }
    size_t k = i % DISTINCT;
    *rows = round_.rows[k];
    *in = round_.input + round_.offset[k] * HIDDEN;
    *want = ref + round_.offset[k] * VOCAB;
}

/* ---- clients ----------------------------------------------------------- */

struct client {
    struct epoch *E;
    pthread_t thread;
    float *out;
    struct tally t;
};

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Waits for r's answer; false (r given up as lost) once the service has
 * answered nothing at all for LOST_AFTER_S (see the file comment). */
static bool wait_answer(struct epoch *E, struct svc_request *r, int *status)
{
    size_t seen = atomic_load_explicit(&E->answered, memory_order_relaxed);
    long long since = now_ns();
    pthread_mutex_lock(&r->lock);
    while (!r->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts); /* the condition variable's clock */
        ts.tv_sec += 1;
        pthread_cond_timedwait(&r->cond, &r->lock, &ts);
        if (r->done)
            break;
        size_t a = atomic_load_explicit(&E->answered, memory_order_relaxed);
        if (a != seen) {
            seen = a;
            since = now_ns();
        } else if (now_ns() - since > LOST_AFTER_S * 1000000000LL) {
            pthread_mutex_unlock(&r->lock);
            return false;
        }
    }
    *status = r->status;
    pthread_mutex_unlock(&r->lock);
    return true;
}

static bool typed(int code)
{
    return code < 0 && (nxr_status_is_nxr(code) || code > -4096);
}

/* An error an injected fault explains. */
static bool explained(int code)
{
    return code == -ENOMEM || code == NXR_EPLACEMENT || code == PROVIDER_ERROR ||
           code == EXECUTOR_ERROR;
}

/* The line the client got says what failed: something, and for the
 * injectors' errors the nxr call that returned it (the service passes
 * nxr_last_error on): the provider's through nxr_sgemm, the executor's
 * through nxr_submit or the kernel whose install failed. */
static bool detailed(int rc, const char *error)
{
    if (error[0] == '\0')
        return false;
    if (rc == PROVIDER_ERROR)
        return strstr(error, "nxr_sgemm") != NULL;
    if (rc == EXECUTOR_ERROR)
        return strstr(error, "nxr_") != NULL;
    return true;
}

static void client_error(struct client *c, size_t i, int rc, const struct svc_request *r)
{
    struct tally *t = &c->t;
    t->errors++;
    tally_code(t, rc, 1, r->error);
    if (!typed(rc)) {
        if (t->untyped++ == 0)
            fprintf(stderr, "soak: %s request %zu: untyped error %d\n", c->E->name, i, rc);
    } else if (!explained(rc)) {
        if (t->unexplained++ == 0)
            fprintf(stderr, "soak: %s request %zu: %s, which no injected fault explains: %s\n",
                    c->E->name, i, nxr_strerror(rc), r->error);
    }
    if (!detailed(rc, r->error) && t->undetailed++ == 0)
        fprintf(stderr, "soak: %s request %zu: %s, and the client was told \"%s\"\n", c->E->name,
                i, nxr_strerror(rc), r->error);
    if (i >= at_pm(c->E, 900) && t->tail_errors++ == 0)
        fprintf(stderr, "soak: %s request %zu: %s after every fault was off: %s\n", c->E->name, i,
                nxr_strerror(rc), r->error);
}

static void *client(void *p)
{
    struct client *c = p;
    struct epoch *E = c->E;
    while (!atomic_load_explicit(&E->abandoned, memory_order_relaxed)) {
        /* Relaxed: hands out distinct ids. */
        size_t i = atomic_fetch_add_explicit(&E->next, 1, memory_order_relaxed);
        if (i >= E->n)
            break;
        advance_schedule(E, i);
        struct request_rec *q = &E->recs[i];
        size_t rows;
        const float *in, *want;
        request_of(E, i, &rows, &in, &want);
        svc_request_init(&q->r);
        q->r.index = i;
        q->r.rows = rows;
        q->r.input = in;
        q->r.output = c->out;
        memset(c->out, 0xff, rows * VOCAB * sizeof(float)); /* NaN: nothing written */
        q->submitted = true;
        c->t.requests++;
        int rc = svc_server_submit(E->server, &q->r);
        if (rc != 0) {
            q->refused = true;
            c->t.refused++;
            client_error(c, i, rc, &q->r);
            continue;
        }
        int status;
        if (!wait_answer(E, &q->r, &status)) {
            q->gave_up = true;
            fprintf(stderr, "soak: %s request %zu: no answer, and no progress for %d s\n",
                    E->name, i, LOST_AFTER_S);
            /* Every other client waits for its own lost request too, or
             * soon will: end the epoch rather than lose 30 s per request. */
            atomic_store_explicit(&E->abandoned, true, memory_order_relaxed);
            continue;
        }
        atomic_fetch_add_explicit(&E->answered, 1, memory_order_relaxed);
        if (status != 0) {
            client_error(c, i, status, &q->r);
        } else if (memcmp(c->out, want, rows * VOCAB * sizeof(float)) == 0) {
            c->t.ok++;
        } else if (c->t.wrong++ == 0) {
            fprintf(stderr, "soak: %s request %zu (%zu rows): answered 0 with a wrong output\n",
                    E->name, i, rows);
        }
    }
    return NULL;
}

/* ---- starting a service, with each stage failed once ------------------- */

static char errbuf[512];

static int create_runtime(struct epoch *E)
{
    struct nxr_runtime_opts o;
    nxr_runtime_opts_init(&o);
    o.ignore_env = true;
    o.domains = E->domains != NULL ? nxr_test_expand(E->domains) : NULL;
    o.providers[NXR_FAMILY_GEMM] = provider_handle;
    errbuf[0] = '\0';
    int rc = nxr_runtime_create(&o, &E->rt);
    if (rc != 0)
        snprintf(errbuf, sizeof(errbuf), "%s", nxr_last_error());
    return rc;
}

/* After a start step failed on purpose: its typed error, and nothing of it
 * left (threads as before, the runtime's domains and the pools' executor
 * references unchanged). */
static void expect_clean_failure(struct epoch *E, const char *what, int rc, int want, int threads,
                                 size_t domains, long refs)
{
    CHECK(rc == want, "%s: %s: got %s, not %s (%s)", E->name, what, nxr_strerror(rc),
          nxr_strerror(want), errbuf);
    CHECK(nxr_test_wait_thread_count(threads) == threads, "%s: %s: threads left", E->name, what);
    if (E->rt != NULL)
        CHECK(nxr_runtime_domain_count(E->rt) == domains, "%s: %s: a domain was left", E->name,
              what);
    CHECK(pool_executor_refs() == refs, "%s: %s: executor references left", E->name, what);
    E->t.restarts++;
}

/* attach hooks: the first attempt's pool cannot start its last thread. */
static atomic_long creates_left;
static int create_until(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    if (atomic_fetch_sub(&creates_left, 1) <= 0)
        return EAGAIN;
    return pthread_create(t, attr, fn, arg);
}

struct attach_ctx {
    struct epoch *E;
    bool fail_pool;
};

static struct host_pool *start_pool(void *arg, size_t i, unsigned threads, const cpu_set_t *cpus)
{
    struct attach_ctx *a = arg;
    (void)i;
    if (!a->fail_pool)
        return host_pool_start(threads, cpus);
    atomic_store(&creates_left, (long)threads - 1);
    return host_pool_start_with(threads, cpus, create_until);
}

static int declare(void *arg, size_t i, struct nxr_external_decl *decl)
{
    struct attach_ctx *a = arg;
    if (a->E->caller_managed) {
        decl->admission = NXR_ADMISSION_CALLER_MANAGED;
        decl->cpus = NULL;
    }
    soak_executor_wrap(&a->E->execs[i], &decl->executor, &executor_gate, EXECUTOR_ERROR,
                       a->E->caller_managed);
    return 0;
}

static int attach_domain(struct epoch *E, size_t i)
{
    struct attach_ctx a = {.E = E};
    struct svc_attach_hooks hooks = {.start_pool = start_pool, .declare = declare, .arg = &a};
    const size_t domains = nxr_runtime_domain_count(E->rt);
    const long refs = pool_executor_refs();
    int threads = nxr_test_thread_count();
    /* The pool's last thread cannot start: the pool stops the others. */
    a.fail_pool = true;
    int rc = svc_attach_domain(E->rt, E->executor, i, &hooks, &E->attached, errbuf, sizeof(errbuf));
    expect_clean_failure(E, "attach, pool thread", rc, -EAGAIN, threads, domains, refs);
    a.fail_pool = false;
    /* nxr's attach runs out of memory: the started pool is stopped again. */
    nxr__fault_arm(NXR_FAULT_ALLOC, 1);
    rc = svc_attach_domain(E->rt, E->executor, i, &hooks, &E->attached, errbuf, sizeof(errbuf));
    nxr__fault_arm(0, 0);
    expect_clean_failure(E, "attach, nxr", rc, -ENOMEM, threads, domains, refs);
    rc = svc_attach_domain(E->rt, E->executor, i, &hooks, &E->attached, errbuf, sizeof(errbuf));
    CHECK(rc == 0, "%s: attach domain %zu: %s", E->name, i, errbuf);
    return rc;
}

static int start_service(struct epoch *E)
{
    int threads = nxr_test_thread_count();
    /* The first worker cannot be created. */
    nxr__fault_arm(NXR_FAULT_THREAD_CREATE, 1);
    int rc = create_runtime(E);
    nxr__fault_arm(0, 0);
    CHECK(E->rt == NULL, "%s: a failed create handed out a runtime", E->name);
    expect_clean_failure(E, "runtime, worker thread", rc, -EAGAIN, threads, 0, 0);
    if ((rc = create_runtime(E)) != 0) {
        CHECK(rc == 0, "%s: runtime: %s: %s", E->name, nxr_strerror(rc), errbuf);
        return rc;
    }
    E->ndomains = nxr_runtime_domain_count(E->rt);
    if (E->ndomains > MAX_DOMAINS) {
        CHECK(E->ndomains <= MAX_DOMAINS, "%s: %zu domains", E->name, E->ndomains);
        E->ndomains = 0;
        return -EINVAL;
    }
    const size_t bytes = svc_model_floats(&shape) * sizeof(float);
    threads = nxr_test_thread_count();
    for (size_t i = 0; i < E->ndomains; i++) {
        nxr_domain_t *d = nxr_runtime_domain_at(E->rt, i);
        if (i == 0) { /* the first replica finds no memory */
            nxr__fault_arm(NXR_FAULT_ALLOC, 1);
            rc = svc_replica_create(&E->replicas[i], d, weights, bytes);
            nxr__fault_arm(0, 0);
            expect_clean_failure(E, "weights", rc, -ENOMEM, threads, E->ndomains, 0);
        }
        if ((rc = svc_replica_create(&E->replicas[i], d, weights, bytes)) != 0) {
            CHECK(rc == 0, "%s: weights: %s", E->name, nxr_strerror(rc));
            return rc;
        }
    }
    CHECK(svc_attached_init(E->rt, &E->attached, errbuf, sizeof(errbuf)) == 0, "%s", errbuf);
    for (size_t i = 0; E->executor != SVC_EXECUTOR_NXR && i < E->ndomains; i++)
        if ((rc = attach_domain(E, i)) != 0)
            return rc;
    struct svc_slot_decl slots[MAX_DOMAINS];
    for (size_t i = 0; i < E->ndomains; i++) {
        nxr_domain_t *d = nxr_runtime_domain_at(E->rt, i);
        slots[i] = (struct svc_slot_decl){
            .domain_id = E->executor == SVC_EXECUTOR_NXR ? nxr_domain_id(d) : E->attached.ids[i],
            .weights = E->replicas[i].w,
            .memory = d,
        };
    }
    struct svc_server_opts so = {.shape = shape, .split_rows = SPLIT_ROWS,
                                 .max_batch = MAX_BATCH, .on_retry = count_retry,
                                 .on_retry_arg = E};
    /* The first context cannot be allocated: the server starts nothing. */
    threads = nxr_test_thread_count();
    const size_t domains = nxr_runtime_domain_count(E->rt);
    const long refs = pool_executor_refs();
    nxr__fault_arm(NXR_FAULT_ALLOC, 1);
    rc = svc_server_start(&E->server, E->rt, slots, E->ndomains, &so, errbuf, sizeof(errbuf));
    nxr__fault_arm(0, 0);
    CHECK(E->server == NULL, "%s: a failed start handed out a server", E->name);
    expect_clean_failure(E, "serving threads", rc, -ENOMEM, threads, domains, refs);
    rc = svc_server_start(&E->server, E->rt, slots, E->ndomains, &so, errbuf, sizeof(errbuf));
    CHECK(rc == 0, "%s: serving threads: %s", E->name, errbuf);
    return rc;
}

/* ---- the end of an epoch ----------------------------------------------- */

/* Permits, guards and operations in flight, over every domain. */
static void count_quiet(struct epoch *E)
{
    nxr_runtime_t *rt = E->rt;
    for (size_t i = 0; i < rt->domain_count; i++)
        nxr__exec_drain(&rt->domains[i]->exec); /* the last jobs' done callbacks */
    struct nxr__arbiter_stats st;
    nxr__arbiter_stats(rt->arbiter, &st);
    E->t.permits = (long)st.holders + (long)st.waiters + (st.exclusive_held ? 1 : 0);
    for (size_t i = 0; i < rt->domain_count; i++) {
        struct nxr_domain *d = rt->domains[i];
        E->t.guards += atomic_load(&d->exec.guard) != 0;
        E->t.active += d->exec.active;
    }
}

static void count_buffers(struct epoch *E)
{
    for (size_t i = 0; i < nxr_runtime_domain_count(E->rt); i++) {
        struct nxr_pool_stats ps;
        CHECK(nxr_pool_stats(nxr_runtime_domain_at(E->rt, i), &ps) == 0, "pool stats");
        E->t.buffers += (long)ps.outstanding;
    }
}

/* Every request submitted and not refused was answered exactly once. */
static void count_answers(struct epoch *E)
{
    for (size_t i = 0; i < E->n; i++) {
        struct request_rec *q = &E->recs[i];
        if (!q->submitted)
            continue;
        unsigned answers = q->r.answers;
        if (!q->refused && (answers == 0 || q->gave_up)) {
            if (E->t.lost++ == 0)
                fprintf(stderr, "soak: %s request %zu: lost (%u answers)\n", E->name, i, answers);
        }
        if (answers > 1 && E->t.duplicated++ == 0)
            fprintf(stderr, "soak: %s request %zu: answered %u times\n", E->name, i, answers);
        svc_request_destroy(&q->r);
    }
}

static long seam_failures(unsigned point)
{
    return nxr__fault_failures((enum nxr__fault_point)point);
}

static void run_epoch(struct epoch *E)
{
    const int threads_before = nxr_test_thread_count();
    pthread_mutex_init(&E->sched_lock, NULL);
    build_schedule(E);
    E->recs = calloc(E->n, sizeof(*E->recs));
    atomic_init(&E->next, 0);
    atomic_init(&E->answered, 0);
    atomic_init(&E->abandoned, false);
    atomic_init(&E->retried_eio, 0);
    atomic_init(&E->retried_eagain, 0);
    atomic_init(&E->retried_enomem, 0);
    atomic_init(&E->retried_eplacement, 0);
    atomic_init(&E->retried_other, 0);
    const long provider_before = atomic_load(&provider.failed);
    int rc = start_service(E);
    long alloc0 = seam_failures(NXR_FAULT_ALLOC), mmap0 = seam_failures(NXR_FAULT_MMAP),
         mbind0 = seam_failures(NXR_FAULT_MBIND);
    const long long t0 = now_ns();
    struct client clients[CLIENTS];
    if (rc == 0) {
        for (unsigned c = 0; c < CLIENTS; c++) {
            clients[c] = (struct client){.E = E};
            clients[c].out = malloc(MAX_ROWS * VOCAB * sizeof(float));
            CHECK(pthread_create(&clients[c].thread, NULL, client, &clients[c]) == 0, "client");
        }
        for (unsigned c = 0; c < CLIENTS; c++) {
            pthread_join(clients[c].thread, NULL);
            tally_add(&E->t, &clients[c].t);
        }
    }
    const double wall = (double)(now_ns() - t0) / 1e9;
    nxr__fault_arm(0, 0);
    soak_gate_close(&provider_gate);
    soak_gate_close(&executor_gate);
    E->t.alloc = seam_failures(NXR_FAULT_ALLOC) - alloc0;
    E->t.mmap = seam_failures(NXR_FAULT_MMAP) - mmap0;
    E->t.mbind = seam_failures(NXR_FAULT_MBIND) - mbind0;
    E->t.provider = atomic_load(&provider.failed) - provider_before;
    for (size_t i = 0; i < E->ndomains; i++)
        E->t.executor += atomic_load(&E->execs[i].failed_items) +
                         atomic_load(&E->execs[i].failed_installs);

    E->t.retried_eio = atomic_load(&E->retried_eio);
    E->t.retried_eagain = atomic_load(&E->retried_eagain);
    E->t.retried_enomem = atomic_load(&E->retried_enomem);
    E->t.retried_eplacement = atomic_load(&E->retried_eplacement);
    E->t.retried_other = atomic_load(&E->retried_other);
    for (size_t i = 0; E->server != NULL && i < svc_server_slots(E->server); i++) {
        struct svc_slot_stats st;
        svc_server_slot_stats(E->server, i, &st, NULL);
        E->t.batched += (long)st.batched;
    }
    if (E->rt != NULL)
        count_quiet(E);
    svc_server_stop(E->server);
    if (E->rt != NULL)
        count_buffers(E);
    for (size_t i = 0; i < E->ndomains; i++)
        svc_replica_destroy(&E->replicas[i]);
    nxr_runtime_destroy(E->rt);
    E->t.refs = pool_executor_refs();
    svc_attached_release(&E->attached);
    /* Only now: a service that answers twice may still write an output
     * after its client went (counted below, not a crash here). */
    for (unsigned c = 0; rc == 0 && c < CLIENTS; c++)
        free(clients[c].out);
    int left = nxr_test_wait_thread_count(threads_before);
    E->t.threads = left > threads_before ? left - threads_before : 0;
    count_answers(E);
    free(E->recs);
    free(E->actions);
    pthread_mutex_destroy(&E->sched_lock);

    const struct tally *t = &E->t;
    char line[1024], name[64];
    int len = snprintf(line, sizeof(line), "soak epoch %s: %zu requests, %zu ok, %zu errors (",
                       E->name, t->requests, t->ok, t->errors);
    for (size_t k = 0; k < t->ncodes; k++)
        len += snprintf(line + len, sizeof(line) - (size_t)len, "%s%s %zu", k ? ", " : "",
                        code_name(t->codes[k], name, sizeof(name)), t->code_n[k]);
    snprintf(line + len, sizeof(line) - (size_t)len,
             "), lost %zu, duplicated %zu, wrong %zu; batched %ld, retried alone: EIO %ld, "
             "EAGAIN %ld, ENOMEM %ld, NXR_EPLACEMENT %ld, other %ld; injected: alloc %ld, "
             "mmap %ld, mbind %ld, provider %ld, executor %ld, failed starts %ld; left: threads "
             "%ld, permits %ld, buffers %ld; %.1f s, %.0f requests/s",
             t->lost, t->duplicated, t->wrong, t->batched, t->retried_eio, t->retried_eagain,
             t->retried_enomem, t->retried_eplacement, t->retried_other, t->alloc, t->mmap,
             t->mbind, t->provider, t->executor, t->restarts, t->threads, t->permits,
             t->buffers, wall,
             wall > 0 ? (double)t->requests / wall : 0.0);
    printf("%s\n", line);
    fflush(stdout);

    /* The epoch's own invariants (the table's are checked in main). */
    CHECK(t->requests == E->n, "%s: %zu of %zu requests sent", E->name, t->requests, E->n);
    CHECK(tally_of(t, PROVIDER_ERROR) + (size_t)t->retried_eio == (size_t)t->provider,
          "%s: %zu requests answered %s and %ld batches retried, the provider failed %ld calls",
          E->name, tally_of(t, PROVIDER_ERROR), nxr_strerror(PROVIDER_ERROR), t->retried_eio,
          t->provider);
    CHECK(tally_of(t, EXECUTOR_ERROR) + (size_t)t->retried_eagain == (size_t)t->executor,
          "%s: %zu requests answered %s and %ld batches retried, the executor failed %ld items "
          "and installs",
          E->name, tally_of(t, EXECUTOR_ERROR), nxr_strerror(EXECUTOR_ERROR), t->retried_eagain,
          t->executor);
    CHECK((tally_of(t, -ENOMEM) + (size_t)t->retried_enomem > 0) == (t->alloc + t->mmap > 0),
          "%s: %zu requests answered ENOMEM, %ld batches retried, %ld alloc and %ld mmap "
          "failures",
          E->name, tally_of(t, -ENOMEM), t->retried_enomem, t->alloc, t->mmap);
    CHECK((tally_of(t, NXR_EPLACEMENT) + (size_t)t->retried_eplacement > 0) == (t->mbind > 0),
          "%s: %zu requests answered NXR_EPLACEMENT, %ld batches retried, %ld mbind failures",
          E->name, tally_of(t, NXR_EPLACEMENT), t->retried_eplacement, t->mbind);
    CHECK(t->retried_other == 0, "%s: %ld batches retried after an error no fault explains",
          E->name, t->retried_other);
    CHECK(t->guards == 0 && t->active == 0, "%s: %ld guards, %ld operations left", E->name,
          t->guards, t->active);
    CHECK(t->refs == 0, "%s: %ld executor references left", E->name, t->refs);
}

/* ---- LeakSanitizer, when the build has it ------------------------------ */

/* Weak: present only in sanitizer builds (-fsanitize=address or leak). */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

/* Runs LeakSanitizer's check now, its report captured and passed on to
 * stderr; returns the allocations it reports leaked (-1: it found leaks
 * but its summary could not be read), or -2 without LeakSanitizer. */
static long leak_check(void)
{
    if (__lsan_do_recoverable_leak_check == NULL)
        return -2;
    char path[] = "/tmp/nxr_soak_lsan_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return __lsan_do_recoverable_leak_check() ? -1 : 0;
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int found = __lsan_do_recoverable_leak_check();
    dup2(saved, 2);
    close(saved);
    long leaked = found ? -1 : 0;
    off_t size = lseek(fd, 0, SEEK_END);
    char *report = size > 0 ? malloc((size_t)size + 1) : NULL;
    if (report != NULL && pread(fd, report, (size_t)size, 0) == size) {
        report[size] = '\0';
        fputs(report, stderr);
        const char *s = strstr(report, "leaked in ");
        if (found && s != NULL)
            leaked = strtol(s + strlen("leaked in "), NULL, 10);
    }
    free(report);
    close(fd);
    return leaked;
}

/* ---- main -------------------------------------------------------------- */

int main(void)
{
    size_t total = DEFAULT_REQUESTS;
    const char *env = getenv("NXR_SOAK_REQUESTS");
    if (env != NULL && atol(env) >= 1000)
        total = (size_t)atol(env);
    const int threads_start = nxr_test_thread_baseline();
    workload_make();
    CHECK(soak_provider_create(&provider, &provider_gate, PROVIDER_ERROR, &provider_handle) == 0,
          "provider");

    const bool two = nxr_test_cpu_count() >= 2;
    struct epoch epochs[] = {
        {.name = "nxr", .executor = SVC_EXECUTOR_NXR},
        {.name = two ? "nxr-2" : "nxr-1", .executor = SVC_EXECUTOR_NXR,
         .domains = two ? "0:%0;1:%1" : "0:%0"},
        {.name = "pool", .executor = SVC_EXECUTOR_POOL},
        {.name = "caller", .executor = SVC_EXECUTOR_POOL, .caller_managed = true},
    };
    const size_t nepochs = sizeof(epochs) / sizeof(epochs[0]);
    printf("soak: %zu requests in %zu epochs, %d clients, model hidden %d x %d layers, vocab %d, "
           "batch 1-%d (passes of up to %d rows, split from %d) and jumbo up to %d rows, %d CPUs\n",
           total, nepochs, CLIENTS, HIDDEN, LAYERS, VOCAB, BATCH_MAX, MAX_BATCH, SPLIT_ROWS, MAX_ROWS,
           nxr_test_cpu_count());
    fflush(stdout);
    struct tally all = {0};
    const long long t0 = now_ns();
    for (size_t e = 0; e < nepochs; e++) {
        epochs[e].n = total / nepochs + (e < total % nepochs ? 1 : 0);
        run_epoch(&epochs[e]);
        tally_add(&all, &epochs[e].t);
    }
    const double wall = (double)(now_ns() - t0) / 1e9;
    nxr_provider_destroy(provider_handle);
    soak_provider_release(&provider);
    workload_free();
    int left = nxr_test_wait_thread_count(threads_start);
    long threads_left = left > threads_start ? left - threads_start : 0;
    long leaks = leak_check();

    char name[64];
    printf("soak: table (%.1f s, %.0f requests/s)\n", wall, wall > 0 ? (double)all.requests / wall : 0.0);
    printf("soak:   %-34s %zu\n", "requests", all.requests);
    printf("soak:   %-34s %zu\n", "answered ok (reference bits)", all.ok);
    printf("soak:   %-34s %zu\n", "answered with a typed error", all.errors - all.untyped);
    for (size_t k = 0; k < all.ncodes; k++)
        printf("soak:     %-32s %-8zu e.g. \"%s\"\n", code_name(all.codes[k], name, sizeof(name)),
               all.code_n[k], all.example[k]);
    printf("soak:   %-34s %zu\n", "untyped or unexplained errors", all.untyped + all.unexplained);
    printf("soak:   %-34s %zu\n", "errors after the faults stopped", all.tail_errors);
    printf("soak:   %-34s %zu\n", "lost", all.lost);
    printf("soak:   %-34s %zu\n", "duplicated", all.duplicated);
    printf("soak:   %-34s %zu\n", "wrong outputs", all.wrong);
    if (leaks >= -1)
        printf("soak:   %-34s %ld\n", "leaks (LeakSanitizer)", leaks);
    else
        printf("soak:   %-34s not checked (no LeakSanitizer in this build)\n", "leaks");
    printf("soak:   %-34s %ld\n", "threads left", all.threads + threads_left);
    printf("soak:   %-34s %ld\n", "permits left", all.permits);
    printf("soak:   %-34s %ld\n", "buffers left", all.buffers);
    printf("soak:   %-34s alloc %ld, mmap %ld, mbind %ld, provider %ld, executor %ld\n",
           "faults injected while serving", all.alloc, all.mmap, all.mbind, all.provider,
           all.executor);
    printf("soak:   %-34s %ld\n", "failed starts, restarted", all.restarts);
    printf("soak:   %-34s %ld\n", "requests answered from a batch", all.batched);
    printf("soak:   %-34s EIO %ld, EAGAIN %ld, ENOMEM %ld, NXR_EPLACEMENT %ld\n",
           "batches retried alone", all.retried_eio, all.retried_eagain, all.retried_enomem,
           all.retried_eplacement);

    CHECK(all.ok + all.wrong + all.errors + all.lost == all.requests,
          "%zu ok + %zu wrong + %zu errors + %zu lost != %zu requests", all.ok, all.wrong,
          all.errors, all.lost, all.requests);
    CHECK(all.lost == 0 && all.duplicated == 0 && all.wrong == 0, "lost, duplicated or wrong");
    CHECK(all.untyped == 0 && all.unexplained == 0 && all.undetailed == 0 && all.refused == 0,
          "%zu untyped, %zu unexplained, %zu without detail, %zu refused", all.untyped,
          all.unexplained, all.undetailed, all.refused);
    CHECK(all.tail_errors == 0, "errors after the faults stopped");
    CHECK(leaks <= 0, "LeakSanitizer: %ld leaked allocations", leaks);
    CHECK(all.threads + threads_left == 0 && all.permits == 0 && all.buffers == 0,
          "threads, permits or buffers left");
    /* Every kind of fault reached the service (or the soak proves nothing). */
    CHECK(all.alloc > 0 && all.mmap > 0 && all.mbind > 0 && all.provider > 0 && all.executor > 0 &&
              all.restarts > 0,
          "a fault kind never fired");
    /* Batches formed, and faults met them (or the retry proves nothing). */
    CHECK(all.batched > 0 && all.retried_eio + all.retried_eagain + all.retried_enomem > 0,
          "%ld requests batched, no batch retried", all.batched);
    const unsigned f = nxr_test_check_failures();
    printf("soak: result: %s (%u checks failed)\n", f == 0 ? "PASSED" : "FAILED", f);
    printf("%d passed, %d failed\n", f == 0 ? 1 : 0, f == 0 ? 0 : 1);
    /* Now: LeakSanitizer's own check at exit ends a leaking process with
     * _exit, which would drop what stdio still holds. */
    fflush(stdout);
    return f == 0 ? 0 : 1;
}
