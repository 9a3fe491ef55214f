/*
 * tmpl: the ${variable} templates of experiment files. One template becomes
 * exactly one string (one argv element): expansion substitutes text and
 * never involves a shell, so "$(id); touch x" stays those very bytes.
 *   ${NAME}                one of enum tmpl_var
 *   ${env:NAME}            the environment variable NAME (error when unset)
 *   ${env:NAME:-default}   ... or default when NAME is unset or empty; the
 *                          default is a template too (${env:A:-${env:B}}),
 *                          nested at most TMPL_MAX_NEST deep
 *   $$                     a literal '$'; any other '$' is literal too
 */
#ifndef RUNNER_TMPL_H
#define RUNNER_TMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"

enum tmpl_var {
    TMPL_MODEL,
    TMPL_PORT,
    TMPL_HOST,
    TMPL_URL,
    TMPL_NAME,
    TMPL_VARIANT,
    TMPL_RUN_DIR,
    TMPL_CONCURRENCY, /* the rest are per point: client templates only */
    TMPL_PROMPTS,
    TMPL_INPUT_LEN,
    TMPL_OUTPUT_LEN,
    TMPL_POINT, /* the point's log name less ".log" ("c16-n48", "c16-n48-r2"): where a
                   client writes an export the point is read from (client/export.h) */
    TMPL_N_VARS,
};

/* How many defaults may nest inside each other: ${env:A:-${env:B:-...}}. */
#define TMPL_MAX_NEST 8

/* Bit masks of variables a template may use. */
#define TMPL_ALL        ((1u << TMPL_N_VARS) - 1)
#define TMPL_SERVER_SET ((1u << TMPL_CONCURRENCY) - 1) /* model .. run_dir */

enum tmpl_kind {
    TMPL_TEXT, /* literal bytes */
    TMPL_VAR,  /* ${name} */
    TMPL_ENV,  /* ${env:NAME} or ${env:NAME:-default} */
};

struct tmpl_piece {
    enum tmpl_kind kind;
    const char *text;  /* TEXT: the bytes; ENV: the variable name (not NUL-terminated) */
    size_t len;        /* bytes at text */
    enum tmpl_var var; /* VAR */
    bool has_def;      /* ENV: ":-default" given */
    const char *def;   /* ENV: the default's bytes */
    size_t def_len;
};

/* "model", "port", ... */
const char *tmpl_var_name(enum tmpl_var v);

/*
 * Read the next piece of the template at *pos and advance *pos. Returns 1
 * with *pc filled, 0 at the end, or -1 with err set (code `code`):
 * unterminated "${", unknown variable (with "did you mean"), bad
 * environment variable name. The piece ends at the '}' that balances its
 * "${", so a default (pc->def) may hold templates; it is not expanded here.
 */
int tmpl_next(const char **pos, struct tmpl_piece *pc, struct err *err, int code);

/*
 * Check a template without expanding it: syntax, and that every variable is
 * in `allowed` (a TMPL_* bit mask). where names the setting in messages
 * ("server settings"), also inside defaults, nested at most TMPL_MAX_NEST
 * deep. Returns 0 or -1 with err set (code `code`).
 */
int tmpl_check(const char *tmpl, unsigned allowed, const char *where, struct err *err, int code);

/*
 * Expand tmpl into out (appended). vals[v] is the value of variable v, or
 * NULL when it is not available here (an error naming it). Environment
 * variables are read with getenv. Returns 0, or -1 with err set (code
 * `code`; also when out's cap is reached).
 */
int tmpl_expand(const char *tmpl, const char *const vals[TMPL_N_VARS], struct buf *out,
                struct err *err, int code);

#endif
