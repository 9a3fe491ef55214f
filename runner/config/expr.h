/*
 * expr: the small arithmetic language of `bench.prompts` when the grid is
 * given as a concurrency list: numbers, the variable c (the concurrency),
 * + - * / and parentheses, and the functions min, max (one or more
 * arguments), ceil and floor. Example: "max(8, 1.5*c)".
 */
#ifndef RUNNER_EXPR_H
#define RUNNER_EXPR_H

#include "err.h"

#define EXPR_MAX_DEPTH 32 /* nested parentheses, calls and signs */

enum expr_status {
    EXPR_OK = 0,
    EXPR_SYNTAX = -1, /* the text is not an expression: wrong for every c */
    EXPR_VALUE = -2,  /* well formed, but this c gives no finite value (x/0) */
};

/*
 * Evaluate text with c bound to the given value. Returns EXPR_OK with *out
 * set, or EXPR_SYNTAX / EXPR_VALUE with a message such as "unexpected ')' at
 * character 7" in err (code `code`, no location: the caller adds it).
 */
enum expr_status expr_eval(const char *text, double c, double *out, struct err *err, int code);

#endif
