/*
 * compare: runs (or variants of runs) side by side. The first series is
 * the baseline A; every other series B gets, per concurrency, each key
 * metric next to A's with the ratio B/A, and its fitted a, b and ceiling
 * next to A's. Points present in only some series are shown as missing (or
 * failed), never dropped. Output: a terminal table, and with an output
 * folder compare.md plus overlay charts (throughput, TPOT, TTFT) and a
 * ratio chart in OUT/plots/.
 */
#ifndef RUNNER_COMPARE_H
#define RUNNER_COMPARE_H

#include <stddef.h>
#include <stdio.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

#include "analysis/fit.h"

#include "store/results.h"

struct cmp_run {
    char *dir;          /* owned; the run folder */
    struct res_table t; /* its points.csv */
};

struct cmp_series {
    char *label;   /* owned; "runA", "runA:nvfp4" */
    size_t run;    /* index into cmp_set.runs */
    char *variant; /* owned */
    struct fit_analysis fit;
};

struct cmp_set {
    struct cmp_run *runs; /* owned */
    size_t n_runs;
    struct cmp_series *s; /* owned; s[0] is the baseline A */
    size_t n_s;
    char *fit_x, *fit_y;   /* owned; the fit all series are compared on */
    struct strvec metrics; /* key metrics, in table order */
    long *conc;            /* owned; union of concurrencies, ascending */
    size_t n_conc;
    const char *gates; /* not owned; the gates' verdict as printed (compare --gate),
                          written into compare.md and REPORT.html; NULL: none */
};

/*
 * Load specs[0..n): each "RUN_DIR" (every variant of the run becomes a
 * series) or "RUN_DIR:VARIANT". metrics NULL or empty picks the default key
 * metrics that any series has. Returns 0, or -1 with err: RN_ERR_USAGE for
 * fewer than two series, an unknown variant or a malformed points.csv,
 * RN_ERR_ENV for a missing folder or points.csv.
 */
int cmp_load(const char *const *specs, size_t n, const struct strvec *metrics, struct cmp_set *out,
             struct err *err);
void cmp_release(struct cmp_set *c);

/* Every metric name some row of some run has, each once, appended to have. */
void cmp_metric_names(const struct cmp_set *c, struct strvec *have);

/* The terminal table: per metric and concurrency, values and ratios; then
 * the fits side by side. */
void cmp_print(FILE *f, const struct cmp_set *c);

/*
 * Write out_dir/compare.md and the charts under out_dir/plots/ (created).
 * Returns 0, or -1 with err (RN_ERR_ENV); compare.md is written even when
 * gnuplot is missing, and says so.
 */
int cmp_write(const struct cmp_set *c, const char *out_dir, struct err *err);

/*
 * A matrix variant's name ("max-batch=8,quant=mxfp4", made AXIS=VALUE,...)
 * split on axis ("quant", or the matrix key "flags.quant"): its value
 * ("mxfp4") into value and the other axes ("max-batch=8"; "all" when there
 * are none) into others, either may be NULL. Returns false when the name
 * has no AXIS=VALUE part (both buffers then hold "" and the whole name).
 * The grouping of `sweep compare --by` and of the charts' analysis.group_by.
 */
/*
 * The value of metric for series si at concurrency conc, over the ok
 * repeats of that point, into *v (n, mean, sd, min, max, mean_ci). Returns
 * CMP_VALUE, or why there is none: CMP_MISSING (no row at conc), CMP_FAILED
 * (rows, none ok), CMP_NA (ok rows without the metric). The cells of the
 * tables and of `compare --gate` (analysis/gate.h).
 */
enum cmp_cell { CMP_VALUE, CMP_MISSING, CMP_FAILED, CMP_NA };
enum cmp_cell cmp_cell(const struct cmp_set *c, size_t si, long conc, const char *metric,
                       struct fit_spread *v);
/* "missing", "failed", "n/a" (CMP_VALUE: "measured"). */
const char *cmp_cell_word(enum cmp_cell k);

bool cmp_split_axis(const char *name, const char *axis, struct buf *value, struct buf *others);

#endif
