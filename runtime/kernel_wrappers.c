/*
 * The public kernels through a context (runtime/nxr_ctx_kernels.h), each
 * written out here: nxr_<kernel> packs its parameters into struct
 * nxr__<kernel>_args, applies the contract's argument rules
 * (kernels/internal/args.h), names the inputs a routing context weighs, and
 * hands the call to the engine (runtime/kernel_call.c) with the kernel's
 * invoker. Only the invokers, which unpack the struct for the bundle's
 * dispatch, are generated from the rows of kernels/internal/kernel_table.h.
 * The call against packed weights (runtime/nxr_weights.h) is at the end.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/internal/last_error.h"
#include "kernels/internal/args.h"
#include "kernels/internal/kernel_table.h"
#include "kernels/internal/provider.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/kernel_call.h"
#include "runtime/internal/runtime.h"
#include "runtime/internal/weights.h"
#include "runtime/nxr_ctx_kernels.h"

static const nxr_provider_bundle_t *providers_of(const nxr_ctx_t *ctx)
{
    return ctx->rt != NULL ? ctx->rt->providers : NULL;
}

static void input(struct nxr__kcall *k, const void *ptr, size_t bytes)
{
    if (ptr != NULL && bytes > 0 && k->nin < sizeof(k->in) / sizeof(k->in[0]))
        k->in[k->nin++] = (struct nxr_mem_ref){.ptr = ptr, .bytes = bytes};
}

static size_t floats(size_t n)
{
    return n > SIZE_MAX / sizeof(float) ? SIZE_MAX : n * sizeof(float);
}

/* ---- the invokers: the engine's way to each kernel's dispatch --------------- */

/* invoke_<kernel>(bundle, call, args): nxr__bundle_<kernel> with the
 * arguments unpacked from struct nxr__<kernel>_args. Generated from
 * kernels/internal/kernel_table.h: each is only its parameter list, read
 * from the struct. */
#define INVOKER(name, family, table, PARAMS)                                                       \
    static int invoke_##name(const nxr_provider_bundle_t *bundle,                                  \
                             const struct nxr_kernel_call *call, const void *args_)                \
    {                                                                                              \
        const struct nxr__##name##_args *from = args_;                                             \
        return nxr__bundle_##name(bundle, call PARAMS(NXR__PARAM_FROM));                           \
    }
NXR__KERNELS(INVOKER)
NXR__KERNELS_OWN(INVOKER)
#undef INVOKER

/* The engine's request for one call of a kernel of `family`, through
 * `invoke` with `args`; its error details name the public function `name`.
 * The caller's check fills the verdict and the inputs. */
static struct nxr__kcall request(const char *name, nxr_ctx_t *ctx, enum nxr_provider_family family,
                                 int (*invoke)(const nxr_provider_bundle_t *,
                                               const struct nxr_kernel_call *, const void *),
                                 const void *args)
{
    return (struct nxr__kcall){.name = name,
                               .providers = providers_of(ctx),
                               .family = family,
                               .invoke = invoke,
                               .args = args};
}

/* ---- GEMM ------------------------------------------------------------------ */

/* A, B and (when it is read) C of one GEMM, each `batch` items apart. */
static void gemm_inputs(struct nxr__kcall *k, const struct nxr_sgemm_args *g, size_t batch,
                        size_t sa, size_t sb, size_t sc)
{
    input(k, g->a, nxr__batch_bytes(nxr__sgemm_a_bytes(g), batch, sa));
    input(k, g->b, nxr__batch_bytes(nxr__sgemm_b_bytes(g), batch, sb));
    if (g->beta != 0.0f)
        input(k, g->c, nxr__batch_bytes(nxr__sgemm_c_bytes(g), batch, sc));
}

/* nxr_sgemm's rules, scratch and inputs. */
static void check_sgemm(struct nxr__kcall *k, const struct nxr_sgemm_args *args)
{
    k->bad = nxr__check_sgemm(args, k->why, sizeof(k->why));
    if (k->bad == 0) {
        k->scratch_bytes = nxr__bundle_sgemm_scratch(k->providers, args);
        gemm_inputs(k, args, 1, 0, 0, 0);
    }
}

/* nxr_sgemm, its error details naming `name` (nxr_sgemm_fused's shortcut). */
static int sgemm_named(const char *name, nxr_ctx_t *ctx, const struct nxr_sgemm_args *args)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, name, "ctx is NULL");
    const struct nxr__sgemm_args a = {.args = args};
    struct nxr__kcall k = request(name, ctx, NXR_FAMILY_GEMM, invoke_sgemm, &a);
    check_sgemm(&k, args);
    return nxr__kcall_run(ctx, &k);
}

int nxr_sgemm(nxr_ctx_t *ctx, const struct nxr_sgemm_args *args)
{
    return sgemm_named(__func__, ctx, args);
}

int nxr_sgemm_batch(nxr_ctx_t *ctx, const struct nxr_sgemm_batch_args *args)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__sgemm_batch_args a = {.args = args};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_GEMM, invoke_sgemm_batch, &a);
    k.bad = nxr__check_sgemm_batch(args, k.why, sizeof(k.why));
    if (k.bad == 0) {
        k.scratch_bytes = nxr__bundle_sgemm_scratch(k.providers, &args->gemm);
        gemm_inputs(&k, &args->gemm, args->batch, args->stride_a, args->stride_b, args->stride_c);
    }
    return nxr__kcall_run(ctx, &k);
}

/* Without a bias or an activation there is nothing to fuse: nxr_sgemm. */
int nxr_sgemm_fused(nxr_ctx_t *ctx, const struct nxr_sgemm_args *args,
                    const struct nxr_sgemm_epilogue *epilogue)
{
    bool none =
        epilogue == NULL || (epilogue->bias == NULL && epilogue->activation == NXR_ACTIVATION_NONE);
    if (none)
        return sgemm_named(__func__, ctx, args);
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__sgemm_fused_args a = {.args = args, .epilogue = epilogue};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_GEMM, invoke_sgemm_fused, &a);
    k.bad = nxr__check_sgemm(args, k.why, sizeof(k.why));
    if (k.bad == 0)
        k.bad = nxr__check_epilogue(args, epilogue, k.why, sizeof(k.why));
    if (k.bad == 0) {
        k.scratch_bytes = nxr__bundle_sgemm_scratch(k.providers, args);
        gemm_inputs(&k, args, 1, 0, 0, 0);
        if (args->m > 0 && args->n > 0)
            input(&k, epilogue->bias, floats(args->n));
    }
    return nxr__kcall_run(ctx, &k);
}

/* ---- elementwise ----------------------------------------------------------- */

/* Vectors of n floats: x (and y when two) read, out written; names are the
 * public call's names for them. */
static void vectors(struct nxr__kcall *k, size_t n, const float *x, const float *y, bool two,
                    const float *out, const char *const names[3])
{
    k->bad = nxr__check_vectors(n, x, y, two, out, names, k->why, sizeof(k->why));
    input(k, x, floats(n));
    if (two)
        input(k, y, floats(n));
}

static const char *const xy_out[3] = {"x", "y", "out"};

int nxr_binary(nxr_ctx_t *ctx, enum nxr_binary_op op, size_t n, const float *x, const float *y,
               float *out)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__binary_args a = {.op = op, .n = n, .x = x, .y = y, .out = out};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_ELEMENTWISE, invoke_binary, &a);
    vectors(&k, n, x, y, true, out, xy_out);
    if (k.bad == 0)
        k.bad = nxr__check_binary_op(op, k.why, sizeof(k.why));
    return nxr__kcall_run(ctx, &k);
}

int nxr_scale(nxr_ctx_t *ctx, size_t n, const float *x, float alpha, float *out)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__scale_args a = {.n = n, .x = x, .alpha = alpha, .out = out};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_ELEMENTWISE, invoke_scale, &a);
    vectors(&k, n, x, NULL, false, out, xy_out);
    return nxr__kcall_run(ctx, &k);
}

int nxr_unary(nxr_ctx_t *ctx, enum nxr_unary_op op, size_t n, const float *x, float *out)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__unary_args a = {.op = op, .n = n, .x = x, .out = out};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_ELEMENTWISE, invoke_unary, &a);
    vectors(&k, n, x, NULL, false, out, xy_out);
    if (k.bad == 0)
        k.bad = nxr__check_unary_op(op, k.why, sizeof(k.why));
    return nxr__kcall_run(ctx, &k);
}

int nxr_triad(nxr_ctx_t *ctx, size_t n, const float *b, const float *c, float s, float *a)
{
    static const char *const names[3] = {"b", "c", "a"};
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__triad_args args = {.n = n, .b = b, .c = c, .s = s, .a = a};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_ELEMENTWISE, invoke_triad, &args);
    vectors(&k, n, b, c, true, a, names);
    return nxr__kcall_run(ctx, &k);
}

int nxr_binary_rows(nxr_ctx_t *ctx, enum nxr_binary_op op, size_t rows, size_t cols, const float *x,
                    size_t ldx, const float *row, float *out, size_t ldo)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__binary_rows_args a = {.op = op,
                                            .rows = rows,
                                            .cols = cols,
                                            .x = x,
                                            .ldx = ldx,
                                            .row = row,
                                            .out = out,
                                            .ldo = ldo};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_ELEMENTWISE, invoke_binary_rows, &a);
    k.bad = nxr__check_binary_rows(rows, cols, x, ldx, row, out, ldo, k.why, sizeof(k.why));
    if (k.bad == 0)
        k.bad = nxr__check_binary_op(op, k.why, sizeof(k.why));
    if (rows > 0 && cols > 0) {
        input(&k, x, nxr__matrix_bytes(rows, cols, ldx));
        input(&k, row, floats(cols));
    }
    return nxr__kcall_run(ctx, &k);
}

/* ---- reductions ------------------------------------------------------------ */

/* x of n floats; empty_ok: the reduction of nothing has a value (the sum). */
static void reduction(struct nxr__kcall *k, size_t n, const float *x, const void *out,
                      bool empty_ok)
{
    k->bad = nxr__check_reduction(n, x, out, empty_ok, k->why, sizeof(k->why));
    input(k, x, floats(n));
}

int nxr_sum(nxr_ctx_t *ctx, size_t n, const float *x, float *out)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__sum_args a = {.n = n, .x = x, .out = out};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_REDUCTION, invoke_sum, &a);
    reduction(&k, n, x, out, true);
    return nxr__kcall_run(ctx, &k);
}

int nxr_max(nxr_ctx_t *ctx, size_t n, const float *x, float *out)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__max_args a = {.n = n, .x = x, .out = out};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_REDUCTION, invoke_max, &a);
    reduction(&k, n, x, out, false);
    return nxr__kcall_run(ctx, &k);
}

int nxr_argmax(nxr_ctx_t *ctx, size_t n, const float *x, size_t *out)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__argmax_args a = {.n = n, .x = x, .out = out};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_REDUCTION, invoke_argmax, &a);
    reduction(&k, n, x, out, false);
    return nxr__kcall_run(ctx, &k);
}

/* ---- row kernels (norm) ---------------------------------------------------- */

/* A row kernel: x, gamma and beta read (NULL: not there), out written. */
static void check_rows(struct nxr__kcall *k, size_t rows, size_t cols, const float *x, size_t ldx,
                       const float *gamma, const float *beta, float eps, const float *out,
                       size_t ldo)
{
    k->bad =
        nxr__check_rows(rows, cols, x, ldx, gamma, beta, eps, out, ldo, k->why, sizeof(k->why));
    if (rows > 0) {
        input(k, x, nxr__matrix_bytes(rows, cols, ldx));
        input(k, gamma, floats(cols));
        input(k, beta, floats(cols));
    }
}

int nxr_softmax(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx, float *out,
                size_t ldo)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__softmax_args a = {
        .rows = rows, .cols = cols, .x = x, .ldx = ldx, .out = out, .ldo = ldo};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_NORM, invoke_softmax, &a);
    check_rows(&k, rows, cols, x, ldx, NULL, NULL, 0.0f, out, ldo);
    return nxr__kcall_run(ctx, &k);
}

int nxr_rmsnorm(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx,
                const float *gamma, float eps, float *out, size_t ldo)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__rmsnorm_args a = {.rows = rows,
                                        .cols = cols,
                                        .x = x,
                                        .ldx = ldx,
                                        .gamma = gamma,
                                        .eps = eps,
                                        .out = out,
                                        .ldo = ldo};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_NORM, invoke_rmsnorm, &a);
    check_rows(&k, rows, cols, x, ldx, gamma, NULL, eps, out, ldo);
    return nxr__kcall_run(ctx, &k);
}

int nxr_layernorm(nxr_ctx_t *ctx, size_t rows, size_t cols, const float *x, size_t ldx,
                  const float *gamma, const float *beta, float eps, float *out, size_t ldo)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    const struct nxr__layernorm_args a = {.rows = rows,
                                          .cols = cols,
                                          .x = x,
                                          .ldx = ldx,
                                          .gamma = gamma,
                                          .beta = beta,
                                          .eps = eps,
                                          .out = out,
                                          .ldo = ldo};
    struct nxr__kcall k = request(__func__, ctx, NXR_FAMILY_NORM, invoke_layernorm, &a);
    check_rows(&k, rows, cols, x, ldx, gamma, beta, eps, out, ldo);
    return nxr__kcall_run(ctx, &k);
}

/* ---- against packed weights (runtime/nxr_weights.h) ----------------------- */

int nxr__packed_invoke(const struct nxr_kernel_call *c, const struct nxr__packed_call *pc)
{
    if (pc->quant != NULL)
        return nxr__native_sgemm_quant(pc->isa, c, &pc->gemm, pc->quant, pc->epilogue);
    return nxr__native_sgemm_packed(pc->isa, c, &pc->gemm, pc->packed, pc->epilogue);
}

static int inv_sgemm_packed(const nxr_provider_bundle_t *b, const struct nxr_kernel_call *c,
                            const void *p)
{
    (void)b; /* the weights' own ISA: the native provider's, checked at creation */
    return nxr__packed_invoke(c, p);
}

/* The rest of the verdict for weights in bf16 or 8-bit blocks: nxr_sgemm's
 * rules with B the whole copy (its bytes are not floats, so its span is the
 * copy's), the epilogue's, then the scratch of the quantized kernel. */
static void quant_prepare(struct nxr__kcall *k, struct nxr__packed_call *pc,
                          const struct nxr__weights_copy *copy)
{
    static const char *const names[3] = {"a", "the packed weights", "c"};
    pc->quant = &copy->qview;
    pc->gemm.trans_b = true;
    pc->gemm.ldb = pc->gemm.k;
    k->bad = nxr__check_sgemm_b_span(&pc->gemm, names, copy->bytes, k->why, sizeof k->why);
    if (k->bad == 0)
        k->bad = nxr__check_epilogue(&pc->gemm, pc->epilogue, k->why, sizeof k->why);
    if (k->bad != 0)
        return;
    if (nxr__sgemm_reads_ab(&pc->gemm)) {
        k->scratch_bytes = nxr__quant_scratch_bytes(&copy->qview, pc->gemm.m);
        input(k, pc->gemm.a, nxr__sgemm_a_bytes(&pc->gemm));
        input(k, copy->data, copy->bytes);
    }
    if (pc->gemm.m > 0 && pc->gemm.n > 0 && pc->gemm.beta != 0.0f)
        input(k, pc->gemm.c, nxr__sgemm_c_bytes(&pc->gemm));
}

/* The packed call's verdict: the copy for ctx's domain, then nxr_sgemm's
 * rules on the equivalent unpacked arguments (the copy standing in for B),
 * the epilogue's, and C against the whole copy. */
void nxr__packed_prepare(nxr_ctx_t *ctx, struct nxr__kcall *k, struct nxr__packed_call *pc,
                         const struct nxr_sgemm_packed_args *args,
                         const struct nxr_sgemm_epilogue *ep)
{
    if (args == NULL || args->w == NULL) {
        k->bad = -EINVAL;
        snprintf(k->why, sizeof k->why, "%s is NULL", args == NULL ? "args" : "args->w");
        return;
    }
    const nxr_weights_t *w = args->w;
    if (ctx->placing) {
        k->bad = -EINVAL;
        snprintf(k->why, sizeof k->why,
                 "a routing context has no domain to choose a copy by; use a context on a "
                 "domain that holds one");
        return;
    }
    const struct nxr__weights_copy *copy = nxr__weights_on(w, ctx->domain);
    if (copy == NULL) {
        k->bad = NXR_ENODOMAIN;
        snprintf(k->why, sizeof k->why, "the weights have no copy on domain %d",
                 ctx->domain->spec.id);
        return;
    }
    pc->isa = w->isa;
    pc->packed = &copy->view;
    k->weight_bytes = copy->bytes; /* the whole copy streams through the GEMV/GEMM */
    pc->epilogue =
        ep != NULL && (ep->bias != NULL || ep->activation != NXR_ACTIVATION_NONE) ? ep : NULL;
    pc->gemm = (struct nxr_sgemm_args){.trans_a = args->trans_a,
                                       .trans_b = w->trans,
                                       .m = args->m,
                                       .n = w->n,
                                       .k = w->k,
                                       .alpha = args->alpha,
                                       .a = args->a,
                                       .lda = args->lda,
                                       .b = copy->data,
                                       .ldb = w->trans ? w->k : w->n,
                                       .beta = args->beta,
                                       .c = args->c,
                                       .ldc = args->ldc};
    /* The whole copy (padding included), named as such, before nxr_sgemm's
     * rules would call it B. */
    if (nxr__sgemm_reads_ab(&pc->gemm) &&
        nxr__spans_overlap(pc->gemm.c, nxr__sgemm_c_bytes(&pc->gemm), copy->data, copy->bytes)) {
        k->bad = -EINVAL;
        snprintf(k->why, sizeof k->why, "c overlaps the packed weights");
        return;
    }
    if (w->format != NXR_WEIGHTS_F32) {
        quant_prepare(k, pc, copy);
        return;
    }
    k->bad = nxr__check_sgemm(&pc->gemm, k->why, sizeof k->why);
    if (k->bad == 0)
        k->bad = nxr__check_epilogue(&pc->gemm, pc->epilogue, k->why, sizeof k->why);
    if (k->bad == 0) {
        k->scratch_bytes =
            nxr__sgemm_scratch_for(w->isa, &pc->gemm, copy->view.panels ? &copy->view : NULL);
        gemm_inputs(k, &pc->gemm, 1, 0, 0, 0);
    }
}

int nxr_sgemm_packed(nxr_ctx_t *ctx, const struct nxr_sgemm_packed_args *args,
                     const struct nxr_sgemm_epilogue *epilogue)
{
    nxr__call_begin();
    if (ctx == NULL)
        return nxr__fail(-EINVAL, __func__, "ctx is NULL");
    struct nxr__packed_call pc = {0};
    struct nxr__kcall k = {.name = "nxr_sgemm_packed",
                           .providers = providers_of(ctx),
                           .family = NXR_FAMILY_GEMM,
                           .invoke = inv_sgemm_packed,
                           .args = &pc};
    if (ctx->rt != NULL) /* else nxr__kcall_run reports the orphaned context */
        nxr__packed_prepare(ctx, &k, &pc, args, epilogue);
    return nxr__kcall_run(ctx, &k);
}
