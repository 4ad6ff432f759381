/*
 * The runtime in the peer registry (domains/internal/peers.h): after its
 * teams started, a runtime publishes the CPUs its managed domains cover and
 * their budgets' sum, reads the entries of other processes' runtimes, and
 * under NXR_PEERS=warn says on stderr when any overlap its own CPUs: two
 * processes whose teams share CPUs compete for them and neither arbiter
 * sees the other (docs/deployment.md). Nothing here changes a budget.
 */
#include <stdio.h>

#include "runtime/internal/runtime.h"

void nxr__runtime_peers_open(nxr_runtime_t *rt)
{
    if (rt->settings.peers == NXR_PEERS_OFF)
        return;
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    if (cpus == NULL)
        return;
    unsigned budget = 0;
    for (size_t i = 0; i < rt->domain_count; i++) {
        hwloc_bitmap_or(cpus, cpus, rt->domains[i]->spec.cpus);
        budget += rt->domains[i]->spec.budget;
    }
    nxr__peers_open(&rt->peers, rt->settings.peers_dir, cpus, budget, true);
    hwloc_bitmap_free(cpus);
    const struct nxr__peers *p = &rt->peers;
    if (rt->settings.peers != NXR_PEERS_WARN)
        return;
    /* A directory that exists and is refused (another user's: anyone can
     * make /dev/shm/nxr-peers-<uid> for someone else) turns the registry
     * off for this user until it is removed: worth more than a line in
     * nxr info. */
    if (p->dir_refused)
        fprintf(stderr,
                "nxr: warning: the peer registry is off for this runtime (%s); remove or fix "
                "that directory, or set NXR_PEERS=quiet\n",
                p->detail);
    /* Another copy of libnxr loaded in this process (its own arbiter). */
    size_t copies = 0;
    for (size_t i = 0; i < p->overlapping && i < NXR__PEERS_SHOWN; i++) {
        const struct nxr__peer *q = &p->shown[i];
        if (!q->same_process)
            continue;
        copies++;
        fprintf(stderr,
                "nxr: warning: another copy of libnxr loaded in this process (pid %d) has a "
                "runtime over CPUs %s (budget %u, shared %s): the two copies' arbiters do not "
                "see each other, so their teams compete for those CPUs; load one libnxr per "
                "process (docs/deployment.md) or set NXR_PEERS=quiet\n",
                (int)q->pid, q->cpus, q->budget, q->overlap);
    }
    if (p->overlapping == copies)
        return;
    const struct nxr__peer *first = &p->shown[0];
    for (size_t i = 0; i < p->overlapping && i < NXR__PEERS_SHOWN; i++)
        if (!p->shown[i].same_process) {
            first = &p->shown[i];
            break;
        }
    fprintf(stderr,
            "nxr: warning: %zu runtime(s) of other processes use this runtime's CPUs (pid %d: "
            "CPUs %s, budget %u, shared %s%s): their teams and this one's compete for those "
            "CPUs; bind each process to CPUs of its own (docs/deployment.md) or set "
            "NXR_PEERS=quiet\n",
            p->overlapping - copies, (int)first->pid, first->cpus, first->budget, first->overlap,
            p->overlapping - copies > 1 ? "; nxr info lists the others" : "");
}

void nxr__runtime_peers_close(nxr_runtime_t *rt)
{
    nxr__peers_close(&rt->peers);
}
