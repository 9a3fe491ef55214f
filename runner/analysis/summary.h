/*
 * summary: a results table seen per variant and per concurrency, the shape
 * reports, charts and comparisons need: each metric's value at each
 * concurrency (the mean over ok repeats, with its spread), the scaling fit
 * of one variant, and readable labels for metric names.
 */
#ifndef RUNNER_SUMMARY_H
#define RUNNER_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/fit.h"
#include "store/results.h"
#include "strvec.h"

/* One metric at one concurrency, over the ok rows (all repeats and prompt
 * counts at that concurrency). */
struct sum_level {
    long concurrency;
    struct fit_spread s; /* n, mean, sd, min, max, bootstrap CI of the mean */
};

struct sum_series {
    struct sum_level *lv; /* owned; ascending concurrency; levels without a value left out */
    size_t n;
};

/* A rate point (open loop at an offered rate, log "rateR-nP.log"): its
 * concurrency is only a cap, so it is charted and fitted against
 * offered_rate, never against concurrency. */
bool sum_is_rate_point(const struct res_point *p);

/* Variant names of t: those in order first (when present in t), then the
 * rest in first-seen order. */
void sum_variants(const struct res_table *t, const struct strvec *order, struct strvec *out);

/* metric for variant (NULL = every row) at each concurrency, ok rows only
 * (rate points left out). Release with sum_series_release. */
void sum_metric(const struct res_table *t, const char *variant, const char *metric,
                struct sum_series *out);
void sum_series_release(struct sum_series *s);
/* The level for concurrency c, or NULL. */
const struct sum_level *sum_find(const struct sum_series *s, long c);

/*
 * Fit y against x for variant's ok rows: x "concurrency" (or "prompts")
 * is the point's requested value (rate points left out), any other name a
 * metric (offered_rate fits the rate points). The fit is a
 * step-time fit (ceiling, throughput) when sum_is_step_metric(y).
 */
void sum_fit(const struct res_table *t, const char *variant, const char *x, const char *y,
             struct fit_analysis *fa);

/* true for per-token step times in ms: *_tpot_ms, *_itl_ms. */
bool sum_is_step_metric(const char *name);

/* "median TPOT (ms)", "output throughput (tok/s)", "p99 TTFT (ms)": a fresh
 * heap string for axis labels and table headers. */
char *sum_label(const char *metric);

/* Number of ok rows / other rows of variant (NULL = all). */
size_t sum_count(const struct res_table *t, const char *variant, bool ok);

#endif
