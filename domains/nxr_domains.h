/*
 * nxr domains: the vocabulary of resource domains shared by the public API.
 *
 * A domain is a stable id, a CPU set (OS CPU ids, as an hwloc bitmap), an
 * optional NUMA node (OS node id, sparse: node 2 may exist without node 1),
 * a thread budget and an admission mode. By default nxr forms one MANAGED
 * domain per NUMA node that has at least one allowed CPU; a caller may
 * instead declare domains (struct nxr_domain_decl, or the NXR_DOMAINS string).
 *
 * NXR_DOMAINS grammar (whitespace around tokens is ignored):
 *     spec    := domain { ';' domain } [ ';' ]
 *     domain  := id ':' cpulist [ '/' budget ] [ "shared" ]
 *     cpulist := range { ',' range }
 *     range   := cpu [ '-' cpu ]
 * id, cpu and budget are decimal; cpu <= NXR_CPU_ID_MAX; a range's first cpu
 * is <= its last. Example: "0:0-3;1:4-7/2" declares domain 0 on CPUs 0..3
 * (budget 4) and domain 1 on CPUs 4..7 with a budget of 2 threads.
 * "shared" declares an overlap by intent: "0:0-3;1:4-7;9:0-7 shared" adds a
 * domain 9 over both nodes. Overlapping domains are legal only when one of
 * them says so; the arbiter then keeps them from running at the same time.
 * At most 256 domains (in NXR_DOMAINS: NXR_ESYNTAX naming the bound; in
 * opts.domain_decls: -EINVAL): each has a team and an arena of its own.
 */
#ifndef NXR_DOMAINS_H
#define NXR_DOMAINS_H

#include <hwloc.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/nxr_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The node of a domain that is not confined to one NUMA node. */
#define NXR_NODE_NONE (-1)
/* A declaration's budget: as many threads as the domain has CPUs (zero,
 * so that a zeroed declaration means it). */
#define NXR_BUDGET_ALL 0
/* Largest OS CPU id accepted in a declaration (bounds bitmap sizes). */
#define NXR_CPU_ID_MAX 65535

enum nxr_admission {
    /* nxr creates, pins and verifies the workers; arbitrated. */
    NXR_ADMISSION_MANAGED = 0,
    /* An external executor that declares an exact CPU set; arbitrated. */
    NXR_ADMISSION_COOPERATIVE = 1,
    /* An external executor with no CPU set; guarded, never arbitrated. */
    NXR_ADMISSION_CALLER_MANAGED = 2,
};

enum nxr_placement {
    /* Each worker read its own affinity back and it equals the domain set. */
    NXR_PLACEMENT_VERIFIED = 0,
    /* The caller declared the set; nxr did not (cannot) check the workers. */
    NXR_PLACEMENT_DECLARED = 1,
    /* No placement claim at all (caller-managed). */
    NXR_PLACEMENT_NONE = 2,
};

/* A caller-declared managed domain. Initialise with nxr_domain_decl_init. */
struct nxr_domain_decl {
    int id;                    /* stable id, >= 0, unique in the runtime */
    hwloc_const_bitmap_t cpus; /* OS CPU ids; borrowed for the create call only */
    int budget;                /* 1..|cpus|, or NXR_BUDGET_ALL (the default) */
    bool shared;               /* may overlap other domains (arbitrated) */
};

/* Sets id 0, no CPUs, budget NXR_BUDGET_ALL, not shared. */
NXR_API void nxr_domain_decl_init(struct nxr_domain_decl *decl);

/* "managed", "cooperative", "caller-managed". */
NXR_API const char *nxr_admission_name(enum nxr_admission mode);

/* "verified", "declared", "none". */
NXR_API const char *nxr_placement_name(enum nxr_placement placement);

/* ---- CPU sets -------------------------------------------------------------
 * nxr takes and returns CPU sets as hwloc bitmaps of OS CPU ids. These
 * helpers convert the forms a host already has: the kernel's CPU list text
 * ("0-3,8", as in /sys and cgroup cpuset files) and glibc's cpu_set_t (from
 * sched_getaffinity or pthread_getaffinity_np of the threads of a pool the
 * host attaches). Bitmaps they return are the caller's (hwloc_bitmap_free).
 * Any thread may call them; none blocks.
 */

/*
 * Parses a CPU list: ranges "a" or "a-b" (a <= b <= NXR_CPU_ID_MAX, decimal)
 * separated by ','; blanks around tokens and one trailing newline are
 * allowed; "" is the empty set. Returns 0 and a new bitmap in *out, or
 * -EINVAL (NULL list or out), NXR_ESYNTAX (nxr_last_error() says where),
 * -ENOMEM; on failure *out is NULL.
 */
NXR_API int nxr_cpuset_parse(const char *list, hwloc_bitmap_t *out);

/*
 * Writes cpus as a CPU list ("0-3,8"; "" for the empty set) into buf.
 * Returns 0; -EINVAL (NULL cpus or buf, size 0, an infinite set); -ENOSPC
 * when the list and its NUL do not fit in size bytes, buf untouched. len
 * (optional) receives the list's length without the NUL, on success and on
 * -ENOSPC, so a caller can size buf.
 */
NXR_API int nxr_cpuset_format(hwloc_const_bitmap_t cpus, char *buf, size_t size, size_t *len);

/* cpu_set_t is glibc's and exists only with _GNU_SOURCE (which defines
 * CPU_SETSIZE); without it these two are not declared. `setsize` is the
 * mask's size in bytes: sizeof(cpu_set_t), or CPU_ALLOC_SIZE(n) for a mask
 * from CPU_ALLOC(n); like the kernel, nxr takes only whole multiples of
 * sizeof(unsigned long) (-EINVAL otherwise). */
#ifdef CPU_SETSIZE
/*
 * The CPUs of a glibc mask as a new bitmap in *out. Returns 0, -EINVAL (NULL
 * set or out, a bad setsize) or -ENOMEM; on failure *out is NULL.
 */
NXR_API int nxr_cpuset_from_cpu_set(const cpu_set_t *set, size_t setsize, hwloc_bitmap_t *out);

/*
 * Fills a glibc mask with exactly the CPUs of cpus (for
 * pthread_setaffinity_np, say). Returns 0, -EINVAL (NULL cpus or set, a bad
 * setsize) or -ERANGE (a CPU id does not fit in setsize * 8 bits, or the
 * set is infinite); on failure the mask is untouched.
 */
NXR_API int nxr_cpuset_to_cpu_set(hwloc_const_bitmap_t cpus, cpu_set_t *set, size_t setsize);
#endif

#ifdef __cplusplus
}
#endif

#endif /* NXR_DOMAINS_H */
