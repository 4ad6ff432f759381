/*
 * Steps (runtime/nxr_step.h): a sequence of products and loops run as one
 * region on a context's domain.
 *
 * Every participant of the region walks the operations in order. A loop's
 * chunks are handed out from the operation's counters (its home ranges,
 * HOMES below). A product is run the
 * way a kernel call runs it, but cooperatively: each participant calls the
 * native kernel itself with the same arguments (so each builds the same
 * plan, on its own stack), and the kernel's call->parallel_for, instead of
 * fanning out, takes chunks from the operation's counters and runs
 * them on that participant. The kernel cuts its work the same way for every
 * participant (its cut depends on the arguments and call->threads only), so
 * the chunks are one set, each run once, whoever takes it; the result is
 * the one call's, bit for bit.
 *
 * Completion: `done` counts an operation's finished chunks. At a barrier a
 * participant waits until every operation before it is done. It can only be
 * waiting for chunks that were taken, and a chunk is taken by a thread that
 * runs it at once: the earliest unfinished chunk never waits on anything,
 * so the step progresses with any number of awake threads, one included.
 * A participant whose slot no worker claimed in time is run by an awake
 * thread after its own (executor/team.c): it finds every chunk taken and
 * passes through. The wait spins briefly, then sleeps on the run's
 * progress word, which the thread that finishes an operation bumps.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/internal/pool.h"
#include "base/internal/build.h"
#include "base/internal/last_error.h"
#include "base/internal/sys.h"
#include "executor/internal/exec.h"
#include "executor/internal/stall.h"
#include "executor/internal/tasks.h"
#include "kernels/internal/native.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/kernel_call.h"
#include "runtime/internal/runtime.h"
#include "runtime/internal/step.h"
#include "runtime/nxr_step.h"

enum op_kind { OP_LOOP, OP_PRODUCT };

struct op {
    enum op_kind kind;
    unsigned phase; /* barriers added before it */
    /* OP_LOOP */
    size_t begin, end, grain;
    nxr_for_fn fn;
    void *arg;
    /* OP_PRODUCT */
    struct nxr_sgemm_packed_args args;
    struct nxr_sgemm_epilogue epilogue;
    bool has_epilogue;
};

struct nxr_step {
    struct op *ops;
    size_t nops, cap;
    unsigned phase; /* the phase of the next operation added */
};

/* Pause iterations a participant spins at a barrier before it sleeps:
 * about the length of a small chunk, so a barrier between two operations
 * of a decode step rarely sleeps. */
#define BARRIER_SPIN 4000

#define UNKNOWN SIZE_MAX

/* An operation's chunks are cut into up to HOMES home ranges, one per
 * participant: each takes its own range's chunks in order (one stream
 * through the weights, the way one big chunk would be read), then takes
 * the chunks left in the others' ranges. So a participant on a slower CPU
 * (a busy hyperthread sibling, a neighbour's interrupts) sheds the end of
 * its range to the faster ones instead of making them wait at the next
 * barrier, and one awake participant still takes every chunk. */
#define HOMES 8

/* Products split this many times finer than the kernel's one chunk per
 * participant: the slack the taking of others' chunks works with. */
#define PRODUCT_SPLIT 4

/* One operation's state while the step runs. */
struct op_run {
    /* Chunks taken from each home range (offsets into it). */
    _Alignas(NXR__CACHE_LINE) atomic_size_t next[HOMES];
    atomic_size_t done;                           /* chunks finished */
    atomic_size_t total;                          /* chunks (UNKNOWN until the kernel says) */
    atomic_int failed; /* the kernel refused before cutting: the op counts as done */
};

struct nxr__step_run {
    const struct nxr_step *step;
    const struct nxr__exec *exec;
    struct op_run *ops;
    struct nxr__packed_call *pc; /* per op (products) */
    unsigned participants;
    void *const *scratch; /* per participant, or NULL */
    size_t scratch_bytes;
    size_t products;      /* product operations, for the domain's counters */
    size_t weight_bytes;  /* the packed bytes they stream, as their calls would count */
    bool in_place;        /* run inside a body of the domain: one participant, as it is */
    atomic_uint progress; /* futex word: bumped when an operation completes */
    atomic_uint sleepers; /* participants asleep (or about to be) on progress */
    atomic_int status;    /* the first failure */
    nxr_buffer_t *scratch_buffer;
    void **scratch_ptrs;
};

/* ---- building ------------------------------------------------------------------- */

int nxr_step_create(nxr_step_t **out)
{
    nxr__call_begin();
    if (out == NULL)
        return nxr__fail(-EINVAL, __func__, "out is NULL");
    *out = nxr__calloc(1, sizeof(**out));
    if (*out == NULL)
        return nxr__fail(-ENOMEM, __func__, "no memory for the step");
    return 0;
}

void nxr_step_destroy(nxr_step_t *step)
{
    if (step == NULL)
        return;
    free(step->ops);
    free(step);
}

/* The slot for one more operation: NULL when the array cannot grow (the
 * step unchanged). */
static struct op *append(nxr_step_t *step)
{
    if (step->nops == step->cap) {
        size_t cap = step->cap != 0 ? 2 * step->cap : 16;
        if (cap > SIZE_MAX / sizeof(struct op))
            return NULL;
        struct op *ops = nxr__malloc(cap * sizeof(*ops));
        if (ops == NULL)
            return NULL;
        if (step->nops > 0)
            memcpy(ops, step->ops, step->nops * sizeof(*ops));
        free(step->ops);
        step->ops = ops;
        step->cap = cap;
    }
    struct op *op = &step->ops[step->nops];
    memset(op, 0, sizeof(*op));
    op->phase = step->phase;
    return op;
}

int nxr_step_add_sgemm_packed(nxr_step_t *step, const struct nxr_sgemm_packed_args *args,
                              const struct nxr_sgemm_epilogue *epilogue)
{
    nxr__call_begin();
    if (step == NULL)
        return nxr__fail(-EINVAL, __func__, "step is NULL");
    if (args == NULL || args->w == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", args == NULL ? "args" : "args->w");
    /* A product that only scales C takes another path in the kernel (C
     * scaled, then the epilogue: two passes), which no step cuts. */
    if (args->m == 0)
        return nxr__fail(-EINVAL, __func__, "args->m is 0 (a step's product reads its operands)");
    if (!(args->alpha != 0.0f))
        return nxr__fail(-EINVAL, __func__,
                         "args->alpha is 0 (a step's product reads its operands; scale C with a "
                         "loop)");
    struct op *op = append(step);
    if (op == NULL)
        return nxr__fail(-ENOMEM, __func__, "no memory for operation %zu", step->nops);
    op->kind = OP_PRODUCT;
    op->args = *args;
    if (epilogue != NULL) {
        op->epilogue = *epilogue;
        op->has_epilogue = true;
    }
    step->nops++;
    return 0;
}

int nxr_step_add_loop(nxr_step_t *step, size_t begin, size_t end, size_t grain, nxr_for_fn fn,
                      void *arg)
{
    nxr__call_begin();
    if (step == NULL)
        return nxr__fail(-EINVAL, __func__, "step is NULL");
    if (fn == NULL)
        return nxr__fail(-EINVAL, __func__, "fn is NULL");
    if (begin > end)
        return nxr__fail(-EINVAL, __func__, "begin > end");
    struct op *op = append(step);
    if (op == NULL)
        return nxr__fail(-ENOMEM, __func__, "no memory for operation %zu", step->nops);
    op->kind = OP_LOOP;
    op->begin = begin;
    op->end = end;
    op->grain = grain;
    op->fn = fn;
    op->arg = arg;
    step->nops++;
    return 0;
}

int nxr_step_add_barrier(nxr_step_t *step)
{
    nxr__call_begin();
    if (step == NULL)
        return nxr__fail(-EINVAL, __func__, "step is NULL");
    if (step->phase == UINT_MAX)
        return nxr__fail(-ENOMEM, __func__, "too many barriers");
    step->phase++;
    return 0;
}

/* ---- running ------------------------------------------------------------------------ */

/* Chunks of `grain` over len iterations (grain 0: one per participant). */
static size_t chunks_of(size_t len, size_t grain, unsigned participants, size_t *g)
{
    if (grain == 0)
        grain = len / participants + (len % participants != 0);
    if (grain == 0)
        grain = 1;
    *g = grain;
    return len / grain + (len % grain != 0);
}

/* One chunk finished: the last one of its operation wakes the sleepers. */
static void chunk_done(struct nxr__step_run *r, struct op_run *o, size_t total)
{
    /* seq_cst with the sleepers' count (barrier_wait): either this thread
     * sees a sleeper, or the sleeper sees the operation done. Release: the
     * chunk's writes are seen by whoever sees the count. */
    if (atomic_fetch_add(&o->done, 1) + 1 == total) {
        atomic_fetch_add(&r->progress, 1);
        if (atomic_load(&r->sleepers) > 0)
            nxr__futex_wake(&r->progress, INT_MAX);
    }
}

/* How many home ranges `total` chunks have with `participants`. */
static unsigned homes_of(size_t total, unsigned participants)
{
    size_t h = participants < HOMES ? participants : HOMES;
    return (unsigned)(h < total ? h : total > 0 ? total : 1);
}

/* Home range h of `total` chunks in `homes`: chunks [*first, *end). */
static void home_range(size_t total, unsigned homes, unsigned h, size_t *first, size_t *end)
{
    *first = total * h / homes;
    *end = total * (h + 1) / homes;
}

/* Whether every chunk of the operation was taken (none left to take). */
static bool all_taken(struct op_run *o, size_t total, unsigned participants)
{
    const unsigned homes = homes_of(total, participants);
    for (unsigned h = 0; h < homes; h++) {
        size_t first, end;
        home_range(total, homes, h, &first, &end);
        if (atomic_load_explicit(&o->next[h], memory_order_relaxed) < end - first)
            return false;
    }
    return true;
}

/* Takes and runs chunks of [begin, begin + len) until none are left: those
 * of participant's home range first, then the others' (see HOMES). */
static void take_chunks(struct nxr__step_run *r, struct op_run *o, size_t begin, size_t len,
                        size_t grain, size_t total, nxr_for_fn fn, void *arg, unsigned participant,
                        unsigned worker)
{
    const unsigned homes = homes_of(total, r->participants);
    for (unsigned k = 0; k < homes; k++) {
        const unsigned h = (participant + k) % homes;
        size_t first, end;
        home_range(total, homes, h, &first, &end);
        for (;;) {
            /* Relaxed: the counter only hands out distinct chunks. */
            size_t c = first + atomic_fetch_add_explicit(&o->next[h], 1, memory_order_relaxed);
            if (c >= end)
                break;
            size_t b = begin + c * grain;
            size_t e = c + 1 == total ? begin + len : b + grain;
            fn(arg, b, e, worker);
            chunk_done(r, o, total);
        }
    }
}

/* What a product's kernel gets as call->runner. */
struct coop {
    struct nxr__step_run *run;
    struct op_run *op;
    unsigned participant;
    unsigned calls; /* of parallel_for, by this participant's kernel */
};

/* The kernel's call->parallel_for inside a step: the chunks of the one cut
 * every participant's kernel makes, taken from the operation's counter. */
static int coop_parallel_for(const struct nxr_kernel_call *call, size_t n, size_t grain,
                             nxr_for_fn fn, void *arg)
{
    struct coop *c = call->runner;
    /* One cut per product: a kernel that cut its work twice (a pass, then
     * another over its result) would need a barrier between the passes,
     * which the op counter does not have. Refused, never run half. */
    if (++c->calls > 1)
        return NXR_EUNSUPPORTED;
    size_t g;
    size_t total = chunks_of(n, grain, call->threads, &g);
    if (total <= call->threads && g >= PRODUCT_SPLIT)
        total = chunks_of(n, (g + PRODUCT_SPLIT - 1) / PRODUCT_SPLIT, call->threads, &g);
    size_t unknown = UNKNOWN;
    /* Every participant computes the same total; the first one records it. */
    atomic_compare_exchange_strong(&c->op->total, &unknown, total);
    take_chunks(c->run, c->op, 0, n, g, total, fn, arg, c->participant, c->participant);
    return 0;
}

static void run_product(struct nxr__step_run *r, size_t i, unsigned participant)
{
    struct op_run *o = &r->ops[i];
    size_t total = atomic_load_explicit(&o->total, memory_order_relaxed);
    if (total != UNKNOWN && all_taken(o, total, r->participants))
        return; /* every chunk taken: nothing to plan */
    struct coop c = {.run = r, .op = o, .participant = participant};
    const struct nxr_kernel_call call = {
        .threads = r->participants,
        .scratch = r->scratch,
        .scratch_bytes = r->scratch_bytes,
        .parallel_for = coop_parallel_for,
        .runner = &c,
    };
    const struct nxr__packed_call *pc = &r->pc[i];
    int rc = nxr__packed_invoke(&call, pc);
    if (rc != 0) {
        /* Checked before the run, so not expected; the same refusal on every
         * participant, before any chunk: nobody waits for this operation. */
        nxr__record_first_error(&r->status, rc);
        if (atomic_exchange(&o->failed, 1) == 0) {
            atomic_fetch_add(&r->progress, 1);
            nxr__futex_wake(&r->progress, INT_MAX);
        }
    }
}

static bool op_complete(struct op_run *o)
{
    if (atomic_load(&o->failed) != 0)
        return true;
    size_t total = atomic_load(&o->total);
    return total != UNKNOWN && atomic_load(&o->done) == total;
}

/* Waits until operations [first, end) are complete. Past the stall
 * threshold it reports once (a chunk that does not finish: a body waiting
 * for something that never comes) and waits on. */
static void barrier_wait(struct nxr__step_run *r, size_t first, size_t end)
{
    uint64_t start = 0, at = 0;
    for (size_t i = first; i < end; i++) {
        struct op_run *o = &r->ops[i];
        for (unsigned spin = 0; !op_complete(o);) {
            if (spin < BARRIER_SPIN) {
                spin++;
                nxr__cpu_relax();
                continue;
            }
            if (start == 0) {
                start = nxr__now_ns();
                at = nxr__stall_deadline(r->exec->stall, start);
            }
            unsigned seen = atomic_load(&r->progress);
            atomic_fetch_add(&r->sleepers, 1);
            bool woken = true;
            if (!op_complete(o)) {
                if (at == 0)
                    nxr__futex_wait(&r->progress, seen);
                else
                    woken = nxr__futex_wait_until(&r->progress, seen, at);
            }
            atomic_fetch_sub(&r->sleepers, 1);
            if (!woken && !op_complete(o)) {
                char what[96];
                snprintf(what, sizeof what, "a step's barrier (operation %zu not complete)", i);
                nxr__stall_report(r->exec->stall, r->exec, what, nxr__now_ns() - start);
                at = 0;
            }
        }
    }
}

/* One participant's walk through the step. */
static void participate(struct nxr__step_run *r, unsigned participant, unsigned loop_worker)
{
    const struct nxr_step *s = r->step;
    size_t phase_start = 0;
    for (size_t i = 0; i < s->nops; i++) {
        const struct op *op = &s->ops[i];
        if (op->phase != s->ops[phase_start].phase) {
            barrier_wait(r, phase_start, i);
            phase_start = i;
        }
        if (op->kind == OP_PRODUCT) {
            run_product(r, i, participant);
        } else {
            struct op_run *o = &r->ops[i];
            size_t g;
            size_t total = chunks_of(op->end - op->begin, op->grain, r->participants, &g);
            take_chunks(r, o, op->begin, op->end - op->begin, g, total, op->fn, op->arg,
                        participant, loop_worker);
        }
    }
    /* The step returns when everything completed, not when this
     * participant ran out of chunks (the caller reads the outputs). */
    barrier_wait(r, phase_start, s->nops);
}

/* Checks every product against ctx's domain (nothing runs unless all
 * hold), sizes the scratch and sums what the counters say of them. */
static int check_products(nxr_ctx_t *ctx, const nxr_step_t *step, struct nxr__step_run *r,
                          char *why, size_t whysz)
{
    r->scratch_bytes = 0;
    for (size_t i = 0; i < step->nops; i++) {
        const struct op *op = &step->ops[i];
        if (op->kind != OP_PRODUCT)
            continue;
        struct nxr__kcall k = {.name = "nxr_sgemm_packed"};
        nxr__packed_prepare(ctx, &k, &r->pc[i], &op->args, op->has_epilogue ? &op->epilogue : NULL);
        if (k.bad != 0) {
            snprintf(why, whysz, "operation %zu (a product): %s", i, k.why);
            return k.bad;
        }
        r->products++;
        r->weight_bytes += k.weight_bytes;
        size_t bytes = (k.scratch_bytes + 63) & ~(size_t)63;
        if (bytes > r->scratch_bytes)
            r->scratch_bytes = bytes;
    }
    return 0;
}

void nxr__step_run_free(struct nxr__step_run *r)
{
    if (r == NULL)
        return;
    nxr_buffer_release(r->scratch_buffer);
    free(r->scratch_ptrs);
    free(r->ops);
    free(r->pc);
    free(r);
}

int nxr__step_run_prepare(nxr_ctx_t *ctx, const nxr_step_t *step, unsigned participants,
                          bool in_place, struct nxr__step_run **out, char *why, size_t whysz)
{
    *out = NULL;
    struct nxr__step_run *r = nxr__calloc(1, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    r->step = step;
    r->exec = ctx->exec;
    r->participants = participants;
    r->in_place = in_place;
    atomic_init(&r->progress, 0);
    atomic_init(&r->sleepers, 0);
    atomic_init(&r->status, 0);
    const size_t n = step->nops > 0 ? step->nops : 1;
    r->pc = nxr__calloc(n, sizeof(*r->pc));
    /* Whole lines: the counters of two operations never share one. */
    r->ops = n <= SIZE_MAX / sizeof(*r->ops) ? aligned_alloc(NXR__CACHE_LINE, n * sizeof(*r->ops))
                                             : NULL;
    int rc = r->pc == NULL || r->ops == NULL ? -ENOMEM : 0;
    if (rc == 0)
        rc = check_products(ctx, step, r, why, whysz);
    if (rc == 0 && r->scratch_bytes > 0) {
        r->scratch_ptrs = nxr__calloc(participants, sizeof(void *));
        if (r->scratch_ptrs == NULL || r->scratch_bytes > SIZE_MAX / participants)
            rc = -ENOMEM;
        else
            rc = nxr__pool_acquire(ctx->domain->pool, r->scratch_bytes * participants,
                                   &r->scratch_buffer);
        if (rc == 0) {
            unsigned char *block = nxr_buffer_data(r->scratch_buffer);
            for (unsigned i = 0; i < participants; i++)
                r->scratch_ptrs[i] = block + (size_t)i * r->scratch_bytes;
            r->scratch = (void *const *)r->scratch_ptrs;
        }
    }
    if (rc != 0) {
        nxr__step_run_free(r);
        return rc;
    }
    for (size_t i = 0; i < step->nops; i++) {
        const struct op *op = &step->ops[i];
        size_t g;
        for (unsigned h = 0; h < HOMES; h++)
            atomic_init(&r->ops[i].next[h], 0);
        atomic_init(&r->ops[i].done, 0);
        atomic_init(&r->ops[i].failed, 0);
        atomic_init(&r->ops[i].total, op->kind == OP_LOOP ? chunks_of(op->end - op->begin,
                                                                      op->grain, participants, &g)
                                                          : UNKNOWN);
    }
    *out = r;
    return 0;
}

void nxr__step_region(void *p, unsigned participant, unsigned count)
{
    struct nxr__step_run *r = p;
    (void)count;
    struct nxr__exec_tls saved = nxr__body_begin(r->exec, participant);
    participate(r, participant, participant);
    nxr__body_end(saved);
}

int nxr__step_run_status(const struct nxr__step_run *r)
{
    return atomic_load(&((struct nxr__step_run *)r)->status);
}

/* The prepared step on exec: in place, on the caller, or as a region. */
static int run_on(struct nxr__exec *exec, struct nxr__step_run *r)
{
    int rc;
    if (r->in_place) {
        /* Already a body of this domain: its loops see the participant it
         * runs as; its products have this one thread (scratch slot 0). */
        participate(r, 0, nxr__tls.participant);
        rc = 0;
    } else if (r->participants == 1 && nxr__exec_caller_inside(exec)) {
        struct nxr__exec_tls saved = nxr__exec_alone_begin(exec);
        participate(r, 0, 0);
        nxr__exec_alone_end(exec, saved);
        rc = 0;
    } else {
        rc = nxr__exec_region(exec, nxr__step_region, r, r->participants);
    }
    return rc != 0 ? rc : nxr__step_run_status(r);
}

int nxr_step_run(nxr_ctx_t *ctx, const nxr_step_t *step)
{
    static const char call[] = "nxr_step_run";
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, call, "ctx is NULL");
    struct nxr__ctx_call c;
    int rc = nxr__ctx_call_open(&c, ctx, call);
    if (rc != 0)
        return rc;
    if (step == NULL)
        return nxr__ctx_call_closef(&c, ctx->domain, -EINVAL, "step is NULL");
    if (ctx->placing || ctx->span != NULL)
        return nxr__ctx_call_closef(
            &c, ctx->domain, -EINVAL,
            "a step runs on one domain: use a context on a domain (not a %s context)",
            ctx->placing ? "placing" : "span");
    struct nxr__exec *exec = ctx->exec;
    enum nxr__nesting nesting = nxr__exec_nesting(exec);
    unsigned budget = ctx->domain->spec.budget;
    struct nxr__step_run *r = NULL;
    if (nesting == NXR__NEST_OTHER)
        rc = NXR_EREENTRANT; /* a body of another domain: not this domain's CPUs */
    else
        rc = nxr__step_run_prepare(ctx, step,
                                   nesting == NXR__NEST_INLINE || budget == 0 ? 1 : budget,
                                   nesting == NXR__NEST_INLINE, &r, c.why, sizeof(c.why));
    if (rc == 0 && r->products > 0) {
        /* Each product counts as the call it replaces would (kernel calls,
         * packed bytes streamed): nxr top and the metrics page show a
         * service run by steps as they show one run call by call. */
        nxr__exec_count(exec, (enum nxr__counter)(NXR__COUNT_KERNEL_CALLS + NXR_FAMILY_GEMM),
                        r->products);
        nxr__exec_count(exec, NXR__COUNT_WEIGHT_BYTES, r->weight_bytes);
    }
    if (rc == 0 && step->nops > 0)
        rc = run_on(exec, r);
    nxr__step_run_free(r);
    return nxr__ctx_call_close(&c, ctx->domain, rc);
}
