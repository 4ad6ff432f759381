/*
 * nxr_runtime_metrics: the page parses as Prometheus text exposition, by a
 * small parser written here from the format's rules (not by the code that
 * wrote it): every sample's family has # HELP and # TYPE lines before it,
 * a family's samples are together, a counter's name ends in _total, names
 * and label names are [a-zA-Z_][a-zA-Z0-9_]*, label values are quoted, no
 * series (name and labels) appears twice, every value is a number. Then
 * the figures agree with nxr_runtime_stats, and the buffer rules hold.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cpus.h"
#include "tests/support/runtime.h"

static struct nxr_test_runtime fx;

static void teardown(void)
{
    nxr_test_runtime_close(&fx);
}

TestSuite(runtime_metrics, .fini = teardown, .timeout = 60);

static char *page(void)
{
    size_t len = 0;
    cr_assert_eq(nxr_runtime_metrics(fx.rt, NULL, 0, &len), -ENOSPC, "asking the length");
    char *buf = malloc(len + 1);
    cr_assert_not_null(buf);
    size_t again = 0;
    cr_assert_eq(nxr_runtime_metrics(fx.rt, buf, len + 1, &again), 0, "%s", nxr_last_error());
    cr_assert_eq(again, len);
    cr_assert_eq(strlen(buf), len);
    return buf;
}

/* ---- the parser ---------------------------------------------------------- */

#define MAX_FAMILIES 64
#define MAX_SERIES   1024

struct parsed {
    char family[MAX_FAMILIES][96];
    char type[MAX_FAMILIES][16];
    bool help[MAX_FAMILIES];
    int families;
    char series[MAX_SERIES][192]; /* name{labels} as written */
    double value[MAX_SERIES];
    int count;
};

static bool is_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return true;
}

static int family_index(struct parsed *p, const char *name)
{
    for (int i = 0; i < p->families; i++)
        if (strcmp(p->family[i], name) == 0)
            return i;
    return -1;
}

/* Parses text into p, failing the test at the first broken rule. */
static void parse(const char *text, struct parsed *p)
{
    memset(p, 0, sizeof(*p));
    int current = -1; /* the family whose samples may follow */
    int line_no = 0;
    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        cr_assert_not_null(end, "line %d has no newline", line_no + 1);
        line_no++;
        char l[512];
        size_t n = (size_t)(end - line);
        cr_assert_lt(n, sizeof(l), "line %d is too long", line_no);
        memcpy(l, line, n);
        l[n] = '\0';
        line = end + 1;
        if (strncmp(l, "# HELP ", 7) == 0 || strncmp(l, "# TYPE ", 7) == 0) {
            char name[96], rest[400];
            cr_assert_eq(sscanf(l + 7, "%95s %399[^\n]", name, rest), 2, "line %d: '%s'", line_no,
                         l);
            cr_assert(is_name(name, strlen(name)), "line %d: bad name '%s'", line_no, name);
            int f = family_index(p, name);
            if (f < 0) {
                cr_assert_lt(p->families, MAX_FAMILIES);
                f = p->families++;
                snprintf(p->family[f], sizeof(p->family[f]), "%s", name);
            } else {
                cr_assert_eq(f, current, "line %d: family %s comes back after another", line_no,
                             name);
            }
            current = f;
            if (l[2] == 'H') {
                cr_assert(!p->help[f], "line %d: a second HELP for %s", line_no, name);
                p->help[f] = true;
            } else {
                cr_assert_eq(p->type[f][0], '\0', "line %d: a second TYPE for %s", line_no, name);
                cr_assert(strcmp(rest, "counter") == 0 || strcmp(rest, "gauge") == 0,
                          "line %d: type '%s'", line_no, rest);
                snprintf(p->type[f], sizeof(p->type[f]), "%.15s", rest);
            }
            continue;
        }
        cr_assert_neq(l[0], '#', "line %d: an unknown comment '%s'", line_no, l);
        /* A sample: name, optional {labels}, a space, a value. */
        size_t k = 0;
        while (isalnum((unsigned char)l[k]) || l[k] == '_')
            k++;
        char name[96];
        cr_assert(is_name(l, k) && k < sizeof(name), "line %d: bad metric name in '%s'", line_no,
                  l);
        memcpy(name, l, k);
        name[k] = '\0';
        cr_assert_geq(current, 0, "line %d: a sample before any family", line_no);
        cr_assert_str_eq(name, p->family[current], "line %d: a sample of another family", line_no);
        cr_assert(p->help[current] && p->type[current][0] != '\0',
                  "line %d: %s has no HELP or no TYPE before its samples", line_no, name);
        if (strcmp(p->type[current], "counter") == 0)
            cr_assert(k > 6 && strcmp(name + k - 6, "_total") == 0,
                      "line %d: counter %s does not end in _total", line_no, name);
        if (l[k] == '{') {
            k++;
            for (;;) {
                size_t start = k;
                while (isalnum((unsigned char)l[k]) || l[k] == '_')
                    k++;
                cr_assert(is_name(l + start, k - start), "line %d: bad label name", line_no);
                cr_assert(l[k] == '=' && l[k + 1] == '"', "line %d: label without =\"", line_no);
                k += 2;
                while (l[k] != '"' && l[k] != '\0')
                    k++;
                cr_assert_eq(l[k], '"', "line %d: unterminated label value", line_no);
                k++;
                if (l[k] == ',') {
                    k++;
                    continue;
                }
                cr_assert_eq(l[k], '}', "line %d: labels not closed", line_no);
                k++;
                break;
            }
        }
        cr_assert_eq(l[k], ' ', "line %d: no space before the value", line_no);
        cr_assert_lt(p->count, MAX_SERIES);
        snprintf(p->series[p->count], sizeof(p->series[0]), "%.*s", (int)k, l);
        char *vend;
        p->value[p->count] = strtod(l + k + 1, &vend);
        cr_assert(vend != l + k + 1 && *vend == '\0', "line %d: value '%s'", line_no, l + k + 1);
        for (int j = 0; j < p->count; j++)
            cr_assert_str_neq(p->series[j], p->series[p->count], "line %d: series %s twice",
                              line_no, p->series[j]);
        p->count++;
    }
    for (int f = 0; f < p->families; f++)
        cr_assert(p->help[f] && p->type[f][0] != '\0', "%s lacks HELP or TYPE", p->family[f]);
}

static double sample(const struct parsed *p, const char *series)
{
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->series[i], series) == 0)
            return p->value[i];
    cr_assert_fail("no series %s", series);
    return 0;
}

/* ---- the tests ---------------------------------------------------------- */

static int task(void *arg, size_t i)
{
    (void)arg, (void)i;
    return 0;
}

Test(runtime_metrics, the_page_parses_and_agrees_with_the_stats)
{
    NXR_TEST_NEED_CPUS(2);
    NXR_TEST_RUNTIME(&fx, "0:%0;1:%1", 0);
    nxr_ctx_t *ctx;
    cr_assert_eq(nxr_ctx_create(fx.rt, 1, &ctx), 0);
    cr_assert_eq(nxr_run(ctx, NXR_MODE_OUTER, 29, task, NULL), 0);
    float x[16] = {0}, y[16];
    cr_assert_eq(nxr_scale(ctx, 16, x, 2.0f, y), 0);
    nxr_ctx_destroy(ctx);

    char *text = page();
    struct parsed *p = malloc(sizeof(*p));
    parse(text, p);
    cr_expect_geq(p->families, 20);
    struct nxr_domain_stats d[2];
    struct nxr_runtime_stats s;
    nxr_runtime_stats_init(&s, d, 2);
    cr_assert_eq(nxr_runtime_stats(fx.rt, &s), 0);
    for (int i = 0; i < 2; i++) {
        char series[192], node[16];
        if (d[i].node == NXR_NODE_NONE)
            snprintf(node, sizeof(node), "none");
        else
            snprintf(node, sizeof(node), "%d", d[i].node);
        snprintf(series, sizeof(series), "nxr_domain_tasks_total{domain=\"%d\",node=\"%s\"}",
                 d[i].id, node);
        cr_expect_eq(sample(p, series), (double)d[i].tasks, "%s", series);
        snprintf(series, sizeof(series), "nxr_domain_budget{domain=\"%d\",node=\"%s\"}", d[i].id,
                 node);
        cr_expect_eq(sample(p, series), (double)d[i].budget, "%s", series);
        snprintf(series, sizeof(series),
                 "nxr_domain_kernel_calls_total{domain=\"%d\",node=\"%s\",family=\"elementwise\"}",
                 d[i].id, node);
        cr_expect_eq(sample(p, series), (double)d[i].kernel_calls[NXR_FAMILY_ELEMENTWISE], "%s",
                     series);
        snprintf(series, sizeof(series), "nxr_domain_busy_seconds_total{domain=\"%d\",node=\"%s\"}",
                 d[i].id, node);
        cr_expect_geq(sample(p, series), 0.0);
    }
    cr_expect_eq(d[1].tasks, 29, "the run was on domain 1");
    cr_expect_eq(sample(p, "nxr_cpu_quota_cpus"), (double)s.cpu_quota);
    free(p);
    free(text);
}

Test(runtime_metrics, a_short_buffer_gets_the_length_and_is_left_alone)
{
    NXR_TEST_RUNTIME(&fx, "0:%0", NXR_TEST_PARK);
    size_t len = 0;
    cr_assert_eq(nxr_runtime_metrics(fx.rt, NULL, 0, &len), -ENOSPC);
    cr_assert_gt(len, 0);
    char small[16];
    memset(small, 'x', sizeof(small));
    size_t got = 0;
    cr_expect_eq(nxr_runtime_metrics(fx.rt, small, sizeof(small), &got), -ENOSPC);
    cr_expect_eq(got, len);
    for (size_t i = 0; i < sizeof(small); i++)
        cr_expect_eq(small[i], 'x', "byte %zu written", i);
    cr_expect_neq(strstr(nxr_last_error(), "nxr_runtime_metrics"), NULL, "%s", nxr_last_error());
    cr_expect_eq(nxr_runtime_metrics(NULL, small, sizeof(small), &got), -EINVAL);
    cr_expect_eq(nxr_runtime_metrics(fx.rt, small, sizeof(small), NULL), -EINVAL);
    cr_expect_eq(nxr_runtime_metrics(fx.rt, NULL, 5, &got), -EINVAL);
}

Test(runtime_metrics, describe_has_the_page_as_its_third_format)
{
    NXR_TEST_RUNTIME(&fx, "0:%0", NXR_TEST_PARK);
    char *text = NULL;
    cr_assert_eq(nxr_runtime_describe(fx.rt, NXR_DESCRIBE_PROMETHEUS, &text), 0, "%s",
                 nxr_last_error());
    struct parsed *p = malloc(sizeof(*p));
    parse(text, p);
    nxr_domain_t *d = nxr_runtime_domain_at(fx.rt, 0);
    char series[128], node[16] = "none";
    if (nxr_domain_node(d) != NXR_NODE_NONE)
        snprintf(node, sizeof(node), "%d", nxr_domain_node(d));
    snprintf(series, sizeof(series), "nxr_domain_workers{domain=\"0\",node=\"%s\"}", node);
    cr_expect_eq(sample(p, series), (double)nxr_domain_workers(d), "%s", series);
    free(p);
    free(text);
}
