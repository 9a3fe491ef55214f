/*
 * cmd_compare: `sweep compare A B ... [--out DIR]` puts runs (or
 * RUN_DIR:VARIANT) side by side: per concurrency each key metric with the
 * ratio B/A, the fits side by side, and with --out compare.md plus
 * overlay and ratio charts. Nothing is rerun or re-extracted.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "sweep.h"
#include "analysis/compare.h"
#include "fileio.h"
#include "log.h"
#include "opts.h"
#include "store/rundir.h"

static const char synopsis[] =
    "RUN_DIR[:VARIANT] RUN_DIR[:VARIANT]... [--out DIR] [--metric NAME]...";
static const char summary[] =
    "Compare runs, or variants of runs, side by side. The first is the baseline A; for every\n"
    "other series B and every concurrency, each key metric is shown next to A's with the\n"
    "ratio B/A, and the fitted a, b and ceiling next to A's. Points only some runs have are\n"
    "shown as missing. With --out, writes DIR/compare.md and overlay and ratio charts in\n"
    "DIR/plots/.";

int cmd_compare(int argc, char **argv)
{
    const char *out = NULL;
    struct strvec metrics = STRVEC_INIT, specs = STRVEC_INIT;
    const struct opt opts[] = {
        {"out", 'o', OPT_STR, &out, "DIR",
         "write compare.md and charts (DIR/plots/) here (not a run folder)"},
        {"metric", 0, OPT_LIST, &metrics, "NAME",
         "compare this metric (repeatable; default: throughput, TPOT, TTFT, ITL, E2E)"},
    };
    const size_t n_opts = sizeof(opts) / sizeof(opts[0]);
    struct err err;
    struct cmp_set c;
    int rc = RN_ERR_USAGE;
    bool loaded = false;
    err_init(&err);
    int pr = opt_parse(argc, argv, opts, n_opts, &specs, &err, RN_ERR_USAGE);
    if (pr == 1) {
        opt_help(stdout, "sweep", "compare", synopsis, summary, opts, n_opts);
        rc = RN_OK;
        goto out;
    }
    if (pr < 0)
        goto fail;
    if (specs.n == 0) {
        err_set(&err, RN_ERR_USAGE, "no run given (sweep compare RUN_A RUN_B)");
        goto fail;
    }
    if (out) { /* its plots/ would replace the run's charts of the same names */
        char *csv = path_join(out, "points.csv"), *lock = path_join(out, RUNDIR_LOCK_NAME);
        bool is_run = path_exists(csv) || path_exists(lock); /* a run that just started */
        free(csv);
        free(lock);
        if (is_run) {
            err_set(&err, RN_ERR_USAGE,
                    "--out '%s' is a run folder: its charts would be replaced; "
                    "write the comparison to another folder",
                    out);
            goto fail;
        }
    }
    if (cmp_load((const char *const *)specs.v, specs.n, &metrics, &c, &err) != 0)
        goto fail;
    loaded = true;
    cmp_print(stdout, &c);
    if (out) {
        if (cmp_write(&c, out, &err) != 0)
            goto fail;
        char *md = path_join(out, "compare.md"), *plots = path_join(out, "plots");
        printf("\nwrote %s and charts in %s/\n", md, plots);
        free(md);
        free(plots);
    }
    rc = RN_OK;
    goto out;
fail:
    log_error("%s", err.msg);
    rc = err.code ? err.code : RN_ERR_USAGE;
out:
    if (loaded)
        cmp_release(&c);
    strvec_release(&metrics);
    strvec_release(&specs);
    return rc;
}
