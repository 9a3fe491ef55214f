/*
 * embed: POST /v1/embeddings (OpenAI's shape). The request is parsed and
 * tokenized on the HTTP thread (embed_new); the vectors are computed by a
 * scheduler job (sched_submit_job), which runs each input's prompt through
 * the model in chunks on a slot of its own, between steps, and pools the
 * final hidden states (model_seq.hidden): the last token's (default, as
 * vLLM pools a decoder-only model) or the mean over the tokens, then
 * L2-normalised. The answer is "float" lists or "base64" (little-endian
 * float32), with usage. CPU backend only (the others give no hidden states).
 */
#ifndef ENGINE_EMBED_H
#define ENGINE_EMBED_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#include "serve/api.h"
#include "serve/scheduler.h"

#include "text/tokenizer.h"

#define EMBED_MAX_INPUTS 256 /* inputs per request */

enum embed_pooling { EMBED_LAST = 0, EMBED_MEAN = 1 };

struct embed_ctx {
    const tok_vocab *vocab;
    const char *const *model_ids; /* accepted "model" values (NULL-terminated) */
    const char *model;            /* the id answers carry */
    int n_ctx;                    /* positions per slot: an input must fit */
    int n_embd;                   /* the vector's length */
    int chunk;                    /* tokens per model step */
    enum embed_pooling pooling;
};

typedef struct embed_req embed_req;

/*
 * Parse and tokenize body[0..len): "input" (a string, a list of strings,
 * a list of token ids, or a list of such lists), "model", "encoding_format"
 * ("float" or "base64"), "dimensions" (only null or n_embd: no truncation),
 * "user"; other fields are ignored. Returns a request holding two
 * references (the caller's and its job's), or NULL with e set (400, or 404
 * for another model). wake(wake_arg) is called from the scheduler thread
 * when the answer is ready and the caller is parked (embed_take).
 */
embed_req *embed_new(const struct embed_ctx *ctx, const char *body, size_t len,
                     void (*wake)(void *), void *wake_arg, struct api_error *e);
/* The scheduler job that computes r (submit it with sched_submit_job). */
struct sched_job *embed_job(embed_req *r);
/* Tokens over all inputs (usage). */
long embed_tokens(const embed_req *r);
/* The answer, once ready: true with *status and the body appended to body;
 * otherwise park(arg) is called under r's lock (the server suspends the
 * connection) and false returned. */
bool embed_take(embed_req *r, struct buf *body, int *status, void (*park)(void *), void *arg);
/* Drop a reference; the last frees. NULL is a no-op. */
void embed_unref(embed_req *r);

#endif
