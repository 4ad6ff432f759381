/*
 * Topology loading (see internal/topology.h).
 *
 * hwloc only binds for real on a topology it considers "this system"; nxr
 * never asks it to bind (workers pin with sched_setaffinity), so synthetic
 * and XML topologies behave exactly like the real one here.
 */
#include "domains/internal/topology.h"

#include <ctype.h>
#include <errno.h>
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "domains/internal/cpuset.h"
#include "domains/nxr_domains.h"
#include "base/internal/sys.h"
#include "base/nxr_status.h"

const char *nxr__topology_source_name(enum nxr__topology_source source)
{
    switch (source) {
    case NXR_TOPOLOGY_SYNTHETIC:
        return "synthetic";
    case NXR_TOPOLOGY_XML:
        return "xml";
    case NXR_TOPOLOGY_HWLOC:
    default:
        return "hwloc";
    }
}

/* A synthetic description carries NUMA information only if it names a NUMA
 * level; otherwise hwloc invents a single node 0, which would be a claim. */
static bool synthetic_names_numa(const char *desc)
{
    for (const char *p = desc; *p != '\0'; p++) {
        if (strncasecmp(p, "numa", 4) == 0)
            return true;
    }
    return false;
}

/*
 * Index attributes hwloc 2.9's synthetic parser aborts on instead of
 * rejecting (assertions in topology-synthetic.c, which kill the process
 * whatever the caller does with errors):
 *   - interleaving by object type that names a level below the indexed one,
 *     "numa:2(indexes=core) core:2 pu:1": the step it derives is 0;
 *   - step*count loops whose counts multiply to 0 in its unsigned long
 *     (a count of 2^32 truncates to 0, three of 2^22 wrap).
 * Every ordering can be written as an explicit list ("indexes=0,2,1,3") or
 * as step*count loops ("indexes=2*2:1*2"), so nxr takes those two forms,
 * checks the loops' counts, and refuses interleaving by type names before
 * hwloc sees the description. hwloc tells a list from a loop the same way:
 * only digits and commas make a list; a leading digit makes loops.
 */
static int synthetic_indexes_check(const char *desc, char *err, size_t errsz)
{
    for (const char *p = strstr(desc, "indexes="); p != NULL; p = strstr(p, "indexes=")) {
        p += 8;
        const int len = (int)strcspn(p, " )");
        if (strspn(p, "0123456789,") == (size_t)len)
            continue; /* an explicit list: hwloc checks it */
        if (!isdigit((unsigned char)p[0])) {
            snprintf(err, errsz,
                     "synthetic topology: 'indexes=%.*s' interleaves by object type, which nxr "
                     "does not take (hwloc 2.9 aborts on some of them); give the indexes as a "
                     "list (indexes=0,2,1,3) or as step*count loops (indexes=2*2:1*2)",
                     len, p);
            return NXR_ESYNTAX;
        }
        /* step*count[:step*count...]: the product of the counts as hwloc
         * forms it (each truncated to unsigned, multiplied in unsigned long). */
        unsigned long product = 1;
        for (const char *q = p; q < p + len;) {
            const char *star = memchr(q, '*', (size_t)(p + len - q));
            if (star == NULL)
                break;                                      /* malformed: hwloc rejects it */
            product *= (unsigned)strtol(star + 1, NULL, 0); /* as hwloc reads it */
            const char *colon = memchr(star, ':', (size_t)(p + len - star));
            q = colon == NULL ? p + len : colon + 1;
        }
        if (product == 0) {
            snprintf(err, errsz,
                     "synthetic topology: 'indexes=%.*s': a loop count is 0 or the counts "
                     "overflow",
                     len, p);
            return NXR_ESYNTAX;
        }
    }
    return 0;
}

/*
 * The size of a synthetic description, bounded before hwloc builds it:
 * hwloc's work grows faster than the objects it makes (children are
 * inserted one by one into their parent's list, and identical levels are
 * merged pairwise): "pack:16 core:64 pu:64" (65,536 PUs) took 17 s and
 * 970 MB in nxr_runtime_create, "pack:4096 pu:1" 10 s, and arity-1 groups
 * repeated over a wide level about as long. A synthetic topology is a test
 * fixture of at most a real machine's size, so nxr takes at most
 * NXR__SYNTHETIC_PU_MAX PUs, NXR__SYNTHETIC_OBJECT_MAX objects over all
 * levels (attached NUMA nodes included) and NXR__SYNTHETIC_ARITY_MAX
 * children per object; the worst description inside all three loads in
 * a few seconds here ("pack:4 core:1024 pu:1": 2.6 s on a loaded CPU).
 *
 * The walk follows hwloc 2.9's grammar: an optional "(attrs)" for the root;
 * then levels "[type:]count[(attrs)]" (count read as strtoul base 0 reads
 * it, so "0x10" is 16), and "[numa...]" attached to the level before it (one
 * per object of that level). Where the walk cannot read a level it stops:
 * hwloc rejects the description at the same place.
 */
static int synthetic_size_check(const char *desc, char *err, size_t errsz)
{
    /* Saturating: far above every bound, far below overflow. */
    const unsigned long cap = 1ul << 40;
    unsigned long width = 1, objects = 1; /* the machine */
    unsigned long widest = 0;             /* the most children of one object */
    const char *p = desc;
    if (*p == '(') {
        p = strchr(p, ')');
        if (p == NULL)
            return 0; /* hwloc rejects it */
        p++;
    }
    for (;;) {
        while (*p == ' ' || *p == '\n')
            p++;
        if (*p == '\0')
            break;
        if (*p == '[') {
            const char *close = strchr(p, ']');
            if (close == NULL)
                return 0;
            objects += width; /* one attached node per object of the level above */
            p = close + 1;
            continue;
        }
        if (!isdigit((unsigned char)*p)) {
            const char *colon = strchr(p, ':');
            if (colon == NULL)
                return 0;
            p = colon + 1;
        }
        char *end;
        const unsigned long count = strtoul(p, &end, 0);
        if (end == p || count == 0)
            return 0;
        if (count > widest)
            widest = count;
        width = count >= cap || width >= cap / count ? cap : width * count;
        objects = objects >= cap - width ? cap : objects + width;
        p = end;
        if (*p == '(') {
            const char *close = strchr(p, ')');
            if (close == NULL)
                return 0;
            p = close + 1;
        }
    }
    /* The last level is the PUs (hwloc insists), so width is their count. */
    const char *what = NULL;
    unsigned long n = 0;
    if (widest > NXR__SYNTHETIC_ARITY_MAX)
        what = "children of one object", n = widest;
    else if (width > NXR__SYNTHETIC_PU_MAX)
        what = "PUs", n = width;
    else if (objects > NXR__SYNTHETIC_OBJECT_MAX)
        what = "objects", n = objects;
    if (what == NULL)
        return 0;
    snprintf(err, errsz,
             "synthetic topology: %lu%s %s; nxr takes at most %u PUs, %u objects over all levels "
             "and %u children per object",
             n, n >= cap ? " or more" : "", what, NXR__SYNTHETIC_PU_MAX,
             NXR__SYNTHETIC_OBJECT_MAX, NXR__SYNTHETIC_ARITY_MAX);
    return NXR_ESYNTAX;
}

static int parse_spec(const char *spec, enum nxr__topology_source *source, const char **arg,
                      char *err, size_t errsz)
{
    *arg = NULL;
    if (spec == NULL || spec[0] == '\0' || strcmp(spec, "hwloc") == 0) {
        *source = NXR_TOPOLOGY_HWLOC;
        return 0;
    }
    if (strncmp(spec, "synthetic:", 10) == 0 && spec[10] != '\0') {
        *source = NXR_TOPOLOGY_SYNTHETIC;
        *arg = spec + 10;
        int rc = synthetic_size_check(*arg, err, errsz);
        return rc != 0 ? rc : synthetic_indexes_check(*arg, err, errsz);
    }
    if (strncmp(spec, "xml:", 4) == 0 && spec[4] != '\0') {
        *source = NXR_TOPOLOGY_XML;
        *arg = spec + 4;
        return 0;
    }
    snprintf(err, errsz,
             "topology '%s': expected 'hwloc', 'synthetic:<description>' or 'xml:<path>'", spec);
    return NXR_ESYNTAX;
}

/*
 * NUMA node OS ids must be unique: hwloc guarantees it for nodes (and PUs)
 * of a real machine, and everything above -- memory binding, the default
 * domain ids, nxr_mem_node -- names a node by that id. hwloc accepts a
 * synthetic or XML description that repeats one ("numa:2(indexes=0,0)") and
 * keeps both objects with the same nodeset; it does not merge them (two
 * nodes with different CPUs are not one node), so neither does nxr: such a
 * topology is refused, naming the id. (A repeated PU id is different: hwloc
 * itself drops the duplicate PU.)
 */
static bool node_ids_unique(hwloc_topology_t hw, char *err, size_t errsz)
{
    hwloc_obj_t a = NULL;
    while ((a = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_NUMANODE, a)) != NULL) {
        hwloc_obj_t b = a;
        while ((b = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_NUMANODE, b)) != NULL) {
            if (a->os_index == b->os_index) {
                snprintf(err, errsz,
                         "the topology has NUMA node id %u twice (hwloc objects L#%u and L#%u): "
                         "node ids must be unique",
                         a->os_index, a->logical_index, b->logical_index);
                return false;
            }
        }
    }
    return true;
}

static int load_hwloc(struct nxr__topology *topo, const char *arg, char *err, size_t errsz)
{
    if (nxr__fault_hit(NXR_FAULT_ALLOC) || hwloc_topology_init(&topo->hw) != 0) {
        topo->hw = NULL;
        snprintf(err, errsz, "hwloc_topology_init failed");
        return -ENOMEM;
    }
    int rc = 0;
    if (topo->source == NXR_TOPOLOGY_SYNTHETIC)
        rc = hwloc_topology_set_synthetic(topo->hw, arg);
    else if (topo->source == NXR_TOPOLOGY_XML)
        rc = hwloc_topology_set_xml(topo->hw, arg);
    if (rc != 0) {
        snprintf(err, errsz, "hwloc rejected %s topology '%s'",
                 nxr__topology_source_name(topo->source), arg);
        goto out_destroy;
    }
    if (nxr__fault_hit(NXR_FAULT_TOPOLOGY_LOAD) || hwloc_topology_load(topo->hw) != 0) {
        snprintf(err, errsz, "hwloc could not load the %s topology",
                 nxr__topology_source_name(topo->source));
        goto out_destroy;
    }
    if (!node_ids_unique(topo->hw, err, errsz))
        goto out_destroy;
    return 0;

out_destroy:
    hwloc_topology_destroy(topo->hw);
    topo->hw = NULL;
    return NXR_ETOPOLOGY;
}

int nxr__topology_load(struct nxr__topology *topo, const char *spec, hwloc_const_bitmap_t narrow,
                       char *err, size_t errsz)
{
    const char *arg;
    memset(topo, 0, sizeof(*topo));
    int rc = parse_spec(spec, &topo->source, &arg, err, errsz);
    if (rc != 0)
        return rc;
    rc = load_hwloc(topo, arg, err, errsz);
    if (rc != 0)
        return rc;

    topo->allowed = nxr__cpuset_alloc();
    if (topo->allowed == NULL) {
        rc = -ENOMEM;
        goto out_fini;
    }
    rc = nxr__affinity_self(topo->allowed);
    if (rc != 0) {
        snprintf(err, errsz, "sched_getaffinity failed: %s", nxr_strerror(rc));
        goto out_fini;
    }
    topo->process = nxr__cpuset_dup(topo->allowed);
    if (topo->process == NULL) {
        rc = -ENOMEM;
        goto out_fini;
    }
    if (narrow != NULL)
        hwloc_bitmap_and(topo->allowed, topo->allowed, narrow);

    topo->node_count = hwloc_get_nbobjs_by_type(topo->hw, HWLOC_OBJ_NUMANODE);
    topo->cpu_count = hwloc_get_nbobjs_by_type(topo->hw, HWLOC_OBJ_PU);
    switch (topo->source) {
    case NXR_TOPOLOGY_HWLOC:
        topo->has_numa = numa_available() >= 0 && topo->node_count > 0;
        break;
    case NXR_TOPOLOGY_SYNTHETIC:
        topo->has_numa = synthetic_names_numa(arg);
        break;
    case NXR_TOPOLOGY_XML:
        topo->has_numa = topo->node_count > 0;
        break;
    }
    return 0;

out_fini:
    nxr__topology_fini(topo);
    return rc;
}

void nxr__topology_fini(struct nxr__topology *topo)
{
    if (topo->allowed != NULL)
        hwloc_bitmap_free(topo->allowed);
    if (topo->process != NULL)
        hwloc_bitmap_free(topo->process);
    if (topo->hw != NULL)
        hwloc_topology_destroy(topo->hw);
    memset(topo, 0, sizeof(*topo));
}

int nxr__topology_node_of(const struct nxr__topology *topo, hwloc_const_bitmap_t cpus)
{
    if (!topo->has_numa || hwloc_bitmap_iszero(cpus))
        return NXR_NODE_NONE;
    hwloc_obj_t node = NULL;
    while ((node = hwloc_get_next_obj_by_type(topo->hw, HWLOC_OBJ_NUMANODE, node)) != NULL) {
        if (node->cpuset != NULL && hwloc_bitmap_isincluded(cpus, node->cpuset))
            return (int)node->os_index;
    }
    return NXR_NODE_NONE;
}
