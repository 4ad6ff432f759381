/*
 * The counters page: a small shared file beside a runtime's peer registry
 * entry (domains/internal/peers.h), "<entry name>.page", in which the runtime
 * publishes its domains and their counters for `nxr top` (runtime/nxr_top.h)
 * to read from another process.
 *
 * Same directory and same rules as the entries: created by the runtime with
 * mode 0600 under a temporary name and renamed into place (a reader never
 * sees a page before its header and domains are written), every operation
 * relative to the registry's checked directory descriptor (O_NOFOLLOW,
 * O_EXCL); a reader believes a page only when it is a regular file of the
 * effective uid with no group or other access, of exactly this layout's size,
 * magic and version, named after the pid it holds, and when that process is
 * alive with the start time it holds (the entries' liveness rules,
 * nxr__peers_judge). A page of a dead process is removed by the reader that
 * finds it, with its entry; an entry found stale removes its page too.
 *
 * Fixed layout, version NXR__PAGE_VERSION, sizeof(struct nxr__page) bytes:
 * only fixed-size integer fields and NUL-terminated strings. A new layout
 * is a new version: a reader skips (refuses) versions it does not know.
 *
 * Refreshing costs the runtime nothing while nobody reads: a reader asks by
 * writing `asked` (answered + 1) and the next operation to end on any of the
 * runtime's domains (nxr__exec_leave) sees asked != answered, refreshes the
 * counters and sets answered = asked (a futex word: the reader waits on it
 * with a bound). An idle runtime answers nobody, and its page keeps the
 * counters of its last refresh: they have not moved since (no operation
 * ended). Writes are bracketed by `seq` (odd while writing), so a reader
 * copies the page again when it changed under it.
 */
#ifndef NXR_INTERNAL_STATS_PAGE_H
#define NXR_INTERNAL_STATS_PAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NXR__PAGE_MAGIC   "nxr-page" /* 8 bytes, no NUL stored */
#define NXR__PAGE_VERSION 1
#define NXR__PAGE_DOMAINS 64  /* domains published; a runtime's others are counted */
#define NXR__PAGE_CPUS    128 /* bytes of a domain's CPU list (cut when longer) */
#define NXR__PAGE_COMMAND 96  /* bytes of the command line */
#define NXR__PAGE_SUFFIX  ".page"

struct nxr__page_domain {
    int32_t id;
    int32_t node;
    uint32_t workers;
    uint32_t budget;         /* now */
    uint32_t budget_created; /* the domain's budget at creation */
    uint32_t limited_by;     /* enum nxr__budget_limit (domains/internal/plan.h) */
    char cpus[NXR__PAGE_CPUS];
    uint64_t regions;
    uint64_t tasks;
    uint64_t busy_ns;
    uint64_t spin_ns;
    uint64_t admission_waits;
    uint64_t admission_wait_ns;
    uint64_t weight_bytes;
};

struct nxr__page {
    char magic[8];
    uint32_t version;
    uint32_t size; /* sizeof(struct nxr__page) */
    /* Who wrote it: the entry's identity fields (domains/internal/peers.h). */
    int32_t pid;
    uint32_t domain_count; /* published in domains[] */
    uint64_t start;
    uint64_t pidns;
    uint64_t copy;
    uint64_t mark;
    char command[NXR__PAGE_COMMAND];
    uint32_t domains_total; /* the runtime's domains, attached ones too */
    uint32_t cpu_quota;     /* CPUs of the quota the budgets follow; 0: none */
    /* The reader's request and the runtime's answer (futex words, shared). */
    _Atomic uint32_t asked;
    _Atomic uint32_t answered;
    _Atomic uint64_t seq; /* odd while the runtime writes */
    uint64_t sampled_ns;  /* CLOCK_MONOTONIC of the last refresh */
    uint64_t stalls;
    struct nxr__page_domain domains[NXR__PAGE_DOMAINS];
};

/* ---- the runtime's side ------------------------------------------------ */

/*
 * Creates the page of the entry `entry_name` in the checked directory dirfd
 * under a temporary name, maps it and writes its header (identity of this
 * process and copy, command line): the caller fills the domains, then
 * calls nxr__page_publish. 0 or a negative errno (nothing left behind).
 */
int nxr__page_create(int dirfd, const char *entry_name, struct nxr__page **out);

/* Renames the created page into place ("<entry_name>.page"); on failure the
 * page is unmapped and its file removed. 0 or a negative errno. */
int nxr__page_publish(int dirfd, const char *entry_name, struct nxr__page *page);

/* Unmaps the page and, when remove (the process that wrote it), removes its
 * file. NULL: a no-op. */
void nxr__page_close(int dirfd, const char *entry_name, struct nxr__page *page, bool remove);

/* The writer's brackets around a refresh (one writer at a time). */
void nxr__page_write_begin(struct nxr__page *page);
void nxr__page_write_end(struct nxr__page *page);

/* Sets answered = asked and wakes the readers waiting for it. */
void nxr__page_answer(struct nxr__page *page, uint32_t asked);

/* ---- the reader's side ------------------------------------------------- */

struct nxr__pages_seen {
    size_t refused;     /* not believed: wrong owner/mode/size/format, a symlink */
    size_t stale;       /* of dead processes: removed with their entries */
    size_t other_pidns; /* of another PID namespace: left alone */
};

/*
 * Reads every live page in dirfd: asks each runtime for a refresh, waits
 * for the answers at most wait_ms in all (an idle runtime does not answer:
 * its page is read as it is), then copies each page and calls
 * take(arg, copy, answered, serial) (answered: the runtime refreshed for
 * this read; serial: the <n> of its entry's name "<pid>.<n>", which tells
 * one process's runtimes apart). Removes stale pages and their entries; counts what it skipped.
 * 0, or a negative errno when the directory cannot be read.
 */
int nxr__pages_read(int dirfd, unsigned wait_ms,
                    void (*take)(void *arg, const struct nxr__page *copy, bool answered,
                                 unsigned serial),
                    void *arg, struct nxr__pages_seen *seen);

#endif /* NXR_INTERNAL_STATS_PAGE_H */
