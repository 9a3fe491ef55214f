/*
 * tokapi: the bodies of POST /tokenize and POST /detokenize in vLLM's
 * shapes, with no I/O: request JSON in, response JSON or an OpenAI-style
 * error out. The HTTP layer (server.c) and the fuzz target call these.
 *
 *   /tokenize    {"prompt": str, "add_special_tokens": bool = true}
 *                or {"messages": [...]} (the chat completion's prompt ids)
 *                [, "model": str, "return_token_strs": bool = false]
 *             -> {"count": n, "max_model_len": ctx, "tokens": [ids],
 *                 "token_strs": [vocabulary texts] or null}
 *   /detokenize  {"tokens": [ids] [, "model": str]} -> {"prompt": str}
 *   GET /tokenizer_info -> the tokenizer's configuration as transformers
 *                keeps it (tokenizer_class, the special tokens' texts,
 *                add_bos_token, model_max_length, chat_template, ...)
 */
#ifndef ENGINE_TOKAPI_H
#define ENGINE_TOKAPI_H

#include <stddef.h>

#include "buf.h"

#include "serve/api.h"

#include "text/chat.h"
#include "text/tokenizer.h"

/* What both endpoints need; pointers must outlive the call. */
struct tokapi_ctx {
    const tok_vocab *vocab;
    const struct chat_template *chat; /* for "messages" */
    int n_ctx;                        /* max_model_len in the answer */
    const char *const *model_ids;     /* accepted "model" values (NULL-terminated); NULL = any */
    const char *model_id;             /* served name (tokenizer_info's name_or_path); NULL = "" */
};

/*
 * Answer a /tokenize body: appends the response JSON to out and returns 0,
 * or returns -1 with *e set (400 for a malformed request, text that is not
 * valid UTF-8 or a missing BOS; 404 for an unknown model). "prompt" is
 * tokenized as a completion's is: special-token texts are split out, and
 * with add_special_tokens BOS is prepended when the model asks for it.
 * "messages" give exactly the ids a chat completion would run. Text that
 * cannot fit the context (more than n_ctx x the longest token's bytes) is
 * refused untokenized, as completions refuse it: the server tokenizes on
 * its one HTTP thread. Never aborts on any input.
 */
int tokapi_tokenize(const struct tokapi_ctx *c, const char *body, size_t len, struct buf *out,
                    struct api_error *e);

/*
 * Answer a /detokenize body: the tokens' bytes (control tokens as their
 * text, as a completion streams them) joined, with bytes that do not form
 * valid UTF-8 written as U+FFFD. Ids outside the vocabulary are a 400
 * naming "tokens[i]". Returns 0 or -1 as tokapi_tokenize.
 */
int tokapi_detokenize(const struct tokapi_ctx *c, const char *body, size_t len, struct buf *out,
                      struct api_error *e);

/*
 * Append GET /tokenizer_info's answer, vLLM's shape (the tokenizer's
 * init kwargs plus its class): {"tokenizer_class", "name_or_path",
 * "bos_token", "eos_token", "pad_token", "unk_token" (texts or null),
 * "add_bos_token", "add_eos_token", "model_max_length" (the served
 * context), "clean_up_tokenization_spaces", "chat_template" (the GGUF's
 * text when fp4serve follows it, else null)}. lm-evaluation-harness's
 * remote tokenizer reads eos_token (then /tokenize's ids of it) and
 * chat_template. Never fails.
 */
void tokapi_info(const struct tokapi_ctx *c, struct buf *out);

#endif
