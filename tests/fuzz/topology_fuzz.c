/*
 * libFuzzer target: the topology spec (NXR_TOPOLOGY, opts.topology) and the
 * default domain plan built from it. The spec is "hwloc" or
 * "synthetic:<hwloc synthetic description>" (hwloc parses the description;
 * "xml:<path>" names a file and is left out: the fuzzer must not read
 * arbitrary paths). Inputs are bounded before hwloc builds them: at most 200
 * bytes, every number at most 64 and their product at most 256, so that a
 * description cannot ask for millions of objects. An input past that bound
 * still goes through nxr's own checks (its size bound refuses what is too
 * big to build, domains/topology.c), with the topology build itself failed
 * through the fault seam: it must come back NXR_ESYNTAX or NXR_ETOPOLOGY,
 * quickly, holding nothing. Memory attached to a level
 * ("pack:2 [numa] pu:2") is left out too: hwloc 2.9.0's synthetic parser
 * leaks the attached-memory description (32 bytes, inside libhwloc) when it
 * rejects the rest of the string, and a LeakSanitizer suppression for
 * libhwloc would also hide hwloc objects that nxr forgot to free.
 *
 * Properties: loading returns 0, NXR_ESYNTAX, NXR_ETOPOLOGY or -ENOMEM and
 * holds nothing on failure; a loaded topology has an allowed set inside the
 * process affinity; the default plan returns 0, NXR_ENODOMAIN or -ENOMEM,
 * and its domains are disjoint, non-empty, inside the allowed set, with
 * budget = CPU count and distinct ids. Built and run by tools/fuzz.sh.
 */
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domains/internal/plan.h"
#include "domains/internal/topology.h"
#include "base/internal/sys.h"
#include "base/nxr_status.h"

#define INPUT_MAX 200

static void require(int cond, const char *what, const char *spec)
{
    if (!cond) {
        fprintf(stderr, "topology_fuzz: property violated: %s\nspec: '%s'\n", what, spec);
        abort();
    }
}

/* The bound described above: 1 within it, 0 past it, -1 never loaded. */
static int bounded(const char *s)
{
    if (strchr(s, '[') != NULL)
        return -1; /* see the file comment */
    unsigned long product = 1;
    while (*s != '\0') {
        if (!isdigit((unsigned char)*s)) {
            s++;
            continue;
        }
        unsigned long v = 0;
        while (isdigit((unsigned char)*s)) {
            v = v * 10 + (unsigned long)(*s++ - '0');
            if (v > 64)
                return 0;
        }
        product *= v > 1 ? v : 1;
        if (product > 256)
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    char input[INPUT_MAX + 1];
    memcpy(input, data, size);
    input[size] = '\0';
    const int bound = bounded(input);
    if (bound < 0)
        return 0;
    const bool cheap = bound == 1;
    /* "=" first: the spec as given; otherwise a synthetic description. */
    char spec[INPUT_MAX + 16];
    if (input[0] == '=')
        snprintf(spec, sizeof(spec), "%s", input + 1);
    else
        snprintf(spec, sizeof(spec), "synthetic:%s", input);
    if (strncmp(spec, "xml:", 4) == 0)
        return 0;

    struct nxr__topology topo;
    char err[512] = "";
    if (!cheap) {
        /* Too big to build here: nxr's checks run, hwloc's build does not. */
        nxr__fault_arm(NXR_FAULT_TOPOLOGY_LOAD, 1);
        int rc = nxr__topology_load(&topo, spec, NULL, err, sizeof(err));
        nxr__fault_arm(NXR_FAULT_TOPOLOGY_LOAD, 0);
        require(rc == NXR_ESYNTAX || rc == NXR_ETOPOLOGY || rc == -ENOMEM,
                "unbuilt load: refused or failed", spec);
        require(topo.hw == NULL && topo.allowed == NULL, "a failed load holds nothing", spec);
        require(rc == -ENOMEM || err[0] != '\0', "a failed load explains itself", spec);
        return 0;
    }
    int rc = nxr__topology_load(&topo, spec, NULL, err, sizeof(err));
    require(rc == 0 || rc == NXR_ESYNTAX || rc == NXR_ETOPOLOGY || rc == -ENOMEM,
            "load: a documented status", spec);
    if (rc != 0) {
        require(topo.hw == NULL && topo.allowed == NULL, "a failed load holds nothing", spec);
        require(rc == -ENOMEM || err[0] != '\0', "a failed load explains itself", spec);
        return 0;
    }
    cpu_set_t mine;
    CPU_ZERO(&mine);
    require(sched_getaffinity(0, sizeof(mine), &mine) == 0, "sched_getaffinity", spec);
    int cpu;
    hwloc_bitmap_foreach_begin(cpu, topo.allowed)
        require(cpu < CPU_SETSIZE && CPU_ISSET(cpu, &mine), "allowed set never widened", spec);
    hwloc_bitmap_foreach_end();

    struct nxr__plan plan;
    rc = nxr__plan_default(&plan, &topo, err, sizeof(err));
    require(rc == 0 || rc == NXR_ENODOMAIN || rc == -ENOMEM, "plan: a documented status", spec);
    if (rc == 0) {
        require(plan.count >= 1, "a plan has a domain", spec);
        for (size_t i = 0; i < plan.count; i++) {
            const struct nxr__domain_spec *s = &plan.domains[i];
            int weight = hwloc_bitmap_weight(s->cpus);
            require(weight > 0 && s->budget == (unsigned)weight, "budget = CPUs, non-empty", spec);
            require(hwloc_bitmap_isincluded(s->cpus, topo.allowed), "inside the allowed set", spec);
            require(topo.has_numa || s->node == NXR_NODE_NONE, "no node claimed without NUMA",
                    spec);
            for (size_t j = 0; j < i; j++) {
                require(plan.domains[j].id != s->id, "distinct ids", spec);
                require(!hwloc_bitmap_intersects(plan.domains[j].cpus, s->cpus),
                        "default domains are disjoint", spec);
            }
        }
        nxr__plan_fini(&plan);
    } else {
        require(plan.domains == NULL && plan.count == 0, "a failed plan holds nothing", spec);
    }
    nxr__topology_fini(&topo);
    return 0;
}
