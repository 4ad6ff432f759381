/*
 * A picture of a run, as one self-contained SVG file the demo writes itself
 * (`nxr demo --plot FILE.svg`; no plotting dependency): panels stacked one
 * above the other, each with its axes, ticks, a legend and one curve per
 * series.
 *   - SVC_PLOT_CDF: the latency distribution of each path, a cumulative
 *     distribution over a log-scale x axis (ms): for each series the
 *     fraction of its samples at or below x.
 *   - SVC_PLOT_LINES: y against x (tokens/s per step over time, say),
 *     linear axes.
 * Every curve is one <path class="curve" data-series="NAME"> whose points
 * are the samples (CDF: the sorted samples, one point each), so a reader
 * (or a test) can find the curves and their points without rendering.
 */
#ifndef NXR_SERVICE_PLOT_H
#define NXR_SERVICE_PLOT_H

#include <stddef.h>

struct svc_plot_series {
    const char *name;
    const double *x; /* SVC_PLOT_LINES: the x of each point; unused for a CDF */
    const double *y; /* the samples (CDF, ms, any order, > 0) or each point's y */
    size_t count;
};

enum svc_plot_kind {
    SVC_PLOT_CDF = 1,
    SVC_PLOT_LINES,
};

struct svc_plot_panel {
    enum svc_plot_kind kind;
    const char *title;
    const char *x_label, *y_label;
    const struct svc_plot_series *series;
    size_t series_count;
};

/* Writes the panels to path (replacing it). 0, or -errno with why in err:
 * -EINVAL (no panel, a panel with no series, an unknown kind, a CDF sample
 * that is not a positive finite number, NULL where data is needed), or the
 * file's error. Series with no samples are drawn as a legend entry only. */
int svc_plot_write_svg(const char *path, const char *title, const struct svc_plot_panel *panels,
                       size_t panel_count, char *err, size_t errsz);

#endif /* NXR_SERVICE_PLOT_H */
