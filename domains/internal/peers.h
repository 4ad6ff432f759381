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
 * The directory is opened once (O_DIRECTORY | O_NOFOLLOW), checked with
 * fstat, and used only through that descriptor (openat, renameat,
 * unlinkat): swapping it for a symlink after the check changes nothing.
 * One file per live runtime, "<pid>.<n>", written whole under a temporary
 * name and renamed into place (a reader never sees half an entry), holding
 * one line: "nxr-peer 2 <pid> <start> <budget> <pidns> <copy> <mark>
 * <cpulist>" (start: the process's start time in clock ticks since boot,
 * /proc/<pid>/stat field 22, which tells a live process from a later one
 * that reuses its pid; pidns: the inode of its /proc/self/ns/pid, 0 when
 * unknown; copy and mark, hexadecimal: which copy of libnxr in that process
 * wrote it, an address in that copy and the random value it holds there).
 * Version 1 lines ("nxr-peer 1 <pid> <start> <budget> <cpulist>", older
 * nxr) are still read, judged as they always were.
 * Every entry is checked before it counts: a regular file owned by the user,
 * at most NXR__PEER_ENTRY_MAX bytes, exactly that format with every number
 * bounded (CPU ids at most NXR_CPU_ID_MAX, checked before any bitmap is
 * built), its name's pid the line's pid. Then, by who wrote it:
 *   - another PID namespace (pidns differs from ours): its pid means
 *     nothing here, so it is neither believed nor removed (other_pidns);
 *   - this copy of the library (this pid, this copy's address; or this pid
 *     and version 1): skipped, this copy's arbiter already sees it;
 *   - another copy of libnxr loaded in this process: a peer like another
 *     process (same_process), while its mark is still in memory; stale once
 *     that copy is unloaded (or this process exec'ed);
 *   - another process: a peer while a process with that pid is alive with
 *     that start time, else stale.
 * Stale entries are removed by whoever finds them.
 */
#ifndef NXR_INTERNAL_PEERS_H
#define NXR_INTERNAL_PEERS_H

#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define NXR__PEER_ENTRY_MAX 512 /* bytes: a cpulist of a few hundred ranges */
#define NXR__PEERS_SHOWN    16  /* overlapping peers kept for the report */
#define NXR__PEERS_DIR_MAX  255 /* bytes in the registry directory's path */

struct nxr__peer {
    pid_t pid;
    unsigned budget;
    bool same_process; /* another copy of libnxr in this process */
    char cpus[128];    /* its CPU list, as it wrote it (cut when long) */
    char overlap[128]; /* the CPUs it shares with this runtime */
};

struct nxr__peers {
    char dir[NXR__PEERS_DIR_MAX + 1]; /* the registry directory, "" when none could be used */
    int dirfd;                        /* it, opened and checked; -1 when none */
    char entry[320];                  /* this runtime's entry, "" when not registered */
    char entry_name[40];              /* its name in dir */
    pid_t owner; /* the process that wrote it: a forked child never removes it */
    /* 0, or why the registry could not be used (a negative errno); detail
     * says which path and what was wrong. */
    int status;
    bool dir_refused; /* the directory exists but is not safe to use */
    char detail[256];
    /* Live overlapping runtimes of other processes, at creation (the first
     * NXR__PEERS_SHOWN; overlapping counts them all). */
    struct nxr__peer shown[NXR__PEERS_SHOWN];
    size_t overlapping;
    size_t others;      /* live runtimes of other processes that do not overlap */
    size_t other_pidns; /* entries of other PID namespaces: not checked by pid */
    size_t refused;     /* entries that failed a check (malformed, foreign, ...) */
    size_t stale;       /* entries of processes no longer alive (removed) */
};

/*
 * Registers a runtime over `cpus` with `budget` threads (when publish) and
 * reads every other entry. dir: NULL for the default directory, else the
 * registry directory to use (tests; at most NXR__PEERS_DIR_MAX bytes, else
 * -ENAMETOOLONG in p->status). Never fails for the caller: problems
 * end up in p->status / p->detail and mean "nothing seen". Any thread; it
 * reads a directory and one /proc file per entry (no waits).
 */
void nxr__peers_open(struct nxr__peers *p, const char *dir, hwloc_const_bitmap_t cpus,
                     unsigned budget, bool publish);

/* Removes this runtime's entry (if any) when called by the process that
 * wrote it (a forked child's copy of the runtime leaves the parent's entry
 * alone), and closes the directory. Idempotent; a zeroed struct (a runtime
 * that never opened the registry) is left alone. */
void nxr__peers_close(struct nxr__peers *p);

/* The start time (clock ticks since boot) of process pid, 0 for the calling
 * process (read through /proc/self), or 0 when unknown: what entries are
 * checked against. */
unsigned long long nxr__peers_start_time(pid_t pid);

/* This process's and this copy's identity, as an entry records it. */
struct nxr__peer_self {
    unsigned long long start, pidns;
    uint64_t copy, mark;
};
void nxr__peers_self(struct nxr__peer_self *out);

enum nxr__peer_verdict { NXR__PEER_LIVE, NXR__PEER_STALE, NXR__PEER_OTHER_NAMESPACE };

/* Whether the writer of a format-2 record with these identity fields is
 * alive, by the entries' rules above (this copy's own records are live). */
enum nxr__peer_verdict nxr__peers_judge(pid_t pid, unsigned long long start,
                                        unsigned long long pidns, uint64_t copy, uint64_t mark);

/* Opens and checks the registry directory only (NULL: the default; created
 * when missing), for a reader: 0 with p->dirfd set (nxr__peers_close
 * closes it), or a negative errno with p->detail saying why. */
int nxr__peers_open_dir(struct nxr__peers *p, const char *dir);

/* Opens name in the registry directory dirfd (flags | O_CLOEXEC |
 * O_NOFOLLOW | O_NONBLOCK: a symlink is refused, not followed) when it is a
 * regular file of the effective uid, its stat in *st: the fd, or -1 (gone,
 * a symlink, not a regular file, not ours). What else a file must be (its
 * size, its mode) is the caller's to check. Entries and counters pages. */
int nxr__peers_open_own(int dirfd, const char *name, int flags, struct stat *st);

/* Test hook: called with the directory's path once it has been checked and
 * before anything is written to it (a test swaps it there). NULL: none. */
extern void (*nxr__peers_dir_checked)(const char *dir);

#endif /* NXR_INTERNAL_PEERS_H */
