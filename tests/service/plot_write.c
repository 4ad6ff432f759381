/*
 * Writes the SVG that plot_test.sh reads back: two panels with known data
 * (a CDF of three paths, one of them empty; a line series), so the checker
 * can compare every point of every curve with the data it came from.
 * Usage: plot_write FILE.svg
 */
#include <stdio.h>

#include "service/plot.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: plot_write FILE.svg\n");
        return 2;
    }
    /* Out of order on purpose: the CDF sorts its own copy. */
    static const double nxr_ms[] = {2.0, 0.5, 1.0, 40.0, 3.0};
    static const double omp_ms[] = {7.0, 150.0, 9.5};
    static const double step[] = {0, 1, 2, 3}, tok_s[] = {120.0, 240.0, 230.0, 250.0};
    const struct svc_plot_series cdf[] = {
        {.name = "nxr <one context per domain>", .y = nxr_ms, .count = 5},
        {.name = "OpenMP & co", .y = omp_ms, .count = 3},
        {.name = "flat (not run)", .y = NULL, .count = 0},
    };
    const struct svc_plot_series lines[] = {
        {.name = "nxr", .x = step, .y = tok_s, .count = 4},
    };
    const struct svc_plot_panel panels[] = {
        {.kind = SVC_PLOT_CDF,
         .title = "latency",
         .x_label = "ms (log scale)",
         .y_label = "fraction of requests",
         .series = cdf,
         .series_count = 3},
        {.kind = SVC_PLOT_LINES,
         .title = "tokens/s per step",
         .x_label = "step",
         .y_label = "tokens/s",
         .series = lines,
         .series_count = 1},
    };
    char err[256];
    int rc = svc_plot_write_svg(argv[1], "plot_write: \"known\" data", panels, 2, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "plot_write: %s\n", err);
        return 1;
    }
    return 0;
}
