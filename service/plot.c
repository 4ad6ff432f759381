/*
 * The SVG writer of service/plot.h. Plain text out: no rendering library.
 * Each panel is a <g class="panel"> carrying its plot area and axis range
 * as data-* attributes, so the coordinates of its curves can be read back
 * into data units (the test does that); curves are paths in data order.
 */
#include "service/plot.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH      900.0
#define PANEL_H    380.0
#define LEFT       80.0
#define RIGHT      230.0 /* room for the legend */
#define TOP        50.0
#define BOTTOM     60.0
#define TITLE_H    40.0
#define MAX_PANELS 16

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static int fail(char *err, size_t errsz, int rc, const char *fmt, ...)
{
    if (err != NULL && errsz > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errsz, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Text content and attribute values: the five XML specials escaped. */
static void put_escaped(FILE *f, const char *s)
{
    for (; s != NULL && *s != '\0'; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The axis range of a panel in data units (log10 of ms for a CDF's x). */
struct range {
    double x0, x1, y0, y1;
};

static int panel_range(const struct svc_plot_panel *p, struct range *r, char *err, size_t errsz)
{
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (size_t s = 0; s < p->series_count; s++) {
        const struct svc_plot_series *se = &p->series[s];
        if (se->count > 0 && (se->y == NULL || (p->kind == SVC_PLOT_LINES && se->x == NULL)))
            return fail(err, errsz, -EINVAL, "series '%s' has %zu points and no data",
                        se->name != NULL ? se->name : "?", se->count);
        for (size_t i = 0; i < se->count; i++) {
            const double y = se->y[i];
            if (p->kind == SVC_PLOT_CDF) {
                if (!(y > 0) || !isfinite(y))
                    return fail(err, errsz, -EINVAL,
                                "series '%s': sample %zu is %g; a log-scale CDF needs positive "
                                "finite samples",
                                se->name != NULL ? se->name : "?", i, y);
                xmin = fmin(xmin, y);
                xmax = fmax(xmax, y);
            } else {
                const double x = se->x[i];
                if (!isfinite(x) || !isfinite(y))
                    return fail(err, errsz, -EINVAL, "series '%s': point %zu is not finite",
                                se->name != NULL ? se->name : "?", i);
                xmin = fmin(xmin, x);
                xmax = fmax(xmax, x);
                ymin = fmin(ymin, y);
                ymax = fmax(ymax, y);
            }
        }
    }
    if (p->kind == SVC_PLOT_CDF) {
        /* Whole decades around the samples. */
        r->x0 = isfinite(xmin) ? floor(log10(xmin)) : 0;
        r->x1 = isfinite(xmax) ? ceil(log10(xmax)) : 1;
        if (r->x1 <= r->x0)
            r->x1 = r->x0 + 1;
        r->y0 = 0;
        r->y1 = 1;
    } else {
        r->x0 = isfinite(xmin) ? xmin : 0;
        r->x1 = isfinite(xmax) ? xmax : 1;
        if (r->x1 <= r->x0)
            r->x1 = r->x0 + 1;
        r->y0 = isfinite(ymin) && ymin < 0 ? ymin : 0;
        r->y1 = isfinite(ymax) && ymax > r->y0 ? ymax * 1.05 : r->y0 + 1;
    }
    return 0;
}

struct area {
    double left, top, width, height;
};

static double px_x(const struct area *a, const struct range *r, double v)
{
    return a->left + (v - r->x0) / (r->x1 - r->x0) * a->width;
}

static double px_y(const struct area *a, const struct range *r, double v)
{
    return a->top + a->height - (v - r->y0) / (r->y1 - r->y0) * a->height;
}

static void axes(FILE *f, const struct svc_plot_panel *p, const struct area *a,
                 const struct range *r)
{
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#444\"/>\n",
            a->left, a->top, a->width, a->height);
    /* x ticks: each decade (CDF) or five even steps. */
    const int xticks = p->kind == SVC_PLOT_CDF ? (int)(r->x1 - r->x0) : 5;
    for (int i = 0; i <= xticks; i++) {
        const double v = r->x0 + (r->x1 - r->x0) * i / xticks;
        const double x = px_x(a, r, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x,
                a->top, x, a->top + a->height);
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%g</text>\n",
                x, a->top + a->height + 16, p->kind == SVC_PLOT_CDF ? pow(10, v) : v);
    }
    for (int i = 0; i <= 4; i++) {
        const double v = r->y0 + (r->y1 - r->y0) * i / 4;
        const double y = px_y(a, r, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                a->left, y, a->left + a->width, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">%.3g</text>\n",
                a->left - 6, y + 4, v);
    }
    fputs("<text font-size=\"13\" text-anchor=\"middle\" ", f);
    fprintf(f, "x=\"%.1f\" y=\"%.1f\">", a->left + a->width / 2, a->top + a->height + 40);
    put_escaped(f, p->x_label);
    fputs("</text>\n", f);
    fprintf(f,
            "<text font-size=\"13\" text-anchor=\"middle\" transform=\"translate(%.1f %.1f) "
            "rotate(-90)\">",
            a->left - 55, a->top + a->height / 2);
    put_escaped(f, p->y_label);
    fputs("</text>\n", f);
    fprintf(f, "<text font-size=\"15\" font-weight=\"bold\" x=\"%.1f\" y=\"%.1f\">", a->left,
            a->top - 12);
    put_escaped(f, p->title);
    fputs("</text>\n", f);
}

static int curve(FILE *f, const struct svc_plot_panel *p, size_t s, const struct area *a,
                 const struct range *r)
{
    const struct svc_plot_series *se = &p->series[s];
    const char *color = palette[s % (sizeof palette / sizeof palette[0])];
    /* Legend first: a series with no samples still says it was there. */
    const double ly = a->top + 18.0 * (double)s + 10;
    fprintf(f,
            "<line class=\"legend\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke=\"%s\" stroke-width=\"3\"/>\n",
            a->left + a->width + 12, ly, a->left + a->width + 36, ly, color);
    fprintf(f, "<text font-size=\"12\" x=\"%.1f\" y=\"%.1f\">", a->left + a->width + 42, ly + 4);
    put_escaped(f, se->name);
    fprintf(f, " (%zu)</text>\n", se->count);
    if (se->count == 0)
        return 0;
    double *sorted = NULL;
    if (p->kind == SVC_PLOT_CDF) {
        sorted = malloc(se->count * sizeof *sorted);
        if (sorted == NULL)
            return -ENOMEM;
        memcpy(sorted, se->y, se->count * sizeof *sorted);
        qsort(sorted, se->count, sizeof *sorted, cmp_double);
    }
    fputs("<path class=\"curve\" data-series=\"", f);
    put_escaped(f, se->name);
    fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" d=\"", color);
    for (size_t i = 0; i < se->count; i++) {
        double x, y;
        if (sorted != NULL) {
            x = px_x(a, r, log10(sorted[i]));
            y = px_y(a, r, (double)(i + 1) / (double)se->count);
        } else {
            x = px_x(a, r, se->x[i]);
            y = px_y(a, r, se->y[i]);
        }
        fprintf(f, "%s%.2f %.2f", i == 0 ? "M" : " L", x, y);
    }
    fputs("\"/>\n", f);
    free(sorted);
    return 0;
}

int svc_plot_write_svg(const char *path, const char *title, const struct svc_plot_panel *panels,
                       size_t panel_count, char *err, size_t errsz)
{
    if (err != NULL && errsz > 0)
        err[0] = '\0';
    if (path == NULL || panels == NULL || panel_count == 0)
        return fail(err, errsz, -EINVAL, "%s", path == NULL ? "no file named" : "no panel to draw");
    if (panel_count > MAX_PANELS)
        return fail(err, errsz, -EINVAL, "%zu panels (at most %d)", panel_count, MAX_PANELS);
    struct range ranges[MAX_PANELS];
    for (size_t i = 0; i < panel_count; i++) {
        const struct svc_plot_panel *p = &panels[i];
        if (p->kind != SVC_PLOT_CDF && p->kind != SVC_PLOT_LINES)
            return fail(err, errsz, -EINVAL, "panel %zu: kind %d is not a svc_plot_kind", i,
                        (int)p->kind);
        if (p->series == NULL || p->series_count == 0)
            return fail(err, errsz, -EINVAL, "panel %zu ('%s') has no series", i,
                        p->title != NULL ? p->title : "");
        int rc = panel_range(p, &ranges[i], err, errsz);
        if (rc != 0)
            return rc;
    }
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        int e = errno;
        return fail(err, errsz, -e, "%s: %s", path, strerror(e));
    }
    const double height = TITLE_H + PANEL_H * (double)panel_count;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            WIDTH, height, WIDTH, height);
    fputs("<text font-size=\"17\" font-weight=\"bold\" x=\"20\" y=\"26\">", f);
    put_escaped(f, title);
    fputs("</text>\n", f);
    int rc = 0;
    for (size_t i = 0; i < panel_count && rc == 0; i++) {
        const struct svc_plot_panel *p = &panels[i];
        const struct range *r = &ranges[i];
        const struct area a = {.left = LEFT,
                               .top = TITLE_H + PANEL_H * (double)i + TOP,
                               .width = WIDTH - LEFT - RIGHT,
                               .height = PANEL_H - TOP - BOTTOM};
        fprintf(f,
                "<g class=\"panel\" data-kind=\"%s\" data-left=\"%.1f\" data-top=\"%.1f\" "
                "data-width=\"%.1f\" data-height=\"%.1f\" data-x0=\"%.17g\" data-x1=\"%.17g\" "
                "data-y0=\"%.17g\" data-y1=\"%.17g\">\n",
                p->kind == SVC_PLOT_CDF ? "cdf-log10-x" : "lines", a.left, a.top, a.width, a.height,
                r->x0, r->x1, r->y0, r->y1);
        axes(f, p, &a, r);
        for (size_t s = 0; s < p->series_count && rc == 0; s++)
            rc = curve(f, p, s, &a, r);
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
    if (ferror(f) && rc == 0)
        rc = -EIO;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc != 0) {
        remove(path);
        return fail(err, errsz, rc, "%s: %s", path, strerror(-rc));
    }
    return 0;
}
