/*
 * nxr spans: one request over several domains (one stream across sockets).
 *
 * A span is a context over several domains: nxr_parallel_for,
 * nxr_parallel_reduce (runtime/nxr_ctx.h) and the span kernels below split
 * their range across the members, shares proportional to the members'
 * budgets (nxr_span_share), and each member's share again over its own
 * team, on that member's CPUs. The whole operation runs under ONE permit
 * for the union of the members' CPU sets, asked for once and granted whole
 * or not at all (like nxr_run_across): an overlapping domain's operation
 * waits for the whole span, and the span never holds half of its union.
 * The caller waits (it does not take part); a loop whose chunks all fall
 * to one member runs as that domain's own loop.
 *
 * A one-member span IS a context on that domain (nxr_span_create returns
 * one): same path, same cost, same rules.
 *
 * What else a span is: a context (runtime/nxr_ctx.h) whose domain
 * (nxr_ctx_domain) is its first member; its step memory, nxr_run and
 * nxr_submit are that member's; nxr_ctx_budget is the members' sum. The
 * kernels of runtime/nxr_ctx_kernels.h on a span: nxr's native ones (any
 * ENGINE_WORKERS provider) split their chunks across the members like a
 * loop, with one scratch slot per participant from the first member's pool
 * (same bits as on one domain); a provider with threads of its own runs on
 * the first member. Their inputs are read wherever they lie: shard the big
 * ones and use nxr_span_linear to keep each member on its own memory. The
 * thread rule is a context's: one driving thread at a time.
 *
 * Nesting (see the table in executor/nxr_executor.h): inside a body of a
 * domain the span covers, a loop on the span runs in place on that thread
 * (one fan-out level, as the participant it is); inside a body of any other
 * domain it is NXR_EREENTRANT, and so is anything that would take another
 * permit (nxr_run_across, a span kernel needing its own permit...). Every
 * refusal leaves its detail in nxr_last_error().
 *
 * Sharded memory (nxr_shards_t): rows split across the span's members, part
 * i on member i's node (nxr_domain_malloc, first-touched and checked), so a
 * span kernel hands each member its own part and no worker reads another
 * node's part. The traffic of each layout is in docs/one-context-per-socket.md
 * ("one request across sockets").
 */
#ifndef NXR_SPAN_H
#define NXR_SPAN_H

#include <stdbool.h>
#include <stddef.h>

#include "base/nxr_fwd.h"
#include "base/nxr_status.h"
#include "runtime/nxr_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nxr_span_opts {
    /* The members, in order (the order of the shares and of the combine):
     * `count` domain ids. Or `every`: every domain of the runtime that
     * takes part in arbitration (managed and cooperative; caller-managed
     * ones declare no CPU set and are left out), in creation order, at most
     * 64. Exactly one of the two. */
    const int *domain_ids;
    size_t count;
    bool every;
    /* Deprecated and ignored: nothing reads or writes them. They stay only
     * so that the struct keeps its 1.0 layout (checked when nxr is built);
     * a refusal's detail is in nxr_last_error(). */
    char *errbuf;
    size_t errbuf_size;
};

/* Everything unset (no ids, every false). */
NXR_API void nxr_span_opts_init(struct nxr_span_opts *opts);

/*
 * Opens a span (a context over opts' domains). Returns 0 and *out, or
 * -EINVAL (NULL argument, an empty list, both a list and every, more than
 * 64 ids, an id listed twice), NXR_ENODOMAIN (an id that is no domain;
 * every with no arbitrated domain), NXR_EADMISSION (a caller-managed
 * domain: it declares no CPU set to put under the union permit), -ENOMEM.
 * On failure *out is NULL, nothing is allocated and nxr_last_error() says
 * why (opts->errbuf is ignored).
 * Destroy with nxr_ctx_destroy. Any thread; never blocks (the permit is
 * taken per operation).
 */
NXR_API int nxr_span_create(nxr_runtime_t *rt, const struct nxr_span_opts *opts, nxr_ctx_t **out);

/* Members of ctx (1 for a context on one domain, 0 for NULL). */
NXR_API size_t nxr_span_domain_count(const nxr_ctx_t *ctx);

/* The i-th member (the context's domain for i == 0 on one domain), or NULL
 * (i out of range, or ctx NULL). */
NXR_API nxr_domain_t *nxr_span_domain_at(const nxr_ctx_t *ctx, size_t i);

/*
 * Member i's share of `units` (rows, chunks): [*begin, *end), the split a
 * span loop of grain 1 and a sharded allocation without a partition use:
 * floor(units * B_<i / B) to floor(units * B_<=i / B), B the budgets.
 * 0, or -EINVAL (NULL, i out of range). Any thread.
 */
NXR_API int nxr_span_share(const nxr_ctx_t *ctx, size_t units, size_t i, size_t *begin,
                           size_t *end);

/* ---- sharded memory ------------------------------------------------------- */


/* One part of a sharded allocation. */
struct nxr_shard {
    void *data;                 /* its rows, row_bytes apart; NULL when rows == 0 */
    size_t row0, rows;          /* which rows of the whole it holds */
    nxr_domain_t *domain; /* whose node memory it is */
    /* Fraction of its pages found on the domain's node at creation
     * (nxr_mem_node), or -1 when the domain has no node or the system
     * cannot say. */
    double on_node;
};

/*
 * Allocates `rows` rows of `row_bytes` bytes split across span's members:
 * part i (part_rows[i] rows, or NULL: nxr_span_share's split) on member i's
 * node (nxr_domain_malloc, 64-byte aligned, zeroed by the calling thread:
 * the pages are bound before that first touch). Each part is then checked:
 * nxr_mem_domain must name member i, and on a domain whose memory binding
 * is BOUND every page must be on its node (else NXR_EPLACEMENT).
 * Returns 0 and *out, or -EINVAL (NULL argument, rows or row_bytes 0,
 * nparts not the span's member count, part_rows not summing to rows; the
 * detail names which in nxr_last_error()), NXR_EREENTRANT (inside
 * a body), NXR_EBROKEN, -ENOMEM, NXR_EPLACEMENT; on failure *out is NULL
 * and nothing is allocated. Driver only (the thread rule). The caller owns
 * the shards (nxr_shards_destroy, before the runtime); they outlive the span.
 */
NXR_API int nxr_shards_create(nxr_ctx_t *span, size_t rows, size_t row_bytes,
                              const size_t *part_rows, size_t nparts, nxr_shards_t **out);

/* Frees every part. NULL is a no-op. Not while a kernel reads them. */
NXR_API void nxr_shards_destroy(nxr_shards_t *s);

/* Parts (= the span's members when created). */
NXR_API size_t nxr_shards_count(const nxr_shards_t *s);

/* Part i: 0 and *out, or -EINVAL. Any thread. */
NXR_API int nxr_shards_part(const nxr_shards_t *s, size_t i, struct nxr_shard *out);

/* Row r of the whole, in whichever part holds it (NULL: r out of range). */
NXR_API void *nxr_shards_row(const nxr_shards_t *s, size_t r);

/* ---- span kernels ------------------------------------------------------------ */

/* How a weight matrix W is split into shards (its rows are what is split). */
enum nxr_shard_layout {
    /* W is n x k (a row per output feature): Y = X W^T, for m = 1 y = W x.
     * Member i computes the outputs of its rows; no reduction. */
    NXR_SHARD_BY_OUTPUT = 0,
    /* W is k x n (a row per input feature): Y = X W. Member i computes the
     * partial X[:, its rows] W[its rows, :] into its own node's memory; the
     * partials are then added in member order (fixed partition, fixed
     * order), so Y is bit-identical whatever ran where. */
    NXR_SHARD_BY_INNER = 1,
};

struct nxr_span_linear_args {
    size_t m, k, n;
    const float *x;  /* m x k, row stride ldx >= k */
    size_t ldx;
    const nxr_shards_t *w; /* rows of k (BY_OUTPUT: n rows) or n floats (BY_INNER: k rows) */
    enum nxr_shard_layout layout;
    /* The output, where the caller put it: m x n at y (row stride ldy >= n;
     * any memory: one member's, another domain's, the host's), or, for
     * BY_OUTPUT only, sharded like W: y_shards' row j holds output feature
     * j for the m inputs (m floats; for m = 1, y itself by rows), each part
     * written by the member that owns it. Exactly one of y, y_shards. */
    float *y;
    size_t ldy;
    nxr_shards_t *y_shards;
};

/*
 * Y = X op(W) over the span with W sharded (above). Each member runs its
 * part on its own team, one GEMM per chunk of its rows (BY_OUTPUT) or of
 * the output columns (BY_INNER), in place on the worker (the native GEMM,
 * one thread). X is read by every member (m x k floats each); see the doc
 * for the traffic. Returns 0, -EINVAL (NULL or short arguments, shards of
 * another span or count, a layout out of range; the detail names which),
 * -ENOMEM, NXR_EREENTRANT (inside any body: the kernel takes the union
 * permit), NXR_EBROKEN, or the GEMM's error. Driver only; blocks until done.
 */
NXR_API int nxr_span_linear(nxr_ctx_t *span, const struct nxr_span_linear_args *args);

#ifdef __cplusplus
}
#endif

#endif /* NXR_SPAN_H */
