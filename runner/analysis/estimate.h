/*
 * estimate: how long points will take, from a scaling fit. A point of C
 * concurrent requests and P prompts runs as waves of min(C, remaining)
 * requests; a wave of `active` requests takes output_len·(a + b·active) ms
 * of decode plus the time to first token at that load. Used by
 * `sweep check --from RUN_DIR` before anything runs, and by `sweep run`
 * for an ETA that refines as points finish.
 *
 * Not included: server start-up, warmup requests, the client's own start.
 */
#ifndef RUNNER_ESTIMATE_H
#define RUNNER_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "err.h"

#include "config/plan.h"
#include "store/results.h"

struct est_model {
    double a_ms;      /* step time at zero load: step_ms = a_ms + b_ms·active */
    double b_ms;      /* added step time per active request, ms */
    double ttft_a_ms; /* time to first token: ttft_ms = ttft_a_ms + ttft_b_ms·active */
    double ttft_b_ms; /* (both 0 when unknown; a negative prediction counts as 0) */
};

/* One point to estimate. */
struct est_point {
    long concurrency; /* C >= 1 */
    long prompts;     /* P >= 0 measured requests */
    long output_len;  /* tokens generated per request */
};

/* Predicted seconds for one point (0 for P <= 0; C < 1 is taken as 1), or
 * NAN when the line gives a step time <= 0 for one of its waves (a falling
 * fit extrapolated past zero predicts nothing, not "0 s"). */
double est_point_s(const struct est_model *m, const struct est_point *p);

/*
 * Build a model from a run's results: least squares of median_tpot_ms and
 * median_ttft_ms against concurrency over the ok rows of variant (NULL: all
 * variants together). With one concurrency level only, the step time is
 * taken as constant (b = 0). A missing TTFT leaves the TTFT terms 0.
 * Returns 0, or -1 with err set (RN_ERR_USAGE) when no ok row has a median
 * TPOT for that variant.
 */
int est_model_from_table(const struct res_table *t, const char *variant, struct est_model *m,
                         struct err *err);

/*
 * ETA for a run in progress, in seconds: the predicted time of the points
 * still to run (todo[0..n)), scaled by how long the finished points took
 * against their own predictions (done_actual_s / done_pred_s) once both
 * are above zero. The run loop calls this after each point with the sums
 * so far; a model refitted from the points measured so far
 * (est_model_from_table on the run's own table) sharpens it further.
 */
double est_eta_s(const struct est_model *m, const struct est_point *todo, size_t n,
                 double done_pred_s, double done_actual_s);

/*
 * ETA of a run in progress over plan, in seconds, from the scaling law
 * fitted to the ok rows of t so far: per variant, the predicted time of
 * its points still to run (not attempted[] and without an ok row), scaled
 * by how its finished points (took_s[] >= 0) compared with their
 * predictions. A variant without rows of its own borrows the model of all
 * rows. Until a variant has run two concurrency levels its model assumes
 * perfect batching: from's fit (--from RUN_DIR; may be empty) replaces it
 * then, else *lower_bound is set and the ETA is shown as ">= 46s".
 * Returns -1 when no model is usable (the caller keeps its own average).
 */
double est_plan_eta(const struct plan *plan, const struct res_table *t,
                    const struct res_table *from, const bool *attempted, const double *took_s,
                    bool *lower_bound);

/*
 * `sweep check EXP --from RUN_DIR`: print the predicted duration of every
 * point of plan and the total, from a model fitted to RUN_DIR's points.csv
 * (per variant: the run's points of the same variant name, else all its ok
 * points). Formulas print through fit_formula; a falling step time is
 * flagged, and a point whose waves the line predicts at <= 0 ms shows "?"
 * and is left out of the total (printed as a lower bound). Returns 0, or
 * -1 with err set and nothing printed: RN_ERR_ENV when RUN_DIR has no
 * readable points.csv or no ok row with a median TPOT (said in words).
 */
int est_print_plan(FILE *f, const struct plan *plan, const char *run_dir, struct err *err);

/* Format seconds as "42s", "6m31s" or "2h05m" into out (>= 16 bytes). */
void est_format(double seconds, char *out, size_t size);

#endif
