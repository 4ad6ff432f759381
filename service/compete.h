/*
 * Noisy neighbours: busy processes pinned to chosen CPUs for the length of
 * a measurement, the way another tenant's job shares a server. `nxr demo
 * --compete N` and bench/forkjoin's contended rows start them, measure,
 * and stop them; nothing of them outlives the caller (each dies with it).
 */
#ifndef NXR_SERVICE_COMPETE_H
#define NXR_SERVICE_COMPETE_H

#include <hwloc.h>
#include <sys/types.h>

#define SVC_COMPETE_MAX 64

struct svc_compete {
    unsigned count;
    pid_t pids[SVC_COMPETE_MAX];
    int cpus[SVC_COMPETE_MAX]; /* the CPU each one is pinned to */
};

/*
 * Starts n busy processes (n <= SVC_COMPETE_MAX), the i-th pinned to the
 * i-th CPU of `cpus` counted from the highest id down, wrapping around when
 * n exceeds them (the highest first: the CPU a service's first thread
 * usually is not on). Each spins in user space until stopped and dies with
 * its parent (PR_SET_PDEATHSIG). Returns once every one runs pinned (each
 * reports after pinning; a pipe read, bounded by the child's exit). 0, or
 * -EINVAL (n too large, empty set), a negative errno of fork/pipe or of a
 * child's pinning; on failure the ones started are stopped. Call it from
 * the thread that will stop them; async-signal-safe children, so a
 * multithreaded caller may use it.
 */
int svc_compete_start(struct svc_compete *c, hwloc_const_bitmap_t cpus, unsigned n);

/* Kills and reaps every process started. No-op for an empty or stopped set. */
void svc_compete_stop(struct svc_compete *c);

/* The CPUs they run on as a list ("1" or "1,0,1"), into buf. */
void svc_compete_cpus(const struct svc_compete *c, char *buf, size_t size);

#endif /* NXR_SERVICE_COMPETE_H */
