/*
 * server: fp4serve's HTTP layer on libmicrohttpd. One epoll thread serves
 * every connection; streams are suspended while they wait for tokens and
 * resumed by the scheduler, so slow or idle clients cost a socket, not a
 * thread, and /health keeps answering. Routes, limits and error bodies
 * follow DESIGN.md "fp4serve: HTTP API". The server listens before the
 * model loads (health is 503 until srv_set_ready).
 */
#ifndef ENGINE_SERVER_H
#define ENGINE_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#include "serve/guard.h"
#include "serve/prom.h"
#include "serve/scheduler.h"

#include "text/chat.h"
#include "text/tokenizer.h"

typedef struct srv srv;

/* Limits: a request that passes one is refused with the status named. */
#define SRV_MAX_HEADERS      100  /* header fields per request (431) */
#define SRV_MAX_HEADER_BYTES 8192 /* bytes of one header field (431) */
#define SRV_MAX_URI_BYTES    8192 /* bytes of the request target (414) */

struct srv_opts {
    const char *host;         /* address to bind, e.g. "127.0.0.1" */
    int port;                 /* 0 = any free port (see srv_port) */
    size_t max_body;          /* bytes of a request body (413) */
    unsigned timeout_s;       /* idle connection timeout, seconds (0 = none) */
    unsigned req_deadline_s;  /* a request arrives whole within this, seconds (408; 0 = none) */
    unsigned max_connections; /* connections at once; more are refused at accept */
    const char *model_id;     /* served model id (the "model" field must match, if given) */
    const char *const *more_names; /* further served names (--served-model-name after the
                                      first), NULL-terminated; NULL = none */
    const char *model_path;        /* --model as given (also accepted as the model name) */
    const struct guard *guard;     /* API key and CORS (serve/guard.h); must outlive the server */
    const char *tls_key;           /* PEM private key (--ssl-keyfile's bytes), NULL = plain HTTP */
    const char *tls_cert;          /* PEM certificate chain (--ssl-certfile's bytes) */
    int pooling;                   /* /v1/embeddings: enum embed_pooling (--pooling) */
};

/* What the server needs from the loaded model; pointers must outlive the server. */
struct srv_engine {
    sched *sched;
    const tok_vocab *vocab;
    const struct chat_template *chat;
    int n_vocab;               /* tokens in the vocabulary */
    int n_ctx;                 /* positions per sequence (--ctx) */
    int n_ctx_train;           /* the model's training context */
    int max_batch;             /* sequences decoded together */
    const char *quant;         /* --quant as resolved ("native", "nvfp4", ...) */
    const char *decode;        /* "batched" or "per-request" */
    size_t weight_bytes;       /* weights read per batched decode step */
    double flops_per_token;    /* matmul FLOPs per token */
    double attn_flops_per_pos; /* attention FLOPs per token per position attended to */
    double mem_read_gbs;       /* measured read bandwidth, GB/s; 0 = not measured */
    int n_embd;                /* hidden size: an embedding\'s length */
    int max_step_tokens;       /* tokens one model step may carry (embedding chunks) */
};

/*
 * Bind host:port (SO_REUSEADDR, never SO_REUSEPORT), listen and start the
 * HTTP thread. A taken port or a bad address fails at once with FP_ERR_ADDR
 * and a message that says which. met receives the HTTP counters.
 */
srv *srv_new(const struct srv_opts *o, struct prom *met, struct err *err);
/* The port actually bound (useful with port 0). */
int srv_port(const srv *s);
/* The model is loaded: serve completions with e (copied). */
void srv_set_ready(srv *s, const struct srv_engine *e);
/* Shutting down: close the listening socket; new requests on open
 * connections get 503. */
void srv_quiesce(srv *s);
/* Wait until no request is in flight or timeout_ms passes; true if none. */
bool srv_drain(srv *s, int timeout_ms);
/* Requests in flight now (holding a scheduler request). */
long srv_in_flight(srv *s);
/* Whether this libmicrohttpd can serve HTTPS (built with GnuTLS). */
bool srv_tls_supported(void);
/* Stop the HTTP thread, close every connection and free. NULL is a no-op. */
void srv_free(srv *s);

#endif
