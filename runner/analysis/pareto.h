/*
 * pareto: the trade between what one user sees and what the server
 * delivers. Each load level of a variant is a point (total output tok/s,
 * per-user output tok/s = 1000 / median TPOT); a point is on the frontier
 * when no other point of the same variant is at least as good on both axes
 * and better on one. The knee is the frontier point that buys the most of
 * both at once (pareto_mark). Drawn by the Pareto chart (report_charts.c,
 * gnuplot) and the HTML reports (report_html.c, html_compare.c).
 */
#ifndef RUNNER_PARETO_H
#define RUNNER_PARETO_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#include "analysis/plot.h"

#include "store/results.h"

struct pareto_pt {
    double total; /* output tok/s of the server (mean over ok repeats) */
    double user;  /* output tok/s one user sees: 1000 / mean of median TPOT (ms) */
    long conc;    /* the load level: concurrency */
    bool front;   /* on the frontier (set by pareto_mark) */
};

/*
 * Mark the frontier of p[0..n) and return the knee's index, or -1 when the
 * frontier has fewer than three points or none bulges out.
 *
 * The knee: the frontier, ordered by total throughput, runs from its most
 * interactive end (least total, most per-user) to its busiest end. With
 * both axes scaled to [0, 1] over the frontier's own range, the two ends
 * sit at (0, 1) and (1, 0); the knee is the frontier point farthest above
 * the straight line between them (largest total_n + user_n - 1 > 0; on a
 * tie the lower concurrency). Past it, each gain in total throughput costs
 * more per-user speed than before: the last cheap trade.
 */
ptrdiff_t pareto_mark(struct pareto_pt *p, size_t n);

/*
 * The points of variant (NULL: every row) in t: one per concurrency level
 * with both output_throughput and median_tpot_ms > 0 over its ok rows
 * (rate points left out), ascending concurrency, marked by pareto_mark
 * (its result in *knee). Returns the count; *out is owned by the caller
 * (free), set even when the count is 0.
 */
size_t pareto_points(const struct res_table *t, const char *variant, struct pareto_pt **out,
                     ptrdiff_t *knee);

/*
 * Chart points p[0..n) of one series: the frontier into front (a series of
 * c, PLOT_ROLE_SERIES, drawn as a line in total order), then two series
 * added to c: the dominated points (PLOT_ROLE_DOMINATED, no legend entry)
 * and, when knee >= 0, the knee (PLOT_ROLE_KNEE, "TITLE knee (C=N)"). Every
 * point's note names its concurrency ("C=16", "C=16, knee", "C=16,
 * dominated"). front is invalid afterwards (c's series grow).
 */
void pareto_series(struct plot_chart *c, struct plot_series *front, const struct pareto_pt *p,
                   size_t n, ptrdiff_t knee);

/*
 * The "## Pareto frontier" section of REPORT.md and compare.md: what the
 * chart shows, the knee's rule, then the table's head (pareto_md_head) and
 * one row per series (pareto_md_row: its frontier and dominated levels and
 * its knee, from variant's ok rows of t).
 */
void pareto_md_head(struct buf *b);
void pareto_md_row(struct buf *b, const char *label, const struct res_table *t,
                   const char *variant);

#endif
