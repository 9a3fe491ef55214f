/*
 * runner_stream: the stream reader on its own, fed whole responses: which
 * chunks count as text, the end markers, and the server's usage counts,
 * which come from an untrusted peer and are summed over every request.
 */
#include <string.h>

#include "test.h"

#include "client/stream.h"

/* Feed text as one read at t = 1 s. */
static void feed(struct stream *s, const char *text)
{
    stream_feed(s, text, strlen(text), 1000000000ull);
}

TEST(usage_counts_are_read)
{
    struct stream s;
    stream_init(&s, 1 << 16, 64);
    feed(&s, "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\n"
             "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n"
             "data: [DONE]\n\n");
    CHECK_INT(stream_end(&s), STREAM_OK);
    CHECK_INT(s.n_chunks, 1);
    CHECK_INT(s.usage_completion, 3);
    CHECK_INT(s.usage_prompt, 7);
    stream_release(&s);
}

/* A count no response can have (here INT64_MAX) is not a token count: the
 * report adds these up over every request, and two of them overflow. It is
 * ignored like a negative one, so the request reads as "usage missing". */
TEST(implausible_usage_counts_are_ignored)
{
    static const char *const values[] = {"9223372036854775807", "4294967296", "-5"};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        struct stream s;
        char ev[256];
        stream_init(&s, 1 << 16, 64);
        feed(&s, "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\n");
        snprintf(ev, sizeof(ev),
                 "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%s,"
                 "\"completion_tokens\":%s}}\n\ndata: [DONE]\n\n",
                 values[i], values[i]);
        feed(&s, ev);
        CHECK_INT(stream_end(&s), STREAM_OK);
        CHECK_MSG(s.usage_completion == -1, "completion_tokens %s read as %ld", values[i],
                  s.usage_completion);
        CHECK_MSG(s.usage_prompt == -1, "prompt_tokens %s read as %ld", values[i], s.usage_prompt);
        stream_release(&s);
    }
}

/* "\u0000" inside a JSON string is valid JSON (a byte-level vocabulary
 * can emit NUL): such a chunk is text, not a parse error, and strings are
 * compared with their length, so "error\u0000x" is not an error object. */
TEST(nul_in_text_is_text)
{
    struct stream s;
    stream_init(&s, 1 << 16, 64);
    feed(&s,
         "data: {\"choices\":[{\"text\":\"\\u0000\",\"finish_reason\":null}]}\n\n"
         "data: {\"object\":\"error\\u0000x\",\"choices\":[{\"delta\":{\"content\":\"a\\u0000\"},"
         "\"finish_reason\":\"stop\"}]}\n\n"
         "data: [DONE]\n\n");
    CHECK_MSG(stream_end(&s) == STREAM_OK, "result %d: %s", stream_end(&s), s.msg);
    CHECK_INT(s.n_chunks, 2);
    stream_release(&s);
    /* an error event still fails when its message holds NUL */
    stream_init(&s, 1 << 16, 64);
    feed(&s, "data: {\"error\":{\"message\":\"bad\\u0000news\"}}\n\n");
    CHECK_INT(stream_end(&s), STREAM_ERROR_EVENT);
    CHECK_STR(s.msg, "error event: bad");
    stream_release(&s);
}

/* The SSE event type is compared with its length too: "error" followed by
 * a NUL byte and more is another type, whose data is an ordinary chunk. */
TEST(event_type_with_nul_is_not_error)
{
    static const char ev[] = "event: error\0x\ndata: {\"choices\":[{\"text\":\"a\","
                             "\"finish_reason\":\"stop\"}]}\n\n";
    struct stream s;
    stream_init(&s, 1 << 16, 64);
    stream_feed(&s, ev, sizeof(ev) - 1, 1000000000ull);
    CHECK_MSG(stream_end(&s) == STREAM_OK, "result %d: %s", stream_end(&s), s.msg);
    stream_release(&s);
}

TEST_MAIN()
