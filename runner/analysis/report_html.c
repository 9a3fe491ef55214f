/*
 * report_html: REPORT.html, the run's report as one self-contained page.
 * Its prose and tables are REPORT.md's (turned to HTML by html_md, so the
 * two cannot disagree); the "Charts" section is replaced by every chart
 * drawn inline from its data (html_chart), gnuplot or not, with the
 * gnuplot files linked beside them.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "xalloc.h"

#include "analysis/html.h"
#include "analysis/report_int.h"

/* The inline charts, in REPORT.md's chart order, and what they mean. */
static void html_charts(struct buf *b, const void *ctx)
{
    const struct report *r = ctx;
    buf_puts(b, "<h2 id=\"sec-charts\">Charts</h2>\n<p class=\"note\">");
    if (r->group_by) {
        buf_puts(b, "The variants are grouped by <code>");
        html_escape(b, r->group_by, strlen(r->group_by));
        buf_puts(b, "</code>: one colour per value of it, one marker per combination of the "
                    "other axes. ");
    }
    buf_puts(b, "Hover a point for its values; click a legend entry to hide that series in "
                "every chart. Dashed lines are the fits, dotted lines the decode-only "
                "ceilings; on the Pareto chart grey points are dominated levels and a ring "
                "marks each series' knee.</p>\n");
    if (!r->n_charts) {
        buf_puts(b, "<p>No chart: no point has a value to draw.</p>\n");
        return;
    }
    buf_puts(b, "<div class=\"charts\">\n");
    for (size_t i = 0; i < r->n_charts; i++)
        html_chart(b, &r->charts[i]);
    buf_puts(b, "</div>\n<p class=\"note\">gnuplot's drawings of the same data: ");
    size_t n = 0;
    for (size_t i = 0; i < r->n_charts; i++) {
        const char *name = r->charts[i].name;
        if (strvec_find(&r->drawn, name) < 0)
            continue;
        buf_printf(b, "%s<a href=\"plots/", n++ ? " · " : "");
        html_escape(b, name, strlen(name));
        buf_puts(b, ".png\">");
        html_escape(b, name, strlen(name));
        buf_puts(b, "</a>");
    }
    if (!n)
        buf_puts(b, "none");
    if (r->chart_error) {
        buf_puts(b, " (missing: ");
        html_escape(b, r->chart_error, strlen(r->chart_error));
        buf_putc(b, ')');
    }
    buf_puts(b, ".</p>\n");
}

int report_write_html(const struct report *r, const char *md, struct err *err)
{
    struct buf b;
    buf_init(&b, REPORT_MAX);
    char *title = xasprintf("%s: sweep report", r->rd.name);
    html_begin(&b, title);
    free(title);
    html_md_page(&b, md, html_charts, r);
    html_end(&b);
    char *path = path_join(r->dir, "REPORT.html");
    int rc = b.toobig ? (err_set(err, RN_ERR_ENV, "%s: report over %zu bytes", path, b.max), -1)
                      : file_write_atomic(path, b.data, b.len, err, RN_ERR_ENV);
    free(path);
    buf_release(&b);
    return rc;
}
