/*
 * Per-domain execution state and the per-thread execution marker.
 *
 * struct nxr__exec is what a context reaches: the executor contract in use
 * for the domain (the built-in team's, or a caller's), the domain's CPU set
 * and budget. It is embedded in the runtime's domain and lives as long as it.
 *
 * The marker (nxr__tls) says whether the calling thread is already inside a
 * task or loop body, and as which participant; it is how one fan-out level
 * is enforced without asking any pool.
 */
#ifndef NXR_INTERNAL_EXEC_H
#define NXR_INTERNAL_EXEC_H

#include <hwloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "domains/internal/arbiter.h"
#include "domains/nxr_domains.h"
#include "executor/internal/team.h"
#include "executor/nxr_executor.h"

struct nxr__exec {
    struct nxr_executor executor; /* the contract work goes through */
    struct nxr__team *team;       /* the built-in team, or NULL */
    hwloc_const_bitmap_t cpus;    /* the domain's set; NULL for caller-managed */
    unsigned budget;              /* most participants one operation may use */
    int domain_id;
    enum nxr_admission admission;

    /* Admission (executor/admission.c). MANAGED and COOPERATIVE domains hold
     * a permit for `cpus` while any operation of theirs is in flight
     * (`active` > 0); CALLER_MANAGED ones hold `guard` instead. */
    struct nxr__arbiter *arbiter; /* NULL: not arbitrated */
    struct nxr__arbiter_request request;
    atomic_uint guard; /* caller-managed: 1 while an operation runs */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned active; /* operations in flight; under lock */
    bool acquiring;  /* a thread is acquiring the permit; under lock */
    /* Counters, under lock (nxr__exec_admission_stats). */
    uint64_t joins;     /* operations admitted onto a permit already held */
    uint64_t deferrals; /* operations that found an overlapping request
                         * waiting and queued behind it instead of joining */
};

struct nxr__exec_tls {
    unsigned depth;       /* > 0: inside a task or loop body */
    unsigned participant; /* the index the enclosing body runs as */
};

extern _Thread_local struct nxr__exec_tls nxr__tls;

/* Fills exec->executor with the built-in team's implementation of the
 * contract (owned by nxr, fans out, not re-entrant). */
void nxr__exec_use_team(struct nxr__exec *exec, struct nxr__team *team);

/* True when the calling thread is a worker of exec's own executor. */
bool nxr__exec_is_own_worker(const struct nxr__exec *exec);

/*
 * Prepares exec's admission state: a permit request for exec->cpus on
 * `arbiter` (MANAGED, COOPERATIVE), or the guard (CALLER_MANAGED, arbiter
 * ignored). 0, -EINVAL or -ENOMEM.
 */
int nxr__exec_admission_init(struct nxr__exec *exec, struct nxr__arbiter *arbiter);
void nxr__exec_admission_fini(struct nxr__exec *exec);

/*
 * Admits one operation (a region or a submitted batch) onto exec's executor
 * and retains the executor for it. MANAGED/COOPERATIVE: the first operation
 * in flight acquires the domain's permit (blocking), later ones join it
 * while no overlapping request waits for it, and otherwise queue behind that
 * request (blocking); a thread already inside an operation's body never
 * blocks here (it could wait on a permit its own operation keeps from being
 * granted) and gets -EBUSY instead. CALLER_MANAGED: NXR_EADMISSION when an operation is already in
 * flight, from any thread. Every success is paired with nxr__exec_leave.
 */
int nxr__exec_enter(struct nxr__exec *exec);

/* Ends one admitted operation: releases the executor and, with the last
 * operation, the permit or the guard. Any thread (a done callback too). */
void nxr__exec_leave(struct nxr__exec *exec);

/* Admission counters of an arbitrated domain (a caller-managed one never
 * joins: zeroes), and the operations in flight now. Any thread. */
struct nxr__admission_stats {
    uint64_t joins;
    uint64_t deferrals;
    unsigned active;
};
void nxr__exec_admission_stats(struct nxr__exec *exec, struct nxr__admission_stats *out);

/* Blocks until exec has no operation in flight; returns whether it waited. */
bool nxr__exec_drain(struct nxr__exec *exec);

struct nxr_ctx {
    unsigned magic; /* NXR__HANDLE_LIVE until destroyed (base/internal/sys.h) */
    struct nxr__exec *exec;
    const void *domain; /* the public nxr_domain_t */
    void *runtime;      /* the nxr_runtime_t it belongs to */
};

#endif /* NXR_INTERNAL_EXEC_H */
