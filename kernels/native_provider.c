/*
 * nxr's native providers: the four families' ops tables over the native
 * jobs (kernels/internal/native.h), classified PER_CALL_BOUND x
 * ENGINE_WORKERS. When the call carries call->parallel_for (the runtime
 * granted the domain's workers), every job's index range goes through it,
 * even a range of one chunk: the calling thread may be outside the domain,
 * and parallel_for is what keeps the work on the domain's CPUs. Without it
 * the calling thread is on the domain and runs the range itself. Chunks are
 * independent, so the split changes no result.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/internal/last_error.h"
#include "executor/nxr_executor.h"
#include "kernels/internal/native.h"
#include "kernels/internal/native_quant.h"
#include "kernels/internal/provider.h"
#include "base/internal/sys.h"

/* Grains: enough work per chunk that a region's fixed cost (~0.5 us) stays
 * below a few percent of it. */
#define EW_GRAIN  16384 /* elements: 64 KiB of floats per input */
#define ROW_ELEMS 16384 /* elements per chunk of rows */

/*
 * Batched GEMM runs OUTER (items in parallel, each GEMM sequential) when
 * there are at least as many items as threads and each item is at most
 * this many multiply-adds (128^3: ~20 us on one core at 100 GFLOP/s, too
 * little to split across workers without the region cost showing). Larger
 * or fewer items run one after another, each INNER over the domain.
 */
#define BATCH_OUTER_MAX_MACS ((size_t)128 * 128 * 128)

/* Runs chunk over items [0, n): through the call's parallel_for when it has
 * one (see the file comment), else on the calling thread as worker 0. */
static int run_range(const struct nxr_kernel_call *call, size_t n, size_t grain, nxr_for_fn chunk,
                     void *job)
{
    if (call->parallel_for == NULL) {
        chunk(job, 0, n, 0);
        return 0;
    }
    return call->parallel_for(call, n, grain, chunk, job);
}

/* Whether a job may be split over more than one participant. */
static bool splits(const struct nxr_kernel_call *call)
{
    return call->parallel_for != NULL && call->threads > 1;
}

/* self is the ISA table chosen at creation. */
static const struct nxr__native_isa *isa_of(void *self)
{
    return self;
}

/* ---- GEMM ------------------------------------------------------------------ */

static int check_scratch(const struct nxr_kernel_call *call, size_t bytes)
{
    if (call->scratch == NULL || call->scratch[0] == NULL || call->scratch_bytes < bytes ||
        ((uintptr_t)call->scratch[0] & 63u) != 0)
        return -EINVAL;
    return 0;
}

static bool reads_operands(const struct nxr_sgemm_args *g)
{
    return g->m > 0 && g->n > 0 && g->k > 0 && g->alpha != 0.0f;
}

static size_t native_sgemm_scratch(void *self, const struct nxr_sgemm_args *args)
{
    return nxr__sgemm_scratch_for(isa_of(self), args, NULL);
}

static int run_epilogue(const struct nxr__native_isa *isa, const struct nxr_kernel_call *call,
                        const struct nxr_sgemm_args *g, const struct nxr_sgemm_epilogue *ep);

/* Every native GEMM, plain, fused or against packed f32 weights, comes here
 * (bf16 and 8-bit weights: nxr__native_sgemm_quant, below, which comes here
 * only to scale C when alpha is 0).
 * ep (NULL: none) rides in the plan and is applied per micro-tile as the
 * last kc slice is written back (native_gemm.inc). When A and B are not
 * read (alpha == 0, k == 0) there is no such write-back: C is scaled, then
 * the epilogue runs over its rows. packed (NULL: none) is op(B) in panels. */
static int gemm_run(const struct nxr__native_isa *isa, const struct nxr_kernel_call *call,
                    const struct nxr_sgemm_args *args, const struct nxr_sgemm_epilogue *ep,
                    const struct nxr__packed_b *packed)
{
    if (call == NULL)
        return -EINVAL;
    struct nxr__sgemm_job job;
    unsigned parts = splits(call) ? call->threads : 1;
    int rc = nxr__sgemm_plan_init(&job.plan, isa, args, parts);
    if (rc != 0)
        return rc;
    if (!reads_operands(args)) {
        job.scratch = NULL;
        rc = run_range(call, nxr__sgemm_plan_tiles(&job.plan), 1, nxr__sgemm_chunk, &job);
        return rc != 0 || ep == NULL ? rc : run_epilogue(isa, call, args, ep);
    }
    struct nxr__small_job small;
    if (nxr__small_plan_init(&small.plan, isa, args, packed, ep)) {
        if (small.plan.scratch_bytes > 0 &&
            (rc = check_scratch(call, small.plan.scratch_bytes)) != 0)
            return rc;
        small.scratch = call->scratch;
        /* Static shares: each participant streams one contiguous part of W. */
        return run_range(call, small.plan.units, nxr__small_grain(&small.plan, call->threads),
                         nxr__small_chunk, &small);
    }
    if ((rc = check_scratch(call, job.plan.scratch_bytes)) != 0)
        return rc;
    job.plan.epilogue = ep;
    job.plan.packed = packed;
    job.scratch = call->scratch;
    /* Static shares keep each worker's tiles contiguous (B packed once per
     * column block). */
    return run_range(call, nxr__sgemm_plan_tiles(&job.plan), 1, nxr__sgemm_chunk, &job);
}

static int native_sgemm(void *self, const struct nxr_kernel_call *call, const struct nxr_sgemm_args *args)
{
    return gemm_run(isa_of(self), call, args, NULL, NULL);
}

/* One fan-out level: items are the unit of work, each GEMM sequential. */
static int native_sgemm_batch(void *self, const struct nxr_kernel_call *call,
                              const struct nxr_sgemm_batch_args *args)
{
    if (call == NULL || args == NULL)
        return -EINVAL;
    struct nxr__sgemm_batch_job job;
    int rc = nxr__sgemm_batch_job_init(&job, isa_of(self), args, call->scratch);
    if (rc != 0)
        return rc;
    /* What the items' path needs: small items pack nothing but maybe X. */
    const size_t need = nxr__sgemm_scratch_for(isa_of(self), &args->gemm, NULL);
    if (args->batch > 0 && reads_operands(&args->gemm) && need > 0 &&
        (rc = check_scratch(call, need)) != 0)
        return rc;
    const struct nxr_sgemm_args *g = &args->gemm;
    bool outer = args->batch >= call->threads && g->m * g->n * g->k <= BATCH_OUTER_MAX_MACS;
    if (outer || !splits(call))
        return run_range(call, args->batch, 1, nxr__sgemm_batch_chunk, &job);
    /* Few or large items: one after another, each split over the domain. */
    for (size_t i = 0; i < args->batch; i++) {
        struct nxr_sgemm_args item = *g;
        /* Operands that are not read (alpha == 0, k == 0) may be NULL:
         * offsetting a null pointer is undefined, so never offset those
         * (as nxr__sgemm_batch_chunk does on the OUTER path). */
        if (g->a != NULL)
            item.a = g->a + i * args->stride_a;
        if (g->b != NULL)
            item.b = g->b + i * args->stride_b;
        if (g->c != NULL)
            item.c = g->c + i * args->stride_c;
        if ((rc = native_sgemm(self, call, &item)) != 0)
            return rc;
    }
    return 0;
}

/* The epilogue over C's rows, after a product that did not apply it. */
static int run_epilogue(const struct nxr__native_isa *isa, const struct nxr_kernel_call *call,
                        const struct nxr_sgemm_args *g, const struct nxr_sgemm_epilogue *ep)
{
    if (g->m == 0 || g->n == 0)
        return 0;
    struct nxr__rows_job job = {.isa = isa,
                                .kind = NXR_ROWS_EPILOGUE,
                                .cols = g->n,
                                .x = g->c,
                                .ldx = g->ldc,
                                .gamma = ep->bias,
                                .out = g->c,
                                .ldo = g->ldc,
                                .act = ep->activation};
    size_t grain = g->n >= ROW_ELEMS ? 1 : ROW_ELEMS / g->n;
    return run_range(call, g->m, grain, nxr__rows_chunk, &job);
}

int nxr__epilogue_apply(const struct nxr_kernel_call *call, const struct nxr_sgemm_args *args,
                        const struct nxr_sgemm_epilogue *epilogue)
{
    return run_epilogue(nxr__native_isa_best(), call, args, epilogue);
}

static int native_sgemm_fused(void *self, const struct nxr_kernel_call *call,
                              const struct nxr_sgemm_args *args, const struct nxr_sgemm_epilogue *epilogue)
{
    if (args == NULL || epilogue == NULL)
        return -EINVAL;
    return gemm_run(isa_of(self), call, args, epilogue, NULL);
}

int nxr__native_sgemm_packed(const struct nxr__native_isa *isa, const struct nxr_kernel_call *call,
                             const struct nxr_sgemm_args *args, const struct nxr__packed_b *packed,
                             const struct nxr_sgemm_epilogue *epilogue)
{
    if (args == NULL || packed == NULL || args->n != packed->n || args->k != packed->k)
        return -EINVAL;
    struct nxr_sgemm_args g = *args;
    g.b = packed->data;
    /* Rows are op(B)^T as stored: exactly the unpacked transposed call. */
    g.trans_b = !packed->panels;
    g.ldb = packed->panels ? packed->n : packed->ld;
    return gemm_run(isa, call, &g, epilogue, packed->panels ? packed : NULL);
}

int nxr__native_sgemm_quant(const struct nxr__native_isa *isa, const struct nxr_kernel_call *call,
                            const struct nxr_sgemm_args *args, const struct nxr__packed_q *w,
                            const struct nxr_sgemm_epilogue *epilogue)
{
    if (call == NULL || args == NULL || w == NULL || args->n != w->n || args->k != w->k)
        return -EINVAL;
    if (!reads_operands(args)) {
        /* C = beta C (then the epilogue): W is not read, the tile loop
         * scales C as for any GEMM. */
        struct nxr_sgemm_args g = *args;
        g.b = NULL;
        return gemm_run(isa, call, &g, epilogue, NULL);
    }
    struct nxr__quant_job job;
    nxr__quant_plan_init(&job.plan, isa, args, w, epilogue);
    int rc = check_scratch(call, nxr__quant_scratch_bytes(w, args->m));
    if (rc != 0)
        return rc;
    job.scratch = call->scratch;
    return run_range(call, job.plan.units, nxr__quant_grain(&job.plan, call->threads),
                     nxr__quant_chunk, &job);
}

static const struct nxr_gemm_ops native_gemm_ops = {
    .sgemm_scratch = native_sgemm_scratch,
    .sgemm = native_sgemm,
    .sgemm_batch = native_sgemm_batch,
    .sgemm_fused = native_sgemm_fused,
};

bool nxr__provider_native_gemm(const nxr_provider_t *p, const struct nxr__native_isa **isa)
{
    if (p == NULL || p->foreign || p->gemm != &native_gemm_ops)
        return false;
    if (isa != NULL)
        *isa = p->self;
    return true;
}

/* ---- elementwise ------------------------------------------------------------- */

static int run_ew(void *self, const struct nxr_kernel_call *call, enum nxr__ew_kind kind, size_t n,
                  const float *x, const float *y, float *out, float alpha)
{
    if (call == NULL || (n > 0 && (x == NULL || out == NULL)))
        return -EINVAL;
    const bool two = kind == NXR_EW_ADD || kind == NXR_EW_MUL || kind == NXR_EW_TRIAD;
    if (two && n > 0 && y == NULL)
        return -EINVAL;
    struct nxr__ew_job job = {
        .isa = isa_of(self), .kind = kind, .x = x, .y = y, .out = out, .alpha = alpha};
    return run_range(call, n, EW_GRAIN, nxr__ew_chunk, &job);
}

static int native_binary(void *self, const struct nxr_kernel_call *call, enum nxr_binary_op op, size_t n,
                         const float *x, const float *y, float *out)
{
    switch (op) {
    case NXR_BINARY_ADD:
        return run_ew(self, call, NXR_EW_ADD, n, x, y, out, 0.0f);
    case NXR_BINARY_MUL:
        return run_ew(self, call, NXR_EW_MUL, n, x, y, out, 0.0f);
    }
    return NXR_EUNSUPPORTED;
}

static int native_scale(void *self, const struct nxr_kernel_call *call, size_t n, const float *x,
                        float alpha, float *out)
{
    return run_ew(self, call, NXR_EW_SCALE, n, x, NULL, out, alpha);
}

static int native_unary(void *self, const struct nxr_kernel_call *call, enum nxr_unary_op op, size_t n,
                        const float *x, float *out)
{
    switch (op) {
    case NXR_UNARY_SILU:
        return run_ew(self, call, NXR_EW_SILU, n, x, NULL, out, 0.0f);
    case NXR_UNARY_GELU_TANH:
        return run_ew(self, call, NXR_EW_GELU_TANH, n, x, NULL, out, 0.0f);
    }
    return NXR_EUNSUPPORTED;
}

static int native_triad(void *self, const struct nxr_kernel_call *call, size_t n, const float *b,
                        const float *c, float s, float *a)
{
    return run_ew(self, call, NXR_EW_TRIAD, n, b, c, a, s);
}

static int native_binary_rows(void *self, const struct nxr_kernel_call *call, enum nxr_binary_op op,
                              size_t rows, size_t cols, const float *x, size_t ldx,
                              const float *row, float *out, size_t ldo)
{
    enum nxr__rows_kind kind;
    switch (op) {
    case NXR_BINARY_ADD:
        kind = NXR_ROWS_ADD;
        break;
    case NXR_BINARY_MUL:
        kind = NXR_ROWS_MUL;
        break;
    default:
        return NXR_EUNSUPPORTED;
    }
    if (call == NULL || ldx < cols || ldo < cols)
        return -EINVAL;
    if (rows == 0 || cols == 0)
        return 0;
    if (x == NULL || row == NULL || out == NULL)
        return -EINVAL;
    struct nxr__rows_job job = {.isa = isa_of(self),
                                .kind = kind,
                                .cols = cols,
                                .x = x,
                                .ldx = ldx,
                                .gamma = row,
                                .out = out,
                                .ldo = ldo};
    size_t grain = cols >= ROW_ELEMS ? 1 : ROW_ELEMS / cols;
    return run_range(call, rows, grain, nxr__rows_chunk, &job);
}

static const struct nxr_elementwise_ops native_elementwise_ops = {
    .binary = native_binary,
    .scale = native_scale,
    .unary = native_unary,
    .triad = native_triad,
    .binary_rows = native_binary_rows,
};

/* ---- reductions ---------------------------------------------------------------- */

/* Blocks whose partials live on the stack (beyond: the heap, for the call). */
#define REDUCE_STACK_BLOCKS 64

/* A reduction in fixed blocks through the call's parallel_for; the
 * partials (one float, plus one index for argmax, per block of 16384
 * elements) live on the stack up to REDUCE_STACK_BLOCKS blocks, else on the
 * heap for the call. Bit-identical to the sequential result. */
static int parallel_reduce(void *self, const struct nxr_kernel_call *call, enum nxr__reduce_kind kind,
                           size_t n, const float *x, float *value, size_t *index)
{
    struct nxr__reduce_job job;
    int rc = nxr__reduce_job_init(&job, isa_of(self), kind, x, n, 0);
    if (rc != 0)
        return rc;
    float stack_partial[REDUCE_STACK_BLOCKS];
    size_t stack_index[REDUCE_STACK_BLOCKS];
    bool heap = job.nblocks > REDUCE_STACK_BLOCKS;
    job.partial = heap ? nxr__malloc(job.nblocks * sizeof(float)) : stack_partial;
    job.partial_index = kind != NXR_REDUCE_ARGMAX ? NULL
                        : heap                    ? nxr__malloc(job.nblocks * sizeof(size_t))
                                                  : stack_index;
    rc = -ENOMEM;
    if (job.partial != NULL && (kind != NXR_REDUCE_ARGMAX || job.partial_index != NULL)) {
        rc = run_range(call, job.nblocks, 1, nxr__reduce_chunk, &job);
        if (rc == 0)
            nxr__reduce_finish(&job, value, index);
    }
    if (heap) {
        free(job.partial);
        free(job.partial_index);
    }
    return rc;
}

/* With parallel_for every reduction goes through it (even one block: the
 * calling thread may be off the domain); without, the plain loop. */
static bool split_reduction(const struct nxr_kernel_call *call, size_t n)
{
    return call->parallel_for != NULL && n > 0;
}

static int native_sum(void *self, const struct nxr_kernel_call *call, size_t n, const float *x,
                      float *out)
{
    if (call == NULL || out == NULL || (n > 0 && x == NULL))
        return -EINVAL;
    if (split_reduction(call, n))
        return parallel_reduce(self, call, NXR_REDUCE_SUM, n, x, out, NULL);
    *out = nxr__native_sum(isa_of(self), n, x);
    return 0;
}

static int native_max(void *self, const struct nxr_kernel_call *call, size_t n, const float *x,
                      float *out)
{
    if (call == NULL || out == NULL || n == 0 || x == NULL)
        return -EINVAL;
    if (split_reduction(call, n))
        return parallel_reduce(self, call, NXR_REDUCE_MAX, n, x, out, NULL);
    *out = isa_of(self)->max(n, x);
    return 0;
}

static int native_argmax(void *self, const struct nxr_kernel_call *call, size_t n, const float *x,
                         size_t *out)
{
    if (call == NULL || out == NULL || n == 0 || x == NULL)
        return -EINVAL;
    if (split_reduction(call, n)) {
        float v;
        return parallel_reduce(self, call, NXR_REDUCE_ARGMAX, n, x, &v, out);
    }
    float v;
    *out = nxr__native_argmax(isa_of(self), n, x, &v);
    return 0;
}

static const struct nxr_reduction_ops native_reduction_ops = {
    .sum = native_sum,
    .max = native_max,
    .argmax = native_argmax,
};

/* ---- rows ------------------------------------------------------------------------- */

/* Every row op: one job of `kind` over rows x cols (gamma, beta: NULL when
 * the op has none; eps 0 for softmax). */
static int run_rows(void *self, const struct nxr_kernel_call *call, enum nxr__rows_kind kind,
                    size_t rows, size_t cols, const float *x, size_t ldx, const float *gamma,
                    const float *beta, float eps, float *out, size_t ldo)
{
    if (call == NULL || cols == 0 || ldx < cols || ldo < cols || isnan(eps) || eps < 0.0f)
        return -EINVAL;
    if (rows > 0 && (x == NULL || out == NULL))
        return -EINVAL;
    struct nxr__rows_job job = {.isa = isa_of(self),
                                .kind = kind,
                                .cols = cols,
                                .x = x,
                                .ldx = ldx,
                                .gamma = gamma,
                                .beta = beta,
                                .eps = eps,
                                .out = out,
                                .ldo = ldo};
    size_t grain = cols >= ROW_ELEMS ? 1 : ROW_ELEMS / cols;
    return run_range(call, rows, grain, nxr__rows_chunk, &job);
}

static int native_softmax(void *self, const struct nxr_kernel_call *call, size_t rows, size_t cols,
                          const float *x, size_t ldx, float *out, size_t ldo)
{
    return run_rows(self, call, NXR_ROWS_SOFTMAX, rows, cols, x, ldx, NULL, NULL, 0.0f, out, ldo);
}

static int native_rmsnorm(void *self, const struct nxr_kernel_call *call, size_t rows, size_t cols,
                          const float *x, size_t ldx, const float *gamma, float eps, float *out,
                          size_t ldo)
{
    return run_rows(self, call, NXR_ROWS_RMSNORM, rows, cols, x, ldx, gamma, NULL, eps, out, ldo);
}

static int native_layernorm(void *self, const struct nxr_kernel_call *call, size_t rows, size_t cols,
                            const float *x, size_t ldx, const float *gamma, const float *beta,
                            float eps, float *out, size_t ldo)
{
    return run_rows(self, call, NXR_ROWS_LAYERNORM, rows, cols, x, ldx, gamma, beta, eps, out, ldo);
}

static const struct nxr_norm_ops native_norm_ops = {
    .softmax = native_softmax,
    .rmsnorm = native_rmsnorm,
    .layernorm = native_layernorm,
};

/* ---- creation ------------------------------------------------------------------------ */

int nxr_provider_native_create(enum nxr_provider_family family, nxr_provider_t **out)
{
    nxr__call_begin();
    if (out == NULL)
        return nxr__fail(-EINVAL, __func__, "out is NULL");
    *out = NULL;
    if ((unsigned)family >= NXR_FAMILY_COUNT)
        return nxr__fail(-EINVAL, __func__, "family %d is not a family", (int)family);
    const struct nxr__native_isa *isa = nxr__native_isa_best();
    char name[48];
    snprintf(name, sizeof name, "native-%s", isa->name);
    struct nxr_provider_desc d;
    nxr_provider_desc_init(&d);
    d.name = name;
    d.family = family;
    d.count = NXR_COUNT_PER_CALL_BOUND;
    d.runs_on = NXR_RUNS_ON_ENGINE_WORKERS;
    d.self = (void *)isa; /* never written through: isa_of() gives it back const */
    switch (family) {
    case NXR_FAMILY_GEMM:
        d.gemm = &native_gemm_ops;
        break;
    case NXR_FAMILY_ELEMENTWISE:
        d.elementwise = &native_elementwise_ops;
        break;
    case NXR_FAMILY_REDUCTION:
        d.reduction = &native_reduction_ops;
        break;
    case NXR_FAMILY_NORM:
        d.norm = &native_norm_ops;
        break;
    case NXR_FAMILY_COUNT:
        return nxr__fail(-EINVAL, __func__, "family %d is not a family", (int)family);
    }
    return nxr__provider_new(__func__, &d, false, out);
}
