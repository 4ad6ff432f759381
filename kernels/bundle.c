/*
 * nxr provider bundles: one typed slot per family, resolved at creation,
 * and the dispatch functions the runtime calls through them: one per row of
 * kernels/internal/kernel_table.h, generated below.
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
        struct nxr_fpenv env_;                                                                          \
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

/* Every kernel of the table but those with their own dispatch (below). */
#define BUNDLE_DEFINE(name, family, table, PARAMS)                                                 \
    int nxr__bundle_##name(const nxr_provider_bundle_t *bundle,                                    \
                           const struct nxr_kernel_call *call PARAMS(NXR__PARAM_DECL))                  \
    {                                                                                              \
        DISPATCH(bundle, NXR_FAMILY_##family, table, name, call PARAMS(NXR__PARAM_PASS));          \
    }
NXR__KERNELS(BUNDLE_DEFINE)
#undef BUNDLE_DEFINE

int nxr__bundle_sgemm_fused(const nxr_provider_bundle_t *b, const struct nxr_kernel_call *call,
                            const struct nxr_sgemm_args *args, const struct nxr_sgemm_epilogue *epilogue)
{
    if (b != NULL && b->gemm->sgemm_fused != NULL)
        DISPATCH(b, NXR_FAMILY_GEMM, gemm, sgemm_fused, call, args, epilogue);
    int rc = nxr__bundle_sgemm(b, call, args);
    return rc != 0 ? rc : nxr__epilogue_apply(call, args, epilogue);
}
