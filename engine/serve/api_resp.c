/*
 * api_resp: the answers. Whole completion and chat bodies, SSE chunks
 * (text, usage, errors, [DONE]), logprobs in OpenAI's completion and chat
 * shapes, /generate's cumulative events, error bodies; each written into a
 * bounded buffer, so an answer past its cap is refused, never cut.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/api_int.h"

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
    buf_puts(b, "}]");
    if (c->usage)
        usage(b, c->usage[0], c->usage[1], c->usage[2]);
    buf_puts(b, "}\n\n");
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
