/*
 * stream: what one OpenAI-style streaming response means for a benchmark.
 * Bytes go in with their arrival time; out come the arrival times of the
 * chunks that carry generated text, the server's usage counts, and whether
 * the stream ended properly ([DONE] or a finish_reason) or failed (an
 * in-band error event, unparsable JSON, cut off, or no text at all).
 * Independent of the transport, so it is unit-tested and fuzzed alone.
 */
#ifndef RUNNER_STREAM_H
#define RUNNER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#include "client/sse.h"

/* The largest usage count taken as real, tokens. Larger (or negative)
 * values are ignored: no response is that long, and sums over 2^30
 * requests of counts below 2^32 cannot overflow a 64-bit total. */
#define STREAM_MAX_USAGE ((long)UINT32_MAX)

/* How a stream ended, as far as its bytes tell. */
enum stream_result {
    STREAM_OK = 0,      /* [DONE] or a finish_reason, and at least one text chunk */
    STREAM_ERROR_EVENT, /* data: {"error":...}, {"object":"error"} or "event: error" */
    STREAM_PARSE,       /* an event that is not a JSON object, or an oversized line/event */
    STREAM_TRUNCATED,   /* ended without [DONE] and without a finish_reason */
    STREAM_NO_CONTENT,  /* ended properly but no chunk carried any text */
};

struct stream {
    struct sse_parser sse;        /* owned */
    uint64_t now_ns;              /* arrival time of the bytes being fed (CLOCK_MONOTONIC) */
    uint64_t first_ns;            /* arrival of the first text chunk (TTFT), 0 before it */
    uint64_t *chunk_ns;           /* owned; arrival time of each text chunk, ns, n_stored of them */
    size_t n_chunks;              /* text chunks seen (may exceed n_stored) */
    size_t n_stored;              /* entries used in chunk_ns */
    size_t cap_chunks;            /* entries allocated in chunk_ns */
    size_t max_chunks;            /* cap on n_stored, fixed at init */
    long usage_completion;        /* usage.completion_tokens of the last usage object, or -1
                                     (also when outside 0..STREAM_MAX_USAGE) */
    long usage_prompt;            /* usage.prompt_tokens of the last usage object, or -1 */
    long usage_cached;            /* usage.prompt_tokens_details.cached_tokens, or -1 */
    struct buf *text;             /* borrowed; non-NULL: choice 0's text (completions "text",
                                     chat "delta.content") is appended here */
    bool done;                    /* data: [DONE] arrived (later events are ignored) */
    bool finished;                /* a choice carried a non-null finish_reason */
    bool failed;                  /* an error event or a parse error stopped the stream */
    enum stream_result fail_kind; /* meaningful when failed */
    char msg[256];                /* what failed: the server's error message or the parse error */
};

/* Prepare a stream whose events may not exceed max_event_bytes and which
 * keeps at most max_chunks chunk times (later ones are counted only). */
void stream_init(struct stream *s, size_t max_event_bytes, size_t max_chunks);
/* Free everything the stream owns. */
void stream_release(struct stream *s);
/* Forget the previous response (for the next request on the same slot). */
void stream_reset(struct stream *s);

/*
 * Feed bytes[0..n) that arrived at now_ns. Returns 0, or -1 once the stream
 * has failed (an error event, bad JSON or an oversized event): the caller
 * should stop reading. Further input after a failure is ignored.
 */
int stream_feed(struct stream *s, const char *bytes, size_t n, uint64_t now_ns);

/* The verdict once no more bytes will come (the transfer finished). */
enum stream_result stream_end(const struct stream *s);

/* Hand the chunk times to the caller (who frees them); n gets n_stored. */
uint64_t *stream_take_chunks(struct stream *s, size_t *n);

#endif
