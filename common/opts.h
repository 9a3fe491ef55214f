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

/* The number of rows of a flag table (an array, not a pointer). */
#define OPT_N(table) (sizeof(table) / sizeof((table)[0]))

/* A subcommand's --help text and its usage-error code: what every cmd_*
 * (sweep) and fp4_* (fp4serve) function hands to opt_cmd_parse with its
 * flag table. */
struct opt_cmd {
    const char *prog;     /* "sweep", "fp4serve" */
    const char *name;     /* the subcommand as typed: "plot", "export-tokenizer" */
    const char *synopsis; /* what follows "usage: PROG NAME " */
    const char *summary;  /* the paragraph under it, or NULL */
    int code;             /* the code of a usage error: RN_ERR_USAGE, FP_ERR_USAGE */
};

/*
 * The preamble every subcommand shares: parse argv with the flag table
 * opts[0..n_opts) (opt_parse) and answer --help/-h by printing c's text
 * and the table to stdout (opt_help). Returns 1 after printing the help
 * (the command then exits 0 without looking further), 0 when parsed, or -1
 * with a one-line message in err (code c->code). err is initialised here;
 * positional as in opt_parse.
 */
int opt_cmd_parse(const struct opt_cmd *c, const struct opt *opts, size_t n_opts, int argc,
                  char **argv, struct strvec *positional, struct err *err);

#endif
