/*
 * stream: reads the meaning out of an OpenAI completion or chat stream.
 * A chunk counts as output when any choice carries non-empty text: `text`
 * (completions), or `delta.content`, `delta.reasoning_content`,
 * `delta.reasoning` or a non-empty `delta.tool_calls` (chat). A role-only
 * or empty chunk sets no time: TTFT is the first chunk with text.
 */
#include "client/stream.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void stream_init(struct stream *s, size_t max_event_bytes, size_t max_chunks)
{
    memset(s, 0, sizeof(*s));
    sse_init(&s->sse, max_event_bytes);
    s->max_chunks = max_chunks;
    s->usage_completion = -1;
    s->usage_prompt = -1;
    s->usage_cached = -1;
}

void stream_release(struct stream *s)
{
    sse_release(&s->sse);
    free(s->chunk_ns);
    s->chunk_ns = NULL;
    s->cap_chunks = s->n_stored = 0;
}

void stream_reset(struct stream *s)
{
    sse_reset(&s->sse);
    s->now_ns = s->first_ns = 0;
    s->n_chunks = s->n_stored = 0;
    s->usage_completion = s->usage_prompt = s->usage_cached = -1;
    s->done = s->finished = s->failed = false;
    s->fail_kind = STREAM_OK;
    s->msg[0] = '\0';
}

__attribute__((format(printf, 3, 4))) static int fail(struct stream *s, enum stream_result kind,
                                                      const char *fmt, ...)
{
    s->failed = true;
    s->fail_kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->msg, sizeof(s->msg), fmt, ap);
    va_end(ap);
    /* one line: a multi-line server message would break the log format */
    for (char *c = s->msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return 1; /* stops the SSE parser */
}

/* obj[key] is a string of at least one byte. */
static bool nonempty_string(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) && json_string_length(v) > 0;
}

/* Does this choice carry generated output? Sets *finish on a finish_reason. */
static bool choice_has_text(json_t *choice, bool *finish)
{
    if (!json_is_object(choice))
        return false;
    json_t *fr = json_object_get(choice, "finish_reason");
    if (fr && !json_is_null(fr))
        *finish = true;
    if (nonempty_string(choice, "text"))
        return true;
    json_t *delta = json_object_get(choice, "delta");
    if (!json_is_object(delta))
        return false;
    if (nonempty_string(delta, "content") || nonempty_string(delta, "reasoning_content") ||
        nonempty_string(delta, "reasoning"))
        return true;
    json_t *tools = json_object_get(delta, "tool_calls");
    return json_is_array(tools) && json_array_size(tools) > 0;
}

/* Note one text chunk at the arrival time of the bytes being fed. Beyond
 * max_chunks the chunk is still counted (tokens, TTFT) but its time is not
 * kept, so one endless stream cannot grow memory without bound. */
static void record_chunk(struct stream *s)
{
    if (s->n_chunks++ == 0)
        s->first_ns = s->now_ns;
    if (s->n_stored >= s->max_chunks)
        return;
    XGROW(s->chunk_ns, s->cap_chunks, s->n_stored + 1);
    s->chunk_ns[s->n_stored++] = s->now_ns;
}

/* Choice 0's text into s->text (a multi-turn client resends it as the
 * assistant's turn). */
static void keep_text(struct stream *s, json_t *choice)
{
    json_t *t = json_object_get(choice, "text");
    if (!json_is_string(t))
        t = json_object_get(json_object_get(choice, "delta"), "content");
    if (json_is_string(t))
        buf_append(s->text, json_string_value(t), json_string_length(t));
}

/* A readable message from an error value: {"message": ...}, a string, or
 * the JSON. A message holding "\u0000" is shown up to it: the rest could
 * not travel in a C string anyway. */
static void error_message(struct stream *s, json_t *err)
{
    json_t *m = json_is_object(err) ? json_object_get(err, "message") : err;
    if (json_is_string(m)) {
        fail(s, STREAM_ERROR_EVENT, "error event: %s", json_string_value(m));
        return;
    }
    char *dump = json_dumps(err, JSON_COMPACT);
    fail(s, STREAM_ERROR_EVENT, "error event: %s", dump ? dump : "(unprintable)");
    free(dump);
}

/* A usage count from the server that can be a real token count: the
 * report sums them over every request, so a hostile value must not reach
 * the sum. */
static bool plausible_count(json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 0 &&
           json_integer_value(v) <= STREAM_MAX_USAGE;
}

/* v is the string s, byte for byte ("error\u0000x" is not "error"). */
static bool json_str_is(json_t *v, const char *s)
{
    size_t n = strlen(s);
    return json_is_string(v) && json_string_length(v) == n &&
           memcmp(json_string_value(v), s, n) == 0;
}

/* The terminating sentinel, tolerating trailing blanks some servers add. */
static bool is_done(const char *d, size_t n)
{
    while (n && (d[n - 1] == ' ' || d[n - 1] == '\t'))
        n--;
    return n == 6 && memcmp(d, "[DONE]", 6) == 0;
}

/*
 * One SSE event. Errors come in three shapes (an "error" member, vLLM's
 * older {"object":"error"}, or an "event: error" type); each fails the
 * request at once. Anything else is a completion chunk: choices carrying
 * text make a timed chunk, a finish_reason marks a proper end, and a usage
 * object (usually the last chunk, with choices []) gives the token counts.
 * The usage chunk has no text, so it adds no ITL sample.
 */
static int on_event(void *ctx, const struct sse_event *ev)
{
    struct stream *s = ctx;
    if (s->done)
        return 0; /* nothing after [DONE] belongs to the response */
    if (ev->type_len == 5 && memcmp(ev->type, "error", 5) == 0)
        return fail(s, STREAM_ERROR_EVENT, "error event: %.200s", ev->data);
    if (is_done(ev->data, ev->data_len)) {
        s->done = true;
        return 0;
    }
    json_error_t jerr;
    /* "\u0000" in a string is valid JSON, and text from a byte-level
     * vocabulary can hold it: allowed, and strings are read with their
     * length (nonempty_string, json_str_is) */
    json_t *j = json_loadb(ev->data, ev->data_len, JSON_ALLOW_NUL, &jerr);
    if (!j)
        return fail(s, STREAM_PARSE, "event is not JSON: %s", jerr.text);
    int rc = 0;
    json_t *err = json_object_get(j, "error");
    json_t *object = json_object_get(j, "object");
    if (!json_is_object(j)) {
        rc = fail(s, STREAM_PARSE, "event is not a JSON object");
    } else if (err && !json_is_null(err)) {
        error_message(s, err);
        rc = 1;
    } else if (json_str_is(object, "error")) {
        error_message(s, j);
        rc = 1;
    } else {
        json_t *choices = json_object_get(j, "choices");
        bool text = false;
        for (size_t i = 0; i < json_array_size(choices); i++)
            text |= choice_has_text(json_array_get(choices, i), &s->finished);
        if (text)
            record_chunk(s);
        if (s->text)
            keep_text(s, json_array_get(choices, 0));
        json_t *usage = json_object_get(j, "usage");
        if (json_is_object(usage)) {
            json_t *c = json_object_get(usage, "completion_tokens");
            json_t *p = json_object_get(usage, "prompt_tokens");
            if (plausible_count(c))
                s->usage_completion = (long)json_integer_value(c);
            if (plausible_count(p))
                s->usage_prompt = (long)json_integer_value(p);
            json_t *d = json_object_get(usage, "prompt_tokens_details");
            json_t *ct = json_object_get(d, "cached_tokens");
            if (plausible_count(ct))
                s->usage_cached = (long)json_integer_value(ct);
        }
    }
    json_decref(j);
    return rc;
}

/* SSE_TOOBIG from the parser becomes a parse failure of the request. */
int stream_feed(struct stream *s, const char *bytes, size_t n, uint64_t now_ns)
{
    if (s->failed)
        return -1;
    s->now_ns = now_ns;
    int rc = sse_feed(&s->sse, bytes, n, on_event, s);
    if (rc == SSE_TOOBIG && !s->failed)
        fail(s, STREAM_PARSE, "a line or event passed the %zu-byte cap", s->sse.max_bytes);
    return s->failed ? -1 : 0;
}

/* Success needs an end marker ([DONE] or finish_reason) and some text: a
 * stream cut short is never counted as complete. */
enum stream_result stream_end(const struct stream *s)
{
    if (s->failed)
        return s->fail_kind;
    if (!s->done && !s->finished)
        return STREAM_TRUNCATED;
    if (s->n_chunks == 0)
        return STREAM_NO_CONTENT;
    return STREAM_OK;
}

uint64_t *stream_take_chunks(struct stream *s, size_t *n)
{
    uint64_t *p = s->chunk_ns;
    *n = s->n_stored;
    s->chunk_ns = NULL;
    s->cap_chunks = s->n_stored = 0;
    return p;
}
