/*
 * html_compare: REPORT.html and the Pareto chart of `sweep compare --out`
 * (the contract is in html_compare.h).
 */
#include "analysis/html_compare.h"

#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "sweep.h"
#include "xalloc.h"

#include "analysis/html.h"
#include "analysis/pareto.h"

#define HTML_MAX ((size_t)64 << 20) /* bytes */

void html_compare_pareto_chart(const struct cmp_set *c, struct plot_chart *ch)
{
    plot_chart_init(ch, "pareto", "pareto", "Pareto frontier, per-user vs total tok/s",
                    "per-user output tok/s (1000 / median TPOT)", PLOT_FIT_NONE);
    free(ch->xlabel);
    ch->xlabel = xstrdup("total output throughput (tok/s)");
    for (size_t i = 0; i < c->n_s; i++) {
        struct pareto_pt *p;
        ptrdiff_t knee;
        size_t n = pareto_points(&c->runs[c->s[i].run].t, c->s[i].variant, &p, &knee);
        pareto_series(ch, plot_chart_series(ch, c->s[i].label), p, n, knee);
        free(p);
    }
}

void html_compare_pareto_md(struct buf *b, const struct cmp_set *c)
{
    pareto_md_head(b);
    for (size_t i = 0; i < c->n_s; i++)
        pareto_md_row(b, c->s[i].label, &c->runs[c->s[i].run].t, c->s[i].variant);
    buf_putc(b, '\n');
}

struct charts_ctx {
    const struct plot_chart *charts;
    size_t n;
    const struct strvec *drawn;
};

/* The charts with points, inline, and links to gnuplot's images. */
static void charts_html(struct buf *b, const void *ctx)
{
    const struct charts_ctx *x = ctx;
    const struct plot_chart *charts = x->charts;
    size_t n = x->n;
    const struct strvec *drawn = x->drawn;
    buf_puts(b, "<h2 id=\"sec-charts\">Charts</h2>\n<p class=\"note\">Hover a point for its "
                "values; click a legend entry to hide that series in every chart. On the Pareto "
                "chart grey points are dominated levels and a ring marks each series' "
                "knee.</p>\n<div class=\"charts\">\n");
    for (size_t i = 0; i < n; i++)
        if (plot_chart_points(&charts[i]))
            html_chart(b, &charts[i]);
    buf_puts(b, "</div>\n<p class=\"note\">gnuplot's drawings of the same data: ");
    for (size_t i = 0; i < drawn->n; i++) {
        buf_printf(b, "%s<a href=\"plots/", i ? " · " : "");
        html_escape(b, drawn->v[i], strlen(drawn->v[i]));
        buf_puts(b, ".png\">");
        html_escape(b, drawn->v[i], strlen(drawn->v[i]));
        buf_puts(b, "</a>");
    }
    buf_puts(b, drawn->n ? ".</p>\n" : "none.</p>\n");
}

int html_compare_write(const struct cmp_set *c, const struct plot_chart *charts, size_t n,
                       const struct strvec *drawn, const char *md, const char *out_dir,
                       struct err *err)
{
    struct buf b;
    buf_init(&b, HTML_MAX);
    struct buf title;
    buf_init(&title, 1 << 16);
    buf_printf(&title, "Comparison: %s", c->s[0].label);
    for (size_t i = 1; i < c->n_s; i++)
        buf_printf(&title, " vs %s", c->s[i].label);
    html_begin(&b, title.data ? title.data : "Comparison");
    buf_release(&title);
    struct charts_ctx ctx = {charts, n, drawn};
    html_md_page(&b, md, charts_html, &ctx);
    html_end(&b);
    char *path = path_join(out_dir, "REPORT.html");
    int rc = b.toobig ? (err_set(err, RN_ERR_ENV, "%s: report over %zu bytes", path, b.max), -1)
                      : file_write_atomic(path, b.data, b.len, err, RN_ERR_ENV);
    free(path);
    buf_release(&b);
    return rc;
}
