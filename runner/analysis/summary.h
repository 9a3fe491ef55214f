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

#include "strvec.h"

#include "analysis/fit.h"

#include "store/results.h"

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

/*
 * The throughput law from the end-to-end request time, TTFT included: a
 * closed loop of N clients each waiting E2E(N) ms per request of `out`
 * tokens gives N·out·1000/E2E(N) tok/s (Little's law). E2E(N) = a + b·N is
 * fitted against concurrency to the measured mean E2E of the ok rows (else
 * the median E2E, else median TTFT + (out - 1)·median TPOT, the source
 * that every ok row has); out is the mean of total_output_tokens /
 * successful_requests, else output_len. The decode-only ceiling 1000/b of
 * a TPOT fit leaves TTFT out and is only the limit of this curve.
 */
struct sum_thr {
    bool ok;             /* false: fewer than two levels or no E2E source */
    struct fit_line e2e; /* E2E ms = a + b·N */
    double out_tokens;   /* output tokens per request */
    const char *source;  /* "mean_e2e_ms", "median_e2e_ms" or "median_ttft_ms + (out-1)·TPOT" */
    double max_rel;      /* largest |curve - measured| / measured output_throughput over levels */
};
/* Fit variant's throughput law; output_len < 1 when not known. */
void sum_throughput(const struct res_table *t, const char *variant, long output_len,
                    struct sum_thr *out);
/* N·out·1000/E2E(N) tok/s at concurrency n, NAN when E2E(n) <= 0 or !ok. */
double sum_thr_at(const struct sum_thr *m, double n);

/* true for per-token step times in ms: *_tpot_ms, *_itl_ms, server_step_ms. */
bool sum_is_step_metric(const char *name);

/* "median TPOT (ms)", "output throughput (tok/s)", "p99 TTFT (ms)": a fresh
 * heap string for axis labels and table headers. */
char *sum_label(const char *metric);

/* Number of ok rows / other rows of variant (NULL = all). */
size_t sum_count(const struct res_table *t, const char *variant, bool ok);

#endif
