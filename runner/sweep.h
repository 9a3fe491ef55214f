/*
 * sweep: sweep's exit statuses and its subcommands. main.c dispatches
 * over a table of these; each cmd_* gets the arguments after its name and
 * returns the process exit status.
 */
#ifndef RUNNER_COMMANDS_H
#define RUNNER_COMMANDS_H

/* Exit statuses (DESIGN.md); numbers are never reused for another meaning. */
enum rn_err {
    RN_OK = 0,                /* every point ok */
    RN_ERR_POINTS = 1,        /* some points failed; the rest are kept (compare --gate: a gate
                                 broke, the measurements say worse) */
    RN_ERR_USAGE = 2,         /* bad command line or experiment file */
    RN_ERR_ENV = 3,           /* model missing, binary missing, port taken, never healthy,
                                 results folder not writable */
    RN_ERR_INTERRUPTED = 130, /* SIGINT/SIGTERM: what was measured is kept */
};

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_extract(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_status(int argc, char **argv);

#endif
