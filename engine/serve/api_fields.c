/*
 * api_fields: the request fields as tables. One row per field we read (its
 * endpoints and reader: a type check, then a range check), one per field
 * refused unless it holds its do-nothing value, and the harmless ones taken
 * without a word; engine/README.md's table is generated from them
 * (api_field).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#include "serve/api_int.h"

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

/* stream_options: include_usage and continuous_usage_stats are read. They
 * are accepted without stream too (OpenAI refuses that combination, vLLM
 * does not); they have no effect then, since a non-streaming answer always
 * carries usage. continuous_usage_stats takes effect with include_usage, as
 * vLLM's: every chunk then carries its choice's usage so far. */
static int f_stream_options(const json_t *v, struct api_request *r, const struct api_limits *lim,
                            struct api_error *e)
{
    if (!json_is_object(v))
        return BAD(e, "stream_options", "'stream_options' must be an object (got %s)",
                   json_type_name(v));
    const json_t *cu = json_object_get(v, "continuous_usage_stats");
    if (cu && !json_is_null(cu) &&
        read_bool(cu, "stream_options.continuous_usage_stats", &r->cont_usage, e) != 0)
        return -1;
    const json_t *u = json_object_get(v, "include_usage");
    if (u && !json_is_null(u))
        return read_bool(u, "stream_options.include_usage", &r->include_usage, e);
    return 0;
}

/* Keywords a json_schema may hold and still mean "any JSON object", the
 * subset JSON mode can promise; any other keyword is refused by name. */
static const char *const schema_ok[] = {"type",    "title", "description",
                                        "$schema", "$id",   "additionalProperties"};

/* response_format: "text"; "json_object" (JSON mode: the answer is one
 * JSON object, through the token mask of serve/jsonmask.c); "json_schema"
 * only with a schema that says no more than that (type object, any
 * properties): the rest is refused naming the keyword. */
static int f_response_format(const json_t *v, struct api_request *r, const struct api_limits *lim,
                             struct api_error *e)
{
    const json_t *t = json_is_object(v) ? json_object_get(v, "type") : NULL;
    if (!json_is_string(t))
        return BAD(e, "response_format",
                   "'response_format' must be an object with a string 'type' (text, json_object "
                   "or json_schema)");
    const char *type = json_string_value(t);
    if (json_str_is(t, "text"))
        return 0;
    if (json_str_is(t, "json_object")) {
        r->json = true;
        return 0;
    }
    if (!json_str_is(t, "json_schema")) {
        BAD(e, "response_format",
            "response_format type '%.40s' is not supported by this server (text, json_object or "
            "json_schema)",
            type);
        return api_error_code(e, "unsupported_parameter"), -1;
    }
    const json_t *js = json_object_get(v, "json_schema");
    const json_t *sc = json_is_object(js) ? json_object_get(js, "schema") : NULL;
    if (!json_is_object(sc))
        return BAD(e, "response_format.json_schema.schema",
                   "'response_format.json_schema.schema' must be an object");
    const json_t *st = json_object_get(sc, "type");
    const json_t *ap = json_object_get(sc, "additionalProperties");
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)sc, key, val)
    {
        bool ok = false;
        for (size_t i = 0; i < sizeof(schema_ok) / sizeof(schema_ok[0]) && !ok; i++)
            ok = strcmp(key, schema_ok[i]) == 0;
        if (!ok || (st == val && !json_str_is(st, "object")) || (ap == val && !json_is_true(ap))) {
            char param[64];
            snprintf(param, sizeof(param), "response_format.json_schema.schema.%.28s", key);
            BAD(e, param,
                "json_schema keyword '%.40s'%s is not supported by this server: only a schema "
                "of any object ({\"type\": \"object\"}, as json_object) is",
                key, ok ? " with this value" : "");
            return api_error_code(e, "unsupported_parameter"), -1;
        }
    }
    if (!st)
        return BAD(e, "response_format.json_schema.schema.type",
                   "the json_schema has no 'type' (only {\"type\": \"object\"} is supported)");
    r->json = true;
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
    {"response_format", BOTH, f_response_format},
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
void api_note_ignored(struct api_request *r, const char *key)
{
    size_t len = strlen(r->ignored);
    if (len + 6 >= sizeof(r->ignored)) {
        if (len && strcmp(r->ignored + len - 3, "...") != 0)
            snprintf(r->ignored + len, sizeof(r->ignored) - len, "...");
        return;
    }
    snprintf(r->ignored + len, sizeof(r->ignored) - len - 4, "%s'%s'", len ? ", " : "", key);
}

int api_read_fields(json_t *root, enum api_kind kind, const struct api_limits *lim,
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
            api_note_ignored(out, key);
    }
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (!(fields[i].kinds & (1u << kind)))
            continue;
        const json_t *v = json_object_get(root, fields[i].name);
        if (v && !json_is_null(v) && fields[i].read(v, out, lim, e))
            return -1;
    }
    return 0;
}
