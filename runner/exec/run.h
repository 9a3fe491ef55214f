/*
 * run: `sweep run` end to end (DESIGN.md "A run, step by step"): load the
 * experiment and build the plan; check every model path, binary and fixed
 * port before anything starts; create the run folder; per variant start the
 * server and wait until it is healthy; per point run the client, extract
 * the metrics, check invariants and rewrite points.csv; restart a server
 * that died; on Ctrl-C stop everything and say how to resume; finally
 * build the report (fit, charts, REPORT.md).
 */
#ifndef RUNNER_RUN_H
#define RUNNER_RUN_H

#include <stdbool.h>

#include "strvec.h"

#include "exec/proc.h"

struct run_opts {
    const char *exp_path;      /* the experiment file */
    const char *out_dir;       /* --out, or NULL for results/<name>/<stamp> */
    const char *resume_dir;    /* --resume RUN_DIR, or NULL */
    const char *from_dir;      /* --from RUN_DIR: its fit gives the first ETAs, or NULL */
    bool force;                /* --force: move what --out holds into previous-N/ */
    const struct strvec *only; /* --only names, or NULL / empty for every variant */
    bool dry_run;              /* print the plan, start nothing */
    const char *self_exe;      /* this sweep binary (for the builtin client) */
    bool progress_tty;         /* stderr is a terminal: live progress line */
    bool preview;              /* stdout is a terminal: chart preview at the end */
    int argc;                  /* sweep's own command line, for the manifest and */
    char **argv;               /* the resume hint (argv[0] is the program) */
};

/*
 * Run the experiment. stop is the signal flag (proc_stop_flag: 1 = stop,
 * 2 = hurry) that the caller's SIGINT/SIGTERM handler raises. Returns the
 * exit status: RN_OK, RN_ERR_POINTS (some points failed), RN_ERR_USAGE,
 * RN_ERR_ENV (model, binary, port, never healthy, folder not writable) or
 * RN_ERR_INTERRUPTED. Every child process is stopped on every path. The
 * run folder is locked (store/runfolder.h) from before the first write until
 * the return; a folder another sweep holds is refused with RN_ERR_ENV, a
 * non-empty --out without force and a --resume folder of a different
 * experiment with RN_ERR_USAGE. An artifact that cannot be written
 * (points.csv, manifest.json, fit.json, charts, REPORT.md) makes the status
 * RN_ERR_ENV unless the run was interrupted.
 * Messages go to stderr, the summary and resume hint to stdout.
 */
int run_experiment(const struct run_opts *o, proc_stop_flag *stop);

#endif
