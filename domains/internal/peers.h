/*
 * The peer registry: which other nxr processes of the same user run on this
 * machine and which CPUs their runtimes cover, so that a runtime whose
 * teams overlap another process's can say so (docs/deployment.md, "Several
 * nxr processes on one machine"). Advice only: nothing read here changes a
 * budget or a CPU set, and an unusable registry only means nothing is seen.
 *
 * Layout: one directory per user, created with mode 0700 and refused unless
 * it is a real directory owned by the user with no group/other access
 * ($XDG_RUNTIME_DIR/nxr-peers when that is set, else /dev/shm/nxr-peers-<uid>).
 * One file per live runtime, "<pid>.<n>", written whole under a temporary
 * name and renamed into place (a reader never sees half an entry), holding
 * one line: "nxr-peer 1 <pid> <start> <budget> <cpulist>" (start: the
 * process's start time in clock ticks since boot, /proc/<pid>/stat field
 * 22, which tells a live process from a later one that reuses its pid).
 * Every entry is checked before it counts: a regular file owned by the user,
 * at most NXR__PEER_ENTRY_MAX bytes, exactly that format, its name's pid
 * the line's pid, and a process with that pid alive with that start time.
 * Entries of dead processes are removed by whoever finds them.
 */
#ifndef NXR_INTERNAL_PEERS_H
#define NXR_INTERNAL_PEERS_H

#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define NXR__PEER_ENTRY_MAX 512 /* bytes: a cpulist of a few hundred ranges */
#define NXR__PEERS_SHOWN 16     /* overlapping peers kept for the report */

struct nxr__peer {
    pid_t pid;
    unsigned budget;
    char cpus[128];    /* its CPU list, as it wrote it (cut when long) */
    char overlap[128]; /* the CPUs it shares with this runtime */
};

struct nxr__peers {
    char dir[256];   /* the registry directory, "" when none could be used */
    char entry[320]; /* this runtime's entry, "" when not registered */
    pid_t owner;     /* the process that wrote it: a forked child never removes it */
    /* 0, or why the registry could not be used (a negative errno); detail
     * says which path and what was wrong. */
    int status;
    char detail[256];
    /* Live overlapping runtimes of other processes, at creation (the first
     * NXR__PEERS_SHOWN; overlapping counts them all). */
    struct nxr__peer shown[NXR__PEERS_SHOWN];
    size_t overlapping;
    size_t others;  /* live runtimes of other processes that do not overlap */
    size_t refused; /* entries that failed a check (malformed, foreign, ...) */
    size_t stale;   /* entries of processes no longer alive (removed) */
};

/*
 * Registers a runtime over `cpus` with `budget` threads (when publish) and
 * reads every other entry. dir: NULL for the default directory, else the
 * registry directory to use (tests). Never fails for the caller: problems
 * end up in p->status / p->detail and mean "nothing seen". Any thread; it
 * reads a directory and one /proc file per entry (no waits).
 */
void nxr__peers_open(struct nxr__peers *p, const char *dir, hwloc_const_bitmap_t cpus,
                     unsigned budget, bool publish);

/* Removes this runtime's entry (if any) when called by the process that
 * wrote it (a forked child's copy of the runtime leaves the parent's entry
 * alone). Idempotent. */
void nxr__peers_close(struct nxr__peers *p);

/* This process's start time (clock ticks since boot) or 0 when unknown:
 * what entries are checked against. */
unsigned long long nxr__peers_start_time(pid_t pid);

#endif /* NXR_INTERNAL_PEERS_H */
