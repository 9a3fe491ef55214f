/*
 * gate: `sweep compare --gate 'median_tpot_ms<=+5%'`, a regression gate
 * for CI. A gate bounds each candidate series B against the baseline A at
 * every concurrency both measured: METRIC<=P% holds while B stays at or
 * under A·(1 + P/100), METRIC>=P% while B stays at or above it. With
 * repeats the comparison is between intervals, not single values (the
 * rule: docs/benchmarks.md "Regression gates"): a gate breaks only when
 * B's whole interval is past A's interval moved by the allowance, so
 * noise within the repeats' spread never fails a build.
 */
#ifndef RUNNER_GATE_H
#define RUNNER_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "buf.h"
#include "err.h"

#include "analysis/compare.h"

struct gate {
    char *arg;    /* owned; the argument as given: "median_tpot_ms<=+5%" */
    char *metric; /* owned; "median_tpot_ms" */
    bool upper;   /* "<=": B at most the limit; ">=": at least */
    double pct;   /* allowance, percent of A (signed: -3 for ">=-3%") */
};

/*
 * Parse "METRIC<=+5%" / "METRIC>=-3%" (the sign may be left out: "5%" is
 * "+5%"; blanks around the parts are allowed) into g. Returns 0, or -1
 * with err (RN_ERR_USAGE: "--gate 'ARG': ..." naming what is wrong).
 */
int gate_parse(const char *arg, struct gate *g, struct err *err);
void gate_release(struct gate *g);

/*
 * Every gate metric must be a column of some run of c (else a gate that
 * can never break would pass). Returns 0, or -1 with err (RN_ERR_USAGE,
 * the closest column offered).
 */
int gate_check_metrics(const struct gate *g, size_t n, const struct cmp_set *c, struct err *err);

/*
 * Check gates g[0..n) for every candidate series (c->s[1..]) against the
 * baseline c->s[0], printing a "gates" section to f (one line per check
 * that broke, and how many held). A point the baseline measured and the
 * candidate has as failed breaks its gates too (a crash is no
 * improvement); one missing or without the metric on either side is not
 * compared, and counted as such. broken (may be NULL) gets one short entry
 * per broken check, "median_tpot_ms<=+5% at C=8 for runB: 1.071". Returns
 * how many checks broke.
 */
size_t gate_run(const struct gate *g, size_t n, const struct cmp_set *c, FILE *f,
                struct buf *broken);

#endif
