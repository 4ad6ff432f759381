/*
 * Loops over a domain (INNER): nxr__exec_parallel_for and
 * nxr__exec_parallel_reduce, which the runtime's context calls wrap.
 *
 * The decision tree, cheapest first (internal/exec.h): an empty range
 * returns; inside a body the nesting rule decides (in place, or
 * NXR_EREENTRANT); a loop for one thread runs on the calling thread when it
 * is inside the domain; only then is the domain entered (its permit, or for
 * a caller-managed domain its guard) and the loop becomes a region on the
 * domain's executor, with min(chunks, budget) participants (one, a worker,
 * when the caller is outside the domain and the loop is small).
 *
 * Participants are slots, not threads: the built-in team lets whoever is
 * awake claim them (executor/team.c), so one thread may run several
 * participants' bodies one after another. A static share is one slot (its
 * chunks stay contiguous: B packed once per column block in GEMM, the same
 * range for the same slot every region); dynamic chunks and OUTER tasks are
 * handed out inside the slots from the descriptor's counter, which only a
 * slot holder can reach, so a late worker never touches it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "executor/internal/exec.h"
#include "base/internal/build.h"
#include "base/internal/sys.h"

struct loop {
    const struct nxr__exec *exec; /* whose body the chunks are */
    nxr_for_fn fn;
    void *arg;
    size_t begin, end, grain, chunks;
    /* Dynamic schedule: claimed by every participant, so alone on its line. */
    _Alignas(NXR__CACHE_LINE) atomic_size_t next_chunk;
};

void nxr_for_opts_init(struct nxr_for_opts *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->schedule = NXR_SCHEDULE_STATIC;
}

/* Chunks per participant for grain 0 with the dynamic schedule: enough
 * that a participant slowed down (a preempted worker) sheds work, few
 * enough that the shared counter stays cold. */
#define DYNAMIC_CHUNKS_PER_PARTICIPANT 4

const char *nxr__for_args_bad(size_t begin, size_t end, const struct nxr_for_opts *opts,
                              nxr_for_fn fn)
{
    if (fn == NULL)
        return "fn is NULL";
    if (begin > end)
        return "begin > end";
    if (opts != NULL && opts->schedule != NXR_SCHEDULE_STATIC &&
        opts->schedule != NXR_SCHEDULE_DYNAMIC)
        return "opts->schedule is not a schedule";
    if (opts != NULL && !(opts->cost_ns >= 0)) /* true for NaN too */
        return "opts->cost_ns is negative or NaN (0: no hint)";
    return NULL;
}

const char *nxr__reduce_args_bad(size_t begin, size_t end, size_t elem_size, const void *identity,
                                 const void *map, const void *combine, const void *result)
{
    return map == NULL        ? "map is NULL"
           : combine == NULL  ? "combine is NULL"
           : identity == NULL ? "identity is NULL"
           : result == NULL   ? "result is NULL"
           : elem_size == 0   ? "elem_size is 0"
           : begin > end      ? "begin > end"
                              : NULL;
}

unsigned nxr__for_shape(const struct nxr_for_opts *opts, size_t len, unsigned budget, size_t *grain,
                        size_t *chunks)
{
    if (opts->max_threads != 0 && opts->max_threads < budget)
        budget = opts->max_threads;
    unsigned n = budget > 0 ? budget : 1;
    if (opts->cost_ns > 0) {
        /* The small-work rule: one participant per NXR_FOR_SHARE_NS of
         * estimated work, at least one. */
        double shares = (double)len * opts->cost_ns / NXR_FOR_SHARE_NS;
        n = shares < 1.0 ? 1 : shares < (double)n ? (unsigned)shares : n;
    }
    size_t g = opts->grain;
    if (g == 0) {
        /* OpenMP's static schedule: an even split over the participants. */
        size_t pieces =
            opts->schedule == NXR_SCHEDULE_DYNAMIC ? (size_t)n * DYNAMIC_CHUNKS_PER_PARTICIPANT : n;
        if (pieces > len)
            pieces = len;
        g = pieces > 0 ? len / pieces + (len % pieces != 0) : 1;
    }
    *grain = g;
    *chunks = len / g + (len % g != 0);
    return *chunks < n ? (unsigned)*chunks : n;
}

/* [begin, end) of chunks [c0, c1), clipped to the loop's end. */
static void chunk_range(const struct loop *l, size_t c0, size_t c1, size_t *b, size_t *e)
{
    *b = l->begin + c0 * l->grain;
    *e = c1 >= l->chunks ? l->end : l->begin + c1 * l->grain;
}

static void static_body(void *p, unsigned participant, unsigned count)
{
    struct loop *l = p;
    /* Participant p takes chunks [p*base + min(p, rem), ...): the shares
     * differ by at most one chunk and never overflow. */
    size_t base = l->chunks / count, rem = l->chunks % count;
    size_t c0 = participant * base + (participant < rem ? participant : rem);
    size_t c1 = c0 + base + (participant < rem ? 1 : 0);
    if (c0 == c1)
        return;
    size_t b, e;
    chunk_range(l, c0, c1, &b, &e);
    struct nxr__exec_tls saved = nxr__body_begin(l->exec, participant);
    l->fn(l->arg, b, e, participant);
    nxr__body_end(saved);
}

static void dynamic_body(void *p, unsigned participant, unsigned count)
{
    struct loop *l = p;
    (void)count;
    struct nxr__exec_tls saved = nxr__body_begin(l->exec, participant);
    for (;;) {
        /* Relaxed: the counter only hands out distinct chunks; the region's
         * join orders the bodies' writes for the caller. */
        size_t c = atomic_fetch_add_explicit(&l->next_chunk, 1, memory_order_relaxed);
        if (c >= l->chunks)
            break;
        size_t b, e;
        chunk_range(l, c, c + 1, &b, &e);
        l->fn(l->arg, b, e, participant);
    }
    nxr__body_end(saved);
}

int nxr__exec_parallel_for(struct nxr__exec *exec, size_t begin, size_t end,
                           const struct nxr_for_opts *opts, nxr_for_fn fn, void *arg)
{
    struct nxr_for_opts defaults;
    if (nxr__for_args_bad(begin, end, opts, fn) != NULL)
        return -EINVAL;
    if (opts == NULL) {
        nxr_for_opts_init(&defaults);
        opts = &defaults;
    }
    if (begin == end)
        return 0;
    switch (nxr__exec_nesting(exec)) {
    case NXR__NEST_INLINE:
        /* One fan-out level: already inside a body of this domain, so run
         * in place as the participant we already are. */
        fn(arg, begin, end, nxr__tls.participant);
        return 0;
    case NXR__NEST_OTHER:
        return NXR_EREENTRANT; /* this thread is on another domain's CPUs */
    case NXR__NEST_NONE:
        break;
    }
    size_t grain, chunks;
    unsigned n = nxr__for_shape(opts, end - begin, nxr__exec_budget(exec), &grain, &chunks);
    if (n <= 1 && nxr__exec_caller_inside(exec)) {
        /* Work for one thread, and this thread is on the domain: run it here,
         * no permit, no hand-off. (Outside the domain it goes to a worker
         * below, as a one-participant region: work never leaves the
         * domain's CPUs.) */
        struct nxr__exec_tls saved = nxr__exec_alone_begin(exec);
        fn(arg, begin, end, 0);
        nxr__exec_alone_end(exec, saved);
        return 0;
    }
    struct loop l = {
        .exec = exec,
        .fn = fn,
        .arg = arg,
        .begin = begin,
        .end = end,
        .grain = grain,
        .chunks = chunks,
    };
    atomic_init(&l.next_chunk, 0);
    nxr_region_fn body = opts->schedule == NXR_SCHEDULE_DYNAMIC ? dynamic_body : static_body;
    return nxr__exec_region(exec, body, &l, n);
}

/*
 * Reductions. The range is cut into blocks that depend only on the call
 * (begin, end, grain): blocks of `grain` iterations, made coarser (a whole
 * multiple of grain) when there would be more than REDUCE_MAX_BLOCKS. Each
 * block is folded into its own partial by exactly one map call, whoever
 * runs it, and the partials are combined in block order after the loop. So
 * the result is bit-identical whatever the budget, the schedule of claims
 * or who ran which block, and equal to a serial fold block by block.
 */
#define REDUCE_MAX_BLOCKS 1024
/* Blocks for grain 0: a number, not a size, so a short heavy reduction is
 * still spread over up to this many participants; fixed, not the budget,
 * so the blocks (and the bits) do not depend on the machine. */
#define REDUCE_DEFAULT_BLOCKS 64
#define REDUCE_STACK_BYTES    (64 * 256)

struct reduction {
    void (*map)(void *arg, size_t b, size_t e, void *partial);
    void *arg;
    unsigned char *partials;
    size_t elem_size;
    size_t begin, end, block;
};

/* A chunk range from the loop (whole blocks, but possibly several): one map
 * call per block, into that block's partial. */
static void reduce_body(void *p, size_t begin, size_t end, unsigned worker)
{
    struct reduction *r = p;
    (void)worker;
    for (size_t b = begin; b < end;) {
        size_t index = (b - r->begin) / r->block;
        size_t e = r->end - b > r->block ? b + r->block : r->end;
        r->map(r->arg, b, e, r->partials + index * r->elem_size);
        b = e;
    }
}

int nxr__reduce_blocks(nxr__loop_fn loop, void *self, size_t begin, size_t end, size_t grain,
                       size_t elem_size, const void *identity,
                       void (*map)(void *arg, size_t b, size_t e, void *partial),
                       void (*combine)(void *arg, void *result, const void *partial), void *arg,
                       void *result)
{
    if (nxr__reduce_args_bad(begin, end, elem_size, identity, (const void *)map,
                             (const void *)combine, result) != NULL)
        return -EINVAL;
    size_t len = end - begin;
    if (grain == 0)
        grain = len > REDUCE_DEFAULT_BLOCKS
                    ? len / REDUCE_DEFAULT_BLOCKS + (len % REDUCE_DEFAULT_BLOCKS != 0)
                    : 1;
    size_t chunks = len / grain + (len % grain != 0);
    size_t block = grain;
    if (chunks > REDUCE_MAX_BLOCKS)
        block = grain * (chunks / REDUCE_MAX_BLOCKS + (chunks % REDUCE_MAX_BLOCKS != 0));
    size_t blocks = len / block + (len % block != 0);
    _Alignas(64) unsigned char stack[REDUCE_STACK_BYTES];
    unsigned char *partials = stack;
    if (blocks > SIZE_MAX / elem_size)
        return -ENOMEM;
    if (blocks * elem_size > sizeof(stack)) {
        partials = nxr__malloc(blocks * elem_size);
        if (partials == NULL)
            return -ENOMEM;
    }
    for (size_t i = 0; i < blocks; i++)
        memcpy(partials + i * elem_size, identity, elem_size);
    struct reduction r = {.map = map,
                          .arg = arg,
                          .partials = partials,
                          .elem_size = elem_size,
                          .begin = begin,
                          .end = end,
                          .block = block};
    struct nxr_for_opts opts;
    nxr_for_opts_init(&opts);
    opts.grain = block;
    int rc = loop(self, begin, end, &opts, reduce_body, &r);
    if (rc == 0) {
        memmove(result, identity, elem_size);
        for (size_t i = 0; i < blocks; i++)
            combine(arg, result, partials + i * elem_size);
    }
    if (partials != stack)
        free(partials);
    return rc;
}

static int exec_loop(void *self, size_t begin, size_t end, const struct nxr_for_opts *opts,
                     nxr_for_fn fn, void *arg)
{
    return nxr__exec_parallel_for(self, begin, end, opts, fn, arg);
}

int nxr__exec_parallel_reduce(struct nxr__exec *exec, size_t begin, size_t end, size_t grain,
                              size_t elem_size, const void *identity,
                              void (*map)(void *arg, size_t b, size_t e, void *partial),
                              void (*combine)(void *arg, void *result, const void *partial),
                              void *arg, void *result)
{
    return nxr__reduce_blocks(exec_loop, exec, begin, end, grain, elem_size, identity, map, combine,
                              arg, result);
}
