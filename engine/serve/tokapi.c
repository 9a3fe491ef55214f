/*
 * tokapi: /tokenize and /detokenize bodies (see tokapi.h). The body is
 * checked the way api.c checks a completion's (UTF-8, then JSON, then an
 * object, duplicate keys refused); a "messages" body is handed to
 * api_parse as a chat request, so its messages are read and refused
 * exactly as /v1/chat/completions reads them.
 */
#include "serve/tokapi.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#define BAD(e, param, ...) api_error_set((e), 400, "invalid_request_error", (param), __VA_ARGS__)

/* An optional boolean field: absent or null leaves *out as it is. */
static int opt_bool(const json_t *root, const char *name, bool *out, struct api_error *e)
{
    const json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return BAD(e, name, "'%s' must be a boolean", name);
    *out = json_is_true(v);
    return 0;
}

/* "model", when given, must name what this server serves (404 otherwise,
 * as for completions). */
static int check_model(const struct tokapi_ctx *c, const json_t *root, struct api_error *e)
{
    const json_t *v = json_object_get(root, "model");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return BAD(e, "model", "'model' must be a string");
    if (!c->model_ids)
        return 0;
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    for (size_t i = 0; c->model_ids[i]; i++)
        if (strlen(c->model_ids[i]) == n && memcmp(c->model_ids[i], s, n) == 0)
            return 0;
    return api_error_set(e, 404, "not_found_error", "model",
                         "model '%.200s' does not exist (this server serves '%.200s')", s,
                         c->model_ids[0] ? c->model_ids[0] : "");
}

/* Tokenizing runs on the server's one HTTP thread, so text is bounded as
 * a completion's is (server.c): text that cannot fit the context (no token
 * is longer than max_piece bytes) is refused unread. */
static int check_size(const struct tokapi_ctx *c, size_t bytes, const char *param,
                      struct api_error *e)
{
    size_t max_piece = tok_max_piece(c->vocab) ? tok_max_piece(c->vocab) : 1;
    if (c->n_ctx > 0 && bytes / max_piece >= (size_t)c->n_ctx)
        return BAD(e, param,
                   "'%s' is %zu bytes, more than the context of %d tokens can hold (text up to "
                   "%zu bytes is tokenized)",
                   param, bytes, c->n_ctx, (size_t)c->n_ctx * max_piece - 1);
    return 0;
}

/* The chat completion's prompt ids for a "messages" body. */
static int chat_ids(const struct tokapi_ctx *c, const char *body, size_t len, int32_t **ids,
                    size_t *n, size_t *cap, struct api_error *e)
{
    struct api_limits lim = {.n_vocab = (int)tok_n_vocab(c->vocab), .model_ids = c->model_ids};
    struct api_request q;
    if (api_parse(body, len, API_CHAT, &lim, &q, e) != 0)
        return -1;
    size_t bytes = 0;
    for (size_t i = 0; i < q.n_messages; i++)
        bytes += q.messages[i].content_len;
    if (check_size(c, bytes, "messages", e) != 0) {
        api_request_release(&q);
        return -1;
    }
    struct chat_seg *segs = NULL;
    size_t n_segs = 0, cap_segs = 0;
    chat_render(c->chat, q.messages, q.n_messages, &segs, &n_segs, &cap_segs);
    struct err err;
    err_init(&err);
    int rc = chat_tokenize(c->vocab, segs, n_segs, ids, n, cap, &err);
    free(segs);
    api_request_release(&q);
    if (rc != 0)
        return BAD(e, "messages", "'messages': %s", err.msg);
    return 0;
}

int tokapi_tokenize(const struct tokapi_ctx *c, const char *body, size_t len, struct buf *out,
                    struct api_error *e)
{
    memset(e, 0, sizeof(*e));
    json_t *root = api_load_object(body, len, e);
    if (!root)
        return -1;
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    bool add_special = true, token_strs = false;
    int rc = -1;
    const json_t *prompt = json_object_get(root, "prompt");
    const json_t *msgs = json_object_get(root, "messages");
    if (prompt && json_is_null(prompt))
        prompt = NULL;
    if (msgs && json_is_null(msgs))
        msgs = NULL;
    if (check_model(c, root, e) || opt_bool(root, "return_token_strs", &token_strs, e))
        goto out;
    if (prompt && msgs) {
        BAD(e, "prompt", "give either 'prompt' or 'messages', not both");
        goto out;
    }
    if (msgs) {
        if (chat_ids(c, body, len, &ids, &n, &cap, e) != 0)
            goto out;
    } else {
        if (!prompt) {
            BAD(e, "prompt", "'prompt' is missing (a string, or 'messages' for a chat)");
            goto out;
        }
        if (!json_is_string(prompt)) {
            BAD(e, "prompt", "'prompt' must be a string");
            goto out;
        }
        if (opt_bool(root, "add_special_tokens", &add_special, e) ||
            check_size(c, json_string_length(prompt), "prompt", e))
            goto out;
        struct err err;
        err_init(&err);
        bool bos = add_special && tok_add_bos(c->vocab);
        if (tok_encode(c->vocab, json_string_value(prompt), json_string_length(prompt), true, bos,
                       &ids, &n, &cap, &err) != 0) {
            BAD(e, "prompt", "'prompt': %s", err.msg);
            goto out;
        }
    }
    buf_printf(out, "{\"count\":%zu,\"max_model_len\":%d,\"tokens\":[", n, c->n_ctx);
    for (size_t i = 0; i < n; i++)
        buf_printf(out, "%s%d", i ? "," : "", ids[i]);
    buf_puts(out, "],\"token_strs\":");
    if (token_strs) {
        /* the vocabulary's own texts (byte-level, "Ġworld"), as a Hugging
         * Face tokenizer's convert_ids_to_tokens gives them */
        buf_putc(out, '[');
        for (size_t i = 0; i < n; i++) {
            const char *t = tok_text(c->vocab, ids[i]);
            if (i)
                buf_putc(out, ',');
            buf_json_str(out, t ? t : "", t ? strlen(t) : 0);
        }
        buf_putc(out, ']');
    } else {
        buf_puts(out, "null");
    }
    buf_putc(out, '}');
    rc = out->toobig ? BAD(e, "prompt", "the answer passes %zu bytes", out->max) : 0;
out:
    free(ids);
    json_decref(root);
    return rc;
}

int tokapi_detokenize(const struct tokapi_ctx *c, const char *body, size_t len, struct buf *out,
                      struct api_error *e)
{
    memset(e, 0, sizeof(*e));
    json_t *root = api_load_object(body, len, e);
    if (!root)
        return -1;
    int rc = -1;
    char *piece = NULL;
    struct buf text;
    buf_init(&text, BUF_MAX_DEFAULT);
    if (check_model(c, root, e))
        goto out;
    const json_t *toks = json_object_get(root, "tokens");
    if (!toks || json_is_null(toks)) {
        BAD(e, "tokens", "'tokens' is missing (an array of token ids)");
        goto out;
    }
    if (!json_is_array(toks)) {
        BAD(e, "tokens", "'tokens' must be an array of token ids");
        goto out;
    }
    size_t n_vocab = tok_n_vocab(c->vocab);
    for (size_t i = 0; i < json_array_size(toks); i++) {
        const json_t *t = json_array_get(toks, i);
        char param[32];
        snprintf(param, sizeof(param), "tokens[%zu]", i);
        if (!json_is_integer(t)) {
            BAD(e, param, "'%s' must be an integer token id", param);
            goto out;
        }
        json_int_t id = json_integer_value(t);
        if (id < 0 || (uint64_t)id >= n_vocab) {
            BAD(e, param, "'%s' is %lld, not a token id (the vocabulary has %zu)", param,
                (long long)id, n_vocab);
            goto out;
        }
    }
    /* the streaming detokenizer, as a completion's text is made: whole
     * UTF-8 characters, invalid bytes as U+FFFD */
    size_t piece_cap = TOK_STREAM_CAP(tok_max_piece(c->vocab));
    piece = xmalloc(piece_cap);
    struct tok_stream ts;
    tok_stream_init(&ts);
    for (size_t i = 0; i < json_array_size(toks); i++) {
        int32_t id = (int32_t)json_integer_value(json_array_get(toks, i));
        size_t w = tok_stream_push(c->vocab, &ts, id, piece, piece_cap);
        buf_append(&text, piece, w);
    }
    size_t w = tok_stream_flush(&ts, piece, piece_cap);
    buf_append(&text, piece, w);
    if (text.toobig) {
        BAD(e, "tokens", "the text of these tokens passes %zu bytes (send fewer)", text.max);
        goto out;
    }
    buf_puts(out, "{\"prompt\":");
    buf_json_str(out, text.data ? text.data : "", text.len);
    buf_putc(out, '}');
    rc = out->toobig ? BAD(e, "tokens", "the answer passes %zu bytes", out->max) : 0;
out:
    free(piece);
    buf_release(&text);
    json_decref(root);
    return rc;
}

/* A special token's text as a JSON string, or null for id -1. */
static void special_json(const tok_vocab *v, int32_t id, struct buf *out)
{
    char piece[512];
    if (id < 0 || (size_t)id >= tok_n_vocab(v)) {
        buf_puts(out, "null");
        return;
    }
    size_t n = tok_piece(v, id, piece, sizeof(piece));
    buf_json_str(out, piece, n < sizeof(piece) ? n : sizeof(piece));
}

/* The keys transformers' PreTrainedTokenizerFast keeps as init kwargs
 * (what `fp4serve export-tokenizer` writes to tokenizer_config.json), so a
 * client that builds a tokenizer from them gets fp4serve's ids. The GGUF
 * names no pad or unknown token for BPE vocabularies fp4serve reads: null. */
void tokapi_info(const struct tokapi_ctx *c, struct buf *out)
{
    const char *name = c->model_id ? c->model_id : "";
    buf_puts(out, "{\"tokenizer_class\":\"PreTrainedTokenizerFast\",\"name_or_path\":");
    buf_json_str(out, name, strlen(name));
    buf_puts(out, ",\"bos_token\":");
    special_json(c->vocab, tok_bos(c->vocab), out);
    buf_puts(out, ",\"eos_token\":");
    special_json(c->vocab, tok_eos(c->vocab), out);
    buf_printf(out,
               ",\"pad_token\":null,\"unk_token\":null,\"add_bos_token\":%s,"
               "\"add_eos_token\":false,\"model_max_length\":%d,"
               "\"clean_up_tokenization_spaces\":false,\"chat_template\":",
               tok_add_bos(c->vocab) ? "true" : "false", c->n_ctx);
    const char *tmpl = tok_chat_template(c->vocab);
    if (tmpl && c->chat && c->chat->from_gguf)
        buf_json_str(out, tmpl, strlen(tmpl));
    else
        buf_puts(out, "null");
    buf_putc(out, '}');
}
