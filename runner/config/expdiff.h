/*
 * expdiff: whether two variants measure the same thing. `sweep run --resume`
 * compares the experiment it is given with the one saved in the run folder
 * (experiment.yaml) and refuses to mix rows of different servers or clients
 * in one folder; a variant that only grew (more grid points, more repeats)
 * may be resumed.
 */
#ifndef RUNNER_EXPDIFF_H
#define RUNNER_EXPDIFF_H

#include "config/experiment.h"

/*
 * The dotted schema path ("server.flags") of the first setting that decides
 * what a point measures in which a and b differ, or NULL when they agree.
 * Compared: server engine, command, model, host, flags (in order), args and
 * env (in any order); bench tool, command, input_len, output_len (with
 * their distributions), warmup, request_rate, endpoint, rate_kind and the
 * dataset's kind, path and seed. Not compared: the grid and repeats (which points there
 * are), timeouts, readiness and stop settings (how long sweep waits), the
 * port (auto ports differ every run) and metrics (how logs are read:
 * `sweep plot` can change that afterwards).
 */
const char *expdiff_variant(const struct exp_variant *a, const struct exp_variant *b);

/*
 * The extraction rule: "metrics.preset", "metrics.patterns" (compared as a
 * name -> regex map) or "metrics.server_map" when a and b read logs
 * differently, else NULL. `sweep run --resume` refuses such a change: the
 * folder's rows were read by the old rule and the new points would be read
 * by the new one, two rules in one column (`sweep plot --preset/--pattern`
 * re-reads every row instead).
 */
const char *expdiff_rules(const struct exp_variant *a, const struct exp_variant *b);

#endif
