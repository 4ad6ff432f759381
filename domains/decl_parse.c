/*
 * The NXR_DOMAINS parser and the CPU-list parser it is built on (grammars in
 * nxr_domains.h; nxr_cpuset_parse is the CPU list alone). Hand-written and
 * strict: every rejected string gets NXR_ESYNTAX with the byte offset, and
 * numbers are range-checked before they size anything.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domains/internal/cpuset.h"
#include "domains/internal/plan.h"
#include "base/internal/last_error.h"
#include "base/internal/number.h"
#include "base/internal/sys.h"
#include "base/nxr_status.h"

struct cursor {
    const char *what; /* names the string in messages */
    const char *start;
    const char *p;
    char *err;
    size_t errsz;
};

static void skip_space(struct cursor *c)
{
    while (*c->p == ' ' || *c->p == '\t')
        c->p++;
}

static int syntax(struct cursor *c, const char *what)
{
    if (c->err != NULL && c->errsz > 0)
        snprintf(c->err, c->errsz, "%s '%s': %s at offset %td", c->what, c->start, what,
                 c->p - c->start);
    return NXR_ESYNTAX;
}

/* A decimal number in [0, max] (base/internal/number.h), blanks around. */
static int number(struct cursor *c, long max, long *out, const char *what)
{
    skip_space(c);
    unsigned long long v;
    long n = nxr__parse_digits(c->p, 10, (unsigned long long)max, &v);
    if (n == 0)
        return syntax(c, what);
    if (n < 0)
        return syntax(c, "number out of range");
    c->p += n;
    skip_space(c);
    *out = (long)v;
    return 0;
}

static int cpulist(struct cursor *c, hwloc_bitmap_t cpus)
{
    for (;;) {
        long first, last;
        int rc = number(c, NXR_CPU_ID_MAX, &first, "expected a CPU id");
        if (rc != 0)
            return rc;
        last = first;
        if (*c->p == '-') {
            c->p++;
            rc = number(c, NXR_CPU_ID_MAX, &last, "expected the last CPU of a range");
            if (rc != 0)
                return rc;
            if (last < first)
                return syntax(c, "range ends before it starts");
        }
        if (nxr__fault_hit(NXR_FAULT_ALLOC) ||
            hwloc_bitmap_set_range(cpus, (unsigned)first, (int)last) != 0)
            return -ENOMEM;
        if (*c->p != ',')
            return 0;
        c->p++;
    }
}

static int one_domain(struct cursor *c, struct nxr_domain_decl *d)
{
    long id, budget;
    int rc = number(c, INT_MAX, &id, "expected a domain id");
    if (rc != 0)
        return rc;
    if (*c->p != ':')
        return syntax(c, "expected ':' after the domain id");
    c->p++;
    hwloc_bitmap_t cpus = nxr__cpuset_alloc();
    if (cpus == NULL)
        return -ENOMEM;
    d->id = (int)id;
    d->cpus = cpus;
    d->budget = NXR_BUDGET_ALL;
    d->shared = false;
    rc = cpulist(c, cpus);
    if (rc != 0)
        return rc;
    if (*c->p == '/') {
        c->p++;
        rc = number(c, INT_MAX, &budget, "expected a budget");
        if (rc != 0)
            return rc;
        /* In the text, "all" is the budget left out; a written 0 is a
         * mistake (0 in a struct nxr_domain_decl means NXR_BUDGET_ALL). */
        if (budget == 0) {
            if (c->err != NULL && c->errsz > 0)
                snprintf(c->err, c->errsz,
                         "%s '%s': domain %ld: budget 0 (leave the budget out "
                         "for all its CPUs)",
                         c->what, c->start, id);
            return NXR_EBUDGET;
        }
        d->budget = (int)budget;
    }
    skip_space(c);
    if (strncmp(c->p, "shared", 6) == 0) {
        c->p += 6;
        d->shared = true;
        skip_space(c);
    }
    return 0;
}

void nxr__decls_free(struct nxr_domain_decl *decls, size_t count)
{
    if (decls == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        hwloc_bitmap_free((hwloc_bitmap_t)decls[i].cpus);
    free(decls);
}

int nxr__decls_parse(const char *spec, struct nxr_domain_decl **out, size_t *count, char *err,
                     size_t errsz)
{
    struct cursor c = {.what = "NXR_DOMAINS", .start = spec, .p = spec, .err = err, .errsz = errsz};
    *out = NULL;
    *count = 0;
    /* At most one domain per ';' plus one: the array never grows. */
    size_t cap = 1;
    for (const char *p = spec; *p != '\0'; p++)
        cap += *p == ';';
    if (cap > NXR__DOMAINS_MAX)
        cap = NXR__DOMAINS_MAX; /* one more domain is refused below */
    struct nxr_domain_decl *decls = nxr__calloc(cap, sizeof(*decls));
    if (decls == NULL)
        return -ENOMEM;
    size_t n = 0;
    int rc = 0;
    skip_space(&c);
    if (*c.p == '\0') {
        rc = syntax(&c, "no domain");
        goto out_free;
    }
    while (*c.p != '\0') {
        if (n == NXR__DOMAINS_MAX) {
            snprintf(err, errsz, "NXR_DOMAINS: more than %d domains; nxr takes at most %d domains",
                     NXR__DOMAINS_MAX, NXR__DOMAINS_MAX);
            rc = NXR_ESYNTAX;
            goto out_free;
        }
        rc = one_domain(&c, &decls[n]);
        if (decls[n].cpus != NULL)
            n++; /* owned from here on, freed on error too */
        if (rc != 0)
            goto out_free;
        if (*c.p == ';') {
            c.p++;
            skip_space(&c);
        } else if (*c.p != '\0') {
            rc = syntax(&c, "expected ';' or the end");
            goto out_free;
        }
    }
    *out = decls;
    *count = n;
    return 0;

out_free:
    nxr__decls_free(decls, n);
    return rc;
}

int nxr__cpuset_parse_into(const char *list, hwloc_bitmap_t cpus, const char *what, char *err,
                           size_t errsz)
{
    struct cursor c = {.what = what, .start = list, .p = list, .err = err, .errsz = errsz};
    hwloc_bitmap_zero(cpus);
    int rc = 0;
    skip_space(&c);
    /* "" (or only blanks) is the empty set, as the kernel writes it. */
    if (*c.p != '\0' && !(c.p[0] == '\n' && c.p[1] == '\0'))
        rc = cpulist(&c, cpus);
    if (rc == 0 && *c.p == '\n')
        c.p++; /* one trailing newline, as read from /sys or a cgroup file */
    if (rc == 0 && *c.p != '\0')
        rc = syntax(&c, "expected ',' or the end");
    return rc;
}

int nxr_cpuset_parse(const char *list, hwloc_bitmap_t *out)
{
    nxr__call_begin();
    if (out != NULL)
        *out = NULL;
    if (list == NULL || out == NULL)
        return nxr__fail(-EINVAL, __func__, "%s is NULL", list == NULL ? "list" : "out");
    hwloc_bitmap_t cpus = nxr__cpuset_alloc();
    if (cpus == NULL)
        return nxr__fail(-ENOMEM, __func__, "out of memory");
    char why[NXR__LAST_ERROR_BYTES] = "";
    int rc = nxr__cpuset_parse_into(list, cpus, "CPU list", why, sizeof(why));
    if (rc != 0) {
        hwloc_bitmap_free(cpus);
        return nxr__fail(rc, __func__, "%s", why);
    }
    *out = cpus;
    return 0;
}
