/*
 * report: everything a run folder derives from its points: fit.json (the
 * scaling law per variant), plots/ (gnuplot .dat, .gp, .png, .svg) and
 * REPORT.md. `sweep run` calls report_build after the last point (and after
 * an interrupt, on what was measured); `sweep plot` calls it after
 * re-extracting points.csv from the saved logs.
 *
 * The report is a function of the run folder alone: it reads the files the
 * run has just written (points.csv, experiment.yaml, manifest.json) through
 * analysis/rundir.c rather than taking the run's memory, so `sweep run` and a
 * later `sweep plot` cannot write different reports for the same folder.
 */
#ifndef RUNNER_REPORT_H
#define RUNNER_REPORT_H

#include <stdbool.h>

#include "err.h"

struct report_opts {
    const char *fit_x;    /* NULL: analysis.fit.x from experiment.yaml, else "concurrency" */
    const char *fit_y;    /* NULL: analysis.fit.y from experiment.yaml, else "median_tpot_ms" */
    bool preview;         /* print a gnuplot `dumb` preview of the main chart on stdout */
    bool quiet;           /* no summary lines on stdout */
    bool charts_optional; /* a missing gnuplot is no error (the report says charts were
                             skipped); any chart that fails otherwise still is */
    const char *group_by; /* NULL: analysis.group_by from experiment.yaml; a matrix axis:
                             the charts give each of its values a colour, each combination
                             of the other axes a marker, series in that order */
};

/*
 * Read run_dir/points.csv (and experiment.yaml, manifest.json when present),
 * fit every variant, and (re)write run_dir/fit.json, run_dir/plots/ and
 * run_dir/REPORT.md, each atomically. Charts need gnuplot; without it the
 * fit and report are still written and the error says charts were skipped
 * (a warning only with charts_optional). Any file that cannot be written is
 * an error naming it; points.csv is only read. Returns 0, or -1 with err
 * set (RN_ERR_ENV for I/O, a failed chart and a missing gnuplot,
 * RN_ERR_USAGE for a malformed points.csv).
 */
int report_build(const char *run_dir, const struct report_opts *opts, struct err *err);

#endif
