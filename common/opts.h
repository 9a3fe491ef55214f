/*
 * opts: table-driven command-line flags. One table per command drives the
 * parsing, the range checks, the errors ("did you mean") and the --help
 * text, so they cannot drift apart.
 */
#ifndef COMMON_OPTS_H
#define COMMON_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "err.h"
#include "strvec.h"

enum opt_type {
    OPT_BOOL,   /* dest: bool *; takes no value */
    OPT_LONG,   /* dest: long *; checked against [min, max] when min < max */
    OPT_DOUBLE, /* dest: double *; checked against [min, max] when min < max */
    OPT_STR,    /* dest: const char **; points into argv, not copied */
    OPT_LIST,   /* dest: struct strvec *; repeatable, each value pushed */
};

struct opt {
    const char *name; /* long name without dashes: "input-len" */
    char short_name;  /* 'c', or 0 for none */
    enum opt_type type;
    void *dest;
    const char *arg;  /* value name in --help: "N", "PATH" */
    const char *help; /* one line; say the default and the unit */
    double min, max;  /* numeric range (inclusive) when min < max */
};

/*
 * Parse argv[0..argc) (argv[0] is the first argument after the command
 * name, not the program). Values may be "--name value" or "--name=value";
 * "--" ends flags. Everything else goes to positional (may be NULL when the
 * command takes none). An empty value or positional argument is refused. Returns 0, 1 when
 * --help/-h was given (nothing else is checked), or -1 with a one-line message in err (code
 * `code`).
 */
int opt_parse(int argc, char **argv, const struct opt *opts, size_t n_opts,
              struct strvec *positional, struct err *err, int code);

/* Print "usage: PROG CMD SYNOPSIS", the summary and one line per flag. */
void opt_help(FILE *f, const char *prog, const char *cmd, const char *synopsis, const char *summary,
              const struct opt *opts, size_t n_opts);

#endif
