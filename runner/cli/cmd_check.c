/*
 * cmd_check: `sweep check EXPERIMENT.yaml`: load and validate the file,
 * then print the plan (every variant's server argv and environment, the
 * model's status, every point's client argv, log name and key) without
 * starting anything. `--schema` prints the experiment-file schema instead,
 * `--metrics` the canonical metrics and each preset's names for them.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "opts.h"
#include "sweep.h"
#include "xalloc.h"

#include "analysis/estimate.h"
#include "analysis/glossary.h"
#include "config/experiment.h"
#include "config/plan.h"

static const char synopsis[] =
    "EXPERIMENT.yaml [--only VARIANT]... [--from RUN_DIR] | --schema | --metrics";
static const char summary[] =
    "Validate an experiment file and print its plan: each variant's server argv (shell-quoted,\n"
    "though nothing is ever run through a shell), environment and model status, then every\n"
    "point's client argv, log name and key. Nothing is started. Errors name file:line:col and\n"
    "exit with status 2; a missing model is a warning here (sweep run refuses it). --from\n"
    "adds each point's predicted duration; a RUN_DIR without points.csv, or without an ok\n"
    "point to fit, is exit 3.";

struct check_args {
    struct strvec only; /* --only VARIANT, repeatable */
    bool schema;        /* --schema */
    bool metrics;       /* --metrics: the glossary (analysis/glossary.c) */
    const char *from;   /* --from RUN_DIR: time estimate from that run's fit (estimate.c) */
};

/* This very binary, for the builtin client's argv (the plan shows real paths). */
static char *self_exe(void)
{
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (n <= 0)
        return xstrdup("sweep");
    path[n] = '\0';
    return xstrdup(path);
}

/* Load, plan and print; returns the exit status. */
static int check_file(const char *file, const struct check_args *a)
{
    struct experiment exp;
    struct plan plan;
    struct err err;
    char *self = self_exe();
    char *engine = NULL;
    int rc;

    err_init(&err);
    if (exp_load_file(file, &exp, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        free(self);
        return err.code;
    }
    bool bundled = false;
    for (size_t i = 0; i < exp.n_variants; i++)
        bundled = bundled || exp.variants[i].server.engine == EXP_ENGINE_BUNDLED;
    if (bundled && !(engine = plan_find_bundled_engine(self))) {
        log_warn("the bundled engine 'fp4serve' was not found (next to %s, in build/bin, on "
                 "PATH); the plan shows it as 'fp4serve'",
                 self);
        engine = xstrdup("fp4serve");
    }
    struct plan_opts po = {
        .run_dir = NULL, .only = &a->only, .self_exe = self, .bundled_engine = engine};
    rc = plan_build(&exp, &po, &plan, &err);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", file, err.msg);
        rc = err.code;
    } else {
        plan_print(stdout, &plan);
        for (size_t i = 0; i < plan.n_variants; i++)
            if (plan.variants[i].model_problem)
                log_warn("variant '%s': %s (sweep run will refuse to start)",
                         plan.variants[i].v->name, plan.variants[i].model_problem);
        /* the time estimate of --from RUN_DIR (estimate.c) */
        if (a->from && est_print_plan(stdout, &plan, a->from, &err) != 0) {
            fprintf(stderr, "sweep check: %s\n", err.msg);
            rc = err.code;
        }
    }
    plan_release(&plan);
    exp_release(&exp);
    free(engine);
    free(self);
    return rc;
}

static const struct opt_cmd usage = {"sweep", "check", synopsis, summary, RN_ERR_USAGE};

int cmd_check(int argc, char **argv)
{
    struct check_args a = {.only = STRVEC_INIT, .schema = false, .metrics = false, .from = NULL};
    struct strvec pos = STRVEC_INIT;
    struct err err;
    int rc;
    const struct opt opts[] = {
        {"only", 0, OPT_LIST, &a.only, "VARIANT", "plan only this variant (repeatable)"},
        {"schema", 0, OPT_BOOL, &a.schema, NULL,
         "print every key of an experiment file (type, default, unit, meaning) and exit"},
        {"metrics", 0, OPT_BOOL, &a.metrics, NULL,
         "print what TTFT, TPOT, ITL, E2E... mean here and each preset's name for them, and exit"},
        {"from", 0, OPT_STR, &a.from, "RUN_DIR",
         "estimate each point's duration from that run's scaling fit, and the total"},
    };

    err_init(&err);
    rc = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, &pos, &err);
    if (rc == 1) {
        rc = RN_OK;
    } else if (rc != 0) {
        fprintf(stderr, "sweep check: %s\n", err.msg);
        rc = RN_ERR_USAGE;
    } else if (a.schema && (pos.n || a.only.n || a.from)) {
        fprintf(stderr, "sweep check: --schema takes no experiment file, --only or --from "
                        "(see --help)\n");
        rc = RN_ERR_USAGE;
    } else if (a.metrics && (a.schema || pos.n || a.only.n || a.from)) {
        fprintf(stderr, "sweep check: --metrics takes no experiment file, --schema, --only or "
                        "--from (see --help)\n");
        rc = RN_ERR_USAGE;
    } else if (a.metrics) {
        gloss_print(stdout);
        rc = RN_OK;
    } else if (a.schema) {
        exp_print_schema(stdout);
        rc = RN_OK;
    } else if (pos.n != 1) {
        fprintf(stderr, "sweep check: want one experiment file, got %zu (see --help)\n", pos.n);
        rc = RN_ERR_USAGE;
    } else {
        rc = check_file(pos.v[0], &a);
    }
    strvec_release(&a.only);
    strvec_release(&pos);
    return rc;
}
