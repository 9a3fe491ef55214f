/*
 * Fuzz target for engine/serve/api, chat and stop: arbitrary bytes are parsed as
 * a completions, a chat and an SGLang /generate request body. A refusal must be a 400 or
 * 404 with a message; an accepted request must hold only values in their
 * documented ranges. Its text then goes through the ChatML renderer, the
 * response formatters (each event must parse back as JSON carrying the
 * same text) and the stop-string filter, fed in small pieces, which must
 * release exactly the text before the first stop string. Violations abort.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#include "serve/api.h"
#include "text/chat.h"
#include "text/stop.h"

static void die(const char *what)
{
    fprintf(stderr, "engine_api fuzz: %s\n", what);
    abort();
}

static void check_ranges(const struct api_request *r)
{
    if (r->max_tokens != -1 && r->max_tokens < (r->echo ? 0 : 1))
        die("max_tokens out of range");
    if (r->n < 1 || r->n > API_MAX_N || r->logprobs < -1 || r->logprobs > API_MAX_LOGPROBS)
        die("n or logprobs out of range");
    if (r->kind != API_COMPLETION && r->echo)
        die("echo outside completions");
    if (!(r->min_p >= 0 && r->min_p <= 1) || !(r->repetition_penalty > 0) ||
        !(r->frequency_penalty >= -2 && r->frequency_penalty <= 2) ||
        !(r->presence_penalty >= -2 && r->presence_penalty <= 2))
        die("min_p or a penalty out of range");
    if ((r->n_prompts ? r->n_prompts : 1) * (size_t)r->n > API_MAX_CHOICES)
        die("too many choices");
    for (size_t k = 0; k < r->n_prompts; k++) {
        if (!r->prompts[k].text == !r->prompts[k].ids)
            die("a prompt is neither text nor ids, or both");
        for (size_t i = 0; i < r->prompts[k].n_ids; i++)
            if (r->prompts[k].ids[i] < 0 || r->prompts[k].ids[i] >= 512)
                die("token id out of range");
    }
    if (!(r->temperature >= 0 && r->temperature <= API_TEMP_MAX))
        die("temperature out of range");
    if (!(r->top_p > 0 && r->top_p <= 1))
        die("top_p out of range");
    if (r->top_k < 0 || r->n_stop > API_MAX_STOP)
        die("top_k or stop count out of range");
    for (size_t i = 0; i < r->n_stop; i++)
        if (r->stop_len[i] < 1 || r->stop_len[i] > API_MAX_STOP_LEN ||
            r->stop[i][r->stop_len[i]] != '\0') /* "\u0000" inside is allowed */
            die("stop string length");
    for (size_t k = 0; k < r->n_prompts; k++) {
        const struct api_prompt *p = &r->prompts[k];
        for (size_t i = 0; i < p->n_ids; i++)
            if (p->ids[i] < 0 || p->ids[i] >= 512)
                die("token id out of range");
        if (!p->text && !p->ids)
            die("a prompt with neither text nor token ids");
    }
    if (r->kind != API_CHAT && !r->n_prompts)
        die("completion without a prompt");
    if (r->kind == API_CHAT && (!r->messages || !r->n_messages))
        die("chat without messages");
}

/* The text must survive a streamed chunk and a final body unchanged. */
static void check_format(const struct api_request *r, const char *text, size_t n)
{
    struct buf b;
    buf_init(&b, (size_t)64 << 20);
    struct api_resp rp = {.kind = r->kind, .id = "cmpl-f", .created = 1, .model = "m"};
    if (api_sse_chunk(&b, &rp, text, n, true, r->stream ? "stop" : NULL) != 0)
        die("chunk refused");
    if (b.len < 8 || strncmp(b.data, "data: ", 6) != 0 || strcmp(b.data + b.len - 2, "\n\n") != 0)
        die("chunk framing");
    json_t *j = json_loadb(b.data + 6, b.len - 8, JSON_ALLOW_NUL, NULL);
    if (!j)
        die("chunk is not JSON");
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    json_t *t = r->kind == API_CHAT ? json_object_get(json_object_get(c0, "delta"), "content")
                                    : json_object_get(c0, "text");
    if (n && (!json_is_string(t) || json_string_length(t) != n ||
              memcmp(json_string_value(t), text, n) != 0))
        die("chunk text does not round-trip");
    json_decref(j);
    buf_reset(&b);
    api_final_json(&b, &rp, text, n, "length", 1, 2);
    j = json_loadb(b.data, b.len, JSON_ALLOW_NUL, NULL);
    if (!j)
        die("final body is not JSON");
    json_decref(j);
    buf_reset(&b);
    api_gen_json(&b, "id", r->batch ? 0 : -1, text, n, r->stream ? "stop" : NULL, 1, 2, 0);
    j = json_loadb(b.data, b.len, JSON_ALLOW_NUL, NULL);
    t = json_object_get(j, "text");
    if (!j || (n && (!json_is_string(t) || json_string_length(t) != n ||
                     memcmp(json_string_value(t), text, n) != 0)))
        die("/generate body does not round-trip");
    json_decref(j);
    buf_release(&b);
}

/* Where a stop string first occurs in text[0..n), or n. */
static size_t first_stop(const struct api_request *r, const char *text, size_t n)
{
    size_t first = n;
    for (size_t i = 0; i < r->n_stop; i++) {
        const char *p = memmem(text, n, r->stop[i], r->stop_len[i]);
        if (p && (size_t)(p - text) < first)
            first = (size_t)(p - text);
    }
    return first;
}

/* Push text through the stop filter in pieces of 1..16 bytes (tokens).
 * Generation ends at the first piece in which some stop string is
 * complete, and the text ends before the earliest stop string in what was
 * generated by then (a stop that would start earlier but complete later
 * is never generated). */
static void check_stop(const struct api_request *r, const char *text, size_t n, unsigned seed)
{
    struct stop_filter f;
    stop_init(&f, r->stop, r->stop_len, r->n_stop, 16);
    size_t cap = API_MAX_STOP_LEN + 64, w = 0, want = n, i = 0;
    char *tmp = xmalloc(cap), *out = xmalloc(n + 1);
    bool hit = false, want_hit = false;
    while (i < n && !hit) {
        size_t k = 1 + (seed = seed * 1103515245u + 12345u) % 16;
        if (k > n - i)
            k = n - i;
        size_t got = stop_push(&f, text + i, k, tmp, cap, &hit);
        memcpy(out + w, tmp, got);
        w += got;
        i += k;
        if (!want_hit && first_stop(r, text, i) < i) {
            want_hit = true;
            want = first_stop(r, text, i);
        }
    }
    if (!hit) {
        size_t got = stop_flush(&f, tmp, cap);
        memcpy(out + w, tmp, got);
        w += got;
    }
    if (hit != want_hit || w != want || memcmp(out, text, w) != 0)
        die("stop filter released the wrong text");
    free(tmp);
    free(out);
    stop_release(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const ids[] = {"m", NULL};
    const struct api_limits lim = {.n_vocab = 512, .model_ids = ids};
    for (int kind = 0; kind < 3; kind++) {
        struct api_request r;
        struct api_error e;
        if ((kind == API_GENERATE
                 ? api_parse_generate((const char *)data, size, &lim, &r, &e)
                 : api_parse((const char *)data, size, (enum api_kind)kind, &lim, &r, &e)) != 0) {
            if ((e.status != 400 && e.status != 404) || !e.msg[0] || !e.type[0])
                die("refusal without a 400/404 and a message");
            continue;
        }
        check_ranges(&r);
        struct buf text;
        buf_init(&text, (size_t)64 << 20);
        if (kind == API_CHAT) {
            struct chat_template t;
            chat_template_init(&t, size & 1 ? NULL
                                            : "<|im_start|>system\nDefault<|im_end|>"
                                              "{% if messages[0]['role'] != 'system' %}");
            struct chat_seg *segs = NULL;
            size_t n = 0, cap = 0;
            chat_render(&t, r.messages, r.n_messages, &segs, &n, &cap);
            chat_flatten(segs, n, &text);
            free(segs);
            chat_template_release(&t);
        } else if (r.n_prompts && r.prompts[0].text) {
            buf_append(&text, r.prompts[0].text, r.prompts[0].len);
        }
        check_format(&r, text.data ? text.data : "", text.len);
        check_stop(&r, text.data ? text.data : "", text.len, (unsigned)size);
        buf_release(&text);
        api_request_release(&r);
    }
    return 0;
}
