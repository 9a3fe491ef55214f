/*
 * resume: what `sweep run --resume` checks and carries over once the
 * folder's experiment matched (run.c's resume_check): the keys of the
 * folder's ok rows against the plan's, naming what changed when they
 * differ; rows whose key was lost (points.csv rebuilt from the logs by
 * `sweep plot`); and the extraction overrides `sweep plot` saved, which
 * new points are read with too. manifest.json holds what these compare
 * with: "key_recipe" and, per variant, "key_parts" (exec/manifest.c).
 */
#ifndef RUNNER_RESUME_H
#define RUNNER_RESUME_H

#include "err.h"

#include "client/extract.h"
#include "config/experiment.h"
#include "config/plan.h"
#include "store/results.h"

/*
 * Every ok row of the folder at a point of the plan must have that point's
 * key, or rerunning the rest would put rows of two setups in one fit.
 * Refused (RN_ERR_USAGE, naming the cause): keys of an older key recipe
 * (manifest.json's key_recipe), a changed model file, dataset, or server
 * or client command as expanded (an ${env:...} value), found by comparing
 * the variant's key_parts with the folder's. An ok row without a key (a
 * points.csv that `sweep plot` rebuilt from the logs) takes its point's
 * key when the folder's manifest records the same key_parts for its
 * variant (said on stderr), else it is refused. Returns 0 or -1 with err.
 */
int resume_keys_check(const char *run_dir, const struct plan *plan, struct res_table *table,
                      struct err *err);

/*
 * Resume after a variant was renamed: keys leave the variant's name out, so
 * an ok row of t whose variant exp no longer has, with the key of a point
 * of plan that has no ok row yet, is that point measured under the old
 * name. The row takes the new name and the point is not rerun. Returns how
 * many rows were renamed.
 */
size_t resume_adopt_renamed(const struct plan *plan, const struct experiment *exp,
                            struct res_table *t);

/*
 * The extractor of a variant with metrics m in the run folder run_dir:
 * m's preset and patterns, with the overrides `sweep plot --preset/
 * --pattern` saved in run_dir/manifest.json ("replot") applied on top, so
 * that the points a resume adds are read by the same rule as the rows the
 * plot re-extracted. Returns 0, or -1 with err set (ext_new's errors).
 */
int resume_extractor(const char *run_dir, const struct exp_metrics *m, ext_set **out,
                     struct err *err);

#endif
