/*
 * nxr provider bundles: one typed slot per family, resolved at creation,
 * and the dispatch functions the runtime calls through them: one per row of
 * kernels/internal/kernel_table.h, written out below.
 */
#include "kernels/internal/provider.h"

#include <errno.h>
#include <stdlib.h>

#include "base/internal/last_error.h"
#include "base/internal/sys.h"

void nxr_provider_bundle_opts_init(struct nxr_provider_bundle_opts *opts)
{
    if (opts == NULL)
        return;
    for (int f = 0; f < NXR_FAMILY_COUNT; ++f)
        opts->providers[f] = NULL;
}

void nxr_provider_bundle_destroy(nxr_provider_bundle_t *b)
{
    if (b == NULL)
        return;
    for (int f = 0; f < NXR_FAMILY_COUNT; ++f)
        nxr_provider_destroy(b->slot[f].provider);
    free(b);
}

int nxr_provider_bundle_create(const struct nxr_provider_bundle_opts *opts,
                               nxr_provider_bundle_t **out)
{
    nxr__call_begin();
    if (out == NULL)
        return nxr__fail(-EINVAL, __func__, "out is NULL");
    *out = NULL;
    struct nxr_provider_bundle_opts defaults;
    if (opts == NULL) {
        nxr_provider_bundle_opts_init(&defaults);
        opts = &defaults;
    }
    for (int f = 0; f < NXR_FAMILY_COUNT; ++f)
        if (opts->providers[f] != NULL && (int)opts->providers[f]->family != f)
            return nxr__fail(-EINVAL, __func__, "providers[%d] is a %s provider, in the %s slot", f,
                             nxr_provider_family_name(opts->providers[f]->family),
                             nxr_provider_family_name((enum nxr_provider_family)f));

    nxr_provider_bundle_t *b = nxr__calloc(1, sizeof *b);
    if (b == NULL)
        return nxr__fail(-ENOMEM, __func__, "out of memory");
    for (int f = 0; f < NXR_FAMILY_COUNT; ++f) {
        nxr_provider_t *p = opts->providers[f];
        if (p != NULL) {
            nxr__provider_retain(p);
        } else {
            const int rc = nxr_provider_native_create((enum nxr_provider_family)f, &p);
            if (rc != 0) {
                nxr_provider_bundle_destroy(b);
                return nxr__fail(rc, __func__, "the native %s provider: %s",
                                 nxr_provider_family_name((enum nxr_provider_family)f),
                                 nxr_strerror(rc));
            }
        }
        b->slot[f] = (struct nxr__slot){.provider = p, .self = p->self, .foreign = p->foreign};
    }
    b->gemm = b->slot[NXR_FAMILY_GEMM].provider->gemm;
    b->elementwise = b->slot[NXR_FAMILY_ELEMENTWISE].provider->elementwise;
    b->reduction = b->slot[NXR_FAMILY_REDUCTION].provider->reduction;
    b->norm = b->slot[NXR_FAMILY_NORM].provider->norm;
    *out = b;
    return 0;
}

const nxr_provider_t *nxr_provider_bundle_get(const nxr_provider_bundle_t *b,
                                              enum nxr_provider_family family)
{
    if (b == NULL || (unsigned)family >= NXR_FAMILY_COUNT)
        return NULL;
    return b->slot[family].provider;
}

/*
 * One call through a slot: NXR_EUNSUPPORTED without the op; foreign
 * providers run between an FP environment snapshot and a check, and the
 * provider's own error takes precedence over NXR_EFPENV (the environment
 * is restored in both cases). Never another provider.
 */
#define DISPATCH(b, family, table, op, ...)                                                        \
    do {                                                                                           \
        if ((b) == NULL)                                                                           \
            return -EINVAL;                                                                        \
        const struct nxr__slot *slot_ = &(b)->slot[family];                                        \
        if ((b)->table->op == NULL)                                                                \
            return NXR_EUNSUPPORTED;                                                               \
        if (!slot_->foreign)                                                                       \
            return (b)->table->op(slot_->self, __VA_ARGS__);                                       \
        struct nxr_fpenv env_;                                                                     \
        nxr_fpenv_get(&env_);                                                                      \
        const int rc_ = (b)->table->op(slot_->self, __VA_ARGS__);                                  \
        const int env_rc_ = nxr_fpenv_check(&env_);                                                \
        return rc_ != 0 ? rc_ : env_rc_;                                                           \
    } while (0)

size_t nxr__bundle_sgemm_scratch(const nxr_provider_bundle_t *b, const struct nxr_sgemm_args *args)
{
    if (b == NULL || b->gemm->sgemm_scratch == NULL)
        return 0;
    return b->gemm->sgemm_scratch(b->slot[NXR_FAMILY_GEMM].self, args);
}

/* The dispatch of each kernel (declared in kernels/internal/kernel_table.h,
 * one per row): its slot's op, through DISPATCH. */

int nxr__bundle_sgemm(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                      const struct nxr_sgemm_args *args)
{
    DISPATCH(bundle, NXR_FAMILY_GEMM, gemm, sgemm, call, args);
}

int nxr__bundle_sgemm_batch(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                            const struct nxr_sgemm_batch_args *args)
{
    DISPATCH(bundle, NXR_FAMILY_GEMM, gemm, sgemm_batch, call, args);
}

/* The slot's sgemm_fused, or (when it has none) its sgemm followed by
 * nxr__epilogue_apply on the same call. */
int nxr__bundle_sgemm_fused(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                            const struct nxr_sgemm_args *args,
                            const struct nxr_sgemm_epilogue *epilogue)
{
    if (bundle != NULL && bundle->gemm->sgemm_fused != NULL)
        DISPATCH(bundle, NXR_FAMILY_GEMM, gemm, sgemm_fused, call, args, epilogue);
    int rc = nxr__bundle_sgemm(bundle, call, args);
    return rc != 0 ? rc : nxr__epilogue_apply(call, args, epilogue);
}

int nxr__bundle_binary(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                       enum nxr_binary_op op, size_t n, const float *x, const float *y, float *out)
{
    DISPATCH(bundle, NXR_FAMILY_ELEMENTWISE, elementwise, binary, call, op, n, x, y, out);
}

int nxr__bundle_scale(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                      size_t n, const float *x, float alpha, float *out)
{
    DISPATCH(bundle, NXR_FAMILY_ELEMENTWISE, elementwise, scale, call, n, x, alpha, out);
}

int nxr__bundle_unary(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                      enum nxr_unary_op op, size_t n, const float *x, float *out)
{
    DISPATCH(bundle, NXR_FAMILY_ELEMENTWISE, elementwise, unary, call, op, n, x, out);
}

int nxr__bundle_triad(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                      size_t n, const float *b, const float *c, float s, float *a)
{
    DISPATCH(bundle, NXR_FAMILY_ELEMENTWISE, elementwise, triad, call, n, b, c, s, a);
}

int nxr__bundle_binary_rows(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                            enum nxr_binary_op op, size_t rows, size_t cols, const float *x,
                            size_t ldx, const float *row, float *out, size_t ldo)
{
    DISPATCH(bundle, NXR_FAMILY_ELEMENTWISE, elementwise, binary_rows, call, op, rows, cols, x, ldx,
             row, out, ldo);
}

int nxr__bundle_sum(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                    size_t n, const float *x, float *out)
{
    DISPATCH(bundle, NXR_FAMILY_REDUCTION, reduction, sum, call, n, x, out);
}

int nxr__bundle_max(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                    size_t n, const float *x, float *out)
{
    DISPATCH(bundle, NXR_FAMILY_REDUCTION, reduction, max, call, n, x, out);
}

int nxr__bundle_argmax(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                       size_t n, const float *x, size_t *out)
{
    DISPATCH(bundle, NXR_FAMILY_REDUCTION, reduction, argmax, call, n, x, out);
}

int nxr__bundle_softmax(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                        size_t rows, size_t cols, const float *x, size_t ldx, float *out,
                        size_t ldo)
{
    DISPATCH(bundle, NXR_FAMILY_NORM, norm, softmax, call, rows, cols, x, ldx, out, ldo);
}

int nxr__bundle_rmsnorm(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                        size_t rows, size_t cols, const float *x, size_t ldx, const float *gamma,
                        float eps, float *out, size_t ldo)
{
    DISPATCH(bundle, NXR_FAMILY_NORM, norm, rmsnorm, call, rows, cols, x, ldx, gamma, eps, out,
             ldo);
}

int nxr__bundle_layernorm(const nxr_provider_bundle_t *bundle, const struct nxr_kernel_call *call,
                          size_t rows, size_t cols, const float *x, size_t ldx, const float *gamma,
                          const float *beta, float eps, float *out, size_t ldo)
{
    DISPATCH(bundle, NXR_FAMILY_NORM, norm, layernorm, call, rows, cols, x, ldx, gamma, beta, eps,
             out, ldo);
}
