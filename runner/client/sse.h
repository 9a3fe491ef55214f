/*
 * sse: an incremental parser for Server-Sent Events (the WHATWG
 * "text/event-stream" rules). Bytes go in as they arrive from the socket, in
 * pieces of any size; complete events come out through a callback. The
 * events are the same for every way the same bytes are split, and every
 * buffer is capped, so a hostile stream cannot exhaust memory.
 */
#ifndef RUNNER_SSE_H
#define RUNNER_SSE_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* One dispatched event. The pointers are valid only during the callback. */
struct sse_event {
    const char *data; /* the data lines joined by "\n"; NUL-terminated */
    size_t data_len;  /* bytes in data, excluding the NUL */
    const char *type; /* the "event:" field, "" when none was given; NUL-terminated */
    size_t type_len;  /* bytes in type (a NUL byte inside is possible) */
};

/* Called once per event; return 0 to go on, or a positive value to stop the
 * parser (sse_feed then returns that value and ignores further input). */
typedef int (*sse_event_fn)(void *ctx, const struct sse_event *ev);

enum sse_status {
    SSE_OK = 0,
    SSE_TOOBIG = -1, /* a line or an event passed the cap chosen at init */
};

struct sse_parser {
    struct buf line;   /* the current line, without its terminator */
    struct buf data;   /* data lines of the pending event, each ending in '\n' */
    struct buf type;   /* event type of the pending event */
    size_t max_bytes;  /* cap on one event's data (and on one line), bytes */
    bool has_data;     /* a data field was seen since the last dispatch */
    bool after_cr;     /* the last byte seen was '\r' (a following '\n' belongs to it) */
    bool at_start;     /* no line finished yet: a UTF-8 BOM may still be stripped */
    int status;        /* enum sse_status, or the callback's positive return */
    size_t n_events;   /* events dispatched */
    size_t n_comments; /* comment lines (": ping") seen */
};

/* Prepare a parser whose lines and events may not exceed max_bytes. */
void sse_init(struct sse_parser *p, size_t max_bytes);
/* Free the buffers; the parser may be sse_init'ed again. */
void sse_release(struct sse_parser *p);
/* Forget all state (for a new stream), keeping the allocations. */
void sse_reset(struct sse_parser *p);

/*
 * Parse bytes[0..n), calling fn for every event completed by them. Returns
 * SSE_OK (0), SSE_TOOBIG once a line or event passed the cap, or the
 * callback's positive return value; after a nonzero return the parser stays
 * in that state and ignores further input (until sse_reset).
 */
int sse_feed(struct sse_parser *p, const char *bytes, size_t n, sse_event_fn fn, void *ctx);

/* True when bytes were received after the last complete event: an
 * unfinished line or an event without its terminating blank line. At the
 * end of a stream this means it was cut off mid-event. Also true once a
 * line or event passed the cap (its bytes were dropped). */
bool sse_pending(const struct sse_parser *p);

#endif
