/*
 * The NXR_DOMAINS grammar: what parses, into what, and what is refused.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domains/internal/plan.h"
#include "base/nxr_status.h"

static char err[512];

static void expect_cpus(const struct nxr_domain_decl *d, const char *list)
{
    char got[128];
    hwloc_bitmap_list_snprintf(got, sizeof(got), d->cpus);
    cr_expect_str_eq(got, list);
}

Test(domains_decl_parse, two_domains_with_and_without_budget)
{
    struct nxr_domain_decl *d;
    size_t n;
    cr_assert_eq(nxr__decls_parse("0:0-3;1:4-7/2", &d, &n, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(n, 2);
    cr_expect_eq(d[0].id, 0);
    expect_cpus(&d[0], "0-3");
    cr_expect_eq(d[0].budget, NXR_BUDGET_ALL);
    cr_expect_eq(d[1].id, 1);
    expect_cpus(&d[1], "4-7");
    cr_expect_eq(d[1].budget, 2);
    nxr__decls_free(d, n);
}

Test(domains_decl_parse, lists_spaces_sparse_ids_and_trailing_separator)
{
    struct nxr_domain_decl *d;
    size_t n;
    cr_assert_eq(nxr__decls_parse(" 12 : 1,3, 5-6 ; 40:0 ;", &d, &n, err, sizeof(err)), 0, "%s",
                 err);
    cr_assert_eq(n, 2);
    cr_expect_eq(d[0].id, 12);
    expect_cpus(&d[0], "1,3,5-6");
    cr_expect_eq(d[1].id, 40);
    expect_cpus(&d[1], "0");
    nxr__decls_free(d, n);
}

Test(domains_decl_parse, malformed_strings_are_esyntax)
{
    static const char *const bad[] = {
        "",         ";",   "0",     "0:",   ":1",   "0:1-",    "0:3-1",           "0:1/", "0:1/x",
        "0:1;;1:2", "a:1", "0:1 2", "-1:0", "0:-1", "0:99999", "0:1/99999999999", "0:1,", "0:1:2",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct nxr_domain_decl *d = (void *)1;
        size_t n = 99;
        err[0] = '\0';
        int rc = nxr__decls_parse(bad[i], &d, &n, err, sizeof(err));
        cr_expect_eq(rc, NXR_ESYNTAX, "'%s' gave %d", bad[i], rc);
        cr_expect_null(d, "'%s' left output", bad[i]);
        cr_expect_eq(n, 0);
        cr_expect_neq(strstr(err, "offset"), NULL, "'%s': message '%s' has no position", bad[i],
                      err);
    }
}

Test(domains_decl_parse, shared_marks_an_overlap_by_intent)
{
    struct nxr_domain_decl *d;
    size_t n;
    cr_assert_eq(nxr__decls_parse("0:0;1:1;9:0-1/2 shared", &d, &n, err, sizeof(err)), 0, "%s",
                 err);
    cr_assert_eq(n, 3);
    cr_expect_not(d[0].shared);
    cr_expect_not(d[1].shared);
    cr_expect(d[2].shared);
    cr_expect_eq(d[2].budget, 2);
    nxr__decls_free(d, n);
    cr_expect_eq(nxr__decls_parse("0:0 sharedx", &d, &n, err, sizeof(err)), NXR_ESYNTAX);
    cr_expect_eq(nxr__decls_parse("0:0 shard", &d, &n, err, sizeof(err)), NXR_ESYNTAX);
}

/* The count of domains is bounded before anything is built for them (2000
 * shared domains once took 25 s and 4000 threads to create). */
static char *many_domains(size_t n)
{
    char *spec = malloc(n * 24 + 1);
    cr_assert_not_null(spec);
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        at += (size_t)sprintf(spec + at, "%zu:0 shared;", i);
    return spec;
}

Test(domains_decl_parse, the_domain_count_is_bounded)
{
    struct nxr_domain_decl *d;
    size_t n;
    char *spec = many_domains(NXR__DOMAINS_MAX);
    cr_assert_eq(nxr__decls_parse(spec, &d, &n, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(n, NXR__DOMAINS_MAX);
    nxr__decls_free(d, n);
    free(spec);
    spec = many_domains(NXR__DOMAINS_MAX + 1);
    cr_expect_eq(nxr__decls_parse(spec, &d, &n, err, sizeof(err)), NXR_ESYNTAX);
    cr_expect_null(d);
    cr_expect_eq(n, 0);
    char bound[64];
    snprintf(bound, sizeof(bound), "at most %d domains", NXR__DOMAINS_MAX);
    cr_expect_neq(strstr(err, bound), NULL, "%s", err);
    free(spec);
}
