/*
 * cmd_run: `sweep run EXPERIMENT.yaml [--out DIR [--force]] [--only VARIANT]...
 * [--resume RUN_DIR] [--dry-run]`. Parses the flags, installs the signal
 * handling (the one process-wide flag below) and hands over to run.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "opts.h"
#include "strvec.h"
#include "sweep.h"

#include "exec/proc.h"
#include "exec/run.h"

/*
 * The only global of `sweep run`: how many times SIGINT, SIGTERM or SIGHUP
 * arrived, capped at 2. 1 = stop after stopping the client and the server
 * gracefully (the point in flight is recorded as interrupted); 2 = a
 * second Ctrl-C: no more grace, SIGKILL to the process groups at once.
 * Written only by on_stop_signal, read everywhere through a pointer.
 */
static volatile sig_atomic_t stop_requests;

static void on_stop_signal(int sig)
{
    (void)sig;
    if (stop_requests < 2)
        stop_requests++;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: waits return early and see the flag */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    struct sigaction ign;
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, NULL); /* a closed socket is an error, not a death */
}

static const char synopsis[] =
    "EXPERIMENT.yaml [--out DIR [--force]] [--only VARIANT]... [--resume RUN_DIR] "
    "[--from RUN_DIR] [--dry-run]";
static const char summary[] =
    "Run an experiment: check every model path and binary, start each variant's server in\n"
    "its own process group and wait until it is healthy, run every grid point with the\n"
    "benchmark client, extract the metrics and save points.csv after each point, restart a\n"
    "server that dies, then fit and chart. Results go to results/<name>/<YYYYmmdd-HHMMSS>/\n"
    "(results/<name>/latest points there). Ctrl-C stops the client and the server, keeps\n"
    "what was measured and prints the --resume command; a second Ctrl-C kills at once.\n"
    "One sweep at a time writes into a run folder (a lock file, .sweep.lock, in it). --out must\n"
    "be empty or new; --resume only continues a run of the same experiment (variants and\n"
    "points may be added).\n"
    "\n"
    "exit status: 0 every point ok, 1 some points failed (the rest are kept), 2 usage or\n"
    "experiment error (--out not empty, --resume of another experiment), 3 environment error\n"
    "(model path or binary missing, port in use, server never healthy, run folder in use by\n"
    "another sweep, a result that could not be written), 130 interrupted.";

static const struct opt_cmd usage = {"sweep", "run", synopsis, summary, RN_ERR_USAGE};

int cmd_run(int argc, char **argv)
{
    const char *out_dir = NULL, *resume_dir = NULL, *from_dir = NULL;
    bool dry_run = false, force = false;
    struct strvec only, positional;
    strvec_init(&only);
    strvec_init(&positional);
    const struct opt opts[] = {
        {"out", 0, OPT_STR, &out_dir, "DIR",
         "results folder for this run (default results/<name>/<YYYYmmdd-HHMMSS>)"},
        {"only", 0, OPT_LIST, &only, "VARIANT", "run only this variant (repeatable)"},
        {"resume", 0, OPT_STR, &resume_dir, "RUN_DIR",
         "continue that run in place: points with an ok row are skipped, the rest run"},
        {"force", 0, OPT_BOOL, &force, NULL,
         "--out DIR is not empty: move what it holds into DIR/previous-N/ (nothing is deleted; "
         "refused when that would move a file the run uses)"},
        {"dry-run", 0, OPT_BOOL, &dry_run, NULL,
         "print the plan (every server and client argv) and start nothing"},
        {"from", 0, OPT_STR, &from_dir, "RUN_DIR",
         "an earlier run whose fit gives the ETA until two concurrency levels have run"},
    };
    struct err err;
    err_init(&err);
    int status = RN_OK;
    int rc = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, &positional, &err);
    if (rc == 1) {
        goto out;
    }
    if (rc == 0 && positional.n != 1)
        err_set(&err, RN_ERR_USAGE, "run: expected one experiment file, got %zu arguments",
                positional.n);
    if (rc == 0 && out_dir && resume_dir)
        err_set(&err, RN_ERR_USAGE,
                "run: --out and --resume exclude each other (a resumed "
                "run stays in its folder)");
    if (rc == 0 && force && !out_dir)
        err_set(&err, RN_ERR_USAGE,
                "run: --force only goes with --out DIR (it moves what DIR holds aside)");
    if (err.code) {
        log_error("%s", err.msg);
        fprintf(stderr, "usage: sweep run %s\n", synopsis);
        status = RN_ERR_USAGE;
        goto out;
    }
    install_signals();
    if (proc_become_subreaper() != 0)
        log_warn("cannot become a child subreaper; processes that leave their group may "
                 "outlive the run");
    char *self = realpath("/proc/self/exe", NULL);
    /* sweep's whole command line, for the manifest and the resume hint */
    struct strvec full;
    strvec_init(&full);
    strvec_push(&full, program_invocation_name);
    strvec_push(&full, "run");
    for (int i = 0; i < argc; i++)
        strvec_push(&full, argv[i]);
    struct run_opts ro = {
        .exp_path = positional.v[0],
        .out_dir = out_dir,
        .resume_dir = resume_dir,
        .from_dir = from_dir,
        .force = force,
        .only = &only,
        .dry_run = dry_run,
        .self_exe = self ? self : "sweep",
        .progress_tty = isatty(STDERR_FILENO),
        .preview = isatty(STDOUT_FILENO),
        .argc = (int)full.n,
        .argv = full.v,
    };
    status = run_experiment(&ro, &stop_requests);
    strvec_release(&full);
    free(self);
out:
    strvec_release(&only);
    strvec_release(&positional);
    return status;
}
