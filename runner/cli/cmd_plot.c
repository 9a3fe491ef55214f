/*
 * cmd_plot: `sweep plot RUN_DIR` rebuilds a run's results from its saved
 * client logs alone: every point is re-extracted (with the run's settings,
 * or a changed --preset/--pattern), points.csv is rewritten (the old one
 * kept as points.csv.bak), then the fit, the charts, REPORT.md and
 * REPORT.html. Nothing is rerun. It also works when points.csv, fit.json and plots/ are gone:
 * the logs under RUN_DIR/<variant>/c<C>-n<P>[-r<R>].log are the truth.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "log.h"
#include "opts.h"
#include "sweep.h"
#include "xalloc.h"

#include "analysis/compare.h"
#include "analysis/judge.h"
#include "analysis/report.h"
#include "analysis/rundir.h"
#include "client/extract.h"
#include "store/results.h"
#include "store/runfolder.h"

static const char synopsis[] =
    "RUN_DIR [--preset NAME] [--pattern NAME=REGEX]... [--reset] [--by AXIS] [--no-preview] "
    "[-q]";
static const char summary[] =
    "Re-extract every point of a run from its saved client logs (nothing is rerun), rewrite\n"
    "points.csv (the previous one is kept as points.csv.bak), refit, redraw every chart and\n"
    "rewrite REPORT.md and REPORT.html. --preset and --pattern change how the logs are read\n"
    "(and are saved in manifest.json for later plots; --reset forgets them); a log that no\n"
    "longer yields its required metrics is named and its point marked failed. Works even\n"
    "when points.csv, fit.json and plots/ were deleted. Exit status 1 when some point is not\n"
    "ok, 3 when some log could not be read (its point is failed; the others are still\n"
    "rebuilt). --by AXIS groups the charts by one axis of the run's matrix (a colour per\n"
    "value, a marker per combination of the other axes), for this plot only;\n"
    "analysis.group_by sets it for good.";

static bool is_ok(const struct res_point *p)
{
    return p->status && strcmp(p->status, RES_OK) == 0;
}

/* Re-extract row p from its log; report a log that stopped matching.
 * Returns 0, or -1 with err set when the log cannot be read (the row is
 * then failed, naming why, unless its failure came from the run). */
static int refresh_row(const struct rundir *rd, struct res_point *p, struct err *err)
{
    struct res_point fresh;
    bool was_ok = is_ok(p), rejudge = was_ok || judge_cause_from_log(p->cause);
    res_point_init(&fresh);
    fresh.concurrency = p->concurrency; /* the invariants judge against these */
    fresh.prompts = p->prompts;
    /* an unreadable log still gives a failed point: keep it, tell the caller */
    int rc = judge_saved_point(rd, p->variant, p->log, &fresh, err);
    mset_release(&p->metrics);
    p->metrics = fresh.metrics;
    mset_init(&fresh.metrics);
    if (rejudge) {
        free(p->status);
        free(p->cause);
        p->status = fresh.status;
        p->cause = fresh.cause;
        fresh.status = fresh.cause = NULL;
        if (was_ok && !is_ok(p) && rc == 0)
            log_warn("%s: no longer matches: %s", p->log, p->cause);
    }
    res_point_release(&fresh);
    return rc;
}

/* points.csv.bak: the previous table, byte for byte. */
static int backup(const char *csv, struct err *err)
{
    struct buf b;
    int rc;
    buf_init(&b, (size_t)256 << 20);
    char *bak = xasprintf("%s.bak", csv);
    rc = file_read_all(csv, &b, err, RN_ERR_ENV);
    if (rc == 0)
        rc = file_write_atomic(bak, b.data ? b.data : "", b.len, err, RN_ERR_ENV);
    free(bak);
    buf_release(&b);
    return rc;
}

static bool has_log(const struct res_table *t, const char *rel)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].log && strcmp(t->rows[i].log, rel) == 0)
            return true;
    return false;
}

static const struct opt_cmd usage = {"sweep", "plot", synopsis, summary, RN_ERR_USAGE};

int cmd_plot(int argc, char **argv)
{
    const char *preset = NULL, *by = NULL;
    bool no_preview = false, quiet = false, reset = false;
    struct strvec pattern_args = STRVEC_INIT, pos = STRVEC_INIT;
    const struct opt opts[] = {
        {"preset", 0, OPT_STR, &preset, "NAME",
         "read the logs with this preset (sglang, vllm, aiperf; an export preset such as "
         "vllm-json reads the export beside each log)"},
        {"pattern", 0, OPT_LIST, &pattern_args, "NAME=REGEX",
         "add or replace a metric regex (one capture group; repeatable)"},
        {"reset", 0, OPT_BOOL, &reset, NULL,
         "forget --preset/--pattern overrides saved by earlier plots"},
        {"by", 0, OPT_STR, &by, "AXIS",
         "group the charts by this matrix axis (e.g. quant; default: analysis.group_by)"},
        {"no-preview", 0, OPT_BOOL, &no_preview, NULL, "no terminal chart preview"},
        {"quiet", 'q', OPT_BOOL, &quiet, NULL, "no summary lines"},
    };
    struct err err;
    struct rundir rd;
    struct res_table t;
    struct rundir_log *logs = NULL;
    struct ext_pattern *user = NULL;
    size_t n_logs = 0, missing_logs = 0, unreadable = 0;
    char *csv = NULL;
    bool rd_open = false;
    int lock_fd = -1;
    int rc = RN_ERR_USAGE;
    err_init(&err);
    res_table_init(&t);

    int pr = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, &pos, &err);
    if (pr == 1) {
        rc = RN_OK;
        goto out;
    }
    if (pr < 0)
        goto fail;
    if (pos.n != 1) {
        err_set(&err, RN_ERR_USAGE, "%s (sweep plot RUN_DIR)",
                pos.n ? "one run folder at a time" : "no run folder given");
        goto fail;
    }
    const char *dir = pos.v[0];
    user = xcalloc(pattern_args.n + 1, sizeof(*user));
    for (size_t i = 0; i < pattern_args.n; i++)
        if (ext_pattern_arg(pattern_args.v[i], &user[i], &err) != 0)
            goto fail;
    /* a bad --preset or --pattern is a usage error, whatever the folder holds */
    ext_set *probe = NULL;
    if ((preset || pattern_args.n) && ext_new(preset, user, pattern_args.n, &probe, &err) != 0)
        goto fail;
    ext_free(probe);
    if (rundir_open(dir, &rd, &err) != 0)
        goto fail;
    rd_open = true;
    if (by) { /* before anything is rewritten: some variant must be named AXIS=VALUE */
        bool any = false;
        for (size_t i = 0; i < rd.n_v && !any; i++)
            any = cmp_split_axis(rd.v[i].name, by, NULL, NULL);
        if (!any) {
            err_set(&err, RN_ERR_USAGE,
                    "--by '%s': no variant of '%s' is named %s=VALUE (matrix variants are named "
                    "AXIS=VALUE,...)",
                    by, dir, strrchr(by, '.') ? strrchr(by, '.') + 1 : by);
            goto fail;
        }
    }
    /* everything below rewrites the folder: no sweep run or other plot at the same time */
    lock_fd = rundir_lock(dir, &err);
    if (lock_fd < 0)
        goto fail;
    /* check the overrides on a copy, then save them so later plots and
     * REPORT.md read the logs the same way */
    if ((preset || pattern_args.n) && rundir_override(&rd, preset, user, pattern_args.n, &err) != 0)
        goto fail;
    if (preset || pattern_args.n || reset) {
        rundir_release(&rd);
        rd_open = false;
        if (rundir_save_overrides(dir, preset, user, pattern_args.n, reset, argc, argv, &err) !=
                0 ||
            rundir_open(dir, &rd, &err) != 0)
            goto fail;
        rd_open = true;
    }

    csv = path_join(dir, "points.csv");
    bool had_csv = path_exists(csv);
    if (had_csv && res_table_load(csv, &t, &err) != 0)
        goto fail;
    /* rows of the table: re-read from their logs */
    for (size_t i = 0; i < t.n; i++) {
        struct res_point *p = &t.rows[i];
        if (!p->log || !*p->log)
            continue;
        char *path = path_join(dir, p->log);
        bool there = path_exists(path);
        free(path);
        if (!there) {
            log_warn("%s: log missing; its row is kept as it was", p->log);
            missing_logs++;
            continue;
        }
        struct err e; /* one bad log fails its own point only */
        err_init(&e);
        if (refresh_row(&rd, p, &e) != 0) {
            log_error("%s", e.msg);
            unreadable++;
        }
    }
    /* logs on disk that the table does not have (or every log, without a table) */
    if (rundir_scan_logs(&rd, &logs, &n_logs, &err) != 0)
        goto fail;
    size_t added = 0;
    for (size_t i = 0; i < n_logs; i++) {
        if (has_log(&t, logs[i].rel))
            continue;
        struct res_point p;
        res_point_begin(&p, logs[i].variant, logs[i].concurrency, logs[i].prompts, logs[i].repeat,
                        "", logs[i].rel, "");
        struct err e;
        err_init(&e);
        if (judge_saved_point(&rd, p.variant, p.log, &p, &e) != 0)
            unreadable++; /* failed, with the reason as its cause */
        if (!is_ok(&p))
            log_warn("%s: %s", p.log, p.cause);
        res_table_put(&t, &p);
        added++;
    }
    if (t.n == 0) {
        err_set(&err, RN_ERR_USAGE,
                "%s: no points.csv and no client logs (<variant>/c<C>-n<P>.log) to rebuild from",
                dir);
        goto fail;
    }
    if (had_csv && backup(csv, &err) != 0)
        goto fail;
    if (res_table_save(&t, csv, &err) != 0)
        goto fail;
    size_t bad = 0;
    for (size_t i = 0; i < t.n; i++)
        bad += !is_ok(&t.rows[i]);
    if (!quiet)
        printf("re-extracted %zu point(s) from %s (%zu added from logs on disk, %zu without a "
               "log); %zu ok, %zu not ok\n",
               t.n - missing_logs, dir, added, missing_logs, t.n - bad, bad);
    struct report_opts ro = {NULL, NULL, !no_preview && !quiet && isatty(1), quiet, false, by};
    if (report_build(dir, &ro, &err) != 0)
        goto fail;
    rc = unreadable ? RN_ERR_ENV : bad ? RN_ERR_POINTS : RN_OK;
    goto out;
fail:
    log_error("%s", err.msg);
    rc = err.code ? err.code : RN_ERR_USAGE;
out:
    rundir_unlock(lock_fd);
    if (rd_open)
        rundir_release(&rd);
    rundir_logs_free(logs, n_logs);
    res_table_release(&t);
    for (size_t i = 0; user && i < pattern_args.n; i++)
        free((char *)user[i].name);
    free(user);
    free(csv);
    strvec_release(&pattern_args);
    strvec_release(&pos);
    return rc;
}
