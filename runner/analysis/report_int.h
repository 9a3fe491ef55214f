/*
 * report_int: what the files of the report share (report.c computes the
 * fits and laws and drives the rest; report_json.c writes fit.json and
 * fit.csv; report_charts.c the charts; report_md.c REPORT.md). Private to
 * those four files: everything else goes through report.h.
 */
#ifndef RUNNER_REPORT_INT_H
#define RUNNER_REPORT_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "strvec.h"

#include "analysis/fit.h"
#include "analysis/plot.h"
#include "analysis/rundir.h"
#include "analysis/summary.h"

#include "store/results.h"
#include "store/runfolder.h"

#define REPORT_MAX ((size_t)64 << 20) /* bytes: fit.csv, REPORT.md, REPORT.html */

/* Everything report_build works with, released in one place. */
struct report {
    const char *dir;
    struct rundir rd;
    struct res_table t;
    const char *fit_x, *fit_y;
    struct strvec variants;    /* in display order */
    struct fit_analysis *fits; /* one per variant */
    struct sum_thr *thr;       /* one per variant: the throughput law, TTFT included */
    struct fit_analysis *alt;  /* one per variant: the other of client/server step fits */
    const char *alt_x, *alt_y; /* its axes; NULL when there is no other fit to show */
    struct plot_chart *charts; /* charts written */
    size_t n_charts;
    struct strvec drawn;  /* names of the charts gnuplot rendered */
    char *chart_error;    /* owned; why charts are missing, or NULL */
    bool no_gnuplot;      /* chart_error is "gnuplot not found" (nothing else failed) */
    const char *group_by; /* the matrix axis the charts group by, or NULL */
    size_t *order;        /* owned; variant indices in chart order (grouped by its value) */
    int *color, *mark;    /* owned; per variant: its group's colour, its marker */
};

/* fit.json and fit.csv in r->dir (report_json.c), each atomically. */
int report_write_fit_json(const struct report *r, struct err *err);
int report_write_fit_csv(const struct report *r, struct err *err);

/* Charts (report_charts.c): order and style the variants by the group-by
 * axis, set up every chart, then write and render them with gnuplot (what
 * was drawn goes to r->drawn; why any chart is missing to r->chart_error). */
void report_group_variants(struct report *r);
void report_build_charts(struct report *r);
void report_draw_charts(struct report *r);

/* REPORT.md in r->dir (report_md.c), atomically; its text into *md (a
 * buf_init'ed buffer, replaced) when md is not NULL. */
int report_write_md(const struct report *r, struct buf *md, struct err *err);

/* REPORT.html in r->dir (report_html.c), atomically: md's sections with the
 * charts drawn inline (analysis/html.h). */
int report_write_html(const struct report *r, const char *md, struct err *err);

#endif
