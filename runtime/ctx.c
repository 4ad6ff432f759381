/*
 * Contexts: a runtime plus one domain (or a routing context), the handle
 * work is run through; the runtime's list of open contexts (so that
 * destroying a runtime first is reported and orphans them instead of
 * leaving dangling pointers), the one-driving-thread rule (checked builds),
 * the last error's detail and the context's step memory.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal/build.h"
#include "base/internal/fork.h"
#include "base/internal/last_error.h"
#include "base/internal/lock_rank.h"
#include "base/internal/sys.h"
#include "runtime/internal/ctx.h"
#include "runtime/internal/runtime.h"
#include "runtime/internal/span.h"

/* ---- the runtime's list of open contexts ------------------------------------ */

/* What the caller opened, per domain: a span's member contexts are the
 * span's (one context to its caller), a routing context is counted apart. */
static bool counted(const nxr_ctx_t *ctx)
{
    return !ctx->placing && !ctx->member;
}

static void link_ctx(nxr_runtime_t *rt, nxr_ctx_t *ctx)
{
    nxr__lock(&rt->ctx_lock, NXR__RANK_RUNTIME_CTX);
    ctx->prev = NULL;
    ctx->next = rt->contexts;
    if (rt->contexts != NULL)
        rt->contexts->prev = ctx;
    rt->contexts = ctx;
    if (counted(ctx))
        ctx->domain->open_contexts++;
    nxr__unlock(&rt->ctx_lock, NXR__RANK_RUNTIME_CTX);
}

/* Caller holds rt->ctx_lock. */
static void unlink_locked(nxr_runtime_t *rt, nxr_ctx_t *ctx)
{
    if (ctx->prev != NULL)
        ctx->prev->next = ctx->next;
    else
        rt->contexts = ctx->next;
    if (ctx->next != NULL)
        ctx->next->prev = ctx->prev;
    ctx->prev = ctx->next = NULL;
    if (counted(ctx))
        ctx->domain->open_contexts--;
}

static void free_scopes(nxr_ctx_t *ctx)
{
    for (size_t i = 0; i < ctx->nscopes; i++)
        nxr_scope_destroy(ctx->scopes[i].scope);
    free(ctx->scopes);
    ctx->scopes = NULL;
    ctx->nscopes = 0;
}

size_t nxr__ctx_orphan_all(nxr_runtime_t *rt, char *report, size_t size)
{
    size_t open = 0, len = 0;
    report[0] = '\0';
    nxr__lock(&rt->ctx_lock, NXR__RANK_RUNTIME_CTX);
    /* Per domain, in table order (domains_lock is not needed: destroy owns
     * the runtime, nothing attaches meanwhile). */
    for (size_t i = 0; i < rt->domain_count; i++) {
        struct nxr_domain *d = rt->domains[i];
        if (d->open_contexts > 0 && len < size)
            len += (size_t)snprintf(report + len, size - len, "%sdomain %d: %u", len ? ", " : "",
                                    d->spec.id, d->open_contexts);
    }
    size_t placing = 0;
    for (nxr_ctx_t *c = rt->contexts; c != NULL; c = c->next)
        placing += c->placing;
    if (placing > 0 && len < size)
        len += (size_t)snprintf(report + len, size - len, "%splacing: %zu", len ? ", " : "",
                                placing);
    while (rt->contexts != NULL) {
        nxr_ctx_t *c = rt->contexts;
        open += !c->member;
        unlink_locked(rt, c);
        free_scopes(c); /* their chunks go back before the pools do */
        c->rt = NULL;
        c->domain = NULL;
        c->exec = NULL;
    }
    nxr__unlock(&rt->ctx_lock, NXR__RANK_RUNTIME_CTX);
    return open;
}

/* ---- creation ---------------------------------------------------------------- */

/* nxr_ctx_create; a member context is a span's (runtime/span.c). */
static int create(nxr_runtime_t *rt, int domain_id, bool member, nxr_ctx_t **out)
{
    static const char call[] = "nxr_ctx_create";
    nxr__call_begin();
    if (out == NULL)
        return nxr__fail(-EINVAL, call, "out is NULL");
    *out = NULL;
    if (rt == NULL)
        return nxr__fail(-EINVAL, call, "rt is NULL");
    NXR__HANDLE_CHECK(rt, "runtime");
    if (nxr__runtime_forked(rt))
        return nxr__fail(NXR_EFORKED, call, "the runtime was created before this process forked");
    bool placing = domain_id == NXR_DOMAIN_AUTO;
    nxr_domain_t *d = rt->default_domain;
    if (!placing) {
        int rc = nxr_runtime_domain(rt, domain_id, &d);
        if (rc != 0)
            return nxr__fail(rc, call, "domain %d: %s", domain_id, nxr_strerror(rc));
    }
    nxr_ctx_t *ctx = nxr__calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return nxr__fail(-ENOMEM, call, "out of memory");
    ctx->magic = NXR__HANDLE_LIVE;
    ctx->fork_gen = rt->fork_gen;
    ctx->rt = rt;
    ctx->domain = (struct nxr_domain *)d; /* the runtime's; immutable once published */
    ctx->exec = &ctx->domain->exec;
    ctx->placing = placing;
    ctx->member = member;
    atomic_init(&ctx->driver, 0);
    link_ctx(rt, ctx);
    *out = ctx;
    return 0;
}

int nxr_ctx_create(nxr_runtime_t *rt, int domain_id, nxr_ctx_t **out)
{
    return create(rt, domain_id, false, out);
}

int nxr__ctx_create_member(nxr_runtime_t *rt, int domain_id, nxr_ctx_t **out)
{
    return create(rt, domain_id, true, out);
}

int nxr_ctx_create_here(nxr_runtime_t *rt, nxr_ctx_t **out)
{
    nxr__call_begin();
    if (out == NULL)
        return nxr__fail(-EINVAL, __func__, "out is NULL");
    *out = NULL;
    if (rt == NULL)
        return nxr__fail(-EINVAL, __func__, "rt is NULL");
    nxr_domain_t *d;
    int rc = nxr_runtime_domain_here(rt, &d);
    if (rc != 0)
        return nxr__fail(rc, __func__, "%s",
                         rc == NXR_ENODOMAIN ? "the calling thread's CPUs lie in no single domain"
                                             : nxr_strerror(rc));
    rc = nxr_ctx_create(rt, nxr_domain_id(d), out);
    if (rc != 0) /* its detail, under this call's name */
        return nxr__fail(rc, __func__, "%s", nxr_last_error());
    return 0;
}

void nxr_ctx_destroy(nxr_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    NXR__HANDLE_CHECK(ctx, "context");
    if (nxr__forked_since(ctx->fork_gen)) {
        /* Inherited: its runtime's list and its scopes' pools may be locked
         * by a parent thread; only the context's own memory goes. */
        free(ctx->scopes);
        ctx->magic = NXR__HANDLE_DEAD;
        free(ctx);
        return;
    }
    if (ctx->rt != NULL) { /* else orphaned: its runtime already unlinked it */
        nxr__lock(&ctx->rt->ctx_lock, NXR__RANK_RUNTIME_CTX);
        unlink_locked(ctx->rt, ctx);
        nxr__unlock(&ctx->rt->ctx_lock, NXR__RANK_RUNTIME_CTX);
        free_scopes(ctx);
    }
    nxr__span_free(ctx->span); /* its member contexts, its permit request */
    nxr__handle_retire(&ctx->magic, ctx);
}

nxr_domain_t *nxr_ctx_domain(const nxr_ctx_t *ctx)
{
    if (ctx == NULL)
        return NULL;
    NXR__HANDLE_CHECK(ctx, "context");
    return ctx->domain;
}

unsigned nxr_ctx_budget(const nxr_ctx_t *ctx)
{
    if (ctx == NULL)
        return 0;
    NXR__HANDLE_CHECK(ctx, "context");
    if (ctx->span != NULL)
        return ctx->span->prefix[ctx->span->n];
    return ctx->exec != NULL ? nxr__exec_budget(ctx->exec) : 0;
}

/* ---- the last error ------------------------------------------------------------ */

/* Deprecated in 1.0 (kept one release): the detail is the calling thread's,
 * not the context's; a failed call inside a body leaves it on the thread
 * that ran the body, as before. */
const char *nxr_ctx_last_error(const nxr_ctx_t *ctx)
{
    if (ctx != NULL)
        NXR__HANDLE_CHECK(ctx, "context");
    return nxr_last_error();
}

/* What a status means for a call on domain d, when the call gave no reason. */
static void default_reason(const nxr_ctx_t *ctx, const struct nxr_domain *d, int rc, char *buf,
                           size_t size)
{
    int id = d != NULL ? d->spec.id : -1;
    switch (rc) {
    case NXR_EREENTRANT:
        if (nxr__tls.depth > 0 && nxr__tls.exec != NULL && nxr__tls.exec->spec->id != id)
            snprintf(buf, size,
                     "called inside a body of domain %d on domain %d: another domain's work "
                     "cannot run here (nesting table, executor/nxr_executor.h)",
                     nxr__tls.exec->spec->id, id);
        else
            snprintf(buf, size,
                     "called inside a body of domain %d: this call would enter the executor "
                     "again (nesting table, executor/nxr_executor.h)",
                     id);
        return;
    case NXR_EADMISSION:
        snprintf(buf, size, "caller-managed domain %d is already running an operation", id);
        return;
    case -EBUSY:
        snprintf(buf, size, "inside a body, domain %d's permit is not free (a body never waits)",
                 id);
        return;
    case NXR_EBROKEN:
        snprintf(buf, size, "the context's runtime was destroyed before the context");
        return;
    case NXR_EFORKED:
        snprintf(buf, size,
                 "the context was created before this process forked: its runtime's workers "
                 "and locks are the parent's; create a new runtime here");
        return;
    default:
        snprintf(buf, size, "%s (domain %d%s)", nxr_strerror(rc), id,
                 ctx->placing ? ", placed" : "");
        return;
    }
}

/* Whether the driver's current call (outside any body) failed: its leave
 * then keeps the detail, else empties the slot, so a call that succeeds
 * leaves "" even when a body it ran inline on this thread failed. */
static _Thread_local bool driver_call_failed;

static void driver_call_begins(void)
{
    nxr__call_begin();
    if (nxr__tls.depth == 0)
        driver_call_failed = false;
}

static void driver_call_ends(void)
{
    if (nxr__tls.depth == 0 && !driver_call_failed)
        nxr__last_error_slot()[0] = '\0'; /* a success leaves "" */
}

int nxr__ctx_fail(nxr_ctx_t *ctx, const struct nxr_domain *d, const char *call, int rc,
                  const char *why)
{
    if (rc == 0 || ctx == NULL)
        return rc;
    if (nxr__tls.depth == 0)
        driver_call_failed = true;
    char reason[NXR__LAST_ERROR_BYTES];
    if (why == NULL) {
        default_reason(ctx, d, rc, reason, sizeof(reason));
        why = reason;
    }
    return nxr__fail(rc, call, "%s", why); /* a long reason loses its end */
}

int nxr__ctx_failf(nxr_ctx_t *ctx, const struct nxr_domain *d, const char *call, int rc,
                   const char *fmt, ...)
{
    char why[NXR__LAST_ERROR_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return nxr__ctx_fail(ctx, d, call, rc, why);
}

/* ---- step memory --------------------------------------------------------------- */

int nxr__ctx_scope(nxr_ctx_t *ctx, struct nxr_domain *d, nxr_scope_t **out)
{
    for (size_t i = 0; i < ctx->nscopes; i++) {
        if (ctx->scopes[i].domain == d) {
            *out = ctx->scopes[i].scope;
            return 0;
        }
    }
    struct nxr__ctx_scope *grown = nxr__malloc((ctx->nscopes + 1) * sizeof(*grown));
    if (grown == NULL)
        return -ENOMEM;
    nxr_scope_t *s;
    int rc = nxr_scope_create(d, NULL, &s);
    if (rc != 0) {
        free(grown);
        return rc;
    }
    if (ctx->nscopes > 0)
        memcpy(grown, ctx->scopes, ctx->nscopes * sizeof(*grown));
    grown[ctx->nscopes++] = (struct nxr__ctx_scope){.domain = d, .scope = s};
    free(ctx->scopes);
    ctx->scopes = grown;
    *out = s;
    return 0;
}

void nxr_ctx_reset(nxr_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    NXR__HANDLE_CHECK(ctx, "context");
    if (nxr__forked_since(ctx->fork_gen))
        return; /* the scopes' pools are the parent's */
    for (size_t i = 0; i < ctx->nscopes; i++)
        nxr_scope_reset(ctx->scopes[i].scope);
}

/* ---- the driving thread ---------------------------------------------------------- */

#if NXR__CHECKED_BUILD
/* Its address is the calling thread's token: unique among live threads. */
static _Thread_local char driver_token;

static void __attribute__((noreturn)) two_drivers(const nxr_ctx_t *ctx)
{
    fprintf(stderr,
            "nxr: context %p (domain %d) is driven by two threads at once: a context is "
            "driven by one thread at a time; open one context per thread (runtime/nxr_ctx.h)\n",
            (const void *)ctx, ctx->exec->spec->id);
    abort();
}

static int ctx_enter(nxr_ctx_t *ctx, bool *entered)
{
    *entered = false;
    driver_call_begins();
    NXR__HANDLE_CHECK(ctx, "context");
    if (nxr__forked_since(ctx->fork_gen))
        return NXR_EFORKED;
    if (ctx->rt == NULL)
        return NXR_EBROKEN;
    /* A call from inside a body belongs to the enclosing operation: it runs
     * in place or is refused (the nesting table), never as a second driver. */
    if (nxr__tls.depth > 0)
        return 0;
    uintptr_t me = (uintptr_t)&driver_token, none = 0;
    /* Acquire: pairs with the release in leave, so the previous driver's
     * depth write is visible before this thread counts its own. */
    if (!atomic_compare_exchange_strong_explicit(&ctx->driver, &none, me, memory_order_acquire,
                                                 memory_order_relaxed) &&
        none != me)
        two_drivers(ctx);
    ctx->driver_depth++;
    *entered = true;
    return 0;
}

static void ctx_leave(nxr_ctx_t *ctx, bool entered)
{
    driver_call_ends();
    if (entered && --ctx->driver_depth == 0)
        atomic_store_explicit(&ctx->driver, 0, memory_order_release);
}
#else
static int ctx_enter(nxr_ctx_t *ctx, bool *entered)
{
    *entered = false;
    driver_call_begins();
    if (nxr__forked_since(ctx->fork_gen))
        return NXR_EFORKED;
    return ctx->rt == NULL ? NXR_EBROKEN : 0;
}

static void ctx_leave(nxr_ctx_t *ctx, bool entered)
{
    (void)ctx;
    (void)entered;
    driver_call_ends();
}
#endif

/* ---- one call on a context ------------------------------------------------------- */

int nxr__ctx_call_open(struct nxr__ctx_call *c, nxr_ctx_t *ctx, const char *name)
{
    c->ctx = ctx;
    c->name = name;
    c->why[0] = '\0';
    int rc = ctx_enter(ctx, &c->entered);
    /* A failed enter took no driving: recording the detail is all. */
    return rc != 0 ? nxr__ctx_fail(ctx, NULL, name, rc, NULL) : 0;
}

int nxr__ctx_call_close(struct nxr__ctx_call *c, const struct nxr_domain *d, int rc)
{
    nxr__ctx_fail(c->ctx, d, c->name, rc, c->why[0] != '\0' ? c->why : NULL);
    ctx_leave(c->ctx, c->entered);
    return rc;
}

int nxr__ctx_call_closef(struct nxr__ctx_call *c, const struct nxr_domain *d, int rc,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
    return nxr__ctx_call_close(c, d, rc);
}
