/* err: first-error-wins message buffer carried on contexts. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void err_init(struct err *e)
{
    e->code = 0;
    e->msg[0] = '\0';
}

int err_vset(struct err *e, int code, const char *fmt, va_list ap)
{
    if (e->code)
        return e->code;
    e->code = code;
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    return code;
}

int err_set(struct err *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = err_vset(e, code, fmt, ap);
    va_end(ap);
    return rc;
}

void err_prefix(struct err *e, const char *fmt, ...)
{
    char pre[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof(pre), fmt, ap);
    va_end(ap);
    char old[sizeof(e->msg)];
    memcpy(old, e->msg, sizeof(old));
    size_t n = strlen(pre);
    if (n > sizeof(e->msg) - 3)
        n = sizeof(e->msg) - 3;
    memcpy(e->msg, pre, n);
    memcpy(e->msg + n, ": ", 2);
    size_t rest = sizeof(e->msg) - n - 3;
    size_t m = strnlen(old, rest);
    memcpy(e->msg + n + 2, old, m);
    e->msg[n + 2 + m] = '\0';
}
