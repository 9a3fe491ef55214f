/*
 * html: the pieces of a self-contained HTML report (REPORT.html of a run
 * folder, report_html.c; of a comparison, html_compare.c). One file that
 * loads nothing: the style and a few lines of script are inline, a Content
 * Security Policy forbids every fetch, and the charts are inline SVG drawn
 * here from the same struct plot_chart that gnuplot's .dat files come from.
 *
 * The prose is the Markdown report's: html_md turns the subset of Markdown
 * that report_md.c and compare.c write (headings, paragraphs, lists, pipe
 * tables, `code`, **bold**, links) into HTML, so REPORT.html and REPORT.md
 * cannot say different things. Everything reads without JavaScript; the
 * script only sorts tables (click a header) and hides a series in every
 * chart (click its legend entry).
 */
#ifndef RUNNER_HTML_H
#define RUNNER_HTML_H

#include <stddef.h>

#include "buf.h"

#include "analysis/plot.h"

/* s[0..n) with &, <, >, " and ' escaped (for text and attribute values). */
void html_escape(struct buf *b, const char *s, size_t n);

/* The document up to <main>: doctype, the policy, the style, <title>. */
void html_begin(struct buf *b, const char *title);
/* The script and the end of the document. */
void html_end(struct buf *b);

/*
 * md[0..n) as HTML: "#"/"##" headings (a "##" gets id "sec-" + its words
 * in lower case joined by '-'), paragraphs, "- " lists (two spaces: one
 * level deeper), pipe tables (the first row is the header, "---:" right-
 * aligns; tables are sortable), "---" rules, and inline `code`, **bold**,
 * [text](href) and ![alt](src) (a link: nothing is loaded). An href with a
 * scheme ("javascript:", "https:") is shown as text, never linked.
 */
void html_md(struct buf *b, const char *md, size_t n);

/*
 * The whole page body from md: its text up to the first "## " heading
 * (title, description), a line of links to every "## " section, then the
 * sections, with the "## Charts" one replaced by what charts writes (given
 * ctx); without such a section charts runs at the end.
 */
void html_md_page(struct buf *b, const char *md, void (*charts)(struct buf *b, const void *ctx),
                  const void *ctx);

/*
 * The span of md's "## NAME" section: from its heading to the next "## "
 * heading or the "---" footer (or the end). Returns 0 with *start and *end
 * set, or -1 when there is no such heading.
 */
int html_md_section(const char *md, const char *name, size_t *start, size_t *end);

/*
 * Chart c as a <figure id="chart-NAME"> holding an inline SVG and its
 * legend. Every point is a mark with a <title> tooltip (series, note, x and
 * y, the spread over repeats); series with the same legend title share a
 * data-v attribute, so a click on a legend entry hides that series in
 * every chart of the page. The x axis is log2 when the chart's x label
 * says "log2 scale" (as gnuplot draws it), linear from 0 otherwise.
 */
void html_chart(struct buf *b, const struct plot_chart *c);

#endif
