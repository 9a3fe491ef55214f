/*
 * api: requests of the OpenAI-compatible endpoints and SGLang's /generate
 * (see api.h): the body loaded and checked (UTF-8, NUL, number overflow),
 * the fields read through api_fields.c's tables, then the rules across
 * fields. api_resp.c writes the answers; api_int.h is what they share.
 */
#include "serve/api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/api_int.h"

#include "text/utf8.h"

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
    if (api_read_fields(root, kind, lim, out, e) != 0)
        return -1;
    if (kind == API_COMPLETION && !out->n_prompts) {
        BAD(e, "prompt", "'prompt' is missing (a string or an array of token ids)");
        return -1;
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
            api_note_ignored(out, key);
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
                api_note_ignored(out, key); /* not sampling parameters */
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
