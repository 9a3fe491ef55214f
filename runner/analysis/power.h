/*
 * power: the energy columns of a point from the power samples saved beside
 * its log (X.log -> X.power.csv, written while the point ran by
 * exec/energy.c): `mean_power_w`, `energy_j` and `j_per_token`. Read by
 * judge_point, so `sweep run` and `sweep plot` agree. The rule
 * (docs/benchmarks.md §3.1): per device the time-weighted mean of its
 * samples (trapezoids over their own timestamps), summed over devices;
 * energy = that mean x the point's duration_s; per output token over
 * total_output_tokens.
 */
#ifndef RUNNER_POWER_H
#define RUNNER_POWER_H

#include <stddef.h>

#include "err.h"

#include "store/metric.h"

#define POWER_SUFFIX ".power.csv"

/* The samples file of the point whose log is log_path: X.log -> X.power.csv
 * (a name without ".log" gets the suffix added). Heap string. */
char *power_path(const char *log_path);

/*
 * Summarise samples text[0..len): lines "YYYY/MM/DD HH:MM:SS.mmm, DEVICE,
 * WATTS" (nvidia-smi --query-gpu=timestamp,index,power.draw
 * --format=csv,noheader,nounits; exec/energy.c writes RAPL readings in the
 * same shape with DEVICE "rapl:N"). Lines that are not such a sample
 * ("[N/A]", stderr text, a line cut by a crash) are skipped and counted in
 * *skipped. Per device, the mean over the span of its samples (one sample:
 * its value); *mean_w is their sum, *span_s the longest span. Returns how
 * many devices had a sample.
 */
size_t power_summarise(const char *text, size_t len, double *mean_w, double *span_s,
                       size_t *skipped);

/*
 * When log_path's samples file exists: set mean_power_w, energy_j
 * (mean x duration_s, else x the samples' span) and j_per_token (energy /
 * total_output_tokens, when that is > 0) in metrics. Returns 0 (no file is
 * not an error: nothing was sampled), or -1 with err (RN_ERR_ENV) when the
 * file cannot be read or holds no sample; metrics are then left alone.
 */
int power_point(const char *log_path, struct metric_set *metrics, struct err *err);

#endif
