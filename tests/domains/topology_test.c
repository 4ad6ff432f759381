/*
 * Topology loading: what a description may claim. NUMA node ids are OS ids
 * that everything above names nodes by (binding, default domain ids), so a
 * description that repeats one is refused with NXR_ETOPOLOGY and a message
 * naming the id; distinct sparse ids load as given.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "base/nxr_status.h"
#include "domains/internal/topology.h"

static char err[512];

Test(domains_topology, duplicate_numa_node_ids_are_etopology)
{
    static const char *const specs[] = {
        "synthetic:numa:2(indexes=0,0) pu:1", /* the fuzzer's input */
        "synthetic:pack:2 numa:2(indexes=3,1,3,5) pu:1",
    };
    static const char *const named[] = {"node id 0 twice", "node id 3 twice"};
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        struct nxr__topology topo;
        err[0] = '\0';
        cr_assert_eq(nxr__topology_load(&topo, specs[i], NULL, err, sizeof(err)), NXR_ETOPOLOGY,
                     "%s", specs[i]);
        cr_assert_null(topo.hw, "a failed load holds nothing");
        cr_assert_null(topo.allowed);
        cr_assert_not_null(strstr(err, named[i]), "%s: message '%s'", specs[i], err);
    }
}

Test(domains_topology, distinct_sparse_node_ids_load_as_given)
{
    struct nxr__topology topo;
    cr_assert_eq(nxr__topology_load(&topo, "synthetic:pack:2 numa:2(indexes=3,1,0,5) pu:1", NULL,
                                    err, sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(topo.node_count, 4);
    const unsigned want[] = {3, 1, 0, 5};
    hwloc_obj_t node = NULL;
    for (unsigned i = 0; i < 4; i++) {
        node = hwloc_get_next_obj_by_type(topo.hw, HWLOC_OBJ_NUMANODE, node);
        cr_assert_not_null(node);
        cr_assert_eq(node->os_index, want[i], "node L#%u", i);
    }
    nxr__topology_fini(&topo);
}

/* Descriptions hwloc 2.9's synthetic parser aborts the process on (an
 * assertion, not an error) are refused before hwloc sees them: index
 * interleaving by type names, and step*count loops whose counts multiply
 * to 0 in hwloc's arithmetic. The first is the fuzzer's input. */
Test(domains_topology, index_forms_hwloc_aborts_on_are_esyntax)
{
    static const char *const specs[] = {
        "synthetic:nu\352a:2(indexes=pu0(i) pu:2",
        "synthetic:numa:2(indexes=core) core:2 pu:1",
        "synthetic:pack:2 core:2 pu:2(indexes=core:pu)",
        "synthetic:pack:1 [numa(indexes=pack)] pu:2",
        "synthetic:numa:2(indexes=1*4194304:1*4194304:1*4194304) pu:1",
        "synthetic:numa:2(indexes=1*0x100000000) pu:1",
    };
    static const char *const named[] = {
        "'indexes=pu0(i' interleaves by object type",
        "'indexes=core' interleaves",
        "'indexes=core:pu' interleaves",
        "'indexes=pack' interleaves",
        "a loop count is 0 or the counts overflow",
        "'indexes=1*0x100000000': a loop count",
    };
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        struct nxr__topology topo;
        err[0] = '\0';
        cr_assert_eq(nxr__topology_load(&topo, specs[i], NULL, err, sizeof(err)), NXR_ESYNTAX, "%s",
                     specs[i]);
        cr_assert_null(topo.hw, "a refused spec holds nothing");
        cr_assert_not_null(strstr(err, named[i]), "%s: message '%s'", specs[i], err);
    }
}

/* The two forms nxr takes still reach hwloc and give the order asked for:
 * an explicit list, and step*count loops (2*2:1*2 over four nodes is
 * 0,2,1,3). */
Test(domains_topology, index_lists_and_loops_load_as_given)
{
    static const char *const specs[] = {
        "synthetic:numa:4(indexes=0,2,1,3) pu:1",
        "synthetic:numa:4(indexes=2*2:1*2) pu:1",
    };
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        struct nxr__topology topo;
        cr_assert_eq(nxr__topology_load(&topo, specs[i], NULL, err, sizeof(err)), 0, "%s: %s",
                     specs[i], err);
        const unsigned want[] = {0, 2, 1, 3};
        hwloc_obj_t node = NULL;
        for (unsigned k = 0; k < 4; k++) {
            node = hwloc_get_next_obj_by_type(topo.hw, HWLOC_OBJ_NUMANODE, node);
            cr_assert_not_null(node);
            cr_assert_eq(node->os_index, want[k], "%s: node L#%u", specs[i], k);
        }
        nxr__topology_fini(&topo);
    }
}

/* Synthetic descriptions are bounded before hwloc sees them: hwloc's work
 * grows faster than the objects it builds ("pack:16 core:64 pu:64" took 17 s
 * and 970 MB in nxr_runtime_create; "pack:4096 pu:1" 10 s), and a test
 * topology never needs a machine larger than Linux can run. The limits
 * (domains/internal/topology.h): PUs, objects over all levels, children of
 * one object. Each case is one past a limit; the largest taken still loads. */
Test(domains_topology, oversized_synthetic_descriptions_are_esyntax)
{
    static const char *const specs[] = {
        "synthetic:pack:16 core:64 pu:64",             /* the issue's: 65,536 PUs */
        "synthetic:pack:100 core:100 pu:100",          /* 1,000,000 PUs */
        "synthetic:pack:0x1000 core:0x1000 pu:0x1000", /* hex counts, as hwloc reads them */
        "synthetic:pack:17 core:241 pu:1",             /* 4,097 PUs: one over */
        "synthetic:pack:2 core:1025 pu:1",             /* 1,025 children of one package */
        "synthetic:pack:4 core:1024 group:1 group:1 pu:1", /* 16,389 objects, the machine too */
        "synthetic:pack:2 core:1024 [numa] group:1 group:1 group:1 group:1 group:1 pu:1",
        /* 16,387 objects with the 2,048 attached nodes, 14,339 without */
    };
    static const char *const named[] = {
        "65536 PUs", "1000000 PUs", "4096 children", "4097 PUs", "1025 children",
        "16389 objects", "16387 objects",
    };
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        struct nxr__topology topo;
        err[0] = '\0';
        cr_assert_eq(nxr__topology_load(&topo, specs[i], NULL, err, sizeof(err)), NXR_ESYNTAX, "%s",
                     specs[i]);
        cr_assert_null(topo.hw, "a refused spec holds nothing");
        cr_assert_not_null(strstr(err, named[i]), "%s: message '%s'", specs[i], err);
    }
    struct nxr__topology topo;
    cr_assert_eq(nxr__topology_load(&topo, "synthetic:pack:4 core:1024 pu:1", NULL, err,
                                    sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(topo.cpu_count, 4096);
    nxr__topology_fini(&topo);
}
