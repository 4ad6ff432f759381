/*
 * nxr native kernels: ISA selection, GEMM planning, and the chunk functions
 * that turn a job's index range into calls of the selected ISA's table.
 * Nothing here allocates; scratch and partials come from the caller.
 */
#include "kernels/internal/native.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/internal/cpu.h"

const struct nxr__native_isa *nxr__native_isa_portable(void)
{
    return &nxr__native_isa_portable_table;
}

const struct nxr__native_isa *nxr__native_isa_avx2(void)
{
    if (nxr__native_isa_avx2_table.name == NULL || !nxr__cpu_has_avx2_fma())
        return NULL;
    return &nxr__native_isa_avx2_table;
}

const struct nxr__native_isa *nxr__native_isa_avx512(void)
{
    if (nxr__native_isa_avx512_table.name == NULL || !nxr__cpu_has_avx512())
        return NULL;
    return &nxr__native_isa_avx512_table;
}

const struct nxr__native_isa *nxr__native_isa_best(void)
{
    const struct nxr__native_isa *isa = nxr__native_isa_avx512();
    if (isa == NULL)
        isa = nxr__native_isa_avx2();
    return isa != NULL ? isa : nxr__native_isa_portable();
}

/* ---- GEMM ------------------------------------------------------------------ */

static size_t round_up(size_t x, size_t m)
{
    return (x + m - 1) / m * m;
}

static size_t ceil_div(size_t x, size_t m)
{
    return (x + m - 1) / m;
}

size_t nxr__sgemm_scratch_bytes(const struct nxr__native_isa *isa)
{
    /* A block mc x kc, then B block kc x nc; mc * kc is a multiple of 16
     * floats (kc is), so the B block starts 64-byte aligned too. */
    return ((size_t)isa->mc * isa->kc + round_up(isa->nc, isa->nr) * isa->kc) * sizeof(float);
}

int nxr__sgemm_args_check(const struct nxr_sgemm_args *g)
{
    if (g == NULL)
        return -EINVAL;
    if (g->m == 0 || g->n == 0)
        return 0; /* nothing is touched */
    if (g->c == NULL || g->ldc < g->n)
        return -EINVAL;
    if (g->k == 0 || g->alpha == 0.0f)
        return 0; /* A and B are not read */
    if (g->a == NULL || g->b == NULL)
        return -EINVAL;
    if (g->lda < (g->trans_a ? g->m : g->k) || g->ldb < (g->trans_b ? g->k : g->n))
        return -EINVAL;
    return 0;
}

int nxr__sgemm_plan_init(struct nxr__sgemm_plan *plan, const struct nxr__native_isa *isa,
                         const struct nxr_sgemm_args *args, unsigned parts)
{
    if (plan == NULL || isa == NULL)
        return -EINVAL;
    int rc = nxr__sgemm_args_check(args);
    if (rc != 0)
        return rc;
    plan->args = *args;
    plan->isa = isa;
    plan->mc = isa->mc;
    plan->nc = isa->nc;
    plan->kc = isa->kc;
    plan->scratch_bytes = nxr__sgemm_scratch_bytes(isa);
    plan->epilogue = NULL;
    plan->packed = NULL;
    if (args->m == 0 || args->n == 0) {
        plan->tiles_m = plan->tiles_n = 0;
        return 0;
    }
    plan->tiles_n = ceil_div(args->n, plan->nc);
    plan->tiles_m = ceil_div(args->m, plan->mc);
    if (parts > 1 && plan->tiles_n < parts) {
        /* Columns first: tiles are numbered column-major, so each static
         * share is then whole tile columns, whose B block its participant
         * packs alone (and smaller), instead of every participant packing
         * all of op(B) for its rows (with one row block, e.g. a small batch
         * through a weight matrix, the only way to split at all). Never
         * below one micro-panel; edges stay at the matrix's edge (nc a
         * multiple of nr), and each C element still sees the same kc slices
         * in the same order, so no bit changes. */
        size_t nc = round_up(ceil_div(args->n, parts), isa->nr);
        plan->nc = nc < plan->nc ? nc : plan->nc;
        plan->tiles_n = ceil_div(args->n, plan->nc);
    }
    if (parts > 1 && plan->tiles_m * plan->tiles_n < parts) {
        /* More, shorter row blocks (never below one micro-tile). */
        const size_t want_m = ceil_div(parts, plan->tiles_n);
        size_t mc = round_up(ceil_div(args->m, want_m), isa->mr);
        plan->mc = mc < plan->mc ? mc : plan->mc;
        plan->tiles_m = ceil_div(args->m, plan->mc);
    }
    return 0;
}

size_t nxr__sgemm_packed_bytes(const struct nxr__native_isa *isa, bool trans, size_t k, size_t n)
{
    if (trans)
        return n * round_up(k, 16) * sizeof(float);
    return round_up(n, isa->nr) * k * sizeof(float);
}

void nxr__sgemm_pack_b(const struct nxr__native_isa *isa, bool trans, size_t k, size_t n,
                       const float *src, size_t ld, float *dst, struct nxr__packed_b *view)
{
    *view = (struct nxr__packed_b){.panels = !trans, .k = k, .n = n, .data = dst};
    if (trans) {
        const size_t ldp = round_up(k, 16);
        view->ld = ldp;
        for (size_t j = 0; j < n; ++j) {
            memcpy(dst + j * ldp, src + j * ld, k * sizeof(float));
            for (size_t p = k; p < ldp; ++p)
                dst[j * ldp + p] = 0.0f;
        }
        return;
    }
    const size_t nr = isa->nr;
    for (size_t q = 0; q * nr < n; ++q) {
        float *panel = dst + q * k * nr;
        const size_t cols = n - q * nr < nr ? n - q * nr : nr;
        for (size_t p = 0; p < k; ++p) {
            memcpy(panel + p * nr, src + p * ld + q * nr, cols * sizeof(float));
            for (size_t j = cols; j < nr; ++j)
                panel[p * nr + j] = 0.0f;
        }
    }
}

/* ---- small shapes ---------------------------------------------------------- */

bool nxr__small_plan_init(struct nxr__small_plan *plan, const struct nxr__native_isa *isa,
                          const struct nxr_sgemm_args *g, const struct nxr__packed_b *packed,
                          const struct nxr_sgemm_epilogue *epilogue)
{
    if (g->m == 0 || g->n == 0 || g->k == 0 || g->alpha == 0.0f)
        return false; /* C = beta C: the tile loop's scale */
    /* Packed panels stand for an untransposed B, but stream to the rows
     * transposed rows do: the axpy kernel sums each element in the tile
     * loop's order (kc slices, one fma chain each), so the bits are the ones
     * B's tile loop gives past NXR_SMALL_MAX (gemm_small_test). */
    const bool panels = packed != NULL && packed->panels;
    const size_t m_max = g->trans_b || panels ? NXR_SMALL_STREAM_MAX : NXR_SMALL_MAX;
    const bool small_m = g->m <= m_max && g->m <= g->n;
    const bool small_n = !small_m && g->n <= NXR_SMALL_MAX;
    if (!small_m && !small_n)
        return false;
    const size_t nr = isa->nr;
    *plan = (struct nxr__small_plan){.isa = isa, .k = g->k, .alpha = g->alpha, .beta = g->beta,
                                     .c = g->c, .ldc = g->ldc, .epilogue = epilogue};
    if (small_m) {
        plan->ns = g->m;
        plan->nl = g->n;
        plan->x = g->a;
        plan->x_ss = g->trans_a ? 1 : g->lda;
        plan->x_ps = g->trans_a ? g->lda : 1;
        plan->w = g->b;
        plan->dot = g->trans_b && !panels;
        if (panels) {
            plan->w = packed->data;
            plan->w_rs = nr;
            plan->w_ps = g->k * nr;
        } else if (plan->dot) {
            plan->w_ls = g->ldb; /* op(B)^T's rows: B's */
        } else {
            plan->w_rs = g->ldb;
            plan->w_ps = nr;
        }
        plan->y = g->c;
        plan->y_ss = g->ldc;
        plan->y_ls = 1;
    } else {
        plan->transposed = true;
        plan->ns = g->n;
        plan->nl = g->m;
        if (panels) {
            plan->x_panels = packed->data;
        } else {
            plan->x = g->b;
            plan->x_ss = g->trans_b ? g->ldb : 1;
            plan->x_ps = g->trans_b ? 1 : g->ldb;
        }
        plan->w = g->a;
        plan->dot = !g->trans_a;
        if (plan->dot) {
            plan->w_ls = g->lda;
        } else {
            plan->w_rs = g->lda;
            plan->w_ps = nr;
        }
        plan->y = g->c;
        plan->y_ss = 1;
        plan->y_ls = g->ldc;
    }
    plan->x_copy = plan->x_panels != NULL || (plan->dot && plan->x_ps != 1);
    plan->scratch_bytes = plan->x_copy ? plan->ns * round_up(g->k, 16) * sizeof(float) : 0;
    plan->units = plan->dot ? ceil_div(plan->nl, NXR_SMALL_DOT_ROWS) : ceil_div(plan->nl, nr);
    return true;
}

size_t nxr__small_grain(const struct nxr__small_plan *plan, unsigned threads)
{
    /* At least about 64 KiB of W per participant (a region costs a few
     * microseconds), and then an even split: the static schedule gives
     * whole chunks, so chunks of that minimum would leave one participant
     * a chunk more than another (72 units in chunks of 15 over two: 45
     * against 27, the call as slow as 45). */
    const size_t per_unit = (plan->dot ? NXR_SMALL_DOT_ROWS : plan->isa->nr) * plan->k;
    const size_t want = 16384;
    const size_t least = per_unit >= want ? 1 : ceil_div(want, per_unit);
    size_t parts = ceil_div(plan->units, least);
    if (parts > threads)
        parts = threads;
    return parts > 1 ? ceil_div(plan->units, parts) : plan->units > 0 ? plan->units : 1;
}

void nxr__small_chunk(void *arg, size_t begin, size_t end, unsigned worker)
{
    const struct nxr__small_job *job = arg;
    float *scratch = job->scratch != NULL ? job->scratch[worker] : NULL;
    if (begin < end)
        job->plan.isa->sgemm_small(&job->plan, begin, end, scratch);
}

size_t nxr__sgemm_scratch_for(const struct nxr__native_isa *isa, const struct nxr_sgemm_args *args,
                              const struct nxr__packed_b *packed)
{
    /* The small path packs no operand: at most its copy of X (often
     * nothing, and then the call acquires no scratch at all). */
    struct nxr__small_plan small;
    if (args != NULL && nxr__small_plan_init(&small, isa, args, packed, NULL))
        return small.scratch_bytes;
    return nxr__sgemm_scratch_bytes(isa);
}

void nxr__sgemm_chunk(void *arg, size_t begin, size_t end, unsigned worker)
{
    const struct nxr__sgemm_job *job = arg;
    float *scratch = job->scratch != NULL ? job->scratch[worker] : NULL;
    if (begin < end)
        job->plan.isa->sgemm_tiles(&job->plan, begin, end, scratch);
}

int nxr__sgemm_batch_job_init(struct nxr__sgemm_batch_job *job, const struct nxr__native_isa *isa,
                              const struct nxr_sgemm_batch_args *args, void *const *scratch)
{
    if (job == NULL || args == NULL)
        return -EINVAL;
    int rc = nxr__sgemm_plan_init(&job->plan, isa, &args->gemm, 1);
    if (rc != 0)
        return rc;
    job->stride_a = args->stride_a;
    job->stride_b = args->stride_b;
    job->stride_c = args->stride_c;
    job->scratch = scratch;
    return 0;
}

void nxr__sgemm_batch_chunk(void *arg, size_t begin, size_t end, unsigned worker)
{
    const struct nxr__sgemm_batch_job *job = arg;
    float *scratch = job->scratch != NULL ? job->scratch[worker] : NULL;
    const size_t tiles = nxr__sgemm_plan_tiles(&job->plan);
    for (size_t i = begin; i < end; ++i) {
        struct nxr__sgemm_plan item = job->plan;
        /* Operands that are not read may be NULL: never offset those. */
        if (item.args.a != NULL)
            item.args.a += i * job->stride_a;
        if (item.args.b != NULL)
            item.args.b += i * job->stride_b;
        if (item.args.c != NULL)
            item.args.c += i * job->stride_c;
        struct nxr__small_plan small;
        if (nxr__small_plan_init(&small, item.isa, &item.args, NULL, NULL)) {
            small.isa->sgemm_small(&small, 0, small.units, scratch);
            continue;
        }
        if (tiles > 0)
            item.isa->sgemm_tiles(&item, 0, tiles, scratch);
    }
}

/* ---- elementwise ------------------------------------------------------------ */

void nxr__ew_chunk(void *arg, size_t begin, size_t end, unsigned worker)
{
    const struct nxr__ew_job *job = arg;
    const struct nxr__native_isa *isa = job->isa;
    const size_t n = end - begin;
    (void)worker;
    switch (job->kind) {
    case NXR_EW_ADD:
        isa->add(n, job->x + begin, job->y + begin, job->out + begin);
        break;
    case NXR_EW_MUL:
        isa->mul(n, job->x + begin, job->y + begin, job->out + begin);
        break;
    case NXR_EW_SCALE:
        isa->scale(n, job->alpha, job->x + begin, job->out + begin);
        break;
    case NXR_EW_SILU:
        isa->silu(n, job->x + begin, job->out + begin);
        break;
    case NXR_EW_GELU_TANH:
        isa->gelu_tanh(n, job->x + begin, job->out + begin);
        break;
    case NXR_EW_TRIAD:
        isa->triad(n, job->out + begin, job->x + begin, job->y + begin, job->alpha);
        break;
    }
}

/* ---- reductions -------------------------------------------------------------- */

/* Argmax works on int32 lane indices: pieces of at most 2^30 elements. */
#define ARGMAX_PIECE ((size_t)1 << 30)

size_t nxr__reduce_block(void)
{
    return (size_t)NXR_SUM_BASE * 64;
}

int nxr__reduce_job_init(struct nxr__reduce_job *job, const struct nxr__native_isa *isa,
                         enum nxr__reduce_kind kind, const float *x, size_t n, size_t block)
{
    if (job == NULL || isa == NULL || (n > 0 && x == NULL))
        return -EINVAL;
    if (block == 0)
        block = nxr__reduce_block();
    const size_t leaves = block / NXR_SUM_BASE;
    if (block % NXR_SUM_BASE != 0 || (leaves & (leaves - 1)) != 0 || block > ARGMAX_PIECE)
        return -EINVAL;
    if (kind != NXR_REDUCE_SUM && n == 0)
        return -EINVAL;
    job->isa = isa;
    job->kind = kind;
    job->x = x;
    job->n = n;
    job->block = block;
    job->nblocks = ceil_div(n, block);
    job->partial = NULL;
    job->partial_index = NULL;
    return 0;
}

void nxr__reduce_chunk(void *arg, size_t begin, size_t end, unsigned worker)
{
    const struct nxr__reduce_job *job = arg;
    (void)worker;
    for (size_t b = begin; b < end; ++b) {
        const size_t off = b * job->block;
        const size_t len = job->n - off < job->block ? job->n - off : job->block;
        switch (job->kind) {
        case NXR_REDUCE_SUM:
            job->partial[b] = job->isa->sum(len, job->x + off);
            break;
        case NXR_REDUCE_MAX:
            job->partial[b] = job->isa->max(len, job->x + off);
            break;
        case NXR_REDUCE_ARGMAX:
            job->partial_index[b] = off + job->isa->argmax(len, job->x + off, &job->partial[b]);
            break;
        }
    }
}

/* The tree sum_tree uses, over whole blocks. */
static float combine_sum(const float *p, size_t m)
{
    if (m == 1)
        return p[0];
    const size_t h = nxr__pow2_below(m);
    return combine_sum(p, h) + combine_sum(p + h, m - h);
}

/* Blocks in index order: the first NaN wins, else the first maximum. */
static size_t combine_argmax(const float *v, const size_t *idx, size_t m, float *value)
{
    size_t best = 0;
    for (size_t b = 0; b < m; ++b) {
        if (isnan(v[b])) {
            best = b;
            break;
        }
        if (v[b] > v[best])
            best = b;
    }
    *value = v[best];
    return idx[best];
}

void nxr__reduce_finish(const struct nxr__reduce_job *job, float *value, size_t *index)
{
    switch (job->kind) {
    case NXR_REDUCE_SUM:
        *value = job->nblocks == 0 ? 0.0f : combine_sum(job->partial, job->nblocks);
        break;
    case NXR_REDUCE_MAX: {
        float m = job->partial[0];
        for (size_t b = 0; b < job->nblocks && !isnan(m); ++b)
            m = isnan(job->partial[b]) || job->partial[b] > m ? job->partial[b] : m;
        *value = m;
        break;
    }
    case NXR_REDUCE_ARGMAX: {
        float v;
        *index = combine_argmax(job->partial, job->partial_index, job->nblocks, &v);
        if (value != NULL)
            *value = v;
        break;
    }
    }
}

float nxr__native_sum(const struct nxr__native_isa *isa, size_t n, const float *x)
{
    return isa->sum(n, x);
}

size_t nxr__native_argmax(const struct nxr__native_isa *isa, size_t n, const float *x, float *v)
{
    size_t best = isa->argmax(n < ARGMAX_PIECE ? n : ARGMAX_PIECE, x, v);
    for (size_t off = ARGMAX_PIECE; off < n && !isnan(*v); off += ARGMAX_PIECE) {
        float pv;
        const size_t len = n - off < ARGMAX_PIECE ? n - off : ARGMAX_PIECE;
        const size_t pi = off + isa->argmax(len, x + off, &pv);
        if (isnan(pv) || pv > *v) {
            best = pi;
            *v = pv;
        }
    }
    return best;
}

/* ---- rows ---------------------------------------------------------------------- */

void nxr__rows_chunk(void *arg, size_t begin, size_t end, unsigned worker)
{
    const struct nxr__rows_job *job = arg;
    (void)worker;
    for (size_t r = begin; r < end; ++r) {
        const float *x = job->x + r * job->ldx;
        float *out = job->out + r * job->ldo;
        switch (job->kind) {
        case NXR_ROWS_SOFTMAX:
            job->isa->softmax_row(job->cols, x, out);
            break;
        case NXR_ROWS_RMSNORM:
            job->isa->rmsnorm_row(job->cols, x, job->gamma, job->eps, out);
            break;
        case NXR_ROWS_LAYERNORM:
            job->isa->layernorm_row(job->cols, x, job->gamma, job->beta, job->eps, out);
            break;
        case NXR_ROWS_ADD:
            job->isa->add(job->cols, x, job->gamma, out);
            break;
        case NXR_ROWS_MUL:
            job->isa->mul(job->cols, x, job->gamma, out);
            break;
        case NXR_ROWS_EPILOGUE:
            nxr__epilogue_row(job->isa, job->cols, out, job->gamma, job->act);
            break;
        }
    }
}

void nxr__epilogue_row(const struct nxr__native_isa *isa, size_t n, float *row, const float *bias,
                       enum nxr_activation act)
{
    if (bias != NULL)
        isa->add(n, row, bias, row);
    if (act == NXR_ACTIVATION_SILU)
        isa->silu(n, row, row);
    else if (act == NXR_ACTIVATION_GELU_TANH)
        isa->gelu_tanh(n, row, row);
}
