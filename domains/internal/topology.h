/*
 * Topology: the machine as nxr sees it, from hwloc (this system), an hwloc
 * synthetic description or an XML file, plus the allowed set (the process's
 * affinity at load time, optionally narrowed by the caller). Node and CPU
 * ids are OS ids and stay sparse; nothing here indexes by them.
 */
#ifndef NXR_INTERNAL_TOPOLOGY_H
#define NXR_INTERNAL_TOPOLOGY_H

#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>

enum nxr__topology_source {
    NXR_TOPOLOGY_HWLOC = 0, /* this system */
    NXR_TOPOLOGY_SYNTHETIC = 1,
    NXR_TOPOLOGY_XML = 2,
};

struct nxr__topology {
    hwloc_topology_t hw;
    enum nxr__topology_source source;
    /* False when the source carries no NUMA information (a kernel without
     * NUMA support, a synthetic description without a NUMA level): nxr then
     * forms one domain over the allowed set with node NXR_NODE_NONE. */
    bool has_numa;
    /* The CPUs this process may run on: sched_getaffinity at load time,
     * intersected with the caller's narrowing set if any. Never widened. */
    hwloc_bitmap_t allowed;
    /* The affinity before narrowing: the CPUs this process's other threads
     * (a library's own workers, another runtime's) may run on. A domain
     * confines a provider's own threads only if it covers all of them. */
    hwloc_bitmap_t process;
    int node_count; /* NUMA nodes in the topology (allowed CPUs or not) */
    int cpu_count;  /* PUs in the topology */
};

/* The largest synthetic description nxr takes (domains/topology.c,
 * synthetic_size_check): PUs, objects over all levels, children per
 * object. A test fixture needs far less (the VMs use 2-4 nodes of a few PUs),
 * and inside all three hwloc builds any description in about a second. */
#define NXR__SYNTHETIC_PU_MAX     4096u
#define NXR__SYNTHETIC_OBJECT_MAX 16384u
#define NXR__SYNTHETIC_ARITY_MAX  1024u

/*
 * Loads a topology. `spec` is NULL or "hwloc" (this system),
 * "synthetic:<hwloc synthetic description>" or "xml:<path>". `narrow`, when
 * not NULL, is intersected with the process affinity.
 * Returns 0, NXR_ESYNTAX (bad spec, synthetic indexes interleaved by
 * object type or with loop counts that multiply to 0: hwloc 2.9 aborts on
 * some of those, or a synthetic description past the size bounds above,
 * refused before hwloc builds anything), NXR_ETOPOLOGY (hwloc refused it, or it
 * names one NUMA node id twice) or -ENOMEM, with a message in err. On
 * failure *topo holds nothing.
 */
int nxr__topology_load(struct nxr__topology *topo, const char *spec, hwloc_const_bitmap_t narrow,
                       char *err, size_t errsz);

void nxr__topology_fini(struct nxr__topology *topo);

/* "hwloc", "synthetic", "xml". */
const char *nxr__topology_source_name(enum nxr__topology_source source);

/* The OS id of the NUMA node whose CPU set contains all of `cpus`, or
 * NXR_NODE_NONE when no single node does (or the topology has no NUMA). */
int nxr__topology_node_of(const struct nxr__topology *topo, hwloc_const_bitmap_t cpus);

#endif /* NXR_INTERNAL_TOPOLOGY_H */
