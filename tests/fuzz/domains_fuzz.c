/*
 * libFuzzer target: the NXR_DOMAINS parser (nxr__decls_parse) and domain
 * validation (nxr__plan_declared) on whatever string a user could hand nxr.
 *
 * Properties, beyond "no crash, no leak, no undefined behaviour":
 *   - the parser returns 0, NXR_ESYNTAX (with a message) or -ENOMEM, and
 *     hands out nothing on failure;
 *   - what it accepts prints back (canonical id:cpulist/budget [shared]) to
 *     a string that parses to the same declarations;
 *   - validation returns 0 or one of its documented codes, and a plan it
 *     accepts has non-empty CPU sets inside the allowed set, budgets within
 *     them, unique ids, and no overlap between domains not declared shared.
 * Validation runs against a synthetic 16-CPU topology whose allowed set has
 * a hole (CPU 13), so every error path is reachable on any machine.
 * Built and run by tools/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domains/internal/plan.h"
#include "domains/internal/topology.h"
#include "base/nxr_status.h"

#define INPUT_MAX 2048

static struct nxr__topology topo;

static void require(int cond, const char *what, const char *input)
{
    if (!cond) {
        fprintf(stderr, "domains_fuzz: property violated: %s\ninput: '%s'\n", what, input);
        abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char err[256];
    if (nxr__topology_load(&topo, "synthetic:pack:2 numa:2 pu:4", NULL, err, sizeof(err)) != 0) {
        fprintf(stderr, "domains_fuzz: %s\n", err);
        abort();
    }
    /* The harness widens the allowed set to the whole synthetic machine,
     * less one CPU, instead of this process's affinity. */
    hwloc_bitmap_copy(topo.allowed, hwloc_topology_get_topology_cpuset(topo.hw));
    hwloc_bitmap_clr(topo.allowed, 13);
    return 0;
}

/* Prints decls in the canonical grammar; 0, or -1 when buf is too small. */
static int print_decls(const struct nxr_domain_decl *d, size_t n, char *buf, size_t size)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char list[4096];
        if (hwloc_bitmap_list_snprintf(list, sizeof(list), d[i].cpus) >= (int)sizeof(list))
            return -1;
        int w = snprintf(buf + len, size - len, "%s%d:%s", i ? ";" : "", d[i].id, list);
        if (w < 0 || (size_t)w >= size - len)
            return -1;
        len += (size_t)w;
        if (d[i].budget != NXR_BUDGET_ALL) {
            w = snprintf(buf + len, size - len, "/%d", d[i].budget);
            if (w < 0 || (size_t)w >= size - len)
                return -1;
            len += (size_t)w;
        }
        if (d[i].shared) {
            w = snprintf(buf + len, size - len, " shared");
            if (w < 0 || (size_t)w >= size - len)
                return -1;
            len += (size_t)w;
        }
    }
    return 0;
}

static void check_round_trip(const struct nxr_domain_decl *d, size_t n, const char *input)
{
    static char text[1 << 16];
    if (print_decls(d, n, text, sizeof(text)) != 0)
        return; /* too long to print here: nothing to compare */
    struct nxr_domain_decl *again;
    size_t m;
    char err[256];
    int rc = nxr__decls_parse(text, &again, &m, err, sizeof(err));
    if (rc == -ENOMEM)
        return;
    require(rc == 0, "the canonical form of an accepted string parses", input);
    require(m == n, "the canonical form has as many domains", input);
    for (size_t i = 0; i < n; i++) {
        require(again[i].id == d[i].id && again[i].budget == d[i].budget &&
                    again[i].shared == d[i].shared &&
                    hwloc_bitmap_isequal(again[i].cpus, d[i].cpus),
                "the canonical form parses to the same declarations", input);
    }
    nxr__decls_free(again, m);
}

static void check_plan(const struct nxr__plan *plan, const struct nxr_domain_decl *d, size_t n,
                       const char *input)
{
    require(plan->count == n && plan->declared, "one planned domain per declaration", input);
    for (size_t i = 0; i < n; i++) {
        const struct nxr__domain_spec *s = &plan->domains[i];
        int weight = hwloc_bitmap_weight(s->cpus);
        require(s->id == d[i].id && s->id >= 0, "ids carried over, non-negative", input);
        require(weight > 0, "planned CPU sets are non-empty", input);
        require(hwloc_bitmap_isincluded(s->cpus, topo.allowed), "inside the allowed set", input);
        require(s->budget >= 1 && s->budget <= (unsigned)weight, "budget within the set", input);
        require(d[i].budget == NXR_BUDGET_ALL || s->budget == (unsigned)d[i].budget,
                "declared budgets kept", input);
        for (size_t j = 0; j < i; j++) {
            const struct nxr__domain_spec *o = &plan->domains[j];
            require(o->id != s->id, "ids are unique", input);
            require(d[i].shared || d[j].shared || !hwloc_bitmap_intersects(o->cpus, s->cpus),
                    "only domains declared shared overlap", input);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    char input[INPUT_MAX + 1];
    memcpy(input, data, size);
    input[size] = '\0';

    struct nxr_domain_decl *decls = (struct nxr_domain_decl *)1;
    size_t n = 99;
    char err[512] = "";
    int rc = nxr__decls_parse(input, &decls, &n, err, sizeof(err));
    require(rc == 0 || rc == NXR_ESYNTAX || rc == NXR_EBUDGET || rc == -ENOMEM,
            "parse: a documented status", input);
    if (rc != 0) {
        require(decls == NULL && n == 0, "a failed parse hands out nothing", input);
        require(rc != NXR_ESYNTAX || err[0] != '\0', "a syntax error explains itself", input);
        return 0;
    }
    require(decls != NULL && n >= 1, "an accepted string declares a domain", input);
    for (size_t i = 0; i < n; i++) {
        require(decls[i].cpus != NULL && !hwloc_bitmap_iszero(decls[i].cpus) &&
                    hwloc_bitmap_last(decls[i].cpus) <= NXR_CPU_ID_MAX,
                "parsed CPU sets are non-empty and bounded", input);
        require(decls[i].id >= 0, "parsed ids are non-negative", input);
        require(decls[i].budget == NXR_BUDGET_ALL || decls[i].budget >= 0,
                "parsed budgets are non-negative", input);
    }
    check_round_trip(decls, n, input);

    struct nxr__plan plan;
    err[0] = '\0';
    rc = nxr__plan_declared(&plan, &topo, decls, n, err, sizeof(err));
    require(rc == 0 || rc == -EINVAL || rc == NXR_EEMPTYSET || rc == NXR_EDISALLOWED ||
                rc == NXR_EBUDGET || rc == NXR_EDUPID || rc == NXR_EOVERLAP || rc == -ENOMEM,
            "validation: a documented status", input);
    if (rc == 0) {
        check_plan(&plan, decls, n, input);
        nxr__plan_cap_budgets(&plan, 1 + (unsigned)(size % 3));
        for (size_t i = 0; i < plan.count; i++)
            require(plan.domains[i].budget >= 1, "a capped budget stays >= 1", input);
        nxr__plan_fini(&plan);
    } else {
        require(plan.domains == NULL && plan.count == 0, "a failed plan holds nothing", input);
        require(rc == -ENOMEM || err[0] != '\0', "a validation error explains itself", input);
    }
    nxr__decls_free(decls, n);
    return 0;
}
