/*
 * nxr providers: creation (validation of the classification and the ops
 * table), reference counting and accessors (the global-count guard is in
 * global_count.c).
 */
#include "kernels/internal/provider.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/internal/kernel_table.h"
#include "kernels/internal/rules.h"
#include "base/internal/last_error.h"
#include "base/internal/sys.h"

void nxr_provider_desc_init(struct nxr_provider_desc *desc)
{
    if (desc == NULL)
        return;
    memset(desc, 0, sizeof *desc);
    desc->family = NXR_FAMILY_GEMM;
    desc->count = NXR_COUNT_PER_CALL_BOUND;
    desc->runs_on = NXR_RUNS_ON_ENGINE_WORKERS;
}

/* Whether the family's table has `op`: one row of the kernel table. */
#define HAS_OP(name, fam, table, PARAMS)                                                           \
    if (d->family == NXR_FAMILY_##fam && d->table->name != NULL)                                   \
        return true;

/* The table of `family` is set and has at least one of the family's kernels
 * (every row of kernels/internal/kernel_table.h, so a new kernel counts
 * without an edit here); the others are NULL. */
static bool table_matches(const struct nxr_provider_desc *d)
{
    const void *tables[NXR_FAMILY_COUNT] = {d->gemm, d->elementwise, d->reduction, d->norm};
    for (int f = 0; f < NXR_FAMILY_COUNT; ++f)
        if ((tables[f] != NULL) != (f == (int)d->family))
            return false;
    NXR__KERNELS(HAS_OP)
    NXR__KERNELS_OWN(HAS_OP)
    return false;
}
#undef HAS_OP

int nxr__provider_new(const char *call, const struct nxr_provider_desc *desc, bool foreign,
                      nxr_provider_t **out)
{
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (out == NULL || desc == NULL || desc->name == NULL)
        return nxr__fail(-EINVAL, call, "%s is NULL",
                         out == NULL    ? "out"
                         : desc == NULL ? "desc"
                                        : "desc->name");
    if (desc->name[0] == '\0')
        return nxr__fail(-EINVAL, call, "desc->name is empty");
    if ((unsigned)desc->family >= NXR_FAMILY_COUNT)
        return nxr__fail(-EINVAL, call, "desc->family %d is not a family", (int)desc->family);
    if (!nxr__classification_valid(desc->count, desc->runs_on))
        return nxr__fail(NXR_EPROVIDER, call, "count %s with runs_on %s is an impossible pair",
                         nxr_count_control_name(desc->count),
                         nxr_provider_runs_on_name(desc->runs_on));
    if (!table_matches(desc))
        return nxr__fail(NXR_EPROVIDER, call,
                         "the ops table must be the family's (%s) alone, with at least one op",
                         nxr_provider_family_name(desc->family));
    /* nxr only runs a global count at 1 or under set-and-restore: it must
     * be able to read and set it. */
    if (desc->count == NXR_COUNT_GLOBAL_OR_UNCONTROLLED &&
        (desc->global_threads == NULL || desc->global_threads->get == NULL ||
         desc->global_threads->set == NULL))
        return nxr__fail(NXR_EPROVIDER, call,
                         "a GLOBAL_OR_UNCONTROLLED count needs global_threads get and set");
    /* ... and only such a provider may bring one. nxr holds the count gate
     * around every call of a provider with a count; a provider that fans
     * out on nxr's workers (PER_CALL_BOUND x ENGINE_WORKERS) would then ask
     * for the domain's permit under the gate, while an exclusive call holds
     * the exclusive permit and waits for the gate: the lock order is permit
     * before gate (kernels/global_count.c), so the pairing is refused. */
    if (desc->count != NXR_COUNT_GLOBAL_OR_UNCONTROLLED && desc->global_threads != NULL)
        return nxr__fail(NXR_EPROVIDER, call,
                         "global_threads is only for a GLOBAL_OR_UNCONTROLLED count");

    nxr_provider_t *p = nxr__calloc(1, sizeof *p);
    if (p == NULL)
        return nxr__fail(-ENOMEM, call, "out of memory");
    const size_t len = strlen(desc->name);
    p->name = nxr__malloc(len + 1);
    if (p->name == NULL) {
        free(p);
        return nxr__fail(-ENOMEM, call, "out of memory");
    }
    memcpy(p->name, desc->name, len + 1);
    atomic_init(&p->refs, 1);
    p->family = desc->family;
    p->count = desc->count;
    p->runs_on = desc->runs_on;
    p->foreign = foreign;
    p->gemm = desc->gemm;
    p->elementwise = desc->elementwise;
    p->reduction = desc->reduction;
    p->norm = desc->norm;
    p->global_threads = desc->global_threads;
    p->self = desc->self;
    p->release = desc->release;
    *out = p;
    return 0;
}

int nxr_provider_create(const struct nxr_provider_desc *desc, nxr_provider_t **out)
{
    return nxr__provider_new(__func__, desc, true, out);
}

void nxr__provider_retain(nxr_provider_t *p)
{
    /* Relaxed: the caller already holds a reference, so the object cannot
     * go away concurrently (pairs with nothing). */
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void nxr_provider_destroy(nxr_provider_t *p)
{
    if (p == NULL)
        return;
    /* acq_rel: the last holder acquires every other holder's release
     * decrement before it frees. */
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (p->release != NULL)
        p->release(p->self);
    free(p->name);
    free(p);
}

const char *nxr_provider_name(const nxr_provider_t *p)
{
    return p != NULL ? p->name : NULL;
}

enum nxr_provider_family nxr_provider_family(const nxr_provider_t *p)
{
    return p != NULL ? p->family : NXR_FAMILY_GEMM;
}

enum nxr_count_control nxr_provider_count_control(const nxr_provider_t *p)
{
    return p != NULL ? p->count : NXR_COUNT_PER_CALL_BOUND;
}

enum nxr_provider_runs_on nxr_provider_runs_on(const nxr_provider_t *p)
{
    return p != NULL ? p->runs_on : NXR_RUNS_ON_ENGINE_WORKERS;
}

bool nxr_provider_is_foreign(const nxr_provider_t *p)
{
    return p != NULL && p->foreign;
}

const char *nxr_provider_family_name(enum nxr_provider_family family)
{
    switch (family) {
    case NXR_FAMILY_GEMM:
        return "gemm";
    case NXR_FAMILY_ELEMENTWISE:
        return "elementwise";
    case NXR_FAMILY_REDUCTION:
        return "reduction";
    case NXR_FAMILY_NORM:
        return "norm";
    case NXR_FAMILY_COUNT:
        break;
    }
    return "?";
}

const char *nxr_count_control_name(enum nxr_count_control count)
{
    switch (count) {
    case NXR_COUNT_PER_CALL_BOUND:
        return "per-call-bound";
    case NXR_COUNT_SEQUENTIAL:
        return "sequential";
    case NXR_COUNT_CLAMP_TO_ONE:
        return "clamp-to-one";
    case NXR_COUNT_GLOBAL_OR_UNCONTROLLED:
        return "global-or-uncontrolled";
    }
    return "?";
}

const char *nxr_provider_runs_on_name(enum nxr_provider_runs_on placement)
{
    switch (placement) {
    case NXR_RUNS_ON_ENGINE_WORKERS:
        return "engine-workers";
    case NXR_RUNS_ON_CALLING_THREAD:
        return "calling-thread";
    case NXR_RUNS_ON_EXTERNAL_WORKERS:
        return "external-workers";
    }
    return "?";
}
