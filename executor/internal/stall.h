/*
 * The stall reporter: a wait that should end soon but has not, explained in
 * one line on stderr. An admission wait (a region's caller, or the item that
 * takes a permit back for deferred batches), a region's dispatcher waiting
 * for its slots, and nxr_job_wait are timed waits: when one has waited
 * longer than the runtime's threshold (NXR_STALL_REPORT_MS, the option
 * stall_report_ms; 0 turns it off) it reports once, naming the domain it
 * waits for, who holds that domain's CPUs (domains and what they run) and
 * who else waits, then goes on waiting. The report is a diagnostic: it
 * never ends a wait and changes no state but its counter.
 *
 * One per runtime (struct nxr_runtime owns it); every domain's exec points
 * at it. The runtime fills `who` (it knows the domains); the executor layer
 * only formats and counts.
 */
#ifndef NXR_INTERNAL_STALL_H
#define NXR_INTERNAL_STALL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct nxr__exec;
struct nxr__strbuf;

/* The default threshold (docs/guide.md, "Knobs"): long enough that no healthy wait
 * reaches it, short enough for an operator watching a hung request. */
#define NXR__STALL_DEFAULT_MS 5000u

struct nxr__stall {
    uint64_t after_ns; /* 0: off. Immutable once the runtime is created. */
    /* Lines printed so far (nxr_runtime_describe). Relaxed: a counter. */
    atomic_ullong reports;
    /* Appends who holds and who waits for exec's CPUs to sb (the runtime's
     * domains and the arbiter's state). Called on the waiting thread with
     * no nxr lock held. */
    void (*who)(void *ctx, const struct nxr__exec *exec, struct nxr__strbuf *sb);
    void *who_ctx;
    /* Test hook: receives each line (without the newline) instead of
     * stderr. Set while no wait can report (before the first operation). */
    void (*sink)(void *arg, const char *line);
    void *sink_arg;
};

/* When a wait that started at `start` (nxr__now_ns) should report: 0 when
 * stall is NULL or off. */
uint64_t nxr__stall_deadline(const struct nxr__stall *stall, uint64_t start);

/* Prints (or hands to the sink) one line: "nxr: stall: <what> on domain D
 * (cpus C) has waited N ms; " + who, and counts it. stall may be NULL (no
 * report). No nxr lock may be held by the caller. */
void nxr__stall_report(struct nxr__stall *stall, const struct nxr__exec *exec, const char *what,
                       uint64_t waited_ns);

#endif /* NXR_INTERNAL_STALL_H */
