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
#include "base/internal/last_error.h"
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

enum nxr_weights_format nxr_weights_format(const nxr_weights_t *w)
{
    return w != NULL ? w->format : NXR_WEIGHTS_F32;
}

_Static_assert((int)NXR_WEIGHTS_BF16 == (int)NXR__QFORMAT_BF16 &&
                   (int)NXR_WEIGHTS_Q8_BLOCK32 == (int)NXR__QFORMAT_Q8_BLOCK32,
               "the kernels' format numbers are the API's");

static const char *format_name(enum nxr_weights_format f)
{
    return f == NXR_WEIGHTS_F32 ? "f32" : f == NXR_WEIGHTS_BF16 ? "bf16" : "q8_block32";
}

static size_t packed_bytes(const struct nxr__native_isa *isa, enum nxr_weights_format f, bool trans,
                           size_t k, size_t n)
{
    return f == NXR_WEIGHTS_F32 ? nxr__sgemm_packed_bytes(isa, trans, k, n)
                                : nxr__quant_packed_bytes((enum nxr__qformat)f, k, n);
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
    nxr__call_begin();
    if (w == NULL || d == NULL || data == NULL || bytes == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL",
                         w == NULL      ? "w"
                         : d == NULL    ? "d"
                         : data == NULL ? "data"
                                        : "bytes");
    const struct nxr__weights_copy *c = nxr__weights_on(w, d);
    if (c == NULL)
        return nxr__fail(NXR_ENODOMAIN, __func__, "the weights have no copy on domain %d",
                         nxr_domain_id(d));
    *data = c->data;
    *bytes = c->bytes;
    return 0;
}

int nxr_weights_huge_pages(const nxr_weights_t *w, const nxr_domain_t *d, bool *advised,
                           size_t *huge_bytes)
{
    nxr__call_begin();
    if (advised != NULL)
        *advised = false;
    if (huge_bytes != NULL)
        *huge_bytes = 0;
    if (w == NULL || d == NULL || advised == NULL || huge_bytes == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL",
                         w == NULL         ? "w"
                         : d == NULL       ? "d"
                         : advised == NULL ? "advised"
                                           : "huge_bytes");
    const struct nxr__weights_copy *c = nxr__weights_on(w, d);
    if (c == NULL)
        return nxr__fail(NXR_ENODOMAIN, __func__, "the weights have no copy on domain %d",
                         nxr_domain_id(d));
    *advised = c->huge_advised;
    int rc = nxr__pagemap_huge_bytes(c->data, c->bytes, huge_bytes);
    return rc == 0 ? 0
                   : nxr__fail(rc, __func__, "the page tables of domain %d's copy: %s%s",
                               nxr_domain_id(d), nxr_strerror(rc),
                               rc == -ENOSYS ? " (PAGEMAP_SCAN needs Linux 6.7)" : "");
}

/* The domains desc lists (NULL: all), checked: -EINVAL for a duplicate,
 * NXR_ENODOMAIN for an id rt lacks. */
static int resolve_domains(nxr_runtime_t *rt, const struct nxr_weights_desc *desc,
                           struct nxr_domain **out, size_t count, const char *call)
{
    for (size_t i = 0; i < count; i++) {
        if (desc->domain_ids == NULL) {
            out[i] = rt->domains[i];
            continue;
        }
        nxr_domain_t *d;
        int rc = nxr_runtime_domain(rt, desc->domain_ids[i], &d);
        if (rc != 0)
            return nxr__fail(rc, call, "domain_ids[%zu] = %d is no domain", i, desc->domain_ids[i]);
        for (size_t j = 0; j < i; j++)
            if (out[j] == d)
                return nxr__fail(-EINVAL, call, "domain %d is listed twice (at %zu)",
                                 desc->domain_ids[i], i);
        out[i] = d;
    }
    return 0;
}

/* Both creates; call is the public function's name, for the details. */
static int create(nxr_runtime_t *rt, const struct nxr_weights_desc *desc,
                  enum nxr_weights_format format, nxr_weights_t **out, const char *call)
{
    if (out != NULL)
        *out = NULL;
    if (out == NULL || rt == NULL || desc == NULL || desc->w == NULL)
        return nxr__fail(-EINVAL, call, "%s is NULL",
                         out == NULL    ? "out"
                         : rt == NULL   ? "rt"
                         : desc == NULL ? "desc"
                                        : "desc->w");
    if (desc->k == 0 || desc->n == 0)
        return nxr__fail(-EINVAL, call, "desc->k (%zu) and desc->n (%zu) must be > 0", desc->k,
                         desc->n);
    if (desc->ldw < (desc->trans ? desc->k : desc->n))
        return nxr__fail(-EINVAL, call, "desc->ldw (%zu) < %s (%zu)", desc->ldw,
                         desc->trans ? "k" : "n", desc->trans ? desc->k : desc->n);
    if (desc->domain_ids != NULL && desc->domain_count == 0)
        return nxr__fail(-EINVAL, call, "desc->domain_ids is set, domain_count is 0");
    if (format != NXR_WEIGHTS_F32 && format != NXR_WEIGHTS_BF16 && format != NXR_WEIGHTS_Q8_BLOCK32)
        return nxr__fail(-EINVAL, call,
                         "format %d is no enum nxr_weights_format (NXR_WEIGHTS_F32, "
                         "NXR_WEIGHTS_BF16, NXR_WEIGHTS_Q8_BLOCK32)",
                         (int)format);
    NXR__HANDLE_CHECK(rt, "runtime");
    if (nxr__runtime_forked(rt))
        return nxr__fail(NXR_EFORKED, call, "the runtime was created before this process forked");
    const struct nxr__native_isa *isa;
    if (!nxr__provider_native_gemm(nxr_provider_bundle_get(rt->providers, NXR_FAMILY_GEMM), &isa))
        return nxr__fail(NXR_EUNSUPPORTED, call,
                         "the runtime's GEMM provider is not nxr's native one, which packs");
    /* A pass over W: after the cheap checks, before anything is allocated. */
    size_t bad_p, bad_j;
    if (format == NXR_WEIGHTS_Q8_BLOCK32 &&
        nxr__quant_first_nonfinite(desc->trans, desc->k, desc->n, desc->w, desc->ldw, &bad_p,
                                   &bad_j))
        return nxr__fail(-EINVAL, call,
                         "op(W)[%zu][%zu] is not finite; 8-bit blocks hold finite weights only",
                         bad_p, bad_j);
    const size_t count = desc->domain_ids != NULL ? desc->domain_count : rt->domain_count;
    if (count > (SIZE_MAX - sizeof(nxr_weights_t)) / sizeof(struct nxr__weights_copy))
        return nxr__fail(-EINVAL, call, "desc->domain_count %zu is absurd", count);
    nxr_weights_t *w = nxr__calloc(1, sizeof *w + count * sizeof w->copy[0]);
    if (w == NULL)
        return nxr__fail(-ENOMEM, call, "out of memory");
    *w = (nxr_weights_t){
        .rt = rt, .isa = isa, .format = format, .trans = desc->trans, .k = desc->k, .n = desc->n};
    struct nxr_domain **doms = nxr__calloc(count, sizeof *doms);
    int rc = doms == NULL ? nxr__fail(-ENOMEM, call, "out of memory")
                          : resolve_domains(rt, desc, doms, count, call);
    const size_t bytes = packed_bytes(isa, format, desc->trans, desc->k, desc->n);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        void *data;
        /* Page-aligned: each copy's pages are its own, so a page check
         * (nxr_mem_node) sees only this copy. A copy of a huge page or more
         * owns whole huge pages, advised before the packing below touches
         * them (internal/huge_pages.h says why). */
        const bool huge = rt->settings.huge_pages && nxr__huge_worth(bytes);
        const size_t mapped = huge ? nxr__huge_round(bytes) : bytes;
        rc = nxr_domain_malloc(doms[i], mapped, huge ? NXR__HUGE_PAGE_SIZE : 4096, &data);
        if (rc != 0) {
            nxr__fail(rc, call, "the %s copy on domain %d (%zu bytes): %s", format_name(format),
                      doms[i]->spec.id, mapped, nxr_strerror(rc));
            break;
        }
        struct nxr__weights_copy *c = &w->copy[w->count++];
        c->domain = doms[i];
        c->data = data;
        c->bytes = bytes;
        c->mapped = mapped;
        c->huge_advised = huge && nxr__huge_advise(data, mapped);
        if (format == NXR_WEIGHTS_F32)
            nxr__sgemm_pack_b(isa, desc->trans, desc->k, desc->n, desc->w, desc->ldw, c->data,
                              &c->view);
        else
            nxr__quant_pack((enum nxr__qformat)format, desc->trans, desc->k, desc->n, desc->w,
                            desc->ldw, c->data, &c->qview);
    }
    free(doms);
    if (rc != 0) {
        nxr_weights_destroy(w);
        return rc;
    }
    *out = w;
    return 0;
}

int nxr_weights_create(nxr_runtime_t *rt, const struct nxr_weights_desc *desc, nxr_weights_t **out)
{
    nxr__call_begin();
    return create(rt, desc, NXR_WEIGHTS_F32, out, __func__);
}

int nxr_weights_create_format(nxr_runtime_t *rt, const struct nxr_weights_desc *desc,
                              enum nxr_weights_format format, nxr_weights_t **out)
{
    nxr__call_begin();
    return create(rt, desc, format, out, __func__);
}
