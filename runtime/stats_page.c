/*
 * The runtime's counters page (domains/internal/stats_page.h): published
 * beside its registry entry when the registry is on (NXR_PEERS not off and
 * the entry written), read by nxr_top_read in another process.
 *
 * When it is refreshed: when a reader asks, by the next operation to end on
 * one of the runtime's domains (nxr__exec_leave calls answer below). Not
 * periodically: no thread of its own (a runtime's threads are its workers),
 * no clock read on the hot path, and nothing at all while nobody reads; an
 * idle runtime answers nobody, and its page's counters are still right (no
 * operation ended since its last refresh, so none moved but a region in
 * flight's). The cost of a refresh (summing the counters, one lock per
 * domain's admission and pool) lands on one operation's end per request.
 *
 * A domain a host attaches after creation (nxr_runtime_attach) is added to
 * the page then, its operations hooked like the others': the layout has
 * room and counts for it (domain_count, domains_total), so the page keeps
 * its version.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/internal/lock_rank.h"
#include "runtime/internal/runtime.h"

/* The domain's facts that never change, written once. */
static void domain_facts(const struct nxr_domain *d, struct nxr__page_domain *p)
{
    p->id = d->spec.id;
    p->node = d->spec.node;
    p->budget_created = d->spec.budget;
    if (d->spec.cpus != NULL)
        hwloc_bitmap_list_snprintf(p->cpus, sizeof(p->cpus), d->spec.cpus);
}

static void domain_counters(const struct nxr_domain *d, struct nxr__page_domain *p)
{
    struct nxr_domain_stats s;
    nxr__domain_stats(d, &s);
    p->workers = s.workers;
    p->budget = s.budget;
    p->limited_by = (uint32_t)nxr__domain_limit_now(d);
    p->regions = s.regions;
    p->tasks = s.tasks;
    p->busy_ns = s.busy_ns;
    p->spin_ns = s.spin_ns;
    p->admission_waits = s.admission_waits;
    p->admission_wait_ns = s.admission_wait_ns;
    p->weight_bytes = s.weight_bytes;
}

/* Under page.lock. */
static void refresh(nxr_runtime_t *rt)
{
    struct nxr__page *page = rt->page.map;
    nxr__page_write_begin(page);
    for (size_t i = 0; i < rt->page.domain_count; i++)
        domain_counters(rt->page.domains[i], &page->domains[i]);
    /* Relaxed: a count (executor/internal/stall.h). */
    page->stalls = atomic_load_explicit(&rt->stall.reports, memory_order_relaxed);
    nxr__lock(&rt->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    page->cpu_quota = rt->quota_now.cpus;
    nxr__unlock(&rt->quota_lock, NXR__RANK_RUNTIME_QUOTA);
    nxr__page_write_end(page);
}

/* An operation's end saw a reader's request (executor/internal/exec.h). */
static void answer(void *arg)
{
    nxr_runtime_t *rt = arg;
    if (nxr__runtime_forked(rt))
        return; /* the page is the parent's */
    if (pthread_mutex_trylock(&rt->page.lock) != 0)
        return; /* another thread is answering */
    struct nxr__page *page = rt->page.map;
    uint32_t asked = atomic_load_explicit(&page->asked, memory_order_relaxed);
    if (asked != atomic_load_explicit(&page->answered, memory_order_relaxed)) {
        refresh(rt);
        nxr__page_answer(page, asked);
    }
    pthread_mutex_unlock(&rt->page.lock);
}

/* The domain's operation ends answer the page's readers. */
static void hook_answer(nxr_runtime_t *rt, struct nxr_domain *d)
{
    struct nxr__exec *exec = &d->exec;
    exec->asked = &rt->page.map->asked;
    exec->answered = &rt->page.map->answered;
    exec->answer_arg = rt;
    exec->answer = answer;
}

void nxr__runtime_page_open(nxr_runtime_t *rt)
{
    const struct nxr__peers *p = &rt->peers;
    rt->page.dirfd = -1;
    if (rt->settings.peers == NXR_PEERS_OFF || p->dirfd < 0 || p->entry_name[0] == '\0')
        return;
    size_t n = rt->domain_count < NXR__PAGE_DOMAINS ? rt->domain_count : NXR__PAGE_DOMAINS;
    /* Room for every domain the page can hold: one attached later
     * (nxr__runtime_page_add_domain) needs no allocation, so cannot fail. */
    struct nxr_domain **domains = malloc(NXR__PAGE_DOMAINS * sizeof(*domains));
    int dirfd = dup(p->dirfd);
    struct nxr__page *page = NULL;
    if (domains == NULL || dirfd < 0 || nxr__page_create(dirfd, p->entry_name, &page) != 0) {
        free(domains);
        if (dirfd >= 0)
            close(dirfd);
        return;
    }
    memcpy(domains, rt->domains, n * sizeof(*domains));
    page->domain_count = (uint32_t)n;
    page->domains_total = (uint32_t)rt->domain_count;
    for (size_t i = 0; i < n; i++)
        domain_facts(domains[i], &page->domains[i]);
    rt->page.map = page;
    rt->page.domains = domains;
    rt->page.domain_count = n;
    rt->page.dirfd = dirfd;
    rt->page.owner = getpid();
    snprintf(rt->page.entry_name, sizeof(rt->page.entry_name), "%s", p->entry_name);
    pthread_mutex_init(&rt->page.lock, NULL);
    refresh(rt); /* nobody else has it yet */
    if (nxr__page_publish(dirfd, p->entry_name, page) != 0) {
        /* Unmapped and removed by the publish. */
        pthread_mutex_destroy(&rt->page.lock);
        free(domains);
        close(dirfd);
        memset(&rt->page, 0, sizeof(rt->page));
        rt->page.dirfd = -1;
        return;
    }
    /* Before the runtime is handed out: no operation has run yet. */
    for (size_t i = 0; i < n; i++)
        hook_answer(rt, domains[i]);
}

void nxr__runtime_page_add_domain(nxr_runtime_t *rt, struct nxr_domain *d)
{
    if (rt->page.map == NULL)
        return;
    struct nxr__page *page = rt->page.map;
    pthread_mutex_lock(&rt->page.lock);
    /* Inside the write brackets: a reader copies the count and the
     * domain's facts together, never a count ahead of its domain. */
    nxr__page_write_begin(page);
    page->domains_total++;
    size_t i = rt->page.domain_count;
    if (i < NXR__PAGE_DOMAINS) {
        memset(&page->domains[i], 0, sizeof(page->domains[i]));
        domain_facts(d, &page->domains[i]);
        domain_counters(d, &page->domains[i]);
        rt->page.domains[i] = d;
        rt->page.domain_count = i + 1;
        page->domain_count = (uint32_t)(i + 1);
    }
    nxr__page_write_end(page);
    pthread_mutex_unlock(&rt->page.lock);
    /* Before the domain can be looked up (domains_lock is held): no
     * operation on it has run yet. */
    if (i < NXR__PAGE_DOMAINS)
        hook_answer(rt, d);
}

void nxr__runtime_page_close(nxr_runtime_t *rt)
{
    if (rt->page.map == NULL)
        return;
    for (size_t i = 0; i < rt->page.domain_count; i++)
        rt->page.domains[i]->exec.answer = NULL;
    nxr__page_close(rt->page.dirfd, rt->page.entry_name, rt->page.map, rt->page.owner == getpid());
    pthread_mutex_destroy(&rt->page.lock);
    free(rt->page.domains);
    close(rt->page.dirfd);
    memset(&rt->page, 0, sizeof(rt->page));
    rt->page.dirfd = -1;
}
