/*
 * Packed weights (runtime/nxr_weights.h): one copy per listed domain, packed
 * by the native GEMM's layout (kernels/internal/native.h, "packed op(B)")
 * into memory of that domain's arena, so it is freed like other domain
 * memory and nxr_mem_domain names its domain. The calls against it are in
 * kernel_wrappers.c.
 */
#include "runtime/internal/weights.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "alloc/internal/huge_pages.h"
#include "base/internal/sys.h"
#include "kernels/internal/provider.h"

void nxr_weights_desc_init(struct nxr_weights_desc *desc)
{
    if (desc != NULL)
        *desc = (struct nxr_weights_desc){0};
}

void nxr_weights_destroy(nxr_weights_t *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->count; i++)
        nxr_domain_free(w->copy[i].data);
    free(w);
}

size_t nxr_weights_k(const nxr_weights_t *w)
{
    return w != NULL ? w->k : 0;
}

size_t nxr_weights_n(const nxr_weights_t *w)
{
    return w != NULL ? w->n : 0;
}

const struct nxr__weights_copy *nxr__weights_on(const nxr_weights_t *w, const struct nxr_domain *d)
{
    for (size_t i = 0; i < w->count; i++)
        if (w->copy[i].domain == d)
            return &w->copy[i];
    return NULL;
}

int nxr_weights_copy(const nxr_weights_t *w, const nxr_domain_t *d, const void **data,
                     size_t *bytes)
{
    if (w == NULL || d == NULL || data == NULL || bytes == NULL)
        return -EINVAL;
    const struct nxr__weights_copy *c = nxr__weights_on(w, d);
    if (c == NULL)
        return NXR_ENODOMAIN;
    *data = c->data;
    *bytes = c->bytes;
    return 0;
}

int nxr_weights_huge_pages(const nxr_weights_t *w, const nxr_domain_t *d, bool *advised,
                           size_t *huge_bytes)
{
    if (advised != NULL)
        *advised = false;
    if (huge_bytes != NULL)
        *huge_bytes = 0;
    if (w == NULL || d == NULL || advised == NULL || huge_bytes == NULL)
        return -EINVAL;
    const struct nxr__weights_copy *c = nxr__weights_on(w, d);
    if (c == NULL)
        return NXR_ENODOMAIN;
    *advised = c->huge_advised;
    return nxr__pagemap_huge_bytes(c->data, c->bytes, huge_bytes);
}

/* The domains desc lists (NULL: all), checked: -EINVAL for a duplicate,
 * NXR_ENODOMAIN for an id rt lacks. */
static int resolve_domains(nxr_runtime_t *rt, const struct nxr_weights_desc *desc,
                           struct nxr_domain **out, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (desc->domain_ids == NULL) {
            out[i] = rt->domains[i];
            continue;
        }
        nxr_domain_t *d;
        int rc = nxr_runtime_domain(rt, desc->domain_ids[i], &d);
        if (rc != 0)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (out[j] == d)
                return -EINVAL;
        out[i] = d;
    }
    return 0;
}

int nxr_weights_create(nxr_runtime_t *rt, const struct nxr_weights_desc *desc, nxr_weights_t **out)
{
    if (out == NULL)
        return -EINVAL;
    *out = NULL;
    if (rt == NULL || desc == NULL || desc->w == NULL || desc->k == 0 || desc->n == 0 ||
        desc->ldw < (desc->trans ? desc->k : desc->n) ||
        (desc->domain_ids != NULL && desc->domain_count == 0))
        return -EINVAL;
    NXR__HANDLE_CHECK(rt, "runtime");
    if (nxr__runtime_forked(rt))
        return NXR_EFORKED;
    const struct nxr__native_isa *isa;
    if (!nxr__provider_native_gemm(nxr_provider_bundle_get(rt->providers, NXR_FAMILY_GEMM), &isa))
        return NXR_EUNSUPPORTED;
    const size_t count = desc->domain_ids != NULL ? desc->domain_count : rt->domain_count;
    if (count > (SIZE_MAX - sizeof(nxr_weights_t)) / sizeof(struct nxr__weights_copy))
        return -EINVAL;
    nxr_weights_t *w = nxr__calloc(1, sizeof *w + count * sizeof w->copy[0]);
    if (w == NULL)
        return -ENOMEM;
    *w = (nxr_weights_t){.rt = rt, .isa = isa, .trans = desc->trans, .k = desc->k, .n = desc->n};
    struct nxr_domain **doms = nxr__calloc(count, sizeof *doms);
    int rc = doms == NULL ? -ENOMEM : resolve_domains(rt, desc, doms, count);
    const size_t bytes = nxr__sgemm_packed_bytes(isa, desc->trans, desc->k, desc->n);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        void *data;
        /* Page-aligned: each copy's pages are its own, so a page check
         * (nxr_mem_node) sees only this copy. A copy of a huge page or more
         * owns whole huge pages, advised before the packing below touches
         * them (internal/huge_pages.h says why). */
        const bool huge = rt->settings.huge_pages && nxr__huge_worth(bytes);
        const size_t mapped = huge ? nxr__huge_round(bytes) : bytes;
        rc = nxr_domain_malloc(doms[i], mapped, huge ? NXR__HUGE_PAGE_SIZE : 4096, &data);
        if (rc != 0)
            break;
        struct nxr__weights_copy *c = &w->copy[w->count++];
        c->domain = doms[i];
        c->data = data;
        c->bytes = bytes;
        c->mapped = mapped;
        c->huge_advised = huge && nxr__huge_advise(data, mapped);
        nxr__sgemm_pack_b(isa, desc->trans, desc->k, desc->n, desc->w, desc->ldw, c->data,
                          &c->view);
    }
    free(doms);
    if (rc != 0) {
        nxr_weights_destroy(w);
        return rc;
    }
    *out = w;
    return 0;
}
