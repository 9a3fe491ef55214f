/*
 * api: the OpenAI-compatible request and response bodies of fp4serve
 * (docs/formats.md §4), with no I/O: request JSON in,
 * a checked struct api_request or an OpenAI-style error out; response
 * chunks, final bodies and error envelopes appended to a struct buf. The
 * HTTP layer (server.c) and the fuzz target both call these.
 */
#ifndef ENGINE_API_H
#define ENGINE_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

enum api_kind {
    API_COMPLETION = 0, /* POST /v1/completions */
    API_CHAT = 1,       /* POST /v1/chat/completions */
};

/* Limits the parser enforces; each names itself in the error it causes. */
#define API_MAX_STOP      16   /* stop strings per request */
#define API_MAX_STOP_LEN  512  /* bytes per stop string */
#define API_MAX_MESSAGES  1024 /* chat messages per request */
#define API_MAX_ROLE_LEN  32   /* bytes of a message role */
#define API_MAX_MODEL_LEN 1024 /* bytes of the model field */
#define API_TEMP_MAX      2.0  /* temperature range is [0, API_TEMP_MAX] (OpenAI's) */

/* One chat message; strings are owned and NUL-terminated. */
struct api_message {
    char *role;    /* system | user | assistant | developer | tool */
    char *content; /* text (parts of an array joined); "" when null */
    size_t content_len;
};

/* A parsed and checked request. Every pointer is owned (api_request_release). */
struct api_request {
    enum api_kind kind;
    char *model;                  /* the "model" field, or NULL when absent */
    char *prompt;                 /* completions: prompt text, or NULL when ids were given */
    size_t prompt_len;            /* bytes of prompt */
    int32_t *prompt_ids;          /* completions: prompt as token ids, or NULL */
    size_t n_prompt_ids;          /* entries of prompt_ids (>= 1 when given) */
    struct api_message *messages; /* chat: (n_messages) */
    size_t n_messages;
    long max_tokens; /* >= 1 as sent, or -1 when absent or null (= the rest of the context) */
    const char *max_tokens_field; /* "max_tokens" or "max_completion_tokens" (static), the
                                     field that set max_tokens; NULL when absent */
    double temperature;           /* [0, 2]; 0 = greedy; default 1 */
    double top_p;                 /* (0, 1]; default 1 */
    int top_k;                    /* 0 = off (-1 is read as 0); default 0 */
    uint64_t seed;                /* sampling seed */
    bool has_seed;                /* seed was given (else the server picks one) */
    char **stop;                  /* (n_stop) stop strings, each non-empty */
    size_t *stop_len;             /* (n_stop) their byte lengths */
    size_t n_stop;
    bool ignore_eos;    /* keep going past end-of-generation tokens */
    bool stream;        /* answer as server-sent events */
    bool include_usage; /* stream_options.include_usage */
    char ignored[160];  /* fields this server does not know, "'a', 'b'" (cut with "..."),
                           "" when none: ignored, as vLLM does, and named in the log */
};

/* An OpenAI-style error: {"error":{"code","message","type","param"}}. */
struct api_error {
    int status;     /* HTTP status, 0 = no error */
    char type[40];  /* invalid_request_error, not_found_error, ... */
    char param[48]; /* the offending field ("max_tokens", "messages[2].content"), "" = none */
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
 * implemented (n > 1, logprobs, echo, penalties, typical_p, tool_choice,
 * guided decoding, ...) are refused by name rather than silently dropped;
 * harmless ones (user, metadata, ...) are taken; unknown ones are ignored
 * and listed in out->ignored. Returns 0 with
 * *out filled (release it), or -1 with *e set (status 400, or 404 for an
 * unknown model) and *out empty. Never aborts on any input.
 */
int api_parse(const char *body, size_t len, enum api_kind kind, const struct api_limits *lim,
              struct api_request *out, struct api_error *e);
void api_request_release(struct api_request *r);

/* The i-th request field this server knows (every endpoint), with what it
 * does with it in *what: "read", "refused unless <default>" or "accepted,
 * no effect". NULL past the end. For engine/README.md's table and its
 * test; *what may point to a static buffer (not thread-safe). */
const char *api_field(size_t i, const char **what);

/* Record an error (the first one wins). Returns -1. */
int api_error_set(struct api_error *e, int status, const char *type, const char *param,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

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

/*
 * Append one SSE event "data: {chunk}\n\n" carrying text[0..n) (valid
 * UTF-8) for choice 0. role: chat's first chunk also carries
 * "role":"assistant". finish: "stop", "length" or NULL (more to come).
 * Returns 0, or -1 when b's cap refused it.
 */
int api_sse_chunk(struct buf *b, const struct api_resp *r, const char *text, size_t n, bool role,
                  const char *finish);
/* "data: {..., "choices": [], "usage": {...}}\n\n" */
int api_sse_usage(struct buf *b, const struct api_resp *r, long prompt_tokens,
                  long completion_tokens);
/* "data: {"error": {...}}\n\n" (an error after the stream began). */
int api_sse_error(struct buf *b, const struct api_error *e);
/* "data: [DONE]\n\n" */
int api_sse_done(struct buf *b);
/* The whole non-streaming answer: one choice with text[0..n), finish
 * reason and usage. */
int api_final_json(struct buf *b, const struct api_resp *r, const char *text, size_t n,
                   const char *finish, long prompt_tokens, long completion_tokens);

#endif
