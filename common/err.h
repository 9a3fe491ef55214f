/*
 * err: the error buffer each context carries. The first error wins: later
 * calls to err_set keep the original message, which is the one that names
 * the real cause. The code is the program's error enum, i.e. its exit status.
 */
#ifndef COMMON_ERR_H
#define COMMON_ERR_H

#include <stdarg.h>
#include <stddef.h>

struct err {
    int code;       /* 0 = no error; else the program's error enum value */
    char msg[1024]; /* one line, no trailing newline */
};

void err_init(struct err *e);
/* Record code and a printf-style message unless an error is already set;
 * returns the code that is now set. A failing function still returns -1
 * (or NULL): `return err_set(err, CODE, "..."), -1;` (docs/style.md). */
int err_set(struct err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* err_set with a va_list, for printf-style wrappers of err_set. */
int err_vset(struct err *e, int code, const char *fmt, va_list ap);
/* Prefix the existing message with "prefix: " (e.g. a file name). */
void err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
