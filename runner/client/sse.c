/*
 * sse: Server-Sent Events parsing, incremental and split-invariant. A line
 * is acted on only once its terminator ("\n", "\r\n" or "\r") has arrived,
 * so neither a read boundary nor a multi-byte character cut in two can
 * change the result. Lines that arrive whole are parsed in place, without
 * a copy; only a line cut by a read boundary is assembled in p->line.
 */
#include "client/sse.h"

#include <string.h>

static const char bom[] = "\xEF\xBB\xBF";

void sse_init(struct sse_parser *p, size_t max_bytes)
{
    memset(p, 0, sizeof(*p));
    p->max_bytes = max_bytes;
    buf_init(&p->line, max_bytes);
    /* data holds up to max_bytes of values plus their '\n' separators */
    buf_init(&p->data, max_bytes + 1);
    buf_init(&p->type, max_bytes);
    p->at_start = true;
}

void sse_release(struct sse_parser *p)
{
    buf_release(&p->line);
    buf_release(&p->data);
    buf_release(&p->type);
}

void sse_reset(struct sse_parser *p)
{
    buf_reset(&p->line);
    buf_reset(&p->data);
    buf_reset(&p->type);
    p->after_cr = false;
    p->at_start = true;
    p->status = SSE_OK;
    p->n_events = 0;
    p->n_comments = 0;
}

/* The blank line: hand the pending event to fn, then forget it. */
static int dispatch(struct sse_parser *p, sse_event_fn fn, void *ctx)
{
    if (p->data.len == 0) { /* no data field: nothing to dispatch (spec) */
        buf_reset(&p->type);
        return SSE_OK;
    }
    /* every value was stored with a trailing '\n'; the last one is dropped */
    p->data.data[--p->data.len] = '\0';
    /* the callback sees the buffers as they are; they are reset after it */
    struct sse_event ev = {p->data.data, p->data.len, p->type.data ? p->type.data : "",
                           p->type.len};
    p->n_events++;
    int rc = fn ? fn(ctx, &ev) : 0;
    buf_reset(&p->data);
    buf_reset(&p->type);
    return rc;
}

/* Act on one complete line l[0..len), its terminator already removed. */
static int process_line(struct sse_parser *p, const char *l, size_t len, sse_event_fn fn, void *ctx)
{
    /* a UTF-8 byte-order mark may open the stream (spec): drop it */
    if (p->at_start) {
        p->at_start = false;
        if (len >= 3 && memcmp(l, bom, 3) == 0) {
            l += 3;
            len -= 3;
        }
    }
    if (len == 0)
        return dispatch(p, fn, ctx);
    if (l[0] == ':') {
        p->n_comments++;
        return SSE_OK;
    }
    /* "name: value", "name:value" (one space is dropped, not more) or just
     * "name" (an empty value) */
    const char *colon = memchr(l, ':', len);
    size_t name_len = colon ? (size_t)(colon - l) : len;
    const char *value = colon ? colon + 1 : l + len;
    size_t value_len = (size_t)(l + len - value);
    if (value_len && value[0] == ' ') {
        value++;
        value_len--;
    }
    if (name_len == 4 && memcmp(l, "data", 4) == 0) {
        if (buf_append(&p->data, value, value_len) != 0 || buf_putc(&p->data, '\n') != 0)
            return SSE_TOOBIG;
    } else if (name_len == 5 && memcmp(l, "event", 5) == 0) {
        buf_reset(&p->type);
        if (buf_append(&p->type, value, value_len) != 0)
            return SSE_TOOBIG;
    }
    /* "id", "retry" and unknown fields carry nothing a benchmark needs */
    return SSE_OK;
}

/* Index of the first '\r' or '\n' in s[0..n), or n. */
static size_t find_eol(const char *s, size_t n)
{
    const char *nl = memchr(s, '\n', n);
    size_t end = nl ? (size_t)(nl - s) : n;
    const char *cr = memchr(s, '\r', end);
    return cr ? (size_t)(cr - s) : end;
}

int sse_feed(struct sse_parser *p, const char *bytes, size_t n, sse_event_fn fn, void *ctx)
{
    if (p->status != SSE_OK)
        return p->status;
    size_t i = 0;
    if (n > 0 && p->after_cr) {
        /* a "\r\n" cut between two reads is one terminator, not two */
        if (bytes[0] == '\n')
            i = 1;
        p->after_cr = false;
    }
    int rc = SSE_OK;
    while (i < n && rc == SSE_OK) {
        size_t k = find_eol(bytes + i, n - i);
        if (i + k == n) { /* no terminator yet: keep the piece for later */
            if (buf_append(&p->line, bytes + i, k) != 0)
                rc = SSE_TOOBIG;
            break;
        }
        char term = bytes[i + k];
        /* the common case, a line that arrived whole, is parsed in place;
         * either way a line longer than the cap fails the same */
        if (p->line.len == 0) {
            rc = k > p->max_bytes ? SSE_TOOBIG : process_line(p, bytes + i, k, fn, ctx);
        } else if (buf_append(&p->line, bytes + i, k) != 0) {
            rc = SSE_TOOBIG;
        } else {
            rc = process_line(p, p->line.data, p->line.len, fn, ctx);
            buf_reset(&p->line);
        }
        i += k + 1;
        if (term == '\r') {
            if (i < n && bytes[i] == '\n')
                i++;
            else if (i == n)
                p->after_cr = true;
        }
    }
    p->status = rc;
    return rc;
}

bool sse_pending(const struct sse_parser *p)
{
    return p->status == SSE_TOOBIG || p->line.len > 0 || p->data.len > 0;
}
