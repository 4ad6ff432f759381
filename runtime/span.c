/*
 * Spans: one context over several domains (runtime/nxr_span.h). A span's
 * loop is split across its members, shares proportional to their budgets
 * (nxr__span_split), and each member's share is split again over its own
 * team, all under ONE permit for the union of the members' sets: the executor
 * runs the shares (executor/permits.c, nxr__across_run), as it runs
 * nxr_run_across's tasks.
 *
 * A one-member span is not a span at all: nxr_span_create returns a plain
 * context on that domain, so it runs exactly as one (same path, same cost).
 *
 * Nesting follows the one-domain rule by membership: inside a body of a
 * domain the span covers, the span's loops run in place on that thread (one
 * fan-out level); inside a body of any other domain they are
 * NXR_EREENTRANT, as is everything that would take another permit.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal/last_error.h"
#include "base/internal/sys.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/span.h"

/* ---- the split ------------------------------------------------------------------ */

void nxr__span_split(size_t units, const unsigned *prefix, size_t n, size_t *bounds)
{
    size_t total = prefix[n], q = units / total, r = units % total;
    /* units * p / total = q * p + r * p / total, and r * p < total^2 fits. */
    for (size_t i = 0; i <= n; i++)
        bounds[i] = q * prefix[i] + (size_t)((unsigned long long)r * prefix[i] / total);
}

int nxr__span_member_of_body(const struct nxr__span *s)
{
    if (nxr__tls.depth == 0)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        if (&s->doms[i]->exec == nxr__tls.exec)
            return (int)i;
    }
    return -1;
}

/* ---- creation ------------------------------------------------------------------- */

/* The 1.0 layout of the options (additions only): the deprecated errbuf
 * fields, which nothing uses, stay where they were, last. */
_Static_assert(offsetof(struct nxr_span_opts, errbuf) == 3 * sizeof(void *) &&
                   offsetof(struct nxr_span_opts, errbuf_size) == 4 * sizeof(void *) &&
                   sizeof(struct nxr_span_opts) == 5 * sizeof(void *),
               "struct nxr_span_opts changed its 1.0 layout");

void nxr_span_opts_init(struct nxr_span_opts *opts)
{
    memset(opts, 0, sizeof(*opts));
}

void nxr__span_free(struct nxr__span *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        nxr_ctx_destroy(s->member[i]);
    nxr__union_permit_fini(&s->permit);
    free(s);
}

/* A refusal of nxr_span_create. */
#define refuse(rc, ...) nxr__fail((rc), "nxr_span_create", __VA_ARGS__)

/* The members, checked: every id a domain of rt, none twice, none
 * caller-managed (it declares no CPU set for the union permit). */
static int members(nxr_runtime_t *rt, const struct nxr_span_opts *o, struct nxr_domain **doms,
                   size_t *n)
{
    if (o->every) {
        if (o->domain_ids != NULL || o->count != 0)
            return refuse(-EINVAL, "every is set and so are domain_ids/count");
        *n = 0;
        for (size_t i = 0; i < nxr_runtime_domain_count(rt) && *n < NXR__SPAN_MAX; i++) {
            nxr_domain_t *d = nxr_runtime_domain_at(rt, i);
            if (d != NULL && d->spec.admission != NXR_ADMISSION_CALLER_MANAGED)
                doms[(*n)++] = (struct nxr_domain *)d;
        }
        if (*n == 0)
            return refuse(NXR_ENODOMAIN, "every: the runtime has no arbitrated domain");
        return 0;
    }
    if (o->domain_ids == NULL || o->count == 0)
        return refuse(-EINVAL, "the domain list is empty (give domain_ids and count, or "
                               "set every)");
    if (o->count > NXR__SPAN_MAX)
        return refuse(-EINVAL, "%d domains, a span holds at most %d", (int)o->count, NXR__SPAN_MAX);
    for (size_t i = 0; i < o->count; i++) {
        nxr_domain_t *d;
        if (nxr_runtime_domain(rt, o->domain_ids[i], &d) != 0)
            return refuse(NXR_ENODOMAIN, "domain_ids[%d] = %d is no domain", (int)i,
                          o->domain_ids[i]);
        for (size_t j = 0; j < i; j++) {
            if (doms[j] == d)
                return refuse(-EINVAL, "domain %d is listed twice (at %d)", o->domain_ids[i],
                              (int)i);
        }
        if (d->spec.admission == NXR_ADMISSION_CALLER_MANAGED)
            return refuse(NXR_EADMISSION,
                          "domain %d is caller-managed: it declares no CPU set, "
                          "so it cannot share a permit for the union",
                          o->domain_ids[i]);
        doms[i] = (struct nxr_domain *)d;
    }
    *n = o->count;
    return 0;
}

/* A context on d (a member: the span's own), a failure told as the span's. */
static int member_create(nxr_runtime_t *rt, const struct nxr_domain *d, bool member,
                         nxr_ctx_t **out)
{
    int rc =
        member ? nxr__ctx_create_member(rt, d->spec.id, out) : nxr_ctx_create(rt, d->spec.id, out);
    return rc == 0 ? 0 : refuse(rc, "%s", nxr_last_error());
}

int nxr_span_create(nxr_runtime_t *rt, const struct nxr_span_opts *opts, nxr_ctx_t **out)
{
    nxr__call_begin();
    if (out == NULL)
        return refuse(-EINVAL, "out is NULL");
    *out = NULL;
    if (rt == NULL || opts == NULL)
        return refuse(-EINVAL, "%s is NULL", rt == NULL ? "rt" : "opts");
    NXR__HANDLE_CHECK(rt, "runtime");
    if (nxr__runtime_forked(rt))
        return refuse(NXR_EFORKED, "the runtime was created before this "
                                   "process forked");
    struct nxr_domain *doms[NXR__SPAN_MAX];
    size_t n = 0;
    int rc = members(rt, opts, doms, &n);
    if (rc != 0)
        return rc;
    if (n == 1) /* exactly a context on that domain */
        return member_create(rt, doms[0], false, out);
    struct nxr__span *s = nxr__calloc(1, sizeof(*s));
    if (s == NULL)
        return refuse(-ENOMEM, "out of memory");
    hwloc_const_bitmap_t sets[NXR__SPAN_MAX];
    for (size_t i = 0; i < n; i++) {
        s->doms[i] = doms[i];
        s->prefix[i + 1] = s->prefix[i] + doms[i]->spec.budget;
        sets[i] = doms[i]->spec.cpus;
    }
    rc = nxr__union_permit_init(&s->permit, rt->arbiter, sets, n);
    if (rc != 0) {
        free(s);
        return refuse(rc, "the permit for the members' union: %s", nxr_strerror(rc));
    }
    for (; s->n < n; s->n++) {
        if ((rc = member_create(rt, doms[s->n], true, &s->member[s->n])) != 0)
            goto out_free;
    }
    rc = member_create(rt, doms[0], false, out);
    if (rc != 0)
        goto out_free;
    (*out)->span = s;
    return 0;
out_free:
    nxr__span_free(s);
    return rc;
}

size_t nxr_span_domain_count(const nxr_ctx_t *ctx)
{
    if (ctx == NULL)
        return 0;
    NXR__HANDLE_CHECK(ctx, "context");
    return ctx->span != NULL ? ctx->span->n : 1;
}

nxr_domain_t *nxr_span_domain_at(const nxr_ctx_t *ctx, size_t i)
{
    if (ctx == NULL)
        return NULL;
    NXR__HANDLE_CHECK(ctx, "context");
    if (ctx->span == NULL)
        return i == 0 ? ctx->domain : NULL;
    return i < ctx->span->n ? ctx->span->doms[i] : NULL;
}

int nxr_span_share(const nxr_ctx_t *ctx, size_t units, size_t i, size_t *begin, size_t *end)
{
    nxr__call_begin();
    if (ctx == NULL || begin == NULL || end == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL",
                         ctx == NULL     ? "ctx"
                         : begin == NULL ? "begin"
                                         : "end");
    NXR__HANDLE_CHECK(ctx, "context");
    if (ctx->span == NULL) {
        if (i != 0)
            return nxr__fail(-EINVAL, __func__, "member %zu of a context on one domain", i);
        *begin = 0;
        *end = units;
        return 0;
    }
    if (i >= ctx->span->n)
        return nxr__fail(-EINVAL, __func__, "member %zu of a span of %zu", i, ctx->span->n);
    size_t bounds[NXR__SPAN_MAX + 1];
    nxr__span_split(units, ctx->span->prefix, ctx->span->n, bounds);
    *begin = bounds[i];
    *end = bounds[i + 1];
    return 0;
}

/* ---- loops ---------------------------------------------------------------------- */

struct span_loop;

/* One member's share: chunks [c0, c1) of the loop, split over `count`
 * participants of its team (static), or claimed from `next` (dynamic). */
struct span_share {
    const struct span_loop *loop;
    const struct nxr__exec *exec;
    size_t c0, c1;
    unsigned count;
    unsigned base; /* the span-wide index of its participant 0 */
    _Alignas(64) atomic_size_t next;
};

struct span_loop {
    nxr_for_fn fn;
    void *arg;
    size_t begin, end, grain;
    bool dynamic;
};

static void loop_chunks(const struct span_loop *l, size_t c0, size_t c1, unsigned worker)
{
    size_t b = l->begin + c0 * l->grain;
    size_t e = l->end - b > (c1 - c0) * l->grain ? b + (c1 - c0) * l->grain : l->end;
    l->fn(l->arg, b, e, worker);
}

/* One participant of one member, as a body of that member's domain (so
 * loops and kernels it calls run in place on its CPUs). */
static void share_item(void *p, size_t index)
{
    struct span_share *sh = p;
    const struct span_loop *l = sh->loop;
    unsigned worker = sh->base + (unsigned)index;
    struct nxr__exec_tls saved = nxr__body_begin(sh->exec, (unsigned)index);
    if (l->dynamic) {
        for (;;) {
            /* Relaxed: hands out distinct chunks; the join orders writes. */
            size_t c = sh->c0 + atomic_fetch_add_explicit(&sh->next, 1, memory_order_relaxed);
            if (c >= sh->c1)
                break;
            loop_chunks(l, c, c + 1, worker);
        }
    } else {
        size_t chunks = sh->c1 - sh->c0, base = chunks / sh->count, rem = chunks % sh->count;
        size_t c0 = sh->c0 + index * base + (index < rem ? index : rem);
        size_t c1 = c0 + base + (index < rem ? 1 : 0);
        if (c0 < c1)
            loop_chunks(l, c0, c1, worker);
    }
    nxr__body_end(saved);
}

/*
 * The span's loop over member shares given as chunk bounds (n + 1 of them).
 * The caller is outside any body. A loop whose chunks all fall to one member
 * runs as that domain's own loop (its permit, its small-work rule); anything
 * else takes the union permit and runs every share at once.
 */
static int span_run(struct nxr__span *s, const struct span_loop *l, const size_t *bounds,
                    unsigned max_threads)
{
    size_t busy = 0, last = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (bounds[i + 1] > bounds[i]) {
            busy++;
            last = i;
        }
    }
    if (busy == 0)
        return 0;
    if (busy == 1) {
        struct nxr_for_opts o;
        nxr_for_opts_init(&o);
        o.grain = l->grain;
        o.schedule = l->dynamic ? NXR_SCHEDULE_DYNAMIC : NXR_SCHEDULE_STATIC;
        o.max_threads = max_threads;
        size_t b = l->begin + bounds[last] * l->grain;
        size_t e = l->end - b > (bounds[last + 1] - bounds[last]) * l->grain
                       ? b + (bounds[last + 1] - bounds[last]) * l->grain
                       : l->end;
        return nxr__exec_parallel_for(&s->doms[last]->exec, b, e, &o, l->fn, l->arg);
    }
    struct span_share shares[NXR__SPAN_MAX];
    struct nxr__across_part parts[NXR__SPAN_MAX];
    unsigned total = s->prefix[s->n];
    for (size_t i = 0; i < s->n; i++) {
        unsigned budget = s->doms[i]->spec.budget;
        if (max_threads != 0 && max_threads < total) {
            /* The cap, shared out like the work. */
            unsigned capped = (unsigned)((unsigned long long)max_threads * budget / total);
            budget = capped > 0 ? capped : 1;
        }
        size_t chunks = bounds[i + 1] - bounds[i];
        shares[i] = (struct span_share){.loop = l,
                                        .exec = &s->doms[i]->exec,
                                        .c0 = bounds[i],
                                        .c1 = bounds[i + 1],
                                        .count = chunks < budget ? (unsigned)chunks : budget,
                                        .base = s->prefix[i]};
        atomic_init(&shares[i].next, 0);
        parts[i] = (struct nxr__across_part){.exec = &s->doms[i]->exec,
                                             .fn = share_item,
                                             .arg = &shares[i],
                                             .count = shares[i].count};
    }
    /* The permit's wait is bounded by the holders of overlapping permits
     * and reported past the stall threshold (executor/permits.c). */
    return nxr__across_run(&s->permit, parts, s->n, NULL, "admission of a span");
}

/* A span's loop called inside a body (the nesting rule by membership): in
 * place on that thread when the body is a member's (one fan-out level, as
 * the participant it already is), else NXR_EREENTRANT with why. */
static int in_body(const struct nxr__span *s, size_t begin, size_t end, nxr_for_fn fn, void *arg,
                   char *why, size_t whysz)
{
    int m = nxr__span_member_of_body(s);
    if (m < 0) {
        snprintf(why, whysz,
                 "called inside a body of domain %d, which the span does not cover: its work "
                 "cannot run there (nesting table, executor/nxr_executor.h)",
                 nxr__tls.exec != NULL ? nxr__tls.exec->spec->id : -1);
        return NXR_EREENTRANT;
    }
    fn(arg, begin, end, s->prefix[m] + nxr__tls.participant);
    return 0;
}

/* A loop on a span, given the nesting answer; `why` gets the reason of a
 * refusal. */
static int span_for(nxr_ctx_t *ctx, size_t begin, size_t end, const struct nxr_for_opts *opts,
                    nxr_for_fn fn, void *arg, char *why, size_t whysz)
{
    struct nxr__span *s = ctx->span;
    if (begin == end)
        return 0;
    if (nxr__tls.depth > 0)
        return in_body(s, begin, end, fn, arg, why, whysz);
    size_t grain, chunks;
    /* The same shape as a domain's loop, over the span's participants. */
    unsigned n = nxr__for_shape(opts, end - begin, s->prefix[s->n], &grain, &chunks);
    struct span_loop l = {.fn = fn,
                          .arg = arg,
                          .begin = begin,
                          .end = end,
                          .grain = grain,
                          .dynamic = opts->schedule == NXR_SCHEDULE_DYNAMIC};
    size_t bounds[NXR__SPAN_MAX + 1];
    nxr__span_split(chunks, s->prefix, s->n, bounds);
    /* n below the chunks (the thread cap or the cost hint, not the chunk
     * count, which each member's share already bounds): span_run shares
     * the cap out like the work. */
    return span_run(s, &l, bounds, n < chunks && n < s->prefix[s->n] ? n : 0);
}

int nxr__span_parallel_for(nxr_ctx_t *ctx, size_t begin, size_t end,
                           const struct nxr_for_opts *opts, nxr_for_fn fn, void *arg, char *why,
                           size_t whysz)
{
    struct nxr_for_opts defaults;
    if (opts == NULL) {
        nxr_for_opts_init(&defaults);
        opts = &defaults;
    }
    return span_for(ctx, begin, end, opts, fn, arg, why, whysz);
}

/* ---- the span's loop over given member shares (shards, kernels) ------------------ */

int nxr__span_for_parts(nxr_ctx_t *ctx, const size_t *bounds, nxr_for_fn fn, void *arg, char *why,
                        size_t whysz)
{
    struct nxr__span *s = ctx->span;
    size_t end = bounds[s->n];
    if (end == 0)
        return 0;
    if (nxr__tls.depth > 0)
        return in_body(s, 0, end, fn, arg, why, whysz);
    struct span_loop l = {.fn = fn, .arg = arg, .begin = 0, .end = end, .grain = 1};
    /* Grain 1: the parts' row bounds are the chunk bounds, so a member gets
     * exactly its part's rows, split over its team. */
    return span_run(s, &l, bounds, 0);
}
