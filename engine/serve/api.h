/*
 * api: the OpenAI-compatible request and response bodies of fp4serve
 * (docs/formats.md §4), with no I/O: request JSON in,
 * a checked struct api_request or an OpenAI-style error out; response
 * chunks, final bodies and error envelopes appended to a struct buf. The
 * HTTP layer (server.c) and the fuzz target both call these.
 */
#ifndef ENGINE_API_H
#define ENGINE_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#include "text/chat.h"
#include "text/tokenizer.h"

enum api_kind {
    API_COMPLETION = 0, /* POST /v1/completions */
    API_CHAT = 1,       /* POST /v1/chat/completions */
    API_GENERATE = 2,   /* POST /generate (SGLang's native API) */
};

/* Limits the parser enforces; each names itself in the error it causes. */
#define API_MAX_STOP        16    /* stop strings per request */
#define API_MAX_STOP_LEN    512   /* bytes per stop string */
#define API_MAX_MESSAGES    1024  /* chat messages per request */
#define API_MAX_ROLE_LEN    32    /* bytes of a message role */
#define API_MAX_MODEL_LEN   1024  /* bytes of the model field */
#define API_TEMP_MAX        2.0   /* temperature range is [0, API_TEMP_MAX] (OpenAI's) */
#define API_MAX_PROMPTS     256   /* prompts in one completions request */
#define API_MAX_N           128   /* choices per prompt ("n") */
#define API_MAX_CHOICES     1024  /* prompts x n */
#define API_MAX_LOGPROBS    20    /* top alternatives per token (OpenAI's limit) */
#define API_MAX_REP_PENALTY 100.0 /* repetition_penalty range is (0, this] */

/* One prompt of a completions request: text or token ids. Owned. */
struct api_prompt {
    char *text;   /* NUL-terminated (may hold NULs: use len), or NULL when ids were given */
    size_t len;   /* bytes of text */
    int32_t *ids; /* (n_ids) token ids, or NULL */
    size_t n_ids; /* >= 1 when ids were given */
};

/* struct api_message (one chat message) is declared in text/chat.h. */

/* A parsed and checked request. Every pointer is owned (api_request_release). */
struct api_request {
    enum api_kind kind;
    char *model;                  /* the "model" field, or NULL when absent */
    struct api_prompt *prompts;   /* completions: (n_prompts) prompts, owned */
    size_t n_prompts;             /* >= 1 on completions */
    bool batch;                   /* the prompts came as a list (even of one) */
    struct api_message *messages; /* chat: (n_messages) */
    size_t n_messages;
    long max_tokens; /* >= 1 as sent (0 with echo), or -1 when absent or null (= the rest of
                        the context) */
    const char *max_tokens_field; /* "max_tokens", "max_completion_tokens" or (/generate)
                                     "sampling_params.max_new_tokens" (static), the field
                                     that set max_tokens; NULL when absent */
    double temperature;           /* [0, 2]; 0 = greedy; default 1 */
    double top_p;                 /* (0, 1]; default 1 */
    int top_k;                    /* 0 = off (-1 is read as 0); default 0 */
    double min_p;                 /* [0, 1]; 0 = off */
    double frequency_penalty;     /* [-2, 2]; 0 = off */
    double presence_penalty;      /* [-2, 2]; 0 = off */
    double repetition_penalty;    /* (0, API_MAX_REP_PENALTY]; 1 = off */
    long n;                       /* choices per prompt, [1, API_MAX_N]; default 1 */
    int logprobs;                 /* top alternatives per token, [0, API_MAX_LOGPROBS], or -1
                                     = no logprobs (completions: "logprobs": k; chat:
                                     "logprobs": true with "top_logprobs": k) */
    int top_logprobs;             /* chat's "top_logprobs" as sent (folded into logprobs) */
    bool echo;                    /* completions: the prompt comes back before the text */
    bool json;                    /* response_format json_object (or an any-object json_schema) */
    uint64_t seed;                /* sampling seed */
    bool has_seed;                /* seed was given (else the server picks one) */
    char **stop;                  /* (n_stop) stop strings, each non-empty */
    size_t *stop_len;             /* (n_stop) their byte lengths */
    size_t n_stop;
    bool ignore_eos;    /* keep going past end-of-generation tokens */
    bool stream;        /* answer as server-sent events */
    bool include_usage; /* stream_options.include_usage */
    bool cont_usage;    /* stream_options.continuous_usage_stats (vLLM's usage in every chunk) */
    char ignored[160];  /* fields this server does not know, "'a', 'b'" (cut with "..."),
                           "" when none: ignored, as vLLM does, and named in the log */
};

/* An OpenAI-style error: {"error":{"message","type","param","code"}}. */
struct api_error {
    int status;     /* HTTP status, 0 = no error */
    char type[40];  /* invalid_request_error, not_found_error, ... */
    char code[40];  /* OpenAI's error code ("context_length_exceeded", "model_not_found",
                       "unsupported_parameter"), "" = null */
    char param[64]; /* the offending field ("max_tokens", "messages[2].content"), "" = none */
    char msg[512];  /* one line, lower case */
};

/* What the parser needs to know about the server. */
struct api_limits {
    int n_vocab;                  /* token ids in prompts must be < n_vocab */
    const char *const *model_ids; /* accepted "model" values (NULL-terminated); NULL = any */
};

/*
 * Parse body[0..len) as a request of the given kind. Known fields are
 * type- and range-checked; fields that would change the result but are not
 * implemented (best_of, typical_p, tool_choice, guided decoding, ...) are
 * refused by name rather than silently dropped;
 * harmless ones (user, metadata, ...) are taken; unknown ones are ignored
 * and listed in out->ignored. Returns 0 with
 * *out filled (release it), or -1 with *e set (status 400, or 404 for an
 * unknown model) and *out empty. Never aborts on any input.
 */
int api_parse(const char *body, size_t len, enum api_kind kind, const struct api_limits *lim,
              struct api_request *out, struct api_error *e);
void api_request_release(struct api_request *r);

/*
 * SGLang's POST /generate: {"text" | "input_ids", "sampling_params":
 * {max_new_tokens, temperature, top_p, top_k, min_p, ..., ignore_eos,
 * stop}, "stream"}, read as a completions request of kind API_GENERATE
 * (sampling_params' fields under our names; errors name them as sent,
 * "sampling_params.max_new_tokens"). return_logprob and multimodal
 * inputs are refused. Same contract as api_parse.
 */
int api_parse_generate(const char *body, size_t len, const struct api_limits *lim,
                       struct api_request *out, struct api_error *e);

/* The i-th request field this server knows (every endpoint), with what it
 * does with it in *what: "read", "refused unless <default>" or "accepted,
 * no effect". NULL past the end. For engine/README.md's table and its
 * test; *what may point to a static buffer (not thread-safe). */
const char *api_field(size_t i, const char **what);

/* A request body as a JSON object, or NULL with *e set (400). Checks in the
 * order a client can act on: nothing sent, bytes that are not UTF-8, text
 * that is not JSON (duplicate keys refused, "\u0000" allowed), then JSON
 * that is not an object. */
json_t *api_load_object(const char *body, size_t len, struct api_error *e);

/* Record an error (the first one wins). Returns -1. */
int api_error_set(struct api_error *e, int status, const char *type, const char *param,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Give the recorded error OpenAI's string code (kept when one is set). */
void api_error_code(struct api_error *e, const char *code);

/* ---- responses ---- */

/* What every chunk of one response repeats. */
struct api_resp {
    enum api_kind kind;
    const char *id;    /* "cmpl-..." or "chatcmpl-..." */
    long long created; /* Unix seconds */
    const char *model; /* served model id */
};

/* Append the error envelope {"error":{...}} (no trailing newline). */
void api_error_json(struct buf *b, const struct api_error *e);

/* Log-probabilities of a run of tokens of one choice. */
struct api_logprobs {
    const tok_vocab *v;     /* the tokens' text (tok_piece) */
    const int32_t *ids;     /* (n) the tokens */
    const float *lp;        /* (n) their log-probabilities; NAN = null (echo's first token) */
    const int32_t *top_ids; /* (n, k) the k most likely tokens at each position, best first */
    const float *top_lp;    /* (n, k) their log-probabilities */
    int n, k;
    long *offset; /* completions' text_offset: in, of ids[0] (characters); out, past the last */
};

/* One choice of a chunk or of a whole answer. */
struct api_choice {
    int index;        /* OpenAI's choice index: prompt x n + choice */
    const char *text; /* (n) valid UTF-8 */
    size_t n;
    bool role;                     /* chat stream: this chunk also carries "role":"assistant" */
    const char *finish;            /* "stop", "length" or NULL (more to come) */
    const struct api_logprobs *lp; /* NULL: "logprobs": null */
    const long *usage;             /* stream: {prompt, completion, cached} tokens of this
                                      choice so far, the chunk's "usage" (vLLM's
                                      continuous_usage_stats); NULL = none */
};

/* One SSE event carrying choice c. Returns 0, or -1 when b's cap refused it
 * (b unchanged then). */
int api_sse_choice(struct buf *b, const struct api_resp *r, const struct api_choice *c);
/* A whole non-streaming answer, in three parts: begin returns where it
 * starts in b, each choice is appended (first: no comma before it), end
 * adds usage and returns 0, or -1 (b rolled back to start) when b's cap
 * refused a part. */
size_t api_final_begin(struct buf *b, const struct api_resp *r);
void api_final_choice(struct buf *b, const struct api_resp *r, const struct api_choice *c,
                      bool first);
int api_final_end(struct buf *b, size_t start, long prompt_tokens, long completion_tokens,
                  long cached);

/* /generate's answer for one choice: {"text": text (the whole text so
 * far, also in a stream, as SGLang sends it), "meta_info": {"id",
 * "finish_reason": null or {"type": "stop"} or {"type": "length",
 * "length": N}, "prompt_tokens", "completion_tokens", "cached_tokens"}},
 * and "index" when index >= 0. No framing: the caller adds "data: " and
 * "\n\n", or list brackets. */
void api_gen_json(struct buf *b, const char *id, int index, const char *text, size_t n,
                  const char *finish, long prompt_tokens, long completion_tokens, long cached);

/*
 * Append one SSE event "data: {chunk}\n\n" carrying text[0..n) (valid
 * UTF-8) for choice 0. role: chat's first chunk also carries
 * "role":"assistant". finish: "stop", "length" or NULL (more to come).
 * Returns 0, or -1 when b's cap refused it.
 */
int api_sse_chunk(struct buf *b, const struct api_resp *r, const char *text, size_t n, bool role,
                  const char *finish);
/* "data: {..., "choices": [], "usage": {...}}\n\n". Usage objects carry
 * "prompt_tokens_details": {"cached_tokens": cached} (prompt tokens the
 * prefix cache supplied). */
int api_sse_usage(struct buf *b, const struct api_resp *r, long prompt_tokens,
                  long completion_tokens, long cached);
/* "data: {"error": {...}}\n\n" (an error after the stream began). */
int api_sse_error(struct buf *b, const struct api_error *e);
/* "data: [DONE]\n\n" */
int api_sse_done(struct buf *b);
/* The whole non-streaming answer: one choice with text[0..n), finish
 * reason and usage. */
int api_final_json(struct buf *b, const struct api_resp *r, const char *text, size_t n,
                   const char *finish, long prompt_tokens, long completion_tokens);

#endif
