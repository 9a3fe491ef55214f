/*
 * html_compare: the comparison's REPORT.html (`sweep compare --out`) and
 * its Pareto chart and section: compare.md's prose and tables as HTML with
 * the charts drawn inline (analysis/html.h), the same page as a run's.
 */
#ifndef RUNNER_HTML_COMPARE_H
#define RUNNER_HTML_COMPARE_H

#include <stddef.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

#include "analysis/compare.h"
#include "analysis/plot.h"

/* The Pareto chart of every series of c (analysis/pareto.h): "pareto",
 * one frontier per series, dominated levels grey, knees ringed. */
void html_compare_pareto_chart(const struct cmp_set *c, struct plot_chart *ch);

/* compare.md's "## Pareto frontier" section: a row per series. */
void html_compare_pareto_md(struct buf *b, const struct cmp_set *c);

/*
 * Write out_dir/REPORT.html (atomically) from compare.md's text md: its
 * sections, the "Charts" one replaced by charts[0..n) inline (those with
 * points), with links to gnuplot's images of those in drawn. Returns 0, or
 * -1 with err (RN_ERR_ENV).
 */
int html_compare_write(const struct cmp_set *c, const struct plot_chart *charts, size_t n,
                       const struct strvec *drawn, const char *md, const char *out_dir,
                       struct err *err);

#endif
