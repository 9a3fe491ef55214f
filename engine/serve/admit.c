/*
 * admit: the request policy between parsing and the scheduler (the rules
 * are listed in admit.h). Runs on the HTTP thread, before a status line
 * is sent.
 */
#include "serve/admit.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#include "text/chat.h"
#include "text/tokenizer.h"

/* The field that holds q's prompts, named as the client sent it:
 * /generate's are "input_ids" or "text" (docs/reliability.md W3-N20). */
static const char *prompt_param(const struct api_request *q)
{
    if (q->kind == API_CHAT)
        return "messages";
    if (q->kind == API_GENERATE)
        return q->n_prompts && q->prompts[0].ids ? "input_ids" : "text";
    return "prompt";
}

/* A prompt as token ids: given, tokenized (p), or rendered from messages (p NULL). */
static int prompt_ids(const struct srv_engine *en, const struct api_request *q,
                      const struct api_prompt *p, int32_t **ids, size_t *n, size_t *cap,
                      struct api_error *e)
{
    struct err err;
    err_init(&err);
    if (p && p->ids) {
        *ids = xmalloc(p->n_ids * sizeof(int32_t));
        memcpy(*ids, p->ids, p->n_ids * sizeof(int32_t));
        *n = *cap = p->n_ids;
        return 0;
    }
    if (p) {
        if (tok_encode(en->vocab, p->text, p->len, true, tok_add_bos(en->vocab), ids, n, cap,
                       &err) != 0)
            return api_error_set(e, 400, "invalid_request_error", prompt_param(q), "'%s': %s",
                                 prompt_param(q), err.msg);
        return 0;
    }
    struct chat_seg *segs = NULL;
    size_t n_segs = 0, cap_segs = 0;
    chat_render(en->chat, q->messages, q->n_messages, &segs, &n_segs, &cap_segs);
    int rc = chat_tokenize(en->vocab, segs, n_segs, ids, n, cap, &err);
    free(segs);
    if (rc != 0)
        return api_error_set(e, 400, "invalid_request_error", "messages", "'messages': %s",
                             err.msg);
    return 0;
}

/* Every prompt of q tokenized and checked against the context: pr[i]
 * (ids owned, released by free_prompts) for the n_pr prompts (1 for chat).
 * *longest is the longest prompt's token count. */
static int all_prompts(const struct srv_engine *en, const struct api_request *q,
                       struct sched_prompt *pr, size_t n_pr, size_t *longest, struct api_error *e)
{
    const char *pparam = prompt_param(q);
    *longest = 0;
    for (size_t i = 0; i < n_pr; i++) {
        const struct api_prompt *ap = q->kind == API_CHAT ? NULL : &q->prompts[i];
        int32_t *ids = NULL;
        size_t n_ids = 0, cap_ids = 0;
        if (prompt_ids(en, q, ap, &ids, &n_ids, &cap_ids, e) != 0) {
            free(ids);
            return -1;
        }
        pr[i] = (struct sched_prompt){.ids = ids, .n_ids = n_ids};
        if (ap && ap->text) {
            pr[i].text = ap->text;
            pr[i].len = ap->len;
        }
        char which[32] = "";
        if (n_pr > 1)
            snprintf(which, sizeof(which), "[%zu]", i);
        if (n_ids == 0)
            return api_error_set(e, 400, "invalid_request_error", pparam, "'%s%s' has no tokens",
                                 pparam, which);
        if (n_ids >= (size_t)en->n_ctx) {
            api_error_set(e, 400, "invalid_request_error", pparam,
                          "the prompt%s is %zu tokens, which leaves no room in the context of "
                          "%d tokens",
                          which, n_ids, en->n_ctx);
            api_error_code(e, "context_length_exceeded");
            return -1;
        }
        if (n_ids > *longest)
            *longest = n_ids;
    }
    return 0;
}

static void free_prompts(struct sched_prompt *pr, size_t n)
{
    for (size_t i = 0; pr && i < n; i++)
        free((void *)pr[i].ids);
    free(pr);
}

/* top_p for the sampler's float. A positive value below the smallest
 * float (1e-300) would round to 0, which the sampler reads as "no filter"
 * (top_p 1): it becomes the smallest float instead, which, like the value
 * sent, keeps only the likeliest token (docs/reliability.md W3-N1). */
static float top_p_float(double p)
{
    float f = (float)p;
    return p > 0 && f == 0 ? FLT_TRUE_MIN : f;
}

/* A non-streaming answer with logprobs that cannot fit the body cap is
 * refused before any work (docs/reliability.md W3-N3), not a 500 after the
 * whole generation. Its size is predicted from choices x (max_tokens, plus
 * the prompt with echo) x alternatives, at a floor per token: a 1-byte
 * text and a 4-character logprob ("-0.5") for the token and each
 * alternative; real answers are larger. */
static int answer_fits(const struct api_request *q, const struct sched_prompt *pr, size_t n_pr,
                       long max_tokens, struct api_error *e)
{
    if (q->stream || q->logprobs < 0)
        return 0;
    double n = q->n > 0 ? (double)q->n : 1, tokens = 0;
    for (size_t i = 0; i < n_pr; i++)
        tokens += n * (double)(max_tokens + (q->echo ? (long)pr[i].n_ids : 0));
    /* completions: "x", -0.5, {"x":-0.5, ...}, 0 ; chat: {"token":"x","logprob":-0.5,
     * "bytes":[1],"top_logprobs":[{"token":"x","logprob":-0.5,"bytes":[1]}, ...]} */
    double per_token = q->kind == API_CHAT ? 56 + 40.0 * q->logprobs : 13 + 8.0 * q->logprobs;
    double bytes = tokens * per_token;
    size_t cap = sched_answer_cap((int)(n * (double)n_pr));
    if (bytes <= (double)cap)
        return 0;
    const char *lname = q->kind == API_CHAT ? "top_logprobs" : "logprobs";
    return api_error_set(e, 400, "invalid_request_error", lname,
                         "the answer would take at least %.0f MiB (%.0f tokens over every choice, "
                         "each with %d logprobs), more than the %zu MiB a body may hold; ask for "
                         "fewer choices, tokens or logprobs, or stream",
                         bytes / (1 << 20), tokens, q->logprobs, cap >> 20);
}

int api_admit(const struct srv_engine *en, const struct api_request *q, struct sched_req_params *p,
              struct api_error *e)
{
    struct sched_prompt *pr = NULL;
    size_t n_pr = 0;
    memset(p, 0, sizeof(*p));
    const char *pparam = prompt_param(q);
    /* Tokenizing runs on the HTTP thread: text that cannot fit the context
     * (no token is longer than max_piece bytes) is refused unread, which
     * bounds that work by ctx x max_piece bytes per prompt. */
    size_t text_bytes = 0;
    for (size_t i = 0; i < q->n_prompts; i++)
        if (q->prompts[i].len > text_bytes)
            text_bytes = q->prompts[i].len;
    for (size_t i = 0; i < q->n_messages; i++)
        text_bytes += q->messages[i].content_len;
    size_t max_piece = tok_max_piece(en->vocab) ? tok_max_piece(en->vocab) : 1;
    if (text_bytes / max_piece >= (size_t)en->n_ctx) {
        api_error_set(e, 400, "invalid_request_error", pparam,
                      "the prompt is %zu bytes, more than the context of %d tokens can hold",
                      text_bytes, en->n_ctx);
        api_error_code(e, "context_length_exceeded");
        goto refused;
    }
    n_pr = q->kind == API_CHAT ? 1 : q->n_prompts;
    pr = xcalloc(n_pr, sizeof(*pr));
    size_t n_ids;
    if (all_prompts(en, q, pr, n_pr, &n_ids, e) != 0)
        goto refused;
    /* max_tokens policy: absent = the rest of the context (after the
     * longest prompt); given = must fit */
    long room = en->n_ctx - (long)n_ids;
    long max_tokens = q->max_tokens < 0 ? room : q->max_tokens;
    if (q->kind == API_GENERATE && q->max_tokens < 0 && max_tokens > 128)
        max_tokens = 128; /* SGLang's default max_new_tokens */
    if (max_tokens > room) {
        const char *mname = q->max_tokens_field ? q->max_tokens_field : "max_tokens";
        api_error_set(e, 400, "invalid_request_error", mname,
                      "this model's context is %d tokens; the request has %zu prompt tokens "
                      "plus %ld %s (at most %ld fit)",
                      en->n_ctx, n_ids, max_tokens, mname, room);
        api_error_code(e, "context_length_exceeded");
        goto refused;
    }
    if (answer_fits(q, pr, n_pr, max_tokens, e) != 0)
        goto refused;
    *p = (struct sched_req_params){
        .kind = q->kind,
        .prompts = pr,
        .n_prompts = n_pr,
        .n = (int)q->n,
        .logprobs = q->logprobs,
        .echo = q->echo,
        .batch = q->batch,
        .max_tokens = max_tokens,
        .sample = {.temperature = (float)q->temperature,
                   .top_k = q->top_k,
                   .top_p = top_p_float(q->top_p),
                   .seed = q->seed,
                   .min_p = (float)q->min_p,
                   .repetition_penalty = (float)q->repetition_penalty,
                   .frequency_penalty = (float)q->frequency_penalty,
                   .presence_penalty = (float)q->presence_penalty},
        .stops = q->stop,
        .stop_lens = q->stop_len,
        .n_stops = q->n_stop,
        .ignore_eos = q->ignore_eos,
        .json = q->json,
        .stream = q->stream,
        .include_usage = q->include_usage,
        .continuous_usage = q->cont_usage,
    };
    return 0;
refused:
    free_prompts(pr, n_pr);
    return -1;
}

void api_admit_release(struct sched_req_params *p)
{
    free_prompts((struct sched_prompt *)p->prompts, p->n_prompts);
    p->prompts = NULL;
    p->n_prompts = 0;
}
