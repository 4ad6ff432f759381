/*
 * The SVG writer's refusals (service/plot.h): each names the problem and
 * writes nothing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "service/plot.h"

static char path[512];

static void setup(void)
{
    const char *dir = getenv("TEST_TMPDIR");
    snprintf(path, sizeof path, "%s/refused.svg", dir != NULL ? dir : "/tmp");
    unlink(path);
}

TestSuite(service_plot, .init = setup);

static const double ok_ms[] = {1.0, 2.0};

static void refused(const struct svc_plot_panel *p, size_t n, int want_rc, const char *want_text)
{
    char err[256];
    int rc = svc_plot_write_svg(path, "t", p, n, err, sizeof err);
    cr_assert_eq(rc, want_rc, "rc %d (%s)", rc, err);
    cr_assert_not_null(strstr(err, want_text), "'%s' does not say '%s'", err, want_text);
    cr_assert_neq(access(path, F_OK), 0, "a refused plot left %s behind", path);
}

Test(service_plot, a_non_positive_cdf_sample_is_refused_by_name)
{
    const double ms[] = {1.0, 0.0};
    const struct svc_plot_series s = {.name = "nxr", .y = ms, .count = 2};
    const struct svc_plot_panel p = {.kind = SVC_PLOT_CDF, .series = &s, .series_count = 1};
    refused(&p, 1, -EINVAL, "series 'nxr': sample 1 is 0");
}

Test(service_plot, an_unknown_kind_and_a_panel_without_series_are_refused)
{
    const struct svc_plot_series s = {.name = "nxr", .y = ok_ms, .count = 2};
    const struct svc_plot_panel bad_kind = {.kind = 7, .series = &s, .series_count = 1};
    refused(&bad_kind, 1, -EINVAL, "kind 7");
    const struct svc_plot_panel empty = {.kind = SVC_PLOT_CDF, .title = "lat", .series_count = 0};
    refused(&empty, 1, -EINVAL, "panel 0 ('lat') has no series");
}

Test(service_plot, lines_without_x_are_refused)
{
    const struct svc_plot_series s = {.name = "tok", .y = ok_ms, .count = 2};
    const struct svc_plot_panel p = {.kind = SVC_PLOT_LINES, .series = &s, .series_count = 1};
    refused(&p, 1, -EINVAL, "series 'tok' has 2 points and no data");
}

Test(service_plot, an_unwritable_file_is_named)
{
    const struct svc_plot_series s = {.name = "nxr", .y = ok_ms, .count = 2};
    const struct svc_plot_panel p = {.kind = SVC_PLOT_CDF, .series = &s, .series_count = 1};
    char err[256];
    int rc = svc_plot_write_svg("/nonexistent-dir/x.svg", "t", &p, 1, err, sizeof err);
    cr_assert_eq(rc, -ENOENT, "rc %d (%s)", rc, err);
    cr_assert_not_null(strstr(err, "/nonexistent-dir/x.svg"), "%s", err);
}
