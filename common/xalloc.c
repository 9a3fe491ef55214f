/*
 * xalloc: allocation that cannot return NULL. On failure it names the
 * caller's file and line and aborts; there is no sensible recovery from
 * running out of memory in either program.
 */
#include "xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(size_t n, const char *file, int line)
{
    fprintf(stderr, "fatal: out of memory allocating %zu bytes at %s:%d\n", n, file, line);
    abort();
}

void *xmalloc_at(size_t n, const char *file, int line)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die(n, file, line);
    return p;
}

void *xcalloc_at(size_t count, size_t size, const char *file, int line)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        die(count * size, file, line);
    return p;
}

void *xrealloc_at(void *p, size_t n, const char *file, int line)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        die(n, file, line);
    return q;
}

void *xaligned_alloc_at(size_t alignment, size_t n, const char *file, int line)
{
    void *p = NULL;
    if (posix_memalign(&p, alignment, n ? n : alignment) != 0)
        die(n, file, line);
    return p;
}

char *xstrdup_at(const char *s, const char *file, int line)
{
    return xstrndup_at(s, strlen(s), file, line);
}

char *xstrndup_at(const char *s, size_t n, const char *file, int line)
{
    size_t len = strnlen(s, n);
    char *p = xmalloc_at(len + 1, file, line);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *xmemdup0_at(const void *s, size_t n, const char *file, int line)
{
    char *p = xmalloc_at(n + 1, file, line);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xasprintf_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        die(0, file, line);
    char *p = xmalloc_at((size_t)n + 1, file, line);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}
