/*
 * cmd_compare: `sweep compare A B ... [--out DIR]` puts runs (or
 * RUN_DIR:VARIANT) side by side: per concurrency each key metric with the
 * ratio B/A, the fits side by side, and with --out compare.md,
 * REPORT.html and overlay, ratio and Pareto charts. Nothing is rerun or re-extracted.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fileio.h"
#include "log.h"
#include "opts.h"
#include "strvec.h"
#include "sweep.h"
#include "xalloc.h"

#include "analysis/compare.h"
#include "analysis/gate.h"
#include "analysis/rundir.h"
#include "store/runfolder.h"

static const char synopsis[] =
    "RUN_DIR[:VARIANT] RUN_DIR[:VARIANT]... [--out DIR] [--metric NAME]...\n"
    "       [--gate 'METRIC<=+P%'] [--gate 'METRIC>=-P%']...\n"
    "       RUN_DIR --by AXIS [--out DIR] [--metric NAME]...";
static const char summary[] =
    "Compare runs, or variants of runs, side by side. The first is the baseline A; for every\n"
    "other series B and every concurrency, each key metric is shown next to A's with the\n"
    "ratio B/A, and the fitted a, b and ceiling next to A's. Points only some runs have are\n"
    "shown as missing. With --out, writes DIR/compare.md, DIR/REPORT.html (the same report\n"
    "as one offline page) and overlay, ratio and Pareto charts in DIR/plots/. With --by AXIS, the "
    "variants a matrix made (named AXIS=VALUE,...) are\n"
    "compared along that axis: one comparison per combination of the other axes, the\n"
    "first value the baseline (with --out, each in DIR/OTHER-AXES/).\n"
    "With --gate, exits 1 when a candidate breaks a gate at some concurrency: METRIC<=+5%\n"
    "breaks when B is above A by more than 5%, METRIC>=-3% when B is below A by more than\n"
    "3%; with repeats, only when B's interval of the mean is wholly past A's (moved by the\n"
    "allowance). Each broken check is named with its concurrency and ratio.";

/*
 * sweep compare RUN --by AXIS: group the run's variants by everything but
 * AXIS and compare each group's variants (in the run's order, so the
 * matrix's first value is the baseline). Returns the exit status.
 */
static int compare_by(const char *run, const char *axis, const struct strvec *metrics,
                      const char *out, struct err *err)
{
    struct rundir rd;
    if (rundir_open(run, &rd, err) != 0)
        return err->code;
    struct strvec keys = STRVEC_INIT; /* the groups, in first-seen order */
    struct buf key;
    buf_init(&key, 4096);
    int rc = RN_OK;
    for (size_t i = 0; i < rd.n_v; i++)
        if (cmp_split_axis(rd.v[i].name, axis, NULL, &key) && strvec_find(&keys, key.data) < 0)
            strvec_push(&keys, key.data);
    size_t compared = 0;
    for (size_t g = 0; g < keys.n && rc == RN_OK; g++) {
        struct strvec specs = STRVEC_INIT;
        for (size_t i = 0; i < rd.n_v; i++)
            if (cmp_split_axis(rd.v[i].name, axis, NULL, &key) && strcmp(key.data, keys.v[g]) == 0)
                strvec_pushf(&specs, "%s:%s", run, rd.v[i].name);
        if (specs.n >= 2) {
            struct cmp_set c;
            printf("%s== %s along %s (%zu variants)\n", compared ? "\n" : "", keys.v[g], axis,
                   specs.n);
            if (cmp_load((const char *const *)specs.v, specs.n, metrics, &c, err) != 0) {
                rc = err->code ? err->code : RN_ERR_USAGE;
            } else {
                cmp_print(stdout, &c);
                char *dir = out ? path_join(out, keys.v[g]) : NULL;
                if (dir && cmp_write(&c, dir, err) != 0)
                    rc = err->code ? err->code : RN_ERR_ENV;
                else if (dir)
                    printf("\nwrote %s/compare.md, REPORT.html and its charts\n", dir);
                free(dir);
                cmp_release(&c);
                compared++;
            }
        }
        strvec_release(&specs);
    }
    if (rc == RN_OK && compared == 0) {
        err_set(err, RN_ERR_USAGE,
                "--by '%s': no two variants of '%s' differ only in %s (matrix variants are "
                "named AXIS=VALUE,...)",
                axis, run, axis);
        rc = RN_ERR_USAGE;
    }
    buf_release(&key);
    strvec_release(&keys);
    rundir_release(&rd);
    return rc;
}

static const struct opt_cmd usage = {"sweep", "compare", synopsis, summary, RN_ERR_USAGE};

int cmd_compare(int argc, char **argv)
{
    const char *out = NULL, *by = NULL;
    struct strvec metrics = STRVEC_INIT, specs = STRVEC_INIT, gate_args = STRVEC_INIT;
    struct gate *gates = NULL;
    size_t n_gates = 0;
    const struct opt opts[] = {
        {"out", 'o', OPT_STR, &out, "DIR",
         "write compare.md and charts (DIR/plots/) here (not a run folder)"},
        {"metric", 0, OPT_LIST, &metrics, "NAME",
         "compare this metric (repeatable; default: throughput, TPOT, TTFT, ITL, E2E, J/token)"},
        {"by", 0, OPT_STR, &by, "AXIS",
         "one run: compare its matrix variants along AXIS (e.g. quant, max-batch)"},
        {"gate", 0, OPT_LIST, &gate_args, "'METRIC<=+P%'",
         "fail (exit 1) when a candidate breaks this bound against the baseline (repeatable)"},
    };
    struct err err;
    struct cmp_set c;
    int rc = RN_ERR_USAGE;
    bool loaded = false;
    int pr = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, &specs, &err);
    if (pr == 1) {
        rc = RN_OK;
        goto out;
    }
    if (pr < 0)
        goto fail;
    if (specs.n == 0) {
        err_set(&err, RN_ERR_USAGE, "no run given (sweep compare RUN_A RUN_B)");
        goto fail;
    }
    gates = xcalloc(gate_args.n + 1, sizeof(*gates));
    for (; n_gates < gate_args.n; n_gates++)
        if (gate_parse(gate_args.v[n_gates], &gates[n_gates], &err) != 0)
            goto fail;
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
    if (by) {
        if (n_gates) {
            err_set(&err, RN_ERR_USAGE,
                    "--gate takes runs to compare (sweep compare BASE CANDIDATE... --gate ...), "
                    "not --by");
            goto fail;
        }
        if (specs.n != 1 || strchr(specs.v[0], ':')) {
            err_set(&err, RN_ERR_USAGE, "--by takes one run folder (sweep compare RUN --by AXIS)");
            goto fail;
        }
        rc = compare_by(specs.v[0], by, &metrics, out, &err);
        if (rc != RN_OK)
            goto fail;
        goto out;
    }
    if (cmp_load((const char *const *)specs.v, specs.n, &metrics, &c, &err) != 0)
        goto fail;
    loaded = true;
    if (gate_check_metrics(gates, n_gates, &c, &err) != 0)
        goto fail;
    cmp_print(stdout, &c);
    rc = RN_OK;
    /* the gates before compare.md, which carries their verdict */
    struct buf broken;
    buf_init(&broken, 64 << 10);
    char *gtext = NULL;
    size_t n_broken = 0;
    if (n_gates) {
        size_t len = 0;
        FILE *mf = open_memstream(&gtext, &len);
        n_broken = gate_run(gates, n_gates, &c, mf, &broken);
        fclose(mf);
        c.gates = gtext;
    }
    if (out) {
        if (cmp_write(&c, out, &err) != 0) {
            free(gtext);
            buf_release(&broken);
            goto fail;
        }
        char *md = path_join(out, "compare.md"), *plots = path_join(out, "plots");
        printf("\nwrote %s, REPORT.html and charts in %s/\n", md, plots);
        free(md);
        free(plots);
    }
    if (gtext)
        fputs(gtext, stdout);
    free(gtext);
    c.gates = NULL;
    if (n_broken > 0) {
        fflush(stdout);
        log_error("gate broken: %s", broken.data);
        rc = RN_ERR_POINTS;
    }
    buf_release(&broken);
    goto out;
fail:
    log_error("%s", err.msg);
    rc = err.code ? err.code : RN_ERR_USAGE;
out:
    if (loaded)
        cmp_release(&c);
    for (size_t i = 0; i < n_gates; i++)
        gate_release(&gates[i]);
    free(gates);
    strvec_release(&gate_args);
    strvec_release(&metrics);
    strvec_release(&specs);
    return rc;
}
