/*
 * buf: capped growable byte buffer. Growth doubles the allocation; an append
 * that would pass the cap is refused whole, so callers can report the cap
 * instead of silently truncating.
 */
#include "buf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void buf_init(struct buf *b, size_t max_bytes)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max_bytes;
    b->toobig = false;
}

void buf_release(struct buf *b)
{
    free(b->data);
    buf_init(b, b->max);
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    b->toobig = false;
    if (b->data)
        b->data[0] = '\0';
}

char *buf_detach(struct buf *b, size_t *len)
{
    char *p = b->data ? b->data : xstrdup("");
    if (len)
        *len = b->len;
    buf_init(b, b->max);
    return p;
}

char *buf_reserve(struct buf *b, size_t n)
{
    if (n > b->max || b->len > b->max - n) {
        b->toobig = true;
        return NULL;
    }
    size_t need = b->len + n + 1;
    if (need > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < need)
            nc *= 2;
        b->data = xrealloc(b->data, nc);
        b->cap = nc;
    }
    return b->data + b->len;
}

void buf_commit(struct buf *b, size_t n)
{
    b->len += n;
    b->data[b->len] = '\0';
}

int buf_append(struct buf *b, const void *p, size_t n)
{
    char *dst = buf_reserve(b, n);
    if (!dst)
        return -1;
    if (n)
        memcpy(dst, p, n);
    buf_commit(b, n);
    return 0;
}

int buf_puts(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_putc(struct buf *b, char c)
{
    return buf_append(b, &c, 1);
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof(tmp))
        return buf_append(b, tmp, (size_t)n);
    char *dst = buf_reserve(b, (size_t)n);
    if (!dst)
        return -1;
    vsnprintf(dst, (size_t)n + 1, fmt, ap);
    buf_commit(b, (size_t)n);
    return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    unsigned cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

int buf_json_str(struct buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (buf_putc(b, '"'))
        return -1;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        /* copy plain runs in one go */
        while (run < n && u[run] >= 0x20 && u[run] < 0x80 && u[run] != '"' && u[run] != '\\')
            run++;
        if (run > i && buf_append(b, s + i, run - i))
            return -1;
        i = run;
        if (i >= n)
            break;
        unsigned c = u[i];
        int rc = 0;
        if (c == '"')
            rc = buf_puts(b, "\\\"");
        else if (c == '\\')
            rc = buf_puts(b, "\\\\");
        else if (c == '\n')
            rc = buf_puts(b, "\\n");
        else if (c == '\r')
            rc = buf_puts(b, "\\r");
        else if (c == '\t')
            rc = buf_puts(b, "\\t");
        else if (c < 0x20)
            rc = buf_printf(b, "\\u%04x", c);
        else {
            size_t len = utf8_seq(u + i, n - i);
            if (len == 0) {
                rc = buf_puts(b, "\xEF\xBF\xBD");
                len = 1;
            } else {
                rc = buf_append(b, s + i, len);
            }
            i += len;
            if (rc)
                return -1;
            continue;
        }
        if (rc)
            return -1;
        i++;
    }
    return buf_putc(b, '"');
}

int buf_json_num(struct buf *b, double v)
{
    if (!isfinite(v))
        return buf_puts(b, "null");
    if (v == (double)(long long)v && fabs(v) < 1e15)
        return buf_printf(b, "%lld", (long long)v);
    char tmp[32];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    return buf_puts(b, tmp);
}

void buf_consume(struct buf *b, size_t n)
{
    if (n >= b->len) {
        buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}
