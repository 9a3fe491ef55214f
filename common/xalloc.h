/*
 * xalloc: checked allocation shared by sweep and fp4serve.
 * Every function aborts the process with file:line on failure, so callers
 * never test for NULL. This is the only place that may call malloc directly.
 */
#ifndef COMMON_XALLOC_H
#define COMMON_XALLOC_H

#include <stddef.h>

void *xmalloc_at(size_t n, const char *file, int line);
void *xcalloc_at(size_t count, size_t size, const char *file, int line);
void *xrealloc_at(void *p, size_t n, const char *file, int line);
/* Aligned allocation (alignment a power of two, >= sizeof(void *)); free with free(). */
void *xaligned_alloc_at(size_t alignment, size_t n, const char *file, int line);
char *xstrdup_at(const char *s, const char *file, int line);
/* At most n bytes of s, up to its first NUL. */
char *xstrndup_at(const char *s, size_t n, const char *file, int line);
/* Exactly the n bytes at s (NUL bytes included), plus a terminating NUL:
 * for text whose length is known and may hold "\u0000" (JSON strings). */
char *xmemdup0_at(const void *s, size_t n, const char *file, int line);
/* printf into a fresh heap string; the caller frees it. */
char *xasprintf_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define xmalloc(n)           xmalloc_at((n), __FILE__, __LINE__)
#define xcalloc(c, s)        xcalloc_at((c), (s), __FILE__, __LINE__)
#define xrealloc(p, n)       xrealloc_at((p), (n), __FILE__, __LINE__)
#define xaligned_alloc(a, n) xaligned_alloc_at((a), (n), __FILE__, __LINE__)
#define xstrdup(s)           xstrdup_at((s), __FILE__, __LINE__)
#define xstrndup(s, n)       xstrndup_at((s), (n), __FILE__, __LINE__)
#define xmemdup0(s, n)       xmemdup0_at((s), (n), __FILE__, __LINE__)
#define xasprintf(...)       xasprintf_at(__FILE__, __LINE__, __VA_ARGS__)

/* Grow *arr (of *cap elements of elem_size) so that it holds at least need. */
#define XGROW(arr, cap, need)                                                                      \
    do {                                                                                           \
        if ((size_t)(need) > (size_t)(cap)) {                                                      \
            size_t nc_ = (cap) ? (size_t)(cap)*2 : 8;                                              \
            while (nc_ < (size_t)(need))                                                           \
                nc_ *= 2;                                                                          \
            (arr) = xrealloc((arr), nc_ * sizeof(*(arr)));                                         \
            (cap) = nc_;                                                                           \
        }                                                                                          \
    } while (0)

#endif
