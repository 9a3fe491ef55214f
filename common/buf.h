/*
 * buf: a growable byte buffer with a hard cap chosen at init, so that a
 * hostile stream or file cannot exhaust memory. The data is always
 * NUL-terminated, so text can be used as a C string.
 */
#ifndef COMMON_BUF_H
#define COMMON_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct buf {
    char *data;  /* owned; NUL-terminated; NULL until the first append */
    size_t len;  /* bytes in use, excluding the terminating NUL */
    size_t cap;  /* bytes allocated */
    size_t max;  /* cap on len in bytes, fixed at init */
    bool toobig; /* set once an append was refused for passing max */
};

#define BUF_MAX_DEFAULT ((size_t)64 << 20) /* 64 MiB */

/* Prepare an empty buffer that will refuse to grow past max_bytes. */
void buf_init(struct buf *b, size_t max_bytes);
/* Free the data; the buffer can be used again after buf_init. */
void buf_release(struct buf *b);
/* Forget the contents but keep the allocation (and clear toobig). */
void buf_reset(struct buf *b);
/* Hand the data to the caller (who frees it) and reset the buffer. */
char *buf_detach(struct buf *b, size_t *len);

/* Appends return 0, or -1 (data unchanged, toobig set) past the cap. */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_putc(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap);
/* Append s[0..n) as a quoted JSON string with escapes. Bytes that are not
 * valid UTF-8 are replaced by U+FFFD. */
int buf_json_str(struct buf *b, const char *s, size_t n);
/* Append a double as JSON: a finite number with up to 17 significant digits
 * (shortest round-trip form), or null for NaN and infinities. */
int buf_json_num(struct buf *b, double v);
/* Remove the first n bytes (n <= len), keeping the rest in place. */
void buf_consume(struct buf *b, size_t n);
/* Make room for at least n more bytes; returns a pointer to the free tail or
 * NULL past the cap. Follow with buf_commit(b, written). */
char *buf_reserve(struct buf *b, size_t n);
void buf_commit(struct buf *b, size_t n);

#endif
