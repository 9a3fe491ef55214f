/*
 * api: request parsing and response formatting for the OpenAI-compatible
 * endpoints (see api.h). Parsing is table-driven: one row per field we
 * read, one row per field we refuse unless it has its default value.
 * jansson does the JSON; the body is checked for UTF-8 first so that the
 * error can say so plainly.
 */
#include "serve/api.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/utf8.h"
#include "xalloc.h"

int api_error_set(struct api_error *e, int status, const char *type, const char *param,
                  const char *fmt, ...)
{
    if (e->status)
        return -1;
    e->status = status;
    snprintf(e->type, sizeof(e->type), "%s", type);
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    return -1;
}

void api_error_code(struct api_error *e, const char *code)
{
    if (!e->code[0])
        snprintf(e->code, sizeof(e->code), "%s", code);
}

/* A 400 invalid_request_error naming param. Every refusal of the parser
 * goes through here or api_error_set, so the status, the OpenAI "type" and
 * the field name travel together to the HTTP layer (and into the log). */
#define BAD(e, param, ...) api_error_set((e), 400, "invalid_request_error", (param), __VA_ARGS__)

/* The JSON type of v as the messages say it ("got a string"). jansson
 * keeps integers and reals apart; both are "numbers" to a client, but an
 * integer field given 2.5 must say why it was refused, hence two names. */
static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* ---- the field readers share these: a type check, then a range check ---- */

/* v is the string s, byte for byte. Strings may hold "\u0000" (valid JSON,
 * JSON_ALLOW_NUL), so a C string compare would take "user\u0000x" for
 * "user": every string is compared with its length. */
static bool json_str_is(const json_t *v, const char *s)
{
    size_t n = strlen(s);
    return json_is_string(v) && json_string_length(v) == n &&
           memcmp(json_string_value(v), s, n) == 0;
}

/* A JSON boolean; 0/1 are refused (clients that send them mean something
 * else more often than not, and OpenAI refuses them too). */
static int read_bool(const json_t *v, const char *name, bool *out, struct api_error *e)
{
    if (!json_is_boolean(v))
        return BAD(e, name, "'%s' must be a boolean (got %s)", name, json_type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* A number as the client wrote it, as far as a double can tell: the
 * shortest of %.15g and %.17g that reads back to the same value, so that
 * 2.0000001 is not quoted as "2" next to a limit of 2. */
static const char *num_text(const json_t *v, char *buf, size_t cap)
{
    if (json_is_integer(v)) {
        snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    double d = json_number_value(v);
    snprintf(buf, cap, "%.15g", d);
    if (strtod(buf, NULL) != d)
        snprintf(buf, cap, "%.17g", d);
    return buf;
}

/* A number in [lo, hi], or (lo, hi] when lo_open. Written as !(d >= lo) so
 * that a NaN (jansson cannot produce one, but a future parser might) is
 * refused rather than slipping through both comparisons. */
static int read_number(const json_t *v, const char *name, double lo, double hi, bool lo_open,
                       double *out, struct api_error *e)
{
    if (!json_is_number(v))
        return BAD(e, name, "'%s' must be a number (got %s)", name, json_type_name(v));
    double d = json_number_value(v);
    char t[40];
    if (!(lo_open ? d > lo : d >= lo) || !(d <= hi))
        return BAD(e, name, "'%s' is %s; it must be in %s%g, %g]", name, num_text(v, t, sizeof(t)),
                   lo_open ? "(" : "[", lo, hi);
    *out = d;
    return 0;
}

/* "model": optional, but when given it must name what this server serves
 * (its id, the path given to --model, or the file name). An unknown model
 * is a 404, as OpenAI answers, so a client pointed at the wrong server
 * learns it at once instead of benchmarking the wrong engine. */
static int f_model(const json_t *v, struct api_request *r, const struct api_limits *lim,
                   struct api_error *e)
{
    if (!json_is_string(v))
        return BAD(e, "model", "'model' must be a string (got %s)", json_type_name(v));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n > API_MAX_MODEL_LEN)
        return BAD(e, "model", "'model' is %zu bytes long (at most %d)", n, API_MAX_MODEL_LEN);
    if (lim && lim->model_ids) {
        bool known = false;
        for (size_t i = 0; lim->model_ids[i] && !known; i++)
            known = json_str_is(v, lim->model_ids[i]);
        if (!known) {
            api_error_set(e, 404, "not_found_error", "model",
                          "model '%.200s' does not exist (this server serves '%.200s')", s,
                          lim->model_ids[0] ? lim->model_ids[0] : "");
            api_error_code(e, "model_not_found");
            return -1;
        }
    }
    r->model = xmemdup0(s, n);
    return 0;
}

/* A prompt given as token ids: every entry an integer in [0, n_vocab). */
static int read_ids(const json_t *arr, struct api_prompt *p, const struct api_limits *lim,
                    const char *where, struct api_error *e)
{
    size_t n = json_array_size(arr);
    if (n == 0)
        return BAD(e, "prompt", "'%s' is an empty array (give text or at least one token id)",
                   where);
    int32_t *ids = xmalloc(n * sizeof(*ids));
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(arr, i);
        json_int_t t = json_is_integer(x) ? json_integer_value(x) : -1;
        if (!json_is_integer(x) || t < 0 || (lim && lim->n_vocab > 0 && t >= lim->n_vocab)) {
            free(ids);
            if (!json_is_integer(x))
                return BAD(e, "prompt", "'%s[%zu]' must be a token id (got %s)", where, i,
                           json_type_name(x));
            return BAD(e, "prompt", "'%s[%zu]' is token id %lld, outside [0, %d)", where, i,
                       (long long)t, lim ? lim->n_vocab : 0);
        }
        ids[i] = (int32_t)t;
    }
    p->ids = ids;
    p->n_ids = n;
    return 0;
}

/* One prompt: a string or an array of token ids. */
static int read_prompt(const json_t *v, struct api_prompt *p, const struct api_limits *lim,
                       const char *where, struct api_error *e)
{
    if (json_is_string(v)) {
        p->text = xmemdup0(json_string_value(v), json_string_length(v));
        p->len = json_string_length(v);
        return 0;
    }
    if (json_is_array(v))
        return read_ids(v, p, lim, where, e);
    return BAD(e, "prompt", "'%s' must be a string or an array of token ids (got %s)", where,
               json_type_name(v));
}

/* prompt: a string, an array of token ids, or a batch of those (a list
 * of strings or of token-id lists, as OpenAI's completions take them):
 * each prompt is answered by its own choices. n_prompts counts the
 * entries filled, so a refusal half way through releases what was read. */
static int f_prompt(const json_t *v, struct api_request *r, const struct api_limits *lim,
                    struct api_error *e)
{
    if (json_is_array(v) && json_array_size(v) > 0 &&
        (json_is_string(json_array_get(v, 0)) || json_is_array(json_array_get(v, 0)))) {
        size_t n = json_array_size(v);
        if (n > API_MAX_PROMPTS)
            return BAD(e, "prompt", "'prompt' holds %zu prompts (at most %d)", n, API_MAX_PROMPTS);
        r->batch = true;
        r->prompts = xcalloc(n, sizeof(*r->prompts));
        for (size_t i = 0; i < n; i++) {
            char where[32];
            snprintf(where, sizeof(where), "prompt[%zu]", i);
            r->n_prompts = i + 1;
            if (read_prompt(json_array_get(v, i), &r->prompts[i], lim, where, e))
                return -1;
        }
        return 0;
    }
    r->prompts = xcalloc(1, sizeof(*r->prompts));
    r->n_prompts = 1;
    return read_prompt(v, &r->prompts[0], lim, "prompt", e);
}

/* Roles a chat message may have. "developer" is OpenAI's newer name for
 * "system"; both render as their own ChatML turn, as the template would. */
static const char *const roles[] = {"system", "user", "assistant", "developer", "tool"};

/* Message content: a string, null, or an array of {"type":"text","text":...} parts. */
static int read_content(const json_t *c, size_t i, struct api_message *m, struct api_error *e)
{
    char param[48];
    snprintf(param, sizeof(param), "messages[%zu].content", i);
    if (json_is_null(c) || !c) {
        m->content = xstrdup("");
        return 0;
    }
    if (json_is_string(c)) {
        m->content_len = json_string_length(c);
        m->content = xmemdup0(json_string_value(c), m->content_len);
        return 0;
    }
    if (!json_is_array(c))
        return BAD(e, param, "'%s' must be a string or an array of text parts (got %s)", param,
                   json_type_name(c));
    struct buf b;
    buf_init(&b, (size_t)1 << 30); /* the body cap bounds it long before this */
    for (size_t k = 0; k < json_array_size(c); k++) {
        const json_t *part = json_array_get(c, k);
        const json_t *type = json_object_get(part, "type");
        const json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type)) {
            buf_release(&b);
            return BAD(e, param, "'%s[%zu]' must be an object with a 'type'", param, k);
        }
        if (!json_str_is(type, "text")) {
            buf_release(&b);
            return BAD(e, param, "'%s[%zu]': content of type '%.40s' is not supported (text only)",
                       param, k, json_string_value(type));
        }
        if (!json_is_string(text)) {
            buf_release(&b);
            return BAD(e, param, "'%s[%zu].text' must be a string (got %s)", param, k,
                       text ? json_type_name(text) : "nothing");
        }
        buf_append(&b, json_string_value(text), json_string_length(text));
    }
    m->content = buf_detach(&b, &m->content_len);
    if (!m->content)
        m->content = xstrdup("");
    return 0;
}

/* messages: a non-empty array of {role, content} objects. n_messages
 * counts the entries filled so far, so a refusal half way through still
 * releases exactly what was copied. */
static int f_messages(const json_t *v, struct api_request *r, const struct api_limits *lim,
                      struct api_error *e)
{
    if (!json_is_array(v))
        return BAD(e, "messages", "'messages' must be an array of messages (got %s)",
                   json_type_name(v));
    size_t n = json_array_size(v);
    if (n == 0)
        return BAD(e, "messages", "'messages' is empty (give at least one message)");
    if (n > API_MAX_MESSAGES)
        return BAD(e, "messages", "'messages' holds %zu messages (at most %d)", n,
                   API_MAX_MESSAGES);
    r->messages = xcalloc(n, sizeof(*r->messages));
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(v, i);
        char param[48];
        snprintf(param, sizeof(param), "messages[%zu]", i);
        if (!json_is_object(m))
            return BAD(e, param, "'%s' must be an object (got %s)", param, json_type_name(m));
        const json_t *role = json_object_get(m, "role");
        snprintf(param, sizeof(param), "messages[%zu].role", i);
        if (!json_is_string(role))
            return BAD(e, param, "'%s' must be a string (got %s)", param,
                       role ? json_type_name(role) : "nothing");
        const char *rs = json_string_value(role);
        bool known = false;
        for (size_t k = 0; k < sizeof(roles) / sizeof(roles[0]) && !known; k++)
            known = json_str_is(role, roles[k]);
        if (!known)
            return BAD(e, param,
                       "'%s' is '%.40s' (expected system, user, assistant, developer or tool)",
                       param, rs);
        r->messages[i].role = xstrdup(rs);
        r->n_messages = i + 1;
        if (read_content(json_object_get(m, "content"), i, &r->messages[i], e))
            return -1;
    }
    return 0;
}

/* max_tokens / max_completion_tokens: an integer >= 1. Whether it fits
 * the context is decided later, when the prompt's token count is known
 * (server.c); huge values are kept as sent, so that the error can quote
 * what the client asked for, under the name it used. */
_Static_assert(sizeof(long) >= sizeof(json_int_t), "max_tokens holds any JSON integer");
static int read_max_tokens(const json_t *v, const char *name, struct api_request *r,
                           struct api_error *e)
{
    if (!json_is_integer(v))
        return BAD(e, name, "'%s' must be an integer (got %s)", name, json_type_name(v));
    json_int_t t = json_integer_value(v);
    if (t < 0) /* 0 is checked once echo is known (api_parse) */
        return BAD(e, name, "'%s' is %lld; it must be at least 1", name, (long long)t);
    r->max_tokens = (long)t;
    r->max_tokens_field = name;
    return 0;
}

/* max_tokens, on both endpoints. */
static int f_max_tokens(const json_t *v, struct api_request *r, const struct api_limits *lim,
                        struct api_error *e)
{
    return read_max_tokens(v, "max_tokens", r, e);
}

/* max_completion_tokens: chat's newer name for max_tokens. */
static int f_max_completion_tokens(const json_t *v, struct api_request *r,
                                   const struct api_limits *lim, struct api_error *e)
{
    return read_max_tokens(v, "max_completion_tokens", r, e);
}

/* temperature in [0, 2] as OpenAI allows; 0 means greedy (argmax). */
static int f_temperature(const json_t *v, struct api_request *r, const struct api_limits *lim,
                         struct api_error *e)
{
    return read_number(v, "temperature", 0, API_TEMP_MAX, false, &r->temperature, e);
}

/* top_p in (0, 1]: 0 would keep no token at all. */
static int f_top_p(const json_t *v, struct api_request *r, const struct api_limits *lim,
                   struct api_error *e)
{
    return read_number(v, "top_p", 0, 1, true, &r->top_p, e);
}

/* top_k: -1 (vLLM's "off") and 0 both mean all tokens. */
static int f_top_k(const json_t *v, struct api_request *r, const struct api_limits *lim,
                   struct api_error *e)
{
    if (!json_is_integer(v))
        return BAD(e, "top_k", "'top_k' must be an integer (got %s)", json_type_name(v));
    json_int_t k = json_integer_value(v);
    if (k < -1)
        return BAD(e, "top_k", "'top_k' is %lld; use -1 or 0 for off, or a positive count",
                   (long long)k);
    /* any count from the vocabulary size up keeps every token */
    if (k > INT_MAX)
        return BAD(e, "top_k", "'top_k' is %lld; it must be at most %d (-1 or 0 = off)",
                   (long long)k, INT_MAX);
    r->top_k = k < 0 ? 0 : (int)k;
    return 0;
}

/* seed: any 64-bit integer; negative ones wrap, as in C. */
static int f_seed(const json_t *v, struct api_request *r, const struct api_limits *lim,
                  struct api_error *e)
{
    if (!json_is_integer(v))
        return BAD(e, "seed", "'seed' must be an integer (got %s)", json_type_name(v));
    r->seed = (uint64_t)json_integer_value(v);
    r->has_seed = true;
    return 0;
}

/* min_p in [0, 1], relative to the most likely token's probability. */
static int f_min_p(const json_t *v, struct api_request *r, const struct api_limits *lim,
                   struct api_error *e)
{
    return read_number(v, "min_p", 0, 1, false, &r->min_p, e);
}

/* frequency_penalty and presence_penalty in [-2, 2] (OpenAI's range). */
static int f_frequency_penalty(const json_t *v, struct api_request *r, const struct api_limits *lim,
                               struct api_error *e)
{
    return read_number(v, "frequency_penalty", -2, 2, false, &r->frequency_penalty, e);
}

static int f_presence_penalty(const json_t *v, struct api_request *r, const struct api_limits *lim,
                              struct api_error *e)
{
    return read_number(v, "presence_penalty", -2, 2, false, &r->presence_penalty, e);
}

/* repetition_penalty > 0 (vLLM's); 1 is off. */
static int f_repetition_penalty(const json_t *v, struct api_request *r,
                                const struct api_limits *lim, struct api_error *e)
{
    return read_number(v, "repetition_penalty", 0, API_MAX_REP_PENALTY, true,
                       &r->repetition_penalty, e);
}

/* An integer field in [lo, hi]. */
static int read_int(const json_t *v, const char *name, long lo, long hi, long *out,
                    struct api_error *e)
{
    if (!json_is_integer(v))
        return BAD(e, name, "'%s' must be an integer (got %s)", name, json_type_name(v));
    json_int_t k = json_integer_value(v);
    if (k < lo || k > hi)
        return BAD(e, name, "'%s' is %lld; it must be in [%ld, %ld]", name, (long long)k, lo, hi);
    *out = (long)k;
    return 0;
}

/* n: choices per prompt. */
static int f_n(const json_t *v, struct api_request *r, const struct api_limits *lim,
               struct api_error *e)
{
    return read_int(v, "n", 1, API_MAX_N, &r->n, e);
}

/* logprobs: on completions the number of alternatives per token (0 = the
 * chosen token's own only; false = none); on chat a boolean, the count
 * coming from top_logprobs. */
static int f_logprobs(const json_t *v, struct api_request *r, const struct api_limits *lim,
                      struct api_error *e)
{
    if (r->kind == API_CHAT) {
        bool on = false;
        if (read_bool(v, "logprobs", &on, e))
            return -1;
        if (on && r->logprobs < 0)
            r->logprobs = 0;
        return 0;
    }
    if (json_is_false(v))
        return 0;
    long k = 0;
    if (read_int(v, "logprobs", 0, API_MAX_LOGPROBS, &k, e))
        return -1;
    r->logprobs = (int)k;
    return 0;
}

/* top_logprobs: chat's count of alternatives (needs "logprobs": true,
 * checked in api_parse); completions take the count in logprobs. */
static int f_top_logprobs(const json_t *v, struct api_request *r, const struct api_limits *lim,
                          struct api_error *e)
{
    long k = 0;
    if (read_int(v, "top_logprobs", 0, API_MAX_LOGPROBS, &k, e))
        return -1;
    if (r->kind == API_COMPLETION && k != 0)
        return BAD(e, "top_logprobs",
                   "'top_logprobs' is for chat completions; on completions give the count in "
                   "'logprobs'");
    r->top_logprobs = (int)k;
    return 0;
}

/* echo: completions only (the prompt and its logprobs come back first). */
static int f_echo(const json_t *v, struct api_request *r, const struct api_limits *lim,
                  struct api_error *e)
{
    if (r->kind == API_CHAT) {
        if (json_is_false(v))
            return 0;
        return BAD(e, "echo", "'echo' is not supported on chat completions (only false)");
    }
    return read_bool(v, "echo", &r->echo, e);
}

/* One stop string: non-empty (an empty one would match at once) and at
 * most API_MAX_STOP_LEN bytes (the stop filter holds back up to that much
 * text, so the cap bounds the delay it can add to a stream). */
static int add_stop(struct api_request *r, const json_t *s, const char *where, struct api_error *e)
{
    if (!json_is_string(s))
        return BAD(e, "stop", "'%s' must be a string (got %s)", where, json_type_name(s));
    size_t n = json_string_length(s);
    if (n == 0)
        return BAD(e, "stop", "'%s' is an empty string", where);
    if (n > API_MAX_STOP_LEN)
        return BAD(e, "stop", "'%s' is %zu bytes long (at most %d)", where, n, API_MAX_STOP_LEN);
    r->stop[r->n_stop] = xmemdup0(json_string_value(s), n);
    r->stop_len[r->n_stop++] = n;
    return 0;
}

/* stop: a string or a list of strings (an empty list means none). */
static int f_stop(const json_t *v, struct api_request *r, const struct api_limits *lim,
                  struct api_error *e)
{
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_array(v) && !json_is_string(v))
        return BAD(e, "stop", "'stop' must be a string or an array of strings (got %s)",
                   json_type_name(v));
    if (n > API_MAX_STOP)
        return BAD(e, "stop", "'stop' holds %zu strings (at most %d)", n, API_MAX_STOP);
    r->stop = xcalloc(n ? n : 1, sizeof(*r->stop));
    r->stop_len = xcalloc(n ? n : 1, sizeof(*r->stop_len));
    if (json_is_string(v))
        return add_stop(r, v, "stop", e);
    for (size_t i = 0; i < n; i++) {
        char where[32];
        snprintf(where, sizeof(where), "stop[%zu]", i);
        if (add_stop(r, json_array_get(v, i), where, e))
            return -1;
    }
    return 0;
}

/* ignore_eos: generate past end-of-generation tokens (benchmarks). */
static int f_ignore_eos(const json_t *v, struct api_request *r, const struct api_limits *lim,
                        struct api_error *e)
{
    return read_bool(v, "ignore_eos", &r->ignore_eos, e);
}

/* stream: answer as server-sent events. */
static int f_stream(const json_t *v, struct api_request *r, const struct api_limits *lim,
                    struct api_error *e)
{
    return read_bool(v, "stream", &r->stream, e);
}

/* stream_options: only include_usage is read. It is accepted without
 * stream too (OpenAI refuses that combination, vLLM does not); it has no
 * effect then, since a non-streaming answer always carries usage. */
static int f_stream_options(const json_t *v, struct api_request *r, const struct api_limits *lim,
                            struct api_error *e)
{
    if (!json_is_object(v))
        return BAD(e, "stream_options", "'stream_options' must be an object (got %s)",
                   json_type_name(v));
    /* vLLM's usage on every chunk would change the stream */
    const json_t *cu = json_object_get(v, "continuous_usage_stats");
    if (cu && !json_is_null(cu) && !json_is_false(cu))
        return BAD(e, "stream_options.continuous_usage_stats",
                   "'stream_options.continuous_usage_stats' is not supported by this server (only "
                   "false)");
    const json_t *u = json_object_get(v, "include_usage");
    if (u && !json_is_null(u))
        return read_bool(u, "stream_options.include_usage", &r->include_usage, e);
    return 0;
}

/* Fields we read. A null value means "the default" for every one of them. */
struct field {
    const char *name;
    unsigned kinds; /* bit (1 << enum api_kind) per endpoint that reads it */
    int (*read)(const json_t *v, struct api_request *r, const struct api_limits *lim,
                struct api_error *e);
};

#define BOTH ((1u << API_COMPLETION) | (1u << API_CHAT))
static const struct field fields[] = {
    {"model", BOTH, f_model},
    {"prompt", 1u << API_COMPLETION, f_prompt},
    {"messages", 1u << API_CHAT, f_messages},
    {"max_tokens", BOTH, f_max_tokens},
    /* after max_tokens: the newer name wins when both are given */
    {"max_completion_tokens", 1u << API_CHAT, f_max_completion_tokens},
    {"temperature", BOTH, f_temperature},
    {"top_p", BOTH, f_top_p},
    {"top_k", BOTH, f_top_k},
    {"min_p", BOTH, f_min_p},
    {"frequency_penalty", BOTH, f_frequency_penalty},
    {"presence_penalty", BOTH, f_presence_penalty},
    {"repetition_penalty", BOTH, f_repetition_penalty},
    {"seed", BOTH, f_seed},
    {"n", BOTH, f_n},
    /* logprobs before top_logprobs: chat's count needs the switch */
    {"logprobs", BOTH, f_logprobs},
    {"top_logprobs", BOTH, f_top_logprobs},
    {"echo", BOTH, f_echo},
    {"stop", BOTH, f_stop},
    {"ignore_eos", BOTH, f_ignore_eos},
    {"stream", BOTH, f_stream},
    {"stream_options", BOTH, f_stream_options},
};

/* ---- fields refused unless they hold their default ----
 * Silently ignoring them would be fail-open: a client asking for n=4 or a
 * repetition penalty would get an answer that looks right and is not. */

static bool is_zero(const json_t *v)
{
    return json_is_number(v) && json_number_value(v) == 0;
}
static bool is_one_num(const json_t *v)
{
    return json_is_number(v) && json_number_value(v) == 1;
}
/* logprobs: false is chat's "off"; 0 is not, since on /v1/completions it
 * asks for the sampled tokens' own logprobs */
static bool is_false(const json_t *v)
{
    return json_is_false(v);
}
static bool is_empty(const json_t *v)
{
    return (json_is_string(v) && json_string_length(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0) ||
           (json_is_object(v) && json_object_size(v) == 0);
}
/* for fields whose only accepted value is null (handled before the check) */
static bool is_never(const json_t *v)
{
    return false;
}
static bool is_text_format(const json_t *v)
{
    return json_is_object(v) && json_str_is(json_object_get(v, "type"), "text");
}
static bool is_true(const json_t *v)
{
    return json_is_true(v);
}
/* tool_choice / function_call without tools: "none", or "auto" (which
 * with no tools chooses none) */
static bool is_no_tool(const json_t *v)
{
    return json_str_is(v, "none") || json_str_is(v, "auto");
}
static bool is_text_only(const json_t *v)
{
    return json_is_array(v) && json_array_size(v) == 1 && json_str_is(json_array_get(v, 0), "text");
}
/* llama.cpp's top_n_sigma is off at -1 (and any value <= 0) */
static bool is_off_sigma(const json_t *v)
{
    return json_is_number(v) && json_number_value(v) <= 0;
}

struct refused {
    const char *name;
    bool (*is_default)(const json_t *v);
    const char *what; /* the default we accept, for the message */
};

/* Every field of OpenAI's completions and chat completions, vLLM's extra
 * parameters, llama.cpp's and SGLang's sampling fields that would change
 * the answer: refused by name unless null or the value that does nothing.
 * engine/README.md shows this table (tests/unit/engine_api.c checks it). */
static const struct refused refused[] = {
    /* OpenAI */
    {"best_of", is_one_num, "1"},
    {"suffix", is_empty, "\"\""},
    {"logit_bias", is_empty, "{}"},
    {"tools", is_empty, "[]"},
    {"tool_choice", is_no_tool, "\"none\" or \"auto\" (no tools)"},
    {"functions", is_empty, "[]"},
    {"function_call", is_no_tool, "\"none\" or \"auto\" (no functions)"},
    {"response_format", is_text_format, "{\"type\": \"text\"}"},
    {"modalities", is_text_only, "[\"text\"]"},
    {"audio", is_never, "null"},
    {"prediction", is_never, "null"},
    {"reasoning_effort", is_never, "null"},
    {"verbosity", is_never, "null"},
    {"web_search_options", is_never, "null"},
    /* vLLM's extensions (ignore_eos and top_k are read, above) */
    {"use_beam_search", is_false, "false"},
    {"length_penalty", is_one_num, "1"},
    {"early_stopping", is_false, "false"},
    {"typical_p", is_one_num, "1"},
    {"min_tokens", is_zero, "0"},
    {"include_stop_str_in_output", is_false, "false"},
    {"stop_token_ids", is_empty, "[]"},
    /* control tokens are rendered as their text (llama.cpp's way) */
    {"skip_special_tokens", is_false, "false"},
    {"spaces_between_special_tokens", is_false, "false"},
    {"truncate_prompt_tokens", is_never, "null"},
    {"prompt_logprobs", is_never, "null"},
    /* logprobs keyed by "token_id:N": ours are keyed by the token's text */
    {"return_tokens_as_token_ids", is_false, "false"},
    {"allowed_token_ids", is_never, "null"},
    {"bad_words", is_empty, "[]"},
    {"guided_json", is_never, "null"},
    {"guided_regex", is_never, "null"},
    {"guided_choice", is_never, "null"},
    {"guided_grammar", is_never, "null"},
    {"guided_decoding_backend", is_never, "null"},
    {"guided_whitespace_pattern", is_never, "null"},
    {"structural_tag", is_never, "null"},
    {"structured_outputs", is_never, "null"},
    {"logits_processors", is_never, "null"},
    {"vllm_xargs", is_never, "null"},
    {"add_generation_prompt", is_true, "true"},
    {"continue_final_message", is_false, "false"},
    {"add_special_tokens", is_false, "false"},
    {"chat_template", is_never, "null"},
    {"chat_template_kwargs", is_never, "null"},
    {"documents", is_never, "null"},
    {"mm_processor_kwargs", is_never, "null"},
    {"kv_transfer_params", is_never, "null"},
    /* llama.cpp's /completion fields that its OpenAI routes also read */
    {"n_predict", is_never, "null (use max_tokens)"},
    {"tfs_z", is_one_num, "1"},
    {"mirostat", is_zero, "0"},
    {"repeat_penalty", is_one_num, "1"},
    {"dynatemp_range", is_zero, "0"},
    {"xtc_probability", is_zero, "0"},
    {"dry_multiplier", is_zero, "0"},
    {"top_n_sigma", is_off_sigma, "-1"},
    {"n_probs", is_zero, "0"},
    {"min_keep", is_zero, "0"},
    {"grammar", is_empty, "\"\""},
    {"json_schema", is_never, "null"},
    {"samplers", is_never, "null"},
    {"t_max_predict_ms", is_zero, "0"},
    /* SGLang's */
    {"regex", is_never, "null"},
    {"ebnf", is_never, "null"},
    {"no_stop_trim", is_false, "false"},
    {"stop_regex", is_never, "null"},
    {"custom_logit_processor", is_never, "null"},
    {"custom_params", is_never, "null"},
    {"sampling_seed", is_never, "null (use seed)"},
    {"lora_path", is_never, "null"},
    {"return_hidden_states", is_false, "false"},
};

/* Fields that do not change the answer: taken and ignored without a word.
 * Any other unknown field is ignored too (as vLLM does), but named in a
 * warning in the server's log (api_request.ignored). */
static const char *const harmless[] = {
    "user",                /* OpenAI: end-user id, for abuse tracking */
    "metadata",            /* OpenAI: tags for stored completions */
    "store",               /* OpenAI: keep the completion for evals */
    "service_tier",        /* OpenAI: billing tier */
    "parallel_tool_calls", /* OpenAI: only with tools, which are refused */
    "prompt_cache_key",    /* OpenAI: cache routing hint */
    "safety_identifier",   /* OpenAI: end-user id */
    "request_id",          /* vLLM: id for its logs */
    "priority",            /* vLLM: queue order, not the text */
    "cache_salt",          /* vLLM: prefix-cache isolation */
    "include_reasoning",   /* vLLM: reasoning models only */
    "cache_prompt",        /* llama.cpp: prefix reuse */
    "id_slot",             /* llama.cpp: KV slot choice */
    "separate_reasoning",  /* SGLang: reasoning models only */
};

/* For engine/README.md's table and its test. */
const char *api_field(size_t i, const char **what)
{
    static char buf[96];
    size_t n_read = sizeof(fields) / sizeof(fields[0]);
    size_t n_refused = sizeof(refused) / sizeof(refused[0]);
    size_t n_harmless = sizeof(harmless) / sizeof(harmless[0]);
    if (i < n_read) {
        *what = "read";
        return fields[i].name;
    }
    i -= n_read;
    if (i < n_refused) {
        snprintf(buf, sizeof(buf), "refused unless %s", refused[i].what);
        *what = buf;
        return refused[i].name;
    }
    i -= n_refused;
    if (i < n_harmless) {
        *what = "accepted, no effect";
        return harmless[i];
    }
    return NULL;
}

/* Is key one of the names above? (The tables themselves: api_field's
 * buffer is for documentation, not for the HTTP thread.) */
static bool known_field(const char *key)
{
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strcmp(fields[i].name, key) == 0)
            return true;
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        if (strcmp(refused[i].name, key) == 0)
            return true;
    for (size_t i = 0; i < sizeof(harmless) / sizeof(harmless[0]); i++)
        if (strcmp(harmless[i], key) == 0)
            return true;
    return false;
}

/* Note an unknown field in r->ignored ("a, b"; cut, with "...", when full). */
static void note_ignored(struct api_request *r, const char *key)
{
    size_t len = strlen(r->ignored);
    if (len + 6 >= sizeof(r->ignored)) {
        if (len && strcmp(r->ignored + len - 3, "...") != 0)
            snprintf(r->ignored + len, sizeof(r->ignored) - len, "...");
        return;
    }
    snprintf(r->ignored + len, sizeof(r->ignored) - len - 4, "%s'%s'", len ? ", " : "", key);
}

/* ---- the parser ---- */

/* OpenAI's defaults: temperature 1 and top_p 1 (sampling, not greedy),
 * max_tokens unset (= the rest of the context, see server.c). */
static void request_defaults(struct api_request *r, enum api_kind kind)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->max_tokens = -1;
    r->temperature = 1.0;
    r->top_p = 1.0;
    r->repetition_penalty = 1.0;
    r->n = 1;
    r->logprobs = -1;
}

/* A number that fits neither a 64-bit integer nor a double: quoted as
 * sent, under the key it belongs to ("'max_tokens' is 1e999..."). jansson
 * stops right after the number (je->position); the key is found by
 * walking back over it, the ':' and the quoted key. A key with escapes, or
 * a number inside an array, is not named. */
static int number_overflow(struct api_error *e, const json_error_t *je, const char *body,
                           size_t len)
{
    size_t end = je->position >= 0 && (size_t)je->position <= len ? (size_t)je->position : 0;
    size_t start = end;
    while (start > 0 && strchr("0123456789+-.eE", body[start - 1]) && body[start - 1])
        start--;
    size_t p = start;
    while (p > 0 && strchr(" \t\r\n", body[p - 1]) && body[p - 1])
        p--;
    char key[48] = "";
    if (p > 0 && body[p - 1] == ':') {
        p--;
        while (p > 0 && strchr(" \t\r\n", body[p - 1]) && body[p - 1])
            p--;
        size_t kend = p;
        if (kend > 0 && body[kend - 1] == '"') {
            size_t k = kend - 1;
            while (k > 0 && body[k - 1] != '"' && body[k - 1] != '\\')
                k--;
            if (k > 0 && body[k - 1] == '"' && kend - 1 - k < sizeof(key))
                snprintf(key, sizeof(key), "%.*s", (int)(kend - 1 - k), body + k);
        }
    }
    int n = (int)(end - start < 64 ? end - start : 64);
    bool real = memchr(body + start, '.', end - start) || memchr(body + start, 'e', end - start) ||
                memchr(body + start, 'E', end - start);
    const char *limit =
        real ? "a number must fit in a double" : "an integer must be in [-2^63, 2^63 - 1]";
    if (key[0])
        return BAD(e, key, "'%s' is %.*s%s, out of range (%s) at line %d, column %d", key, n,
                   body + start, end - start > 64 ? "..." : "", limit, je->line, je->column);
    return BAD(e, "", "the number %.*s%s at line %d, column %d is out of range (%s)", n,
               body + start, end - start > 64 ? "..." : "", je->line, je->column, je->text);
}

/* What jansson refused, in words a client can act on. Three refusals are
 * of valid JSON, and say so rather than "malformed": a duplicate key (named
 * in param; jansson's text ends "near '\"key\"'"), "\u0000" inside a key
 * (jansson cannot hold one), and a number outside 64 bits or a double. */
static int json_refusal(struct api_error *e, const json_error_t *je, const char *body, size_t len)
{
    enum json_error_code code = json_error_code(je);
    if (code == json_error_duplicate_key) {
        const char *near = strstr(je->text, "near '\"");
        char key[48] = "";
        if (near) {
            near += 7;
            size_t n = strlen(near);
            if (n >= 2 && near[n - 1] == '\'' && near[n - 2] == '"')
                snprintf(key, sizeof(key), "%.*s", (int)(n - 2), near);
        }
        return BAD(e, key, "duplicate key '%s' at line %d, column %d (give each field once)", key,
                   je->line, je->column);
    }
    if (code == json_error_null_byte_in_key)
        return BAD(e, "", "an object key holds \\u0000 at line %d, column %d (not supported)",
                   je->line, je->column);
    if (code == json_error_numeric_overflow)
        return number_overflow(e, je, body, len);
    return BAD(e, "", "malformed JSON at line %d, column %d: %s", je->line, je->column, je->text);
}

json_t *api_load_object(const char *body, size_t len, struct api_error *e)
{
    if (len == 0)
        return BAD(e, "", "the request body is empty (expected a JSON object)"), NULL;
    size_t bad = utf8_invalid_at((const uint8_t *)body, len);
    if (bad < len)
        return BAD(e, "", "the request body is not valid UTF-8 (byte %zu of %zu)", bad, len), NULL;
    json_error_t je;
    /* duplicate keys are refused: which of two "max_tokens" wins differs
     * between parsers, and the answer should not depend on that. "\u0000"
     * in a string is valid JSON (a byte-level vocabulary can emit it, and
     * a client may send it back): allowed, and every string is then used
     * with its length, never as a C string. */
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root)
        return json_refusal(e, &je, body, len), NULL;
    if (!json_is_object(root)) {
        BAD(e, "", "the request body must be a JSON object (got %s)", json_type_name(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

/* A request object: the refused fields, then each field we read, then
 * what depends on several fields. */
static int parse_root(json_t *root, enum api_kind kind, const struct api_limits *lim,
                      struct api_request *out, struct api_error *e)
{
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        const json_t *v = json_object_get(root, refused[i].name);
        if (v && !json_is_null(v) && !refused[i].is_default(v)) {
            BAD(e, refused[i].name, "field '%s' is not supported by this server (only %s)",
                refused[i].name, refused[i].what);
            api_error_code(e, "unsupported_parameter");
            return -1;
        }
    }
    const char *key;
    const json_t *val;
    json_object_foreach(root, key, val)
    {
        if (!known_field(key))
            note_ignored(out, key);
    }
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (!(fields[i].kinds & (1u << kind)))
            continue;
        const json_t *v = json_object_get(root, fields[i].name);
        if (v && !json_is_null(v) && fields[i].read(v, out, lim, e))
            return -1;
    }
    if (kind == API_COMPLETION && !out->n_prompts) {
        BAD(e, "prompt", "'prompt' is missing (a string or an array of token ids)");
        return -1;
    }
    if (out->n_prompts) { /* the first prompt under the single-prompt names */
        out->prompt = out->prompts[0].text;
        out->prompt_len = out->prompts[0].len;
        out->prompt_ids = out->prompts[0].ids;
        out->n_prompt_ids = out->prompts[0].n_ids;
    }
    if (out->max_tokens == 0 && !out->echo) {
        BAD(e, out->max_tokens_field, "'%s' is 0; it must be at least 1 (0 only with echo)",
            out->max_tokens_field);
        return -1;
    }
    if (kind == API_CHAT && out->top_logprobs > 0 && out->logprobs < 0) {
        BAD(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        return -1;
    }
    if (kind == API_CHAT && out->logprobs >= 0)
        out->logprobs = out->top_logprobs;
    if ((out->n_prompts ? out->n_prompts : 1) * (size_t)out->n > API_MAX_CHOICES) {
        BAD(e, "n", "%zu prompts x n = %ld make %zu choices (at most %d)", out->n_prompts, out->n,
            out->n_prompts * (size_t)out->n, API_MAX_CHOICES);
        return -1;
    }
    if (kind == API_CHAT && !out->messages) {
        BAD(e, "messages", "'messages' is missing (an array of {role, content} objects)");
        return -1;
    }
    return 0;
}

int api_parse(const char *body, size_t len, enum api_kind kind, const struct api_limits *lim,
              struct api_request *out, struct api_error *e)
{
    request_defaults(out, kind);
    memset(e, 0, sizeof(*e));
    json_t *root = api_load_object(body, len, e);
    if (!root)
        return -1;
    int rc = parse_root(root, kind, lim, out, e);
    json_decref(root);
    if (rc)
        api_request_release(out);
    return rc;
}

/* SGLang's sampling_params names that differ from ours. */
static const char *const gen_names[][2] = {
    {"max_new_tokens", "max_tokens"},
    {"sampling_seed", "seed"},
};

/* Top-level fields of SGLang's /generate besides text, input_ids,
 * sampling_params and stream: harmless ones, and those refused unless
 * false or null. */
static const char *const gen_harmless[] = {"rid",
                                           "lora_path",
                                           "logprob_start_len",
                                           "top_logprobs_num",
                                           "return_text_in_logprobs",
                                           "log_metrics",
                                           "bootstrap_host",
                                           "bootstrap_port",
                                           "bootstrap_room",
                                           "session_params"};
static const char *const gen_refused[] = {"return_logprob",
                                          "image_data",
                                          "audio_data",
                                          "video_data",
                                          "input_embeds",
                                          "return_hidden_states",
                                          "custom_logit_processor"};

/* msg with each quoted field name ours ('ours' or 'ours[...') written as
 * theirs, the name the client sent (docs/reliability.md W3-N20). */
static void msg_rename(char *msg, size_t cap, const char *ours, const char *theirs)
{
    struct buf b;
    buf_init(&b, cap);
    size_t n = strlen(ours);
    for (const char *p = msg; *p;) {
        if (p[0] == '\'' && strncmp(p + 1, ours, n) == 0 && (p[n + 1] == '\'' || p[n + 1] == '[')) {
            buf_printf(&b, "'%s", theirs);
            p += n + 1;
        } else {
            buf_append(&b, p++, 1);
        }
    }
    snprintf(msg, cap, "%.*s", (int)b.len, b.data ? b.data : "");
    buf_release(&b);
}

/* The field name a /generate client used for one of ours, in param and
 * in the message. */
static void gen_param(struct api_error *e, const char *from_prompt)
{
    char p[sizeof(e->param)];
    snprintf(p, sizeof(p), "%s", e->param);
    if (strcmp(p, "prompt") == 0) {
        snprintf(e->param, sizeof(e->param), "%s", from_prompt);
        msg_rename(e->msg, sizeof(e->msg), "prompt", from_prompt);
        return;
    }
    if (!p[0] || strcmp(p, "stream") == 0)
        return;
    const char *name = p;
    for (size_t i = 0; i < sizeof(gen_names) / sizeof(gen_names[0]); i++)
        if (strcmp(p, gen_names[i][1]) == 0)
            name = gen_names[i][0];
    snprintf(e->param, sizeof(e->param), "sampling_params.%.28s", name);
    msg_rename(e->msg, sizeof(e->msg), p, e->param);
}

/* SGLang's /generate, rewritten as a completions request: text or
 * input_ids become the prompt, sampling_params' fields become ours (by
 * their names, max_new_tokens and sampling_seed renamed), so every check
 * and refusal is the completions parser's; errors name the field as the
 * client sent it. */
int api_parse_generate(const char *body, size_t len, const struct api_limits *lim,
                       struct api_request *out, struct api_error *e)
{
    request_defaults(out, API_GENERATE);
    memset(e, 0, sizeof(*e));
    json_t *root = api_load_object(body, len, e);
    if (!root)
        return -1;
    json_t *c = json_object();
    int rc = -1;
    const json_t *text = json_object_get(root, "text"), *ids = json_object_get(root, "input_ids");
    const char *from = "text";
    if (text && !json_is_null(text) && ids && !json_is_null(ids)) {
        BAD(e, "text", "give 'text' or 'input_ids', not both");
        goto out;
    }
    if (ids && !json_is_null(ids)) {
        json_object_set(c, "prompt", (json_t *)ids);
        from = "input_ids";
    } else if (text && !json_is_null(text)) {
        json_object_set(c, "prompt", (json_t *)text);
    } else {
        BAD(e, "text", "'text' or 'input_ids' is missing");
        goto out;
    }
    for (size_t i = 0; i < sizeof(gen_refused) / sizeof(gen_refused[0]); i++) {
        const json_t *v = json_object_get(root, gen_refused[i]);
        if (v && !json_is_null(v) && !json_is_false(v)) {
            BAD(e, gen_refused[i], "field '%s' is not supported by this server's /generate",
                gen_refused[i]);
            api_error_code(e, "unsupported_parameter");
            goto out;
        }
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        bool known = strcmp(key, "text") == 0 || strcmp(key, "input_ids") == 0 ||
                     strcmp(key, "sampling_params") == 0 || strcmp(key, "stream") == 0;
        for (size_t i = 0; !known && i < sizeof(gen_harmless) / sizeof(gen_harmless[0]); i++)
            known = strcmp(key, gen_harmless[i]) == 0;
        for (size_t i = 0; !known && i < sizeof(gen_refused) / sizeof(gen_refused[0]); i++)
            known = strcmp(key, gen_refused[i]) == 0;
        if (!known)
            note_ignored(out, key);
    }
    const json_t *st = json_object_get(root, "stream");
    if (st)
        json_object_set(c, "stream", (json_t *)st);
    const json_t *sp = json_object_get(root, "sampling_params");
    if (sp && !json_is_null(sp) && !json_is_object(sp)) {
        BAD(e, "sampling_params", "'sampling_params' must be an object (got %s)",
            json_type_name(sp));
        goto out;
    }
    if (sp && json_is_object(sp)) {
        json_object_foreach((json_t *)sp, key, val)
        {
            const char *name = key;
            for (size_t i = 0; i < sizeof(gen_names) / sizeof(gen_names[0]); i++)
                if (strcmp(key, gen_names[i][0]) == 0)
                    name = gen_names[i][1];
            if (strcmp(name, "prompt") == 0 || strcmp(name, "stream") == 0 ||
                strcmp(name, "model") == 0 || strcmp(name, "echo") == 0 ||
                strcmp(name, "logprobs") == 0) {
                note_ignored(out, key); /* not sampling parameters */
                continue;
            }
            if (json_object_get(c, name)) {
                BAD(e, key, "'sampling_params.%.40s' is given twice (as '%.40s')", key, name);
                goto out;
            }
            json_object_set(c, name, val);
        }
    }
    rc = parse_root(c, API_COMPLETION, lim, out, e);
    if (rc)
        gen_param(e, from);
    if (out->max_tokens_field) /* as server.c's context refusal names it */
        out->max_tokens_field = "sampling_params.max_new_tokens";
    out->kind = API_GENERATE;
out:
    json_decref(c);
    json_decref(root);
    if (rc)
        api_request_release(out);
    return rc;
}

void api_request_release(struct api_request *r)
{
    free(r->model);
    for (size_t i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    for (size_t i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    free(r->messages);
    for (size_t i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->stop);
    free(r->stop_len);
    enum api_kind kind = r->kind;
    request_defaults(r, kind);
}

/* ---- responses ---- */

/* OpenAI's order: message, type, param, code (a string or null). */
void api_error_json(struct buf *b, const struct api_error *e)
{
    buf_puts(b, "{\"error\":{\"message\":");
    buf_json_str(b, e->msg, strlen(e->msg));
    buf_puts(b, ",\"type\":");
    buf_json_str(b, e->type, strlen(e->type));
    buf_puts(b, ",\"param\":");
    if (e->param[0])
        buf_json_str(b, e->param, strlen(e->param));
    else
        buf_puts(b, "null");
    buf_puts(b, ",\"code\":");
    if (e->code[0])
        buf_json_str(b, e->code, strlen(e->code));
    else
        buf_puts(b, "null");
    buf_puts(b, "}}");
}

/* {"id":..,"object":..,"created":..,"model":.., (no closing brace): the
 * fields every chunk and body repeats. The object name follows OpenAI:
 * completions use "text_completion" for chunks and bodies alike, chat uses
 * "chat.completion.chunk" for chunks and "chat.completion" for bodies. */
static void head(struct buf *b, const struct api_resp *r, bool chunk)
{
    static const char *const objects[3][2] = {{"text_completion", "text_completion"},
                                              {"chat.completion", "chat.completion.chunk"},
                                              {"generate", "generate"}};
    buf_puts(b, "{\"id\":");
    buf_json_str(b, r->id, strlen(r->id));
    buf_printf(b, ",\"object\":\"%s\",\"created\":%lld,\"model\":", objects[r->kind][chunk],
               r->created);
    buf_json_str(b, r->model, strlen(r->model));
}

static void finish_reason(struct buf *b, const char *finish)
{
    if (finish)
        buf_printf(b, ",\"finish_reason\":\"%s\"", finish);
    else
        buf_puts(b, ",\"finish_reason\":null");
}

/* cached: prompt tokens whose KV came from the prefix cache (vLLM's
 * prompt_tokens_details.cached_tokens). */
static void usage(struct buf *b, long prompt_tokens, long completion_tokens, long cached)
{
    buf_printf(b,
               ",\"usage\":{\"prompt_tokens\":%ld,\"completion_tokens\":%ld,"
               "\"total_tokens\":%ld,\"prompt_tokens_details\":{\"cached_tokens\":%ld}}",
               prompt_tokens, completion_tokens, prompt_tokens + completion_tokens, cached);
}

/* Appends are all-or-nothing at the event level: begin() notes where the
 * event starts, and commit() rolls b back to it if the cap refused a part. */
static size_t begin(struct buf *b)
{
    b->toobig = false;
    return b->len;
}

static int commit(struct buf *b, size_t start)
{
    if (!b->toobig)
        return 0;
    b->len = start;
    if (b->data)
        b->data[start] = '\0';
    return -1;
}

/* A log-probability as JSON: -inf (a token the model rules out) as
 * -9999.0, as vLLM writes it, since JSON has no infinities. */
static void lp_num(struct buf *b, float x)
{
    if (isnan(x))
        buf_puts(b, "null");
    else if (!(x > -9999.0f))
        buf_puts(b, "-9999.0");
    else
        buf_printf(b, "%.9g", (double)x);
}

/* Characters of a token's text (UTF-8 lead bytes; a partial character
 * counts as one, as its U+FFFD does). */
static long text_chars(const char *p, size_t n)
{
    long c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)p[i] & 0xc0) != 0x80;
    return c;
}

/* Chat's token entry in OpenAI's order: "token" (its text), "logprob",
 * "bytes" (the raw bytes: the lossless form of a partial character). No
 * braces. */
static void token_json(struct buf *b, const tok_vocab *v, int32_t id, float logprob)
{
    char piece[512];
    size_t n = tok_piece(v, id, piece, sizeof(piece));
    if (n > sizeof(piece))
        n = sizeof(piece);
    buf_puts(b, "\"token\":");
    buf_json_str(b, piece, n);
    buf_puts(b, ",\"logprob\":");
    lp_num(b, logprob);
    buf_puts(b, ",\"bytes\":[");
    for (size_t i = 0; i < n; i++)
        buf_printf(b, "%s%u", i ? "," : "", (unsigned)(unsigned char)piece[i]);
    buf_puts(b, "]");
}

/* Completions' logprobs object: parallel lists of the tokens' text, their
 * logprobs, a {text: logprob} map of the alternatives, and text offsets.
 * Two alternatives with the same text would be one key twice: the first
 * (the likelier) is kept. */
static void lp_completion(struct buf *b, const struct api_logprobs *lp)
{
    char piece[512], other[512];
    buf_puts(b, "{\"tokens\":[");
    for (int i = 0; i < lp->n; i++) {
        size_t n = tok_piece(lp->v, lp->ids[i], piece, sizeof(piece));
        buf_puts(b, i ? "," : "");
        buf_json_str(b, piece, n < sizeof(piece) ? n : sizeof(piece));
    }
    buf_puts(b, "],\"token_logprobs\":[");
    for (int i = 0; i < lp->n; i++) {
        buf_puts(b, i ? "," : "");
        lp_num(b, lp->lp[i]);
    }
    buf_puts(b, "],\"top_logprobs\":[");
    for (int i = 0; i < lp->n; i++) {
        buf_puts(b, i ? "," : "");
        if (isnan(lp->lp[i])) {
            buf_puts(b, "null");
            continue;
        }
        buf_puts(b, "{");
        const int32_t *ids = lp->top_ids + (size_t)i * (size_t)lp->k;
        const float *tl = lp->top_lp + (size_t)i * (size_t)lp->k;
        bool any = false;
        for (int j = 0; j < lp->k; j++) {
            size_t n = tok_piece(lp->v, ids[j], piece, sizeof(piece));
            n = n < sizeof(piece) ? n : sizeof(piece);
            bool dup = false;
            for (int q = 0; q < j && !dup; q++) {
                size_t m = tok_piece(lp->v, ids[q], other, sizeof(other));
                dup = m == n && memcmp(piece, other, n) == 0;
            }
            if (dup)
                continue;
            buf_puts(b, any ? "," : "");
            buf_json_str(b, piece, n);
            buf_puts(b, ":");
            lp_num(b, tl[j]);
            any = true;
        }
        buf_puts(b, "}");
    }
    buf_puts(b, "],\"text_offset\":[");
    long off = lp->offset ? *lp->offset : 0;
    for (int i = 0; i < lp->n; i++) {
        buf_printf(b, "%s%ld", i ? "," : "", off);
        size_t n = tok_piece(lp->v, lp->ids[i], piece, sizeof(piece));
        off += text_chars(piece, n < sizeof(piece) ? n : sizeof(piece));
    }
    if (lp->offset)
        *lp->offset = off;
    buf_puts(b, "]}");
}

/* Chat's logprobs object: {"content": [{token, logprob, bytes,
 * top_logprobs: [{token, logprob, bytes}]}]}. */
static void lp_chat(struct buf *b, const struct api_logprobs *lp)
{
    buf_puts(b, "{\"content\":[");
    for (int i = 0; i < lp->n; i++) {
        buf_puts(b, i ? ",{" : "{");
        token_json(b, lp->v, lp->ids[i], lp->lp[i]);
        buf_puts(b, ",\"top_logprobs\":[");
        for (int j = 0; j < lp->k; j++) {
            size_t at = (size_t)i * (size_t)lp->k + (size_t)j;
            buf_puts(b, j ? ",{" : "{");
            token_json(b, lp->v, lp->top_ids[at], lp->top_lp[at]);
            buf_puts(b, "}");
        }
        buf_puts(b, "]}");
    }
    buf_puts(b, "]}");
}

static void logprobs_json(struct buf *b, enum api_kind kind, const struct api_logprobs *lp)
{
    buf_puts(b, ",\"logprobs\":");
    if (!lp)
        buf_puts(b, "null");
    else if (kind == API_CHAT)
        lp_chat(b, lp);
    else
        lp_completion(b, lp);
}

/* A chat delta carries "content" whenever there is text, and also on a
 * non-final chunk without text; the final chunk of a stream that ends on
 * an end-of-generation token has an empty delta {}, as OpenAI sends it. */
int api_sse_choice(struct buf *b, const struct api_resp *r, const struct api_choice *c)
{
    size_t start = begin(b);
    buf_puts(b, "data: ");
    head(b, r, true);
    buf_printf(b, ",\"choices\":[{\"index\":%d,", c->index);
    if (r->kind == API_CHAT) {
        buf_puts(b, "\"delta\":{");
        if (c->role)
            buf_puts(b, "\"role\":\"assistant\"");
        if (c->n || !c->finish) {
            buf_puts(b, c->role ? ",\"content\":" : "\"content\":");
            buf_json_str(b, c->text, c->n);
        }
        buf_puts(b, "}");
    } else {
        buf_puts(b, "\"text\":");
        buf_json_str(b, c->text, c->n);
    }
    logprobs_json(b, r->kind, c->lp);
    finish_reason(b, c->finish);
    buf_puts(b, "}]}\n\n");
    return commit(b, start);
}

int api_sse_chunk(struct buf *b, const struct api_resp *r, const char *text, size_t n, bool role,
                  const char *finish)
{
    struct api_choice c = {.text = text, .n = n, .role = role, .finish = finish};
    return api_sse_choice(b, r, &c);
}
int api_sse_usage(struct buf *b, const struct api_resp *r, long prompt_tokens,
                  long completion_tokens, long cached)
{
    size_t start = begin(b);
    buf_puts(b, "data: ");
    head(b, r, true);
    buf_puts(b, ",\"choices\":[]");
    usage(b, prompt_tokens, completion_tokens, cached);
    buf_puts(b, "}\n\n");
    return commit(b, start);
}

int api_sse_error(struct buf *b, const struct api_error *e)
{
    size_t start = begin(b);
    buf_puts(b, "data: ");
    api_error_json(b, e);
    buf_puts(b, "\n\n");
    return commit(b, start);
}

int api_sse_done(struct buf *b)
{
    size_t start = begin(b);
    buf_puts(b, "data: [DONE]\n\n");
    return commit(b, start);
}

size_t api_final_begin(struct buf *b, const struct api_resp *r)
{
    size_t start = begin(b);
    head(b, r, false);
    buf_puts(b, ",\"choices\":[");
    return start;
}

void api_final_choice(struct buf *b, const struct api_resp *r, const struct api_choice *c,
                      bool first)
{
    buf_printf(b, "%s{\"index\":%d,", first ? "" : ",", c->index);
    if (r->kind == API_CHAT) {
        buf_puts(b, "\"message\":{\"role\":\"assistant\",\"content\":");
        buf_json_str(b, c->text, c->n);
        buf_puts(b, "}");
    } else {
        buf_puts(b, "\"text\":");
        buf_json_str(b, c->text, c->n);
    }
    logprobs_json(b, r->kind, c->lp);
    finish_reason(b, c->finish);
    buf_puts(b, "}");
}

int api_final_end(struct buf *b, size_t start, long prompt_tokens, long completion_tokens,
                  long cached)
{
    buf_puts(b, "]");
    usage(b, prompt_tokens, completion_tokens, cached);
    buf_puts(b, "}");
    return commit(b, start);
}

int api_final_json(struct buf *b, const struct api_resp *r, const char *text, size_t n,
                   const char *finish, long prompt_tokens, long completion_tokens)
{
    size_t start = api_final_begin(b, r);
    struct api_choice c = {.text = text, .n = n, .finish = finish};
    api_final_choice(b, r, &c, true);
    return api_final_end(b, start, prompt_tokens, completion_tokens, 0);
}

void api_gen_json(struct buf *b, const char *id, int index, const char *text, size_t n,
                  const char *finish, long prompt_tokens, long completion_tokens, long cached)
{
    buf_puts(b, "{\"text\":");
    buf_json_str(b, text, n);
    if (index >= 0)
        buf_printf(b, ",\"index\":%d", index);
    buf_puts(b, ",\"meta_info\":{\"id\":");
    buf_json_str(b, id, strlen(id));
    buf_puts(b, ",\"finish_reason\":");
    if (!finish)
        buf_puts(b, "null");
    else if (strcmp(finish, "length") == 0)
        buf_printf(b, "{\"type\":\"length\",\"length\":%ld}", completion_tokens);
    else
        buf_printf(b, "{\"type\":\"%s\",\"matched\":null}", finish);
    buf_printf(b, ",\"prompt_tokens\":%ld,\"completion_tokens\":%ld,\"cached_tokens\":%ld}}",
               prompt_tokens, completion_tokens, cached);
}
