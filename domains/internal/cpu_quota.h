/*
 * The CPU bandwidth quota: how many CPUs' worth of time the process's
 * control groups let it run, read from cgroup v2 `cpu.max` and cgroup v1
 * `cpu.cfs_quota_us` / `cpu.cfs_period_us` (what `docker --cpus`, a
 * Kubernetes CPU limit or systemd's CPUQuota= set). Affinity does not show
 * it: a container limited to one CPU of bandwidth still sees every CPU in
 * sched_getaffinity, and a team sized to those CPUs is throttled in
 * lockstep (docs/contracts.md, "What the process can really get").
 *
 * Pure reading, no state: /proc/self/cgroup names the process's cgroup in
 * each hierarchy, /proc/self/mountinfo where each hierarchy is mounted; the
 * limit of every level from the process's cgroup up to the mount's root
 * counts (a child never gets more bandwidth than its ancestors), and the
 * tightest wins. Every file goes through the seam (nxr__read_lines).
 */
#ifndef NXR_INTERNAL_CPU_QUOTA_H
#define NXR_INTERNAL_CPU_QUOTA_H

#include <stddef.h>

struct nxr__cpu_quota {
    /* Usable CPUs: floor(quota / period), at least 1, of the tightest valid
     * limit over every level of every hierarchy; 0 when no file that could
     * be read sets one. A file that cannot be used (status) never discards
     * a limit read from another: the tightest valid limit stands.
     * Floor, not round: a team of one thread more than the quota pays for
     * is throttled as a whole whenever the group runs out (every period,
     * under load), which costs far more than the idle fraction of a CPU
     * that rounding down leaves unused. At least 1: a quota under one CPU
     * still runs one thread, only slower. */
    unsigned cpus;
    /* 0, or why a file could not be used (the first such file: negative
     * errno of a file that exists but could not be read, NXR_ESYNTAX for a
     * malformed one); cpus may still hold the limit the other files set,
     * and source names both. */
    int status;
    /* For people: the file and its values that set the limit
     * ("cgroup v2 /sys/fs/cgroup/a/cpu.max: 100000 100000 -> 1 CPU"), then,
     * when one could not be used, "; and a file that could not be used:
     * <file>: <problem>"; or why there is none ("none: ..."), or only the
     * problem. Always NUL-terminated. */
    char source[1024];
    /* The tightest limit's own values (microseconds) and the cgroup
     * directory that sets it, with the root prefix ("" and 0 when cpus is
     * 0 or the quota did not come from a file): its cpu.stat counts the
     * periods that limit throttled (nxr__cpu_throttle_read). v: 1 or 2. */
    unsigned long long quota_us;
    unsigned long long period_us;
    int v;
    char dir[1024];
};

/*
 * Reads the quota of the calling process into *out. root: NULL or "" for
 * the real file system, else a directory standing for "/" (tests: it holds
 * proc/self/cgroup, proc/self/mountinfo and the cgroup files under the
 * mount points that mountinfo names). Costs one file read when
 * /proc/self/cgroup names no cpu hierarchy; else mountinfo and one or two
 * small files per cgroup level.
 *
 * Returns out->status: 0 (a quota in out->cpus, or none), a negative errno
 * or NXR_ESYNTAX (a file that could not be used; out->cpus is still the
 * tightest limit the others set, and out->source says which file and why).
 * Every level is read, however deep the cgroup.
 * Missing files are not errors (no /proc, a level without a limit file).
 * Never fails for the caller's lack of memory beyond the seam's line buffer
 * (-ENOMEM). Any thread; blocks only on the reads.
 */
int nxr__cpu_quota_read(const char *root, struct nxr__cpu_quota *out);

/* How often the limit of q->dir throttled the group, from its cpu.stat:
 * periods throttled (nr_throttled) and the time throttled in microseconds
 * (v2 throttled_usec; v1 throttled_time, which is in nanoseconds). */
struct nxr__cpu_throttle {
    unsigned long long nr_throttled;
    unsigned long long throttled_usec;
};

/*
 * Reads q->dir/cpu.stat into *out (zeroes first). 0; -ENOENT when q names
 * no directory (no limit from a file) or the file is missing; a negative
 * errno when it cannot be read; NXR_ESYNTAX when the counters are not
 * both there as numbers. One small file read (the seam); any thread.
 */
int nxr__cpu_throttle_read(const struct nxr__cpu_quota *q, struct nxr__cpu_throttle *out);

#endif /* NXR_INTERNAL_CPU_QUOTA_H */
