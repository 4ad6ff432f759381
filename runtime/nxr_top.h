/*
 * Every nxr runtime of this user on the machine, as `nxr top` shows them.
 *
 * Each runtime registered in the peer registry (NXR_PEERS not off,
 * docs/deployment.md) publishes its domains and counters in a small page
 * beside its registry entry; nxr_top_read reads every such page a reader
 * may believe (a regular file of this user with no group or other access,
 * of the layout's size and version, of a live process of this PID
 * namespace), removes those of dead processes, and fills the caller's
 * arrays. The counters are cumulative since each runtime's creation, as in
 * nxr_runtime_stats: a reader takes two reads an interval apart and divides
 * the differences by the difference of sampled_ns for rates.
 *
 * A page holds the runtime's domains, the first 64: those it was created
 * with, then those attached later (nxr_runtime_attach), each from the
 * attach on (a caller-managed domain with no CPUs and no workers of nxr's).
 *
 * A runtime refreshes its page when asked: nxr_top_read asks every runtime
 * and waits at most wait_ms in all for the answers, which the next
 * operation to end on one of its domains gives. A runtime that runs nothing
 * does not answer (answered 0): its page holds the counters of its last
 * refresh, which have not moved since, but for a region still running.
 *
 * The structs grow by additions only, at their ends, as nxr_runtime_stats's
 * do (nxr_top_init sets the sizes the caller was compiled with; nxr writes
 * no byte past them).
 */
#ifndef NXR_TOP_H
#define NXR_TOP_H

#include <stddef.h>
#include <stdint.h>

#include "base/nxr_fwd.h"
#include "base/nxr_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The layout this header describes (struct nxr_top.version). */
#define NXR_TOP_VERSION 1

struct nxr_top_domain {
    int id;
    int node;         /* NXR_NODE_NONE when the domain has none */
    unsigned workers; /* its team's size */
    unsigned budget;  /* now */
    unsigned budget_created;
    /* What set the budget below the domain's CPU count ("quota",
     * "num_threads", "declared"; "" when nothing did): as
     * nxr_domain_budget_limit, and "quota" once a changed quota lowered it. */
    char budget_limit[16];
    char cpus[128]; /* its CPU list (cut when longer) */
    /* Other processes' domains that share CPUs with this one: "pid P: CPUS"
     * items joined by "; " (cut when long); "" when none. Only the runtimes
     * this read returned are compared. */
    char overlap[128];
    /* Cumulative counters, as struct nxr_domain_stats's. */
    uint64_t regions;
    uint64_t tasks;
    uint64_t busy_ns;
    uint64_t spin_ns;
    uint64_t admission_waits;
    uint64_t admission_wait_ns;
    uint64_t weight_bytes;
};

struct nxr_top_runtime {
    int pid;
    unsigned serial;  /* tells one process's runtimes apart (with pid: stable while it lives) */
    char command[96]; /* the process's command line, arguments joined by spaces (cut) */
    /* CLOCK_MONOTONIC (ns) of the page's last refresh; answered: 1 when the
     * runtime refreshed it for this read. */
    uint64_t sampled_ns;
    int answered;
    unsigned cpu_quota; /* CPUs of the quota the budgets follow; 0: none */
    uint64_t stalls;    /* stall reports printed */
    /* Its domains: domains[domain_first .. + domain_filled) of the caller's
     * array (domain_filled < domain_count when the array ran out);
     * domain_count: those its page publishes (at most 64: the first ones). */
    size_t domain_first;
    size_t domain_filled;
    size_t domain_count;
};

struct nxr_top {
    /* In: the sizes the caller was compiled with and its arrays (NULL with
     * cap 0: only the counts). */
    size_t size;
    size_t runtime_size;
    size_t domain_size;
    struct nxr_top_runtime *runtimes;
    size_t runtime_cap;
    struct nxr_top_domain *domains;
    size_t domain_cap;
    /* Out: NXR_TOP_VERSION of the library; the live runtimes found (the
     * first min(runtime_count, runtime_cap) filled) and their domains
     * (min(domain_count, domain_cap) filled); pages not believed (wrong
     * owner, mode, size or format, a symlink), of dead processes (removed
     * with their registry entries), of another PID namespace (left). */
    unsigned version;
    size_t runtime_count;
    size_t domain_count;
    size_t refused;
    size_t stale;
    size_t other_pidns;
};

/* Sets t's sizes to this header's and its arrays; every other field to 0. */
NXR_API void nxr_top_init(struct nxr_top *t, struct nxr_top_runtime *runtimes, size_t runtime_cap,
                          struct nxr_top_domain *domains, size_t domain_cap);

/*
 * Reads the pages of the registry directory dir (NULL: the default,
 * $XDG_RUNTIME_DIR/nxr-peers or /dev/shm/nxr-peers-<uid>, created when
 * missing), asking each runtime to refresh and waiting at most wait_ms
 * (0: no asking, the pages as they are). 0; -EINVAL (t NULL, a size below
 * the first version's, an array NULL with a cap > 0); -ENAMETOOLONG (dir);
 * -EPERM (the directory is not this user's with mode 0700, or a symlink:
 * nothing read); -ENOMEM; another negative errno when the directory cannot
 * be opened. Any thread; it may block up to wait_ms.
 */
NXR_API int nxr_top_read(const char *dir, unsigned wait_ms, struct nxr_top *t);

#ifdef __cplusplus
}
#endif

#endif /* NXR_TOP_H */
