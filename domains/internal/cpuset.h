/*
 * CPU-set helpers: conversions between hwloc bitmaps (nxr's one CPU-set
 * representation) and the kernel's dynamically sized cpu_set_t, and the
 * OS CPU list format ("0-3,8").
 */
#ifndef NXR_INTERNAL_CPUSET_H
#define NXR_INTERNAL_CPUSET_H

#include <hwloc.h>
#include <sched.h>
#include <stddef.h>

/* A kernel CPU mask sized for a bitmap. */
struct nxr__cpumask {
    cpu_set_t *set;
    size_t size; /* bytes, for the *_S macros and sched_*affinity */
};

/* hwloc_bitmap_alloc and hwloc_bitmap_dup through the fault seam
 * (NXR_FAULT_ALLOC), so that tests can fail them: NULL when out of memory.
 * Free with hwloc_bitmap_free. */
hwloc_bitmap_t nxr__cpuset_alloc(void);
hwloc_bitmap_t nxr__cpuset_dup(hwloc_const_bitmap_t set);

/* Allocates a mask holding exactly the CPUs of `cpus`; 0 or -ENOMEM. */
int nxr__cpumask_from_bitmap(struct nxr__cpumask *mask, hwloc_const_bitmap_t cpus);

/* Allocates an empty mask able to hold CPU ids up to max_cpu; 0 or -ENOMEM. */
int nxr__cpumask_alloc(struct nxr__cpumask *mask, int max_cpu);

void nxr__cpumask_free(struct nxr__cpumask *mask);

/* Replaces `out` with the CPUs set in mask. 0 or -ENOMEM. */
int nxr__cpumask_to_bitmap(const struct nxr__cpumask *mask, hwloc_bitmap_t out);

/* The calling thread's affinity as a bitmap (read through the sys seam).
 * 0, -ENOMEM or the errno of sched_getaffinity. */
int nxr__affinity_self(hwloc_bitmap_t out);

/* Writes "0-3,8" (or "" for an empty set) into buf; returns buf. */
char *nxr__cpuset_list(hwloc_const_bitmap_t cpus, char *buf, size_t size);

/*
 * Parses a CPU list ("0-3,8", nxr_cpuset_parse's grammar) into cpus, which
 * it empties first. Every id is checked against NXR_CPU_ID_MAX digit by
 * digit, before any bit is set, so text from anywhere (an environment
 * variable, another process's registry entry) never sizes a bitmap past
 * 65536 bits. 0, NXR_ESYNTAX (err: what, the text, the offset and the
 * problem) or -ENOMEM. The one CPU-list parser: nxr_cpuset_parse,
 * NXR_DOMAINS and the peer registry all use it.
 */
int nxr__cpuset_parse_into(const char *list, hwloc_bitmap_t cpus, const char *what, char *err,
                           size_t errsz);

#endif /* NXR_INTERNAL_CPUSET_H */
