/*
 * sweep: declarative scaling experiments for LLM inference servers.
 * This file only dispatches to the subcommand table; see runner/README.md
 * for a tour of the modules.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "sweep.h"
#include "version.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *synopsis;
};

static const struct command commands[] = {
    {"run", cmd_run, "run an experiment: start the server, run every point, fit, chart"},
    {"check", cmd_check, "validate an experiment and print its plan (and time estimate)"},
    {"bench", cmd_bench, "built-in load test against a running server"},
    {"extract", cmd_extract, "extract metrics from benchmark logs as JSON"},
    {"plot", cmd_plot, "re-extract a run from its saved logs, refit, redraw every chart"},
    {"compare", cmd_compare, "compare runs or variants side by side, with ratios and charts"},
    {"import", cmd_import, "make a run from existing benchmark logs"},
    {"status", cmd_status, "the state of a run's SLURM tasks (executor: slurm)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: sweep COMMAND [ARGS]   (sweep COMMAND --help, or sweep help COMMAND, for "
               "details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].synopsis);
    fprintf(f, "  %-9s %s\n  %-9s %s\n", "help", "this list, or help COMMAND: that command's help",
            "version", "print sweep's version");
    fprintf(f, "\nexit status: 0 all points ok, 1 some points failed (or a compare --gate broke),\n"
               "2 usage or experiment error, 3 environment error, 130 interrupted\n");
}

/* status, unless stdout could not be written: a summary, result block,
 * JSON, help or version that did not reach it (a full disk, /dev/full)
 * must not pass for a success (docs/reliability.md W3-N15). */
static int stdout_checked(int status)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        log_error("output to stdout could not be written%s%s", errno ? ": " : "",
                  errno ? strerror(errno) : "");
        if (status == RN_OK || status == RN_ERR_POINTS)
            status = RN_ERR_ENV;
    }
    return status;
}

int main(int argc, char **argv)
{
    log_setup("sweep", LOG_INFO, 0);
    if (argc < 2) {
        usage(stderr);
        return RN_ERR_USAGE;
    }
    const char *name = argv[1];
    /* "sweep help X" is "sweep X --help" */
    char *help_argv[] = {"--help", NULL};
    bool help = strcmp(name, "help") == 0 && argc > 2;
    if (help)
        name = argv[2];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0 ||
        (help && strcmp(name, "version") == 0)) {
        usage(stdout);
        return stdout_checked(RN_OK);
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("sweep %s\n", BUILD_VERSION);
        return stdout_checked(RN_OK);
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0) {
            int status = help ? commands[i].fn(1, help_argv) : commands[i].fn(argc - 2, argv + 2);
            return stdout_checked(status);
        }
    fprintf(stderr, "sweep: unknown command '%s'\n", name);
    usage(stderr);
    return RN_ERR_USAGE;
}
