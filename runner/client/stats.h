/*
 * stats: the summary statistics of a benchmark report. Percentiles use
 * linear interpolation between the closest ranks (numpy's default, which
 * SGLang's and vLLM's clients use), so numbers compare one to one.
 */
#ifndef RUNNER_STATS_H
#define RUNNER_STATS_H

#include <stddef.h>

struct stats_summary {
    size_t n;    /* samples */
    double mean; /* 0 when n == 0 */
    double median;
    double p90, p95, p99;
    double min, max;
};

/* The p-th percentile (0 <= p <= 100) of sorted[0..n), interpolating
 * linearly between ranks floor(r) and ceil(r), r = p/100 * (n - 1).
 * Returns 0 for n == 0. */
double stats_percentile(const double *sorted, size_t n, double p);

/* Sort x[0..n) in place and fill out. All fields are 0 when n == 0 (the
 * report then says "no samples" rather than print a misleading 0). */
void stats_summarize(double *x, size_t n, struct stats_summary *out);

/* A growable array of samples (owned data). */
struct stats_vec {
    double *v;
    size_t n, cap;
};

void stats_vec_push(struct stats_vec *sv, double x);
void stats_vec_release(struct stats_vec *sv);

#endif
