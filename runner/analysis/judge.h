/*
 * judge: the one verdict on a point, from its client log. `sweep run` calls
 * it as each point ends; `sweep plot` and `sweep import` call it (through
 * analysis/rundir.c) when they rebuild points from saved logs, so a run and a
 * replot cannot disagree on which points are ok.
 */
#ifndef RUNNER_JUDGE_H
#define RUNNER_JUDGE_H

#include <stdbool.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

#include "analysis/goodput.h"
#include "analysis/rundir.h"

#include "client/extract.h"
#include "client/scrape.h"
#include "store/metric.h"
#include "store/results.h"

/* What a point is judged against. */
struct judge_spec {
    const ext_set *set;                  /* compiled patterns of the point's variant */
    const struct strvec *require;        /* metrics an ok point must have */
    long concurrency, prompts;           /* what the point asked for */
    double request_rate;                 /* open-loop rate in req/s; 0 = closed loop */
    const struct scrape_map *server_map; /* metrics.server_map, may be NULL */
    size_t n_server_map;
    const struct gp_slo *slo; /* analysis.slo, or NULL; with the per-request records
                                 beside the log, goodput.h's columns are added */
};

/*
 * Read the client log at log_path (streamed: any size), or with an export
 * preset the tool's export beside it (ext_source_path: "c4-n16.log" ->
 * "c4-n16.json"), and extract every metric into *metrics (names already
 * there are overwritten), then the server_* columns from the server scrapes
 * saved beside it (scrape.h; none when they are missing). When
 * client_ok (the client exited 0, nothing stopped it) the point must also
 * pass: the log is consistent (no pattern hit a limit, no metric twice in
 * its result block, no block cut short: ext_run), every required metric
 * present, and the invariants of ext_check_invariants. *ok says whether it
 * did; cause gets why not (one line), or when ok the notes of the
 * extraction ("3 result blocks, last used (line 40)", ext_info_notes) and
 * of the invariants ("" when none); a failed cause ends with the
 * extraction's notes too. With client_ok false, *ok is false and cause is
 * left alone: the caller already knows why. Returns 0, or -1 with err set
 * (RN_ERR_ENV) when the log cannot be read; then *metrics and cause are
 * unchanged.
 */
int judge_point(const struct judge_spec *spec, const char *log_path, bool client_ok,
                struct metric_set *metrics, bool *ok, struct buf *cause, struct err *err);

/*
 * Judge the point saved in rd->dir/rel (as `sweep plot` and `sweep import`
 * rebuild points): extract it with variant's settings into p->metrics
 * (replaced), and set p->status and p->cause as a run would: ok, or failed
 * naming every missing required metric (or the pattern that hit a limit,
 * the metric printed twice, the block cut short) or the broken invariant
 * (ext_check_invariants against p->concurrency and p->prompts, which the
 * caller sets: no success, too many failures, ...). An ok point's cause
 * holds the notes, "" when none. Returns 0, or -1 with err set (RN_ERR_ENV)
 * when the log cannot be read: then p is failed too, with no metrics and
 * the cause "cannot read the log: REASON", so that the caller can keep it
 * and go on with the other points.
 */
int judge_saved_point(const struct rundir *rd, const char *variant, const char *rel,
                      struct res_point *p, struct err *err);

/*
 * Whether a failed point's cause came from reading its log (so that reading
 * it again, with other patterns or a repaired log, may pass) rather than
 * from the run itself (server death, timeout, Ctrl-C, client exit status).
 * An empty or missing cause counts as from the log.
 */
bool judge_cause_from_log(const char *cause);

#endif
