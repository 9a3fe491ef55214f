/*
 * embed: /v1/embeddings (see embed.h). Parsing and tokenizing happen on
 * the HTTP thread; the job runs on the scheduler thread with the model to
 * itself and a slot of its own, so it needs no lock but its own to hand
 * the answer over (the pattern of sched_req_take: done, parked, wake).
 */
#include "serve/embed.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"
#include "xalloc.h"

#include "model/model.h"

struct embed_req {
    struct embed_ctx ctx;
    struct sched_job job;
    int32_t **ids; /* (n_inputs) each input's tokens, owned */
    size_t *n_ids; /* (n_inputs) */
    size_t n_inputs;
    bool b64;    /* encoding_format "base64" */
    long tokens; /* over every input */
    float *vec;  /* (n_inputs, n_embd) the pooled, normalised vectors */
    float *rows; /* (chunk, n_embd) one step's hidden states */
    void (*wake)(void *);
    void *wake_arg;

    pthread_mutex_t mu; /* guards what follows */
    int refs;
    bool done, parked;
    int status;     /* of the answer */
    struct buf out; /* the answer's body */
};

/* ---- the request ---- */

static int add_input(embed_req *r, const struct embed_ctx *ctx, const json_t *v, size_t i,
                     struct api_error *e)
{
    char param[32];
    snprintf(param, sizeof(param), "input[%zu]", i);
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    if (json_is_string(v)) {
        struct err err;
        err_init(&err);
        if (tok_encode(ctx->vocab, json_string_value(v), json_string_length(v), true,
                       tok_add_bos(ctx->vocab), &ids, &n, &cap, &err) != 0) {
            free(ids);
            return api_error_set(e, 400, "invalid_request_error", param, "'%s': %s", param,
                                 err.msg);
        }
    } else if (json_is_array(v)) {
        size_t k;
        const json_t *t;
        n = json_array_size(v);
        ids = xcalloc(n ? n : 1, sizeof(int32_t));
        json_array_foreach(v, k, t)
        {
            json_int_t id = json_is_integer(t) ? json_integer_value(t) : -1;
            if (id < 0 || id >= (json_int_t)tok_n_vocab(ctx->vocab)) {
                free(ids);
                return api_error_set(e, 400, "invalid_request_error", param,
                                     "'%s[%zu]' is not a token id in [0, %zu)", param, k,
                                     tok_n_vocab(ctx->vocab));
            }
            ids[k] = (int32_t)id;
        }
    } else {
        return api_error_set(e, 400, "invalid_request_error", param,
                             "'%s' must be a string or a list of token ids", param);
    }
    if (n == 0) {
        free(ids);
        return api_error_set(e, 400, "invalid_request_error", param, "'%s' has no tokens", param);
    }
    if (n > (size_t)ctx->n_ctx) {
        free(ids);
        api_error_set(e, 400, "invalid_request_error", param,
                      "'%s' is %zu tokens, more than the context of %d", param, n, ctx->n_ctx);
        api_error_code(e, "context_length_exceeded");
        return -1;
    }
    r->ids[r->n_inputs] = ids;
    r->n_ids[r->n_inputs++] = n;
    r->tokens += (long)n;
    return 0;
}

/* The fields of the body; each input tokenized. */
static int parse(embed_req *r, const struct embed_ctx *ctx, json_t *root, struct api_error *e)
{
    const json_t *m = json_object_get(root, "model");
    if (m && !json_is_null(m)) {
        bool known = false;
        for (size_t i = 0; json_is_string(m) && ctx->model_ids[i] && !known; i++)
            known = strcmp(json_string_value(m), ctx->model_ids[i]) == 0;
        if (!known) {
            api_error_set(e, 404, "not_found_error", "model",
                          "model '%.200s' does not exist (this server serves '%.200s')",
                          json_is_string(m) ? json_string_value(m) : "?", ctx->model);
            api_error_code(e, "model_not_found");
            return -1;
        }
    }
    const json_t *f = json_object_get(root, "encoding_format");
    if (f && !json_is_null(f)) {
        if (json_is_string(f) && strcmp(json_string_value(f), "base64") == 0)
            r->b64 = true;
        else if (!json_is_string(f) || strcmp(json_string_value(f), "float") != 0)
            return api_error_set(e, 400, "invalid_request_error", "encoding_format",
                                 "'encoding_format' must be \"float\" or \"base64\"");
    }
    const json_t *d = json_object_get(root, "dimensions");
    if (d && !json_is_null(d) &&
        (!json_is_integer(d) || json_integer_value(d) != (json_int_t)ctx->n_embd)) {
        api_error_set(e, 400, "invalid_request_error", "dimensions",
                      "'dimensions' is not supported by this server (only %d, the model's)",
                      ctx->n_embd);
        api_error_code(e, "unsupported_parameter");
        return -1;
    }
    const json_t *in = json_object_get(root, "input");
    if (!in || json_is_null(in))
        return api_error_set(e, 400, "invalid_request_error", "input",
                             "'input' is missing (a string, a list of strings or of token ids)");
    /* one input: a string or a flat list of ids; else a list of inputs */
    bool one = json_is_string(in) ||
               (json_is_array(in) && json_array_size(in) && json_is_integer(json_array_get(in, 0)));
    size_t n = one ? 1 : json_is_array(in) ? json_array_size(in) : 0;
    if (n == 0 || n > EMBED_MAX_INPUTS)
        return api_error_set(e, 400, "invalid_request_error", "input",
                             "'input' must hold 1 to %d inputs", EMBED_MAX_INPUTS);
    r->ids = xcalloc(n, sizeof(*r->ids));
    r->n_ids = xcalloc(n, sizeof(*r->n_ids));
    for (size_t i = 0; i < n; i++)
        if (add_input(r, ctx, one ? in : json_array_get(in, i), i, e) != 0)
            return -1;
    return 0;
}

static void job_run(struct model *m, int slot, void *arg);

embed_req *embed_new(const struct embed_ctx *ctx, const char *body, size_t len,
                     void (*wake)(void *), void *wake_arg, struct api_error *e)
{
    memset(e, 0, sizeof(*e));
    json_t *root = api_load_object(body, len, e);
    if (!root)
        return NULL;
    embed_req *r = xcalloc(1, sizeof(*r));
    r->ctx = *ctx;
    r->wake = wake;
    r->wake_arg = wake_arg;
    r->refs = 2;
    pthread_mutex_init(&r->mu, NULL);
    buf_init(&r->out, BUF_MAX_DEFAULT);
    r->job = (struct sched_job){.run = job_run, .arg = r};
    int rc = parse(r, ctx, root, e);
    json_decref(root);
    if (rc != 0) {
        r->refs = 1;
        embed_unref(r);
        return NULL;
    }
    r->vec = xcalloc(r->n_inputs * (size_t)ctx->n_embd, sizeof(float));
    r->rows = xcalloc((size_t)ctx->chunk * (size_t)ctx->n_embd, sizeof(float));
    return r;
}

struct sched_job *embed_job(embed_req *r)
{
    return &r->job;
}

long embed_tokens(const embed_req *r)
{
    return r->tokens;
}

/* ---- the job ---- */

/* One input through the model on slot, pooled into v (n_embd), normalised. */
static int one_input(embed_req *r, struct model *m, int slot, size_t i, float *v, struct err *err)
{
    int E = r->ctx.n_embd, n = (int)r->n_ids[i];
    double *acc = xcalloc((size_t)E, sizeof(double));
    model_slot_free(m, slot);
    int rc = 0;
    for (int pos = 0; pos < n && rc == 0; pos += r->ctx.chunk) {
        int k = n - pos < r->ctx.chunk ? n - pos : r->ctx.chunk;
        struct model_seq q = {.slot = slot,
                              .pos = pos,
                              .n_tokens = k,
                              .tokens = r->ids[i] + pos,
                              .logits = MODEL_LOGITS_NONE,
                              .hidden = r->rows};
        rc = model_step(m, &q, 1, err);
        for (int t = 0; rc == 0 && t < k; t++)
            if (r->ctx.pooling == EMBED_MEAN || pos + t == n - 1)
                for (int j = 0; j < E; j++)
                    acc[j] += r->rows[(size_t)t * E + j];
    }
    double norm = 0;
    for (int j = 0; j < E; j++) {
        if (r->ctx.pooling == EMBED_MEAN)
            acc[j] /= n;
        norm += acc[j] * acc[j];
    }
    norm = norm > 0 ? 1.0 / sqrt(norm) : 0;
    for (int j = 0; j < E; j++)
        v[j] = (float)(acc[j] * norm);
    free(acc);
    return rc;
}

/* Standard base64 of n bytes. */
static void base64(struct buf *b, const unsigned char *p, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {a[w >> 18 & 63], a[w >> 12 & 63], i + 1 < n ? a[w >> 6 & 63] : '=',
                     i + 2 < n ? a[w & 63] : '='};
        buf_append(b, q, 4);
    }
}

/* OpenAI's list: {"object":"list","data":[{"object":"embedding","index",
 * "embedding"}...],"model","usage":{"prompt_tokens","total_tokens"}}. */
static void answer(embed_req *r, struct buf *b)
{
    int E = r->ctx.n_embd;
    buf_puts(b, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < r->n_inputs; i++) {
        const float *v = r->vec + i * (size_t)E;
        buf_printf(b, "%s{\"object\":\"embedding\",\"index\":%zu,\"embedding\":", i ? "," : "", i);
        if (r->b64) {
            unsigned char *le = xmalloc((size_t)E * 4); /* little-endian float32, as numpy reads */
            for (int j = 0; j < E; j++) {
                uint32_t u;
                memcpy(&u, &v[j], 4);
                for (int k = 0; k < 4; k++)
                    le[(size_t)j * 4 + k] = (unsigned char)(u >> (8 * k));
            }
            buf_putc(b, '"');
            base64(b, le, (size_t)E * 4);
            buf_putc(b, '"');
            free(le);
        } else {
            buf_putc(b, '[');
            for (int j = 0; j < E; j++)
                buf_printf(b, "%s%.9g", j ? "," : "", (double)v[j]);
            buf_putc(b, ']');
        }
        buf_putc(b, '}');
    }
    buf_puts(b, "],\"model\":");
    buf_json_str(b, r->ctx.model, strlen(r->ctx.model));
    buf_printf(b, ",\"usage\":{\"prompt_tokens\":%ld,\"total_tokens\":%ld}}", r->tokens, r->tokens);
}

/* On the scheduler thread: every input, then the answer handed over. */
static void job_run(struct model *m, int slot, void *arg)
{
    embed_req *r = arg;
    struct buf b;
    buf_init(&b, BUF_MAX_DEFAULT);
    struct api_error e = {0};
    struct err err;
    err_init(&err);
    int status = 200;
    if (slot < 0) {
        api_error_set(&e, 503, "unavailable_error", NULL, "the server is shutting down");
    } else {
        for (size_t i = 0; i < r->n_inputs && !err.code; i++)
            one_input(r, m, slot, i, r->vec + i * (size_t)r->ctx.n_embd, &err);
        if (err.code)
            api_error_set(&e, err.code == FP_ERR_UNSUPPORTED ? 501 : 500, "server_error", NULL,
                          "%s", err.msg);
    }
    if (e.status) {
        status = e.status;
        api_error_json(&b, &e);
    } else {
        answer(r, &b);
        if (b.toobig) {
            buf_reset(&b);
            status = 500;
            api_error_set(&e, 500, "server_error", NULL, "the answer passed 64 MiB");
            api_error_json(&b, &e);
        }
    }
    pthread_mutex_lock(&r->mu);
    r->done = true;
    r->status = status;
    struct buf t = r->out;
    r->out = b;
    b = t;
    bool wake = r->parked;
    pthread_mutex_unlock(&r->mu);
    buf_release(&b);
    if (wake)
        r->wake(r->wake_arg);
    embed_unref(r); /* the job's reference */
}

bool embed_take(embed_req *r, struct buf *body, int *status, void (*park)(void *), void *arg)
{
    pthread_mutex_lock(&r->mu);
    bool done = r->done;
    if (done) {
        *status = r->status;
        struct buf t = *body;
        *body = r->out;
        r->out = t;
    } else {
        r->parked = true;
        park(arg);
    }
    pthread_mutex_unlock(&r->mu);
    return done;
}

void embed_unref(embed_req *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left)
        return;
    for (size_t i = 0; i < r->n_inputs; i++)
        free(r->ids[i]);
    free(r->ids);
    free(r->n_ids);
    free(r->vec);
    free(r->rows);
    buf_release(&r->out);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
