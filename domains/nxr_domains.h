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
 */
#ifndef NXR_DOMAINS_H
#define NXR_DOMAINS_H

#include <hwloc.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The node of a domain that is not confined to one NUMA node. */
#define NXR_NODE_NONE (-1)
/* A declaration's budget: as many threads as the domain has CPUs. */
#define NXR_BUDGET_ALL (-1)
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
__attribute__((visibility("default"))) void nxr_domain_decl_init(struct nxr_domain_decl *decl);

/* "managed", "cooperative", "caller-managed". */
__attribute__((visibility("default"))) const char *nxr_admission_name(enum nxr_admission mode);

/* "verified", "declared", "none". */
__attribute__((visibility("default"))) const char *nxr_placement_name(enum nxr_placement placement);

#ifdef __cplusplus
}
#endif

#endif /* NXR_DOMAINS_H */
