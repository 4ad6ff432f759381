/*
 * nxr native kernels: the sequential, range-form building blocks.
 *
 * Every kernel is a job (a struct of arguments) plus a chunk function with
 * the shape of nxr_parallel_for's callback,
 *     void chunk(void *job, size_t begin, size_t end, unsigned worker),
 * that computes the items [begin, end) of the job's index space: C macro
 * tiles for GEMM, batch items for batched GEMM, elements for elementwise
 * kernels, rows for softmax and norms, fixed blocks for reductions. Items
 * are independent and each is computed the same way whatever the split, so
 * a parallel run gives bit-for-bit the result of the sequential one
 * (reductions included: block partials are combined in a fixed tree, the
 * same tree the sequential sum uses). worker indexes per-worker scratch
 * (GEMM packing buffers), which the caller owns: nothing here allocates.
 *
 * The arithmetic lives in one template (native_body.inc) compiled once per
 * vector ISA: portable (GCC/Clang vector extensions lowered to whatever the
 * baseline target has), AVX2+FMA and AVX-512, each in its own translation
 * unit with its own -m flags. The ISA is chosen once, by
 * nxr__native_isa_best(), from what the CPU and OS support; a table is
 * never entered on a CPU that lacks its ISA.
 */
#ifndef NXR_KERNELS_INTERNAL_NATIVE_H
#define NXR_KERNELS_INTERNAL_NATIVE_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/nxr_provider.h"

struct nxr__sgemm_plan;
struct nxr__packed_b;

/* Elements per base block of the pairwise sum; parallel reduction blocks
 * are this times a power of two, which keeps them bit-identical to the
 * sequential sum (see nxr__reduce_block). */
#define NXR_SUM_BASE 256u

/* Largest power of two strictly below m (m >= 2). */
static inline size_t nxr__pow2_below(size_t m)
{
    size_t p = 1;
    while (p * 2 < m)
        p *= 2;
    return p;
}

struct nxr__small_plan;
struct nxr__quant_plan;

/* One ISA's kernels. Lengths are element counts; nothing here validates. */
struct nxr__native_isa {
    const char *name; /* "avx512", "avx2", "portable" */
    unsigned vl;      /* floats per vector register */
    unsigned mr, nr;  /* GEMM micro-tile (rows of C x columns of C) */
    unsigned mc, kc, nc;
    /* Macro tiles [begin, end) of C, all of k; scratch: plan->scratch_bytes. */
    void (*sgemm_tiles)(const struct nxr__sgemm_plan *plan, size_t begin, size_t end,
                        float *scratch);
    /* Units [begin, end) of a small-shape GEMM (see nxr__small_plan). */
    void (*sgemm_small)(const struct nxr__small_plan *plan, size_t begin, size_t end,
                        float *scratch);
    /* Units [begin, end) of a GEMM against bf16 / 8-bit weights
     * (kernels/internal/native_quant.h); scratch: nxr__quant_scratch_bytes. */
    void (*sgemm_quant)(const struct nxr__quant_plan *plan, size_t begin, size_t end,
                        float *scratch);
    void (*add)(size_t n, const float *x, const float *y, float *out);
    void (*mul)(size_t n, const float *x, const float *y, float *out);
    void (*scale)(size_t n, float alpha, const float *x, float *out);
    void (*silu)(size_t n, const float *x, float *out);
    void (*gelu_tanh)(size_t n, const float *x, float *out);
    void (*triad)(size_t n, float *a, const float *b, const float *c, float s);
    float (*sum)(size_t n, const float *x);               /* pairwise, NXR_SUM_BASE leaves */
    float (*max)(size_t n, const float *x);               /* n >= 1; NaN if any NaN */
    size_t (*argmax)(size_t n, const float *x, float *v); /* 1 <= n < 2^31 */
    void (*softmax_row)(size_t n, const float *x, float *out);
    void (*rmsnorm_row)(size_t n, const float *x, const float *gamma, float eps, float *out);
    void (*layernorm_row)(size_t n, const float *x, const float *gamma, const float *beta,
                          float eps, float *out);
};

/* The instances of native_body.inc. A table whose name is NULL was built
 * without its ISA's compiler flags (a non-x86 target) and is never used. */
extern const struct nxr__native_isa nxr__native_isa_portable_table;
extern const struct nxr__native_isa nxr__native_isa_avx2_table;
extern const struct nxr__native_isa nxr__native_isa_avx512_table;

/* The portable table (always present). */
const struct nxr__native_isa *nxr__native_isa_portable(void);
/* AVX2+FMA / AVX-512 tables: NULL unless compiled in and supported by this
 * CPU and OS. */
const struct nxr__native_isa *nxr__native_isa_avx2(void);
const struct nxr__native_isa *nxr__native_isa_avx512(void);
/* The widest supported table. */
const struct nxr__native_isa *nxr__native_isa_best(void);

/* ---- GEMM ---------------------------------------------------------------- */

/* How one GEMM is cut: tiles of mc x nc (mc a multiple of mr, nc of nr),
 * numbered column-major over the tiles_m x tiles_n grid (tile t is row
 * block t % tiles_m of column block t / tiles_m), each looping over k in
 * steps of kc. A range of tiles inside one column block packs op(B) once. */
struct nxr__sgemm_plan {
    struct nxr_sgemm_args args;
    const struct nxr__native_isa *isa;
    size_t mc, nc, kc;
    size_t tiles_m, tiles_n;
    size_t scratch_bytes; /* per worker, for any plan of this ISA */
    /* Applied to each micro-tile of C as it is written back after the last
     * kc slice (NULL: none); set by the fused op, never by plan_init. */
    const struct nxr_sgemm_epilogue *epilogue;
    /* op(B) packed in panels (NULL: B is read through args.b/ldb/trans_b);
     * the tile loop then reads its micro-panels in place. */
    const struct nxr__packed_b *packed;
};

/* 0 when args describe a valid GEMM (see struct nxr_sgemm_args), else -EINVAL. */
int nxr__sgemm_args_check(const struct nxr_sgemm_args *args);

/* Checks args (-EINVAL: NULL pointers where read, leading dimensions too
 * small) and cuts it. parts > 1 shrinks mc until there are at least `parts`
 * tiles, when m allows, so the executor has work for every worker. */
int nxr__sgemm_plan_init(struct nxr__sgemm_plan *plan, const struct nxr__native_isa *isa,
                         const struct nxr_sgemm_args *args, unsigned parts);

static inline size_t nxr__sgemm_plan_tiles(const struct nxr__sgemm_plan *plan)
{
    return plan->tiles_m * plan->tiles_n;
}

/* Per-worker scratch any plan of this ISA needs (bytes, 64-byte aligned). */
size_t nxr__sgemm_scratch_bytes(const struct nxr__native_isa *isa);

struct nxr__sgemm_job {
    struct nxr__sgemm_plan plan;
    void *const *scratch; /* scratch[worker], plan.scratch_bytes each */
};

/* Tiles [begin, end) of job->plan. */
void nxr__sgemm_chunk(void *job, size_t begin, size_t end, unsigned worker);

/* Batched GEMM with one fan-out level: the chunk runs whole batch items
 * [begin, end), each sequentially on the calling worker. */
struct nxr__sgemm_batch_job {
    struct nxr__sgemm_plan plan; /* cut for item 0 (all items share shape) */
    size_t stride_a, stride_b, stride_c;
    void *const *scratch;
};

int nxr__sgemm_batch_job_init(struct nxr__sgemm_batch_job *job, const struct nxr__native_isa *isa,
                              const struct nxr_sgemm_batch_args *args, void *const *scratch);
void nxr__sgemm_batch_chunk(void *job, size_t begin, size_t end, unsigned worker);

/* ---- packed op(B) ----------------------------------------------------------
 * A weight matrix prepared once (runtime/nxr_weights.h): op(B) is k x n.
 * From an untransposed source it becomes column panels of nr (the
 * micro-kernel's width) over all of k, panel q holding op(B)[p][q*nr + j]
 * at data[q * k * nr + p * nr + j], zero-padded past n: the very micro-panels
 * pack_b would build per call, so the tile loop reads them in place. From a
 * transposed source it stays rows of k (op(B)^T, n rows), `ld` floats apart,
 * which is what the unpacked transposed call reads. Either way each kernel
 * reads the same values in the same order as the unpacked call: same bits. */
struct nxr__packed_b {
    bool panels; /* else rows */
    size_t k, n;
    size_t ld; /* rows: floats between rows (>= k, a multiple of 16) */
    const float *data;
};

/* Bytes a packed copy of a k x n op(B) takes (k, n >= 1). */
size_t nxr__sgemm_packed_bytes(const struct nxr__native_isa *isa, bool trans, size_t k, size_t n);

/* Packs op(B) (src as the sgemm args' b, ldb, trans_b) into dst
 * (nxr__sgemm_packed_bytes, 64-byte aligned) and describes it in *view. */
void nxr__sgemm_pack_b(const struct nxr__native_isa *isa, bool trans, size_t k, size_t n,
                       const float *src, size_t ld, float *dst, struct nxr__packed_b *view);

/* The native GEMM (plain, or fused when epilogue is set) against packed
 * op(B): args as nxr_sgemm's, b/ldb/trans_b ignored, k and n packed's. Same
 * bits as the unpacked call. 0, -EINVAL or what the native sgemm returns. */
int nxr__native_sgemm_packed(const struct nxr__native_isa *isa, const struct nxr_kernel_call *call,
                             const struct nxr_sgemm_args *args, const struct nxr__packed_b *packed,
                             const struct nxr_sgemm_epilogue *epilogue);

/* Whether p is nxr's native GEMM provider, and its ISA table. */
bool nxr__provider_native_gemm(const nxr_provider_t *p, const struct nxr__native_isa **isa);

/* ---- small shapes ------------------------------------------------------------
 * A GEMM whose m or n is at most NXR_SMALL_MAX (a decode step's GEMV, a
 * small batch through a weight matrix; m up to NXR_SMALL_STREAM_MAX with
 * a transposed B) gets its own path: nothing of the
 * large operand W is packed, its long dimension is cut into units split over
 * the participants, and each participant streams its share of W once while
 * the few rows of the small operand X stay in cache (L1 up to 16 rows). Written as
 *     Y[s][l] = alpha * sum_p X[s][p] W[l][p] + beta * Y[s][l],
 * s < ns (the small side), l < nl (the long one): for small m, X = op(A),
 * W = op(B)^T, Y = C; for small n, X = op(B)^T, W = op(A), Y = C^T. Two
 * kernels, by how W lies in memory:
 *   - dot: W's rows run along k (W(l, p) = w[l * w_ls + p]): each Y element
 *     is a vector dot product over k, reduced at the end (units: DOT_ROWS
 *     rows of W);
 *   - axpy: W runs along l (W(l, p) = w[(l / nr) * w_ps + p * w_rs + l % nr]:
 *     rows of op(B), or the panels of packed weights): Y's vectors are
 *     accumulated over k in slices of kc, as the tile loop does (units: nr
 *     columns).
 * Every Y element is computed by the same code whichever unit, group or
 * participant computes it, so the split never changes a bit; a packed W
 * feeds the same kernel the same values as the unpacked call. */
#define NXR_SMALL_MAX 16
/* Small m where W is op(B)^T's rows (trans_b, packed or not: the dot
 * kernel, which streams W once whatever m is). There the tile loop packs
 * all of B again for a handful of rows, so the small path is faster up to
 * this many rows of X: 768 x 32000, m = 17 / 32 / 64 / 128, 3.1x / 2.75x /
 * 1.86x / 1.38x the tile loop; 4096 x 4096, m = 17 / 32 / 64, 2.8x / 1.9x /
 * 1.4x (scratch probe, 2 threads, W from memory). A decode step beside
 * prefill chunks has such m; past 16 it went to the tile loop, and a step
 * of 20 rows took as long as 3 of 16. Packed panels (the service's
 * weights) stream to this many rows too, with the tile loop's bits: a 110m
 * layer's four products at 20 rows, 1.49 ms against 2.32 through the tile
 * loop. Unpacked untransposed B stays at NXR_SMALL_MAX (its rows lie ldb
 * apart: the tile loop packs them). */
#define NXR_SMALL_STREAM_MAX 64
#define NXR_SMALL_DOT_ROWS   4

struct nxr__small_plan {
    const struct nxr__native_isa *isa;
    bool dot;
    bool transposed; /* small n: Y = C^T (the epilogue runs along C's rows) */
    size_t ns, nl, k;
    float alpha, beta;
    const float *x;
    size_t x_ss, x_ps; /* X[s][p] = x[s * x_ss + p * x_ps] */
    /* X is copied into the worker's scratch first (rows of k): the dot
     * kernel needs x_ps == 1; packed panels hold X (small n) in panels. */
    bool x_copy;
    const float *x_panels; /* non-NULL: X[s][p] = x_panels[(s/nr)*k*nr + p*nr + s%nr] */
    const float *w;
    size_t w_ls, w_rs, w_ps;
    float *y;
    size_t y_ss, y_ls;
    float *c; /* C and ldc, for the epilogue */
    size_t ldc;
    const struct nxr_sgemm_epilogue *epilogue; /* NULL: none */
    size_t units;
    size_t scratch_bytes; /* per worker: the copy of X (0: none) */
};

/* Whether args (valid, reading A and B) take the small path, and then its
 * plan; packed (NULL: none) is op(B) packed once. */
bool nxr__small_plan_init(struct nxr__small_plan *plan, const struct nxr__native_isa *isa,
                          const struct nxr_sgemm_args *args, const struct nxr__packed_b *packed,
                          const struct nxr_sgemm_epilogue *epilogue);

/* Units per chunk for a call of `threads` threads: each participant
 * streams enough of W to pay for a region, and the shares are even (at
 * most min(threads, what the units pay for) chunks of equal size). */
size_t nxr__small_grain(const struct nxr__small_plan *plan, unsigned threads);

struct nxr__small_job {
    struct nxr__small_plan plan;
    void *const *scratch;
};

/* Units [begin, end) of job->plan. */
void nxr__small_chunk(void *job, size_t begin, size_t end, unsigned worker);

/* Per-worker scratch a GEMM with these arguments (and op(B) packed in
 * panels, or NULL) needs on the path it takes: the small path's copy of X
 * (often 0), else the tile loop's packing buffers. */
size_t nxr__sgemm_scratch_for(const struct nxr__native_isa *isa, const struct nxr_sgemm_args *args,
                              const struct nxr__packed_b *packed);

/* ---- elementwise ----------------------------------------------------------- */

enum nxr__ew_kind {
    NXR_EW_ADD,
    NXR_EW_MUL,
    NXR_EW_SCALE,
    NXR_EW_SILU,
    NXR_EW_GELU_TANH,
    NXR_EW_TRIAD, /* out = x + alpha * y */
};

struct nxr__ew_job {
    const struct nxr__native_isa *isa;
    enum nxr__ew_kind kind;
    const float *x, *y;
    float *out;
    float alpha;
};

/* Elements [begin, end). */
void nxr__ew_chunk(void *job, size_t begin, size_t end, unsigned worker);

/* ---- reductions ------------------------------------------------------------ */

enum nxr__reduce_kind { NXR_REDUCE_SUM, NXR_REDUCE_MAX, NXR_REDUCE_ARGMAX };

/* A reduction over n elements in nblocks blocks of `block` elements (the
 * last one shorter). Each chunk fills the partials of its blocks; finish
 * combines them. For SUM, block must be NXR_SUM_BASE times a power of two;
 * then the result equals isa->sum(n, x) bit for bit. */
struct nxr__reduce_job {
    const struct nxr__native_isa *isa;
    enum nxr__reduce_kind kind;
    const float *x;
    size_t n, block, nblocks;
    float *partial;        /* nblocks values (caller's scratch) */
    size_t *partial_index; /* nblocks indices, ARGMAX only */
};

/* The default parallel block: NXR_SUM_BASE * 64 = 16384 elements. */
size_t nxr__reduce_block(void);
/* Sets block (0: the default) and nblocks; -EINVAL when block is not a
 * valid sum block or n is 0 for MAX/ARGMAX. */
int nxr__reduce_job_init(struct nxr__reduce_job *job, const struct nxr__native_isa *isa,
                         enum nxr__reduce_kind kind, const float *x, size_t n, size_t block);
/* Blocks [begin, end). */
void nxr__reduce_chunk(void *job, size_t begin, size_t end, unsigned worker);
/* Combines every block's partial: *value for SUM/MAX, *index for ARGMAX. */
void nxr__reduce_finish(const struct nxr__reduce_job *job, float *value, size_t *index);

/* The same, sequentially, without partials. */
float nxr__native_sum(const struct nxr__native_isa *isa, size_t n, const float *x);
size_t nxr__native_argmax(const struct nxr__native_isa *isa, size_t n, const float *x, float *v);

/* ---- rows: softmax and norms ----------------------------------------------- */

/* Row kernels; the row broadcasts (ADD, MUL: out = x op gamma) and the GEMM
 * epilogue (out = act(x + gamma), gamma may be NULL) read gamma as the
 * broadcast row. */
enum nxr__rows_kind {
    NXR_ROWS_SOFTMAX,
    NXR_ROWS_RMSNORM,
    NXR_ROWS_LAYERNORM,
    NXR_ROWS_ADD,
    NXR_ROWS_MUL,
    NXR_ROWS_EPILOGUE,
};

struct nxr__rows_job {
    const struct nxr__native_isa *isa;
    enum nxr__rows_kind kind;
    size_t cols;
    const float *x;
    size_t ldx;
    const float *gamma, *beta;
    float eps;
    float *out;
    size_t ldo;
    enum nxr_activation act; /* NXR_ROWS_EPILOGUE */
};

/* The epilogue on one row of n floats in place: bias (NULL: none), then act.
 * The same code the fused GEMM applies per micro-tile (bit-identical). */
void nxr__epilogue_row(const struct nxr__native_isa *isa, size_t n, float *row, const float *bias,
                       enum nxr_activation act);

/* Rows [begin, end). */
void nxr__rows_chunk(void *job, size_t begin, size_t end, unsigned worker);

#endif /* NXR_KERNELS_INTERNAL_NATIVE_H */
