/*
 * server: routes, limits and the glue between libmicrohttpd's event loop
 * and the scheduler (see server.h). A completion request is read whole,
 * parsed (api.c) and admitted (admit.c: tokenized, checked), refused with a 4xx before any
 * byte of a stream if it cannot run, and then handed to the scheduler.
 * Streams are chunked responses whose reader suspends the connection when
 * no event is pending; the scheduler's wake resumes it. Non-streaming
 * requests suspend in the handler until the body is ready.
 */
#include "serve/server.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "fp4.h"
#include "log.h"
#include "rng.h"
#include "timeutil.h"
#include "xalloc.h"

#include "serve/admit.h"
#include "serve/embed.h"
#include "serve/net.h"
#include "serve/tokapi.h"
#include "serve/watch.h"

struct srv {
    struct srv_opts o;
    char *host, *model_id, *model_path, *model_base; /* owned copies */
    char **more_names;      /* further served names, owned, NULL-terminated */
    const char **model_ids; /* accepted "model" values: the served names, the path and its
                               file name (NULL-terminated; the array owned, not the strings) */
    bool tls;               /* serving HTTPS: nothing may be written raw to a socket */
    atomic_bool up;         /* MHD_start_daemon returned */
    char start_why[256];    /* libmicrohttpd's first complaint while starting, or "" */
    struct prom *met;
    watch *watch; /* the request deadline; NULL = none */
    struct MHD_Daemon *d;
    int lfd; /* listening socket until quiesced, else -1 */
    int port;
    struct srv_engine engine; /* valid once ready */
    atomic_bool ready;        /* engine is set */
    atomic_bool stopping;     /* shutting down */
    atomic_long in_flight;    /* calls holding a scheduler request */
    atomic_uint_fast64_t ids; /* response id counter */
    uint64_t id_salt;         /* mixes ids and default seeds between runs */
    long long started;        /* Unix seconds, for /v1/models "created" */
};

/* One HTTP request (MHD's per-request context). */
struct call {
    srv *s;
    struct MHD_Connection *conn;
    const struct route *route; /* NULL: refused before routing */
    struct buf body;           /* the request body, capped at max_body */
    sched_req *req;            /* once submitted; one reference */
    embed_req *emb;            /* /v1/embeddings once submitted; one reference */
    bool counted;              /* counted in in_flight */
    const char *path_rest;     /* what a route ending in '*' matched (points into the URL) */
    bool http11;               /* an HTTP/1.1 request (may be sent an interim 1xx) */
    const char *cors;          /* Access-Control-Allow-Origin of the answer, or NULL */
    bool vary;                 /* ... and it depends on the Origin ("Vary: Origin") */
};

/* A stream's reader context (owned by the MHD response). */
struct stream {
    sched_req *req; /* one reference */
    struct MHD_Connection *conn;
};

typedef enum MHD_Result (*route_fn)(struct call *c);

struct route {
    const char *path;
    const char *method; /* GET also answers HEAD */
    route_fn fn;
    enum prom_route metric;
    bool body; /* reads a request body */
};

/* ---- responses ---- */

/* The CORS headers a browser needs to read the answer (guard.c decided
 * them from the request's Origin). */
static void add_cors(const struct call *c, struct MHD_Response *r)
{
    if (!c->cors)
        return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", c->cors);
    if (c->vary)
        MHD_add_response_header(r, "Vary", "Origin");
}

/* Queue a complete answer (copied) and count it. close_conn after a
 * refusal whose request may still have unread bytes (413, 431, 414):
 * keeping such a connection alive would read them as the next request. */
static enum MHD_Result respond(struct call *c, int status, const char *ctype, const char *body,
                               size_t len, bool close_conn)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (close_conn)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (status == 401) /* RFC 9110 §11.6.1: say which scheme to use */
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    add_cors(c, r);
    enum MHD_Result rc = MHD_queue_response(c->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    prom_response(c->s->met, c->route ? c->route->metric : PROM_OTHER, status);
    return rc;
}

/* An OpenAI-style error body; logged, since it is the client's mistake or ours. */
static enum MHD_Result respond_error(struct call *c, const struct api_error *e, bool close_conn)
{
    struct buf b;
    buf_init(&b, (size_t)1 << 16);
    api_error_json(&b, e);
    const char *path = c->route ? c->route->path : "-";
    log_warn("%s: %d %s%s%s: %s", path, e->status, e->type, e->param[0] ? " param " : "", e->param,
             e->msg);
    enum MHD_Result rc = respond(c, e->status, "application/json", b.data, b.len, close_conn);
    buf_release(&b);
    return rc;
}

static enum MHD_Result refuse(struct call *c, int status, const char *type, const char *param,
                              bool close_conn, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static enum MHD_Result refuse(struct call *c, int status, const char *type, const char *param,
                              bool close_conn, const char *fmt, ...)
{
    struct api_error e = {0};
    e.status = status;
    snprintf(e.type, sizeof(e.type), "%s", type);
    snprintf(e.param, sizeof(e.param), "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
    va_end(ap);
    return respond_error(c, &e, close_conn);
}

/* A refusal while the body is still arriving: net_answer_now writes it
 * to the socket (libmicrohttpd takes no response during an upload) and
 * the caller returns MHD_NO, on which libmicrohttpd closes the connection. */
static enum MHD_Result refuse_now(struct call *c, int status, const char *reason,
                                  const struct api_error *e)
{
    log_warn("%s: %d %s: %s", c->route ? c->route->path : "-", e->status, e->type, e->msg);
    net_answer_now(c->conn, c->s->tls, status, reason, e);
    prom_response(c->s->met, c->route ? c->route->metric : PROM_OTHER, status);
    return MHD_NO;
}

/* ---- GET routes ---- */

/* 503 while loading or stopping, like llama.cpp's server, so that a
 * supervisor polling for readiness never sends load to a server that cannot
 * take it; the pid lets it tell its own child from a stray server. */
static enum MHD_Result h_health(struct call *c)
{
    srv *s = c->s;
    if (atomic_load(&s->stopping))
        return refuse(c, 503, "unavailable_error", NULL, false, "the server is shutting down");
    if (!atomic_load(&s->ready))
        return refuse(c, 503, "unavailable_error", NULL, false, "loading model");
    char body[64];
    int n = snprintf(body, sizeof(body), "{\"status\":\"ok\",\"pid\":%ld}", (long)getpid());
    return respond(c, 200, "application/json", body, (size_t)n, false);
}

/* The model object. meta.n_vocab tells a benchmark client the range of
 * random token ids it may send; meta.n_ctx how long prompt + output may be;
 * weight_bytes_per_step, flops_per_token and mem_read_gbs place its step
 * time on a roofline. */
static void model_json(struct buf *b, const srv *s, const char *name)
{
    const struct srv_engine *e = &s->engine;
    buf_puts(b, "{\"id\":");
    buf_json_str(b, name, strlen(name));
    buf_printf(b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"fp4serve\",", s->started);
    /* vLLM's fields: benchmark clients read root (the model to load a
     * tokenizer for) and max_model_len */
    buf_puts(b, "\"root\":");
    buf_json_str(b, s->model_path, strlen(s->model_path));
    buf_printf(b, ",\"parent\":null,\"max_model_len\":%d,\"meta\":{", e->n_ctx);
    buf_printf(b, "\"n_vocab\":%d,\"n_ctx\":%d,\"n_ctx_train\":%d,\"max_batch\":%d,", e->n_vocab,
               e->n_ctx, e->n_ctx_train, e->max_batch);
    buf_puts(b, "\"quant\":");
    buf_json_str(b, e->quant, strlen(e->quant));
    buf_puts(b, ",\"decode\":");
    buf_json_str(b, e->decode, strlen(e->decode));
    buf_puts(b, ",\"path\":");
    buf_json_str(b, s->model_path, strlen(s->model_path));
    /* the roofline: bytes a decode step reads, FLOPs a token costs, and
     * (with --probe-bandwidth) the bandwidth that reads them */
    buf_printf(b, ",\"weight_bytes_per_step\":%zu,\"flops_per_token\":%.17g,", e->weight_bytes,
               e->flops_per_token);
    buf_printf(b, "\"attn_flops_per_position\":%.17g", e->attn_flops_per_pos);
    if (e->mem_read_gbs > 0)
        buf_printf(b, ",\"mem_read_gbs\":%.3f", e->mem_read_gbs);
    buf_puts(b, "}}");
}

/* GET /v1/models: the one model, once under each served name (vLLM lists
 * every --served-model-name). */
static enum MHD_Result h_models(struct call *c)
{
    srv *s = c->s;
    if (!atomic_load(&s->ready))
        return refuse(c, 503, "unavailable_error", NULL, false, "loading model");
    struct buf b;
    buf_init(&b, (size_t)1 << 16);
    buf_puts(&b, "{\"object\":\"list\",\"data\":[");
    model_json(&b, s, s->model_id);
    for (size_t i = 0; s->more_names[i]; i++) {
        buf_putc(&b, ',');
        model_json(&b, s, s->more_names[i]);
    }
    buf_puts(&b, "]}");
    enum MHD_Result rc = respond(c, 200, "application/json", b.data, b.len, false);
    buf_release(&b);
    return rc;
}

/* GET /v1/models/{id} (the openai client's models.retrieve): the model
 * object for any name a request's "model" may use, else 404. */
static enum MHD_Result h_model(struct call *c)
{
    srv *s = c->s;
    if (!atomic_load(&s->ready))
        return refuse(c, 503, "unavailable_error", NULL, false, "loading model");
    bool known = false; /* the names a request's "model" may use */
    for (size_t i = 0; s->model_ids[i] && !known; i++)
        known = strcmp(c->path_rest, s->model_ids[i]) == 0;
    if (!known) {
        struct api_error e = {0};
        api_error_set(&e, 404, "not_found_error", "model",
                      "model '%.200s' does not exist (this server serves '%.200s')", c->path_rest,
                      s->model_id);
        api_error_code(&e, "model_not_found"); /* as a request's unknown "model" */
        return respond_error(c, &e, false);
    }
    const char *id = s->model_id; /* a served name answers as itself, a path as the first */
    for (size_t i = 0; s->more_names[i]; i++)
        if (strcmp(c->path_rest, s->more_names[i]) == 0)
            id = s->more_names[i];
    struct buf b;
    buf_init(&b, (size_t)1 << 16);
    model_json(&b, s, id);
    enum MHD_Result rc = respond(c, 200, "application/json", b.data, b.len, false);
    buf_release(&b);
    return rc;
}

static enum MHD_Result h_metrics(struct call *c)
{
    srv *s = c->s;
    struct prom_gauges g = {0};
    if (atomic_load(&s->ready))
        sched_gauges(s->engine.sched, &g);
    struct buf b;
    buf_init(&b, (size_t)1 << 20);
    prom_render(s->met, &g, &b);
    enum MHD_Result rc = respond(c, 200, "text/plain; version=0.0.4", b.data, b.len, false);
    buf_release(&b);
    return rc;
}

/* POST /reset_prefix_cache (vLLM's): forget every cached prefix, so that
 * a benchmark point does not start warm from the last one's. */
static enum MHD_Result h_reset_prefix(struct call *c)
{
    srv *s = c->s;
    if (!atomic_load(&s->ready))
        return refuse(c, 503, "unavailable_error", NULL, false, "loading model");
    sched_reset_prefix(s->engine.sched);
    return respond(c, 200, "application/json", "{}", 2, false);
}

/* ---- completions ---- */

/* MHD suspend/resume as the scheduler's park and wake callbacks. park runs
 * on the MHD thread inside a callback (allowed there); wake runs on the
 * scheduler thread (MHD_resume_connection is thread-safe with the ITC that
 * MHD_ALLOW_SUSPEND_RESUME sets up). */
static void park_conn(void *arg)
{
    MHD_suspend_connection(arg);
}

static void wake_conn(void *arg)
{
    MHD_resume_connection(arg);
}

/* A non-streaming request: answer if the generation is over, else suspend
 * until the scheduler resumes the connection (MHD then calls the handler
 * again). A generation cancelled because the client vanished has no answer
 * (status 0): the connection is closed. */
static enum MHD_Result answer_when_done(struct call *c)
{
    struct buf body;
    buf_init(&body, 1);
    int status = 0;
    enum MHD_Result rc = MHD_YES;
    if (sched_req_take(c->req, &body, &status, park_conn, c->conn))
        rc = status ? respond(c, status, "application/json", body.data ? body.data : "", body.len,
                              false)
                    : MHD_NO;
    buf_release(&body);
    return rc;
}

/* MHD's content reader for a stream: whatever events are pending, or 0
 * after suspending the connection (MHD calls again once resumed), or the
 * end, after which MHD writes the last chunk of the chunked body. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream *st = cls;
    bool end;
    size_t n = sched_req_read(st->req, buf, max, park_conn, st->conn, &end);
    if (end)
        return MHD_CONTENT_READER_END_OF_STREAM;
    return (ssize_t)n;
}

/* The response is gone (sent, or the connection died): if the generation
 * still runs, nobody will read it. */
static void stream_free(void *cls)
{
    struct stream *st = cls;
    sched_req_cancel(st->req); /* no-op when it already ended */
    sched_req_unref(st->req);
    free(st);
}

/* POST /v1/completions, /v1/chat/completions and /generate. Everything that can make
 * the request fail is checked before a status line is sent: parse (api.h),
 * the admission policy (admit.h: tokenize, context, max_tokens, answer
 * size), queue room. Only then does a stream start, so a 4xx is never an
 * SSE event (llama.cpp PR #16486). */
static enum MHD_Result h_completion(struct call *c, enum api_kind kind)
{
    srv *s = c->s;
    if (atomic_load(&s->stopping))
        return refuse(c, 503, "unavailable_error", NULL, false, "the server is shutting down");
    if (!atomic_load(&s->ready))
        return refuse(c, 503, "unavailable_error", NULL, false, "loading model");
    const struct srv_engine *en = &s->engine;
    struct api_limits lim = {.n_vocab = en->n_vocab, .model_ids = s->model_ids};
    struct api_request q;
    struct api_error e = {0};
    struct sched_req_params p = {0};
    enum MHD_Result rc;
    const char *body = c->body.data ? c->body.data : "";
    if ((kind == API_GENERATE ? api_parse_generate(body, c->body.len, &lim, &q, &e)
                              : api_parse(body, c->body.len, kind, &lim, &q, &e)) != 0)
        return respond_error(c, &e, false);
    if (q.ignored[0]) /* as vLLM does: served, and said once per request */
        log_warn("%s: ignored unknown fields %s", c->route->path, q.ignored);
    if (api_admit(en, &q, &p, &e) != 0)
        goto refused;
    /* ids: a per-process salt mixed with a counter, unique within a run
     * and unlikely to repeat across runs; the default seed comes from the
     * same counter, so two requests without a seed sample differently */
    uint64_t k = atomic_fetch_add(&s->ids, 1);
    char id[48];
    snprintf(id, sizeof(id), "%s-%016llx", kind == API_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)(s->id_salt ^ (k * 0x9e3779b97f4a7c15ull)));
    uint64_t seed_state = s->id_salt + k;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!q.has_seed)
        p.sample.seed = rng_next(&seed_state);
    p.id = id;
    p.model = s->model_id;
    p.created = (long long)time(NULL);
    p.fd = ci ? ci->connect_fd : -1;
    p.probe_1xx = c->http11 && !q.stream && !s->tls; /* a raw 1xx would garble TLS */
    p.wake = wake_conn;
    p.wake_arg = c->conn;
    c->req = sched_req_new(&p);
    if (sched_submit(en->sched, c->req, &e) != 0) {
        sched_req_unref(c->req);
        c->req = NULL;
        goto refused;
    }
    atomic_fetch_add(&s->in_flight, 1);
    c->counted = true;
    if (q.stream) {
        struct stream *st = xcalloc(1, sizeof(*st));
        st->req = c->req;
        st->conn = c->conn;
        sched_req_ref(c->req);
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                   stream_read, st, stream_free);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        add_cors(c, r);
        rc = MHD_queue_response(c->conn, 200, r);
        MHD_destroy_response(r);
        prom_response(s->met, c->route->metric, 200);
    } else {
        rc = answer_when_done(c);
    }
    api_admit_release(&p);
    api_request_release(&q);
    return rc;
refused:
    api_admit_release(&p);
    api_request_release(&q);
    return respond_error(c, &e, false);
}

/* ---- embeddings (embed.c) ---- */

/* The answer when the job is done, else the connection suspends until
 * the job's wake (the pattern of answer_when_done). */
static enum MHD_Result answer_embed(struct call *c)
{
    struct buf body;
    buf_init(&body, 1);
    int status = 0;
    enum MHD_Result rc = MHD_YES;
    if (embed_take(c->emb, &body, &status, park_conn, c->conn))
        rc = respond(c, status, "application/json", body.data ? body.data : "", body.len, false);
    buf_release(&body);
    return rc;
}

/* POST /v1/embeddings: parsed and tokenized here, computed by a
 * scheduler job between steps. */
static enum MHD_Result h_embeddings(struct call *c)
{
    srv *s = c->s;
    if (atomic_load(&s->stopping))
        return refuse(c, 503, "unavailable_error", NULL, false, "the server is shutting down");
    if (!atomic_load(&s->ready))
        return refuse(c, 503, "unavailable_error", NULL, false, "loading model");
    const struct srv_engine *en = &s->engine;
    struct embed_ctx ctx = {.vocab = en->vocab,
                            .model_ids = s->model_ids,
                            .model = s->model_id,
                            .n_ctx = en->n_ctx,
                            .n_embd = en->n_embd,
                            .chunk = en->max_step_tokens,
                            .pooling = (enum embed_pooling)s->o.pooling};
    struct api_error e;
    c->emb = embed_new(&ctx, c->body.data ? c->body.data : "", c->body.len, wake_conn, c->conn, &e);
    if (!c->emb)
        return respond_error(c, &e, false);
    if (sched_submit_job(en->sched, embed_job(c->emb), &e) != 0) {
        embed_unref(c->emb); /* the job's reference: it will not run */
        return respond_error(c, &e, false);
    }
    atomic_fetch_add(&s->in_flight, 1);
    c->counted = true;
    return answer_embed(c);
}

/* ---- tokenizer endpoints (vLLM's shapes; bodies in tokapi.c) ---- */

enum tok_op { TOK_ENCODE, TOK_DECODE, TOK_INFO };

/* POST /tokenize and /detokenize: answered on the HTTP thread, like a
 * completion's tokenizing, bounded by --max-body; GET /tokenizer_info
 * (vLLM's): lm-evaluation-harness's local-completions finds its remote
 * tokenizer there. */
static enum MHD_Result h_tok(struct call *c, enum tok_op op)
{
    srv *s = c->s;
    if (!atomic_load(&s->ready))
        return refuse(c, 503, "unavailable_error", NULL, false, "loading model");
    struct tokapi_ctx ctx = {.vocab = s->engine.vocab,
                             .chat = s->engine.chat,
                             .n_ctx = s->engine.n_ctx,
                             .model_ids = s->model_ids,
                             .model_id = s->model_id};
    struct api_error e;
    struct buf b;
    buf_init(&b, BUF_MAX_DEFAULT);
    const char *body = c->body.data ? c->body.data : "";
    int rc = 0;
    if (op == TOK_INFO)
        tokapi_info(&ctx, &b);
    else
        rc = op == TOK_DECODE ? tokapi_detokenize(&ctx, body, c->body.len, &b, &e)
                              : tokapi_tokenize(&ctx, body, c->body.len, &b, &e);
    enum MHD_Result r = rc == 0 ? respond(c, 200, "application/json", b.data, b.len, false)
                                : respond_error(c, &e, false);
    buf_release(&b);
    return r;
}

static enum MHD_Result h_tokenize(struct call *c)
{
    return h_tok(c, TOK_ENCODE);
}

static enum MHD_Result h_detokenize(struct call *c)
{
    return h_tok(c, TOK_DECODE);
}

static enum MHD_Result h_tokenizer_info(struct call *c)
{
    return h_tok(c, TOK_INFO);
}

static enum MHD_Result h_completions(struct call *c)
{
    return h_completion(c, API_COMPLETION);
}

static enum MHD_Result h_chat(struct call *c)
{
    return h_completion(c, API_CHAT);
}

/* SGLang's native endpoint (bench_serving --backend sglang). */
static enum MHD_Result h_generate(struct call *c)
{
    return h_completion(c, API_GENERATE);
}

/* The routes: path, method, handler, metrics label, and whether a body is
 * read. A path ending in '*' matches any non-empty rest (c->path_rest). A
 * known path with another method is a 405 naming the right one. */
static const struct route routes[] = {
    {"/health", "GET", h_health, PROM_HEALTH, false},
    {"/v1/health", "GET", h_health, PROM_HEALTH, false},
    {"/v1/models", "GET", h_models, PROM_MODELS, false},
    {"/v1/models/*", "GET", h_model, PROM_MODELS, false},
    {"/metrics", "GET", h_metrics, PROM_METRICS, false},
    {"/v1/completions", "POST", h_completions, PROM_COMPLETIONS, true},
    {"/v1/chat/completions", "POST", h_chat, PROM_CHAT, true},
    {"/generate", "POST", h_generate, PROM_COMPLETIONS, true},
    {"/tokenize", "POST", h_tokenize, PROM_TOKENIZE, true},
    {"/detokenize", "POST", h_detokenize, PROM_TOKENIZE, true},
    {"/tokenizer_info", "GET", h_tokenizer_info, PROM_TOKENIZE, false},
    {"/reset_prefix_cache", "POST", h_reset_prefix, PROM_OTHER, false},
    {"/v1/embeddings", "POST", h_embeddings, PROM_OTHER, true},
};

/* ---- the MHD callbacks ---- */

/* The body framing rules of RFC 9112 §6 that libmicrohttpd leaves to us.
 * Each refusal closes the connection: after a framing error nothing on it
 * can be trusted to start a new request. */
static enum MHD_Result check_framing(struct call *c, const struct net_head *h, const char *version,
                                     bool *refused)
{
    if (h->cl_differ)
        return refuse(c, 400, "invalid_request_error", NULL, true,
                      "the request has %u Content-Length fields with different values", h->n_cl);
    if (h->n_te && h->n_cl)
        return refuse(c, 400, "invalid_request_error", NULL, true,
                      "the request has both Content-Length and Transfer-Encoding (send one)");
    if (h->n_te && strcmp(version, MHD_HTTP_VERSION_1_0) == 0)
        return refuse(c, 400, "invalid_request_error", NULL, true,
                      "Transfer-Encoding in an HTTP/1.0 request");
    if (h->n_te > 1)
        return refuse(c, 400, "invalid_request_error", NULL, true,
                      "the request has %u Transfer-Encoding fields (send one: chunked)", h->n_te);
    if (h->n_te && strcasecmp(h->te, "chunked") != 0)
        return refuse(c, 501, "invalid_request_error", NULL, true,
                      "transfer coding '%.64s' is not supported (only chunked)", h->te);
    *refused = false;
    return MHD_YES;
}

/* A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method,
 * before routing, as vLLM's middleware answers it): 200 with what the
 * browser may send, or 400 for an origin --allowed-origins does not list.
 * Any method and header is allowed, as vLLM's defaults do; the real
 * request then meets the routes, the key and the limits. */
static enum MHD_Result preflight(struct call *c, const char *origin)
{
    if (!c->cors)
        return refuse(c, 400, "invalid_request_error", NULL, false,
                      "origin '%.200s' is not allowed (--allowed-origins)", origin);
    const char *want =
        MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    add_cors(c, r);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
    if (want && *want)
        MHD_add_response_header(r, "Access-Control-Allow-Headers", want);
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    enum MHD_Result rc = MHD_queue_response(c->conn, 200, r);
    MHD_destroy_response(r);
    prom_response(c->s->met, PROM_OTHER, 200);
    return rc;
}

/* Before routing: the CORS answer headers, the preflight, and the API key
 * (401 before any 404, so a client without the key learns no routes).
 * *answered when a response was queued. */
static enum MHD_Result guard_request(struct call *c, const char *path, const char *method,
                                     bool *answered)
{
    const struct guard *g = c->s->o.guard;
    *answered = false;
    if (!g)
        return MHD_YES;
    const char *origin = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Origin");
    c->cors = guard_cors_origin(g, origin, &c->vary);
    *answered = true;
    if (origin && strcmp(method, "OPTIONS") == 0 &&
        MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Access-Control-Request-Method"))
        return preflight(c, origin);
    const char *why =
        guard_needs_key(g, path)
            ? guard_auth_refusal(g, MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND,
                                                                MHD_HTTP_HEADER_AUTHORIZATION))
            : NULL;
    if (why) {
        struct api_error e = {0};
        api_error_set(&e, 401, "invalid_request_error", NULL, "%s", why);
        api_error_code(&e, "invalid_api_key"); /* OpenAI's code for this */
        return respond_error(c, &e, true);
    }
    *answered = false;
    return MHD_YES;
}

/* The first call, when the headers are in: route and check limits. Returns
 * MHD_YES with a response queued when refusing. */
static enum MHD_Result first_call(struct call *c, const char *url, const char *method,
                                  const char *version, bool *refused)
{
    srv *s = c->s;
    *refused = true;
    c->http11 = strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
    struct net_head h = {0};
    MHD_get_connection_values_n(c->conn, MHD_HEADER_KIND, net_scan_header, &h);
    if (h.n > SRV_MAX_HEADERS)
        return refuse(c, 431, "invalid_request_error", NULL, true,
                      "the request has %u header fields (at most %d)", h.n, SRV_MAX_HEADERS);
    if (h.longest > SRV_MAX_HEADER_BYTES)
        return refuse(c, 431, "invalid_request_error", NULL, true,
                      "header field '%.64s' is %zu bytes long (at most %d)", h.which, h.longest,
                      SRV_MAX_HEADER_BYTES);
    enum MHD_Result rc = check_framing(c, &h, version, refused);
    if (*refused)
        return rc;
    *refused = true;
    size_t ulen = strlen(url);
    struct net_head args = {0};
    MHD_get_connection_values_n(c->conn, MHD_GET_ARGUMENT_KIND, net_scan_header, &args);
    if (ulen + args.total > SRV_MAX_URI_BYTES)
        return refuse(c, 414, "invalid_request_error", NULL, true,
                      "the request target is too long (at most %d bytes)", SRV_MAX_URI_BYTES);
    url = net_origin_path(url);
    bool answered;
    rc = guard_request(c, url, method, &answered);
    if (answered)
        return rc;
    const struct route *path_match = NULL;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        const char *p = routes[i].path;
        size_t n = strlen(p);
        if (p[n - 1] == '*') { /* the prefix, then something */
            if (strncmp(p, url, n - 1) != 0 || !url[n - 1])
                continue;
            c->path_rest = url + n - 1;
        } else if (strcmp(p, url) != 0) {
            continue;
        }
        path_match = &routes[i];
        if (strcmp(routes[i].method, method) == 0 ||
            (strcmp(method, "HEAD") == 0 && strcmp(routes[i].method, "GET") == 0)) {
            c->route = &routes[i];
            break;
        }
    }
    if (!path_match)
        return refuse(c, 404, "not_found_error", NULL, false, "no route for %.8s '%.200s'", method,
                      url);
    if (!c->route) {
        c->route = path_match; /* count it under the route it aimed at */
        struct api_error e = {.status = 405};
        snprintf(e.type, sizeof(e.type), "invalid_request_error");
        snprintf(e.msg, sizeof(e.msg), "method %.8s is not allowed on '%s' (use %s)", method,
                 path_match->path, path_match->method);
        struct buf b;
        buf_init(&b, 4096);
        api_error_json(&b, &e);
        log_warn("%s: 405 %s", path_match->path, e.msg);
        struct MHD_Response *r =
            MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_COPY);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, path_match->method);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        add_cors(c, r);
        enum MHD_Result rc = MHD_queue_response(c->conn, 405, r);
        MHD_destroy_response(r);
        prom_response(s->met, path_match->metric, 405);
        buf_release(&b);
        return rc;
    }
    if (c->route->body && !h.n_te && !h.n_cl)
        return refuse(c, 411, "invalid_request_error", NULL, true,
                      "the request has no body length (send Content-Length or "
                      "Transfer-Encoding: chunked)");
    if (c->route->body) {
        const char *cl = h.cl;
        char *end = NULL;
        unsigned long long len = cl ? strtoull(cl, &end, 10) : 0;
        if (cl && end != cl && len > s->o.max_body)
            return refuse(c, 413, "invalid_request_error", NULL, true,
                          "the request body is %llu bytes (at most %zu; --max-body)", len,
                          s->o.max_body);
    }
    *refused = false;
    return MHD_YES;
}

/* The connection's request-deadline record (watch.c), or NULL. */
static struct watch_conn *conn_watch(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* MHD's access handler, called (1) once the headers are in, (2) for each
 * piece of body, (3) once the body is complete, and (4) again after a
 * suspended non-streaming request is resumed. *con_cls holds our call. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    srv *s = cls;
    struct call *c = *con_cls;
    if (!c) {
        c = xcalloc(1, sizeof(*c));
        c->s = s;
        c->conn = conn;
        buf_init(&c->body, s->o.max_body);
        *con_cls = c;
        watch_reading(s->watch, conn_watch(conn));
        /* Answered at the last call, never here: libmicrohttpd closes a
         * connection whose answer was queued with the headers, which
         * refusals want and keep-alive GETs do not. */
        bool refused;
        return first_call(c, url, method, version, &refused);
    }
    if (*upload_data_size) {
        /* a chunked body (no length to refuse up front) that passes the
         * cap: answered now, not when the client finally ends it */
        if (buf_append(&c->body, upload_data, *upload_data_size) != 0) {
            struct api_error e = {.status = 413};
            snprintf(e.type, sizeof(e.type), "invalid_request_error");
            snprintf(e.msg, sizeof(e.msg), "the request body passed %zu bytes (--max-body)",
                     s->o.max_body);
            return refuse_now(c, 413, "Content Too Large", &e);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->req) /* a non-streaming request, resumed: the answer is ready */
        return answer_when_done(c);
    if (c->emb) /* an embeddings request, resumed */
        return answer_embed(c);
    watch_answering(s->watch, conn_watch(conn)); /* read whole: its deadline is met */
    return c->route->fn(c);
}

/* A request is over, answered or not. Anything but a clean completion
 * (client abort, read or write error, timeout, shutdown) cancels a
 * generation still running for it. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    srv *s = cls;
    struct call *c = *con_cls;
    if (!c)
        return;
    if (c->req) {
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
            sched_req_cancel(c->req);
        sched_req_unref(c->req);
    }
    embed_unref(c->emb);
    if (c->counted)
        atomic_fetch_sub(&s->in_flight, 1);
    watch_idle(s->watch, conn_watch(conn));
    buf_release(&c->body);
    free(c);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    srv *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        watch_close(s->watch, *socket_context); /* before MHD closes the socket */
        *socket_context = NULL;
        atomic_fetch_sub(&s->met->open_connections, 1);
        return;
    }
    atomic_fetch_add(&s->met->open_connections, 1);
    atomic_fetch_add(&s->met->connections, 1);
    /* every SSE event leaves at once: no Nagle delay behind a small write */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = ci ? watch_open(s->watch, ci->connect_fd) : NULL;
    int one = 1;
    if (ci && setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
        log_debug("TCP_NODELAY: %s", strerror(errno));
}

/* libmicrohttpd's own diagnostics (a client that sent garbage, a header
 * block too big for its memory): client mistakes, so debug level (-v). */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    srv *s = cls;
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    log_debug("http: %s", line);
    /* while starting (main thread only): the first reason, for srv_new's error */
    if (!atomic_load(&s->up) && !s->start_why[0])
        snprintf(s->start_why, sizeof(s->start_why), "%s", line);
}

/* ---- lifecycle ---- */

/* The daemon: one internal thread running epoll over every connection
 * (MHD_USE_EPOLL_INTERNAL_THREAD), suspend/resume for streams, our own
 * listening socket (so bind errors are ours to word), per-connection idle
 * timeout, a connection limit, and our callbacks for connection open/close
 * (TCP_NODELAY, gauges) and request completion (cancellation). */
srv *srv_new(const struct srv_opts *o, struct prom *met, struct err *err)
{
    srv *s = xcalloc(1, sizeof(*s));
    s->o = *o;
    s->met = met;
    s->host = xstrdup(o->host);
    s->model_id = xstrdup(o->model_id);
    s->model_path = xstrdup(o->model_path);
    s->model_base = xstrdup(path_base(o->model_path));
    size_t n_more = 0;
    while (o->more_names && o->more_names[n_more])
        n_more++;
    s->more_names = xcalloc(n_more + 1, sizeof(char *));
    s->model_ids = xcalloc(n_more + 4, sizeof(char *));
    s->model_ids[0] = s->model_id;
    for (size_t i = 0; i < n_more; i++)
        s->model_ids[1 + i] = s->more_names[i] = xstrdup(o->more_names[i]);
    s->model_ids[n_more + 1] = s->model_path;
    s->model_ids[n_more + 2] = s->model_base;
    s->tls = o->tls_key != NULL;
    s->started = (long long)time(NULL);
    s->id_salt = clock_ns() ^ ((uint64_t)getpid() << 32);
    s->lfd = net_listen(o->host, o->port, &s->port, err);
    if (s->lfd < 0)
        goto fail;
    s->watch = watch_new(o->req_deadline_s, met, s->tls);
    struct MHD_OptionItem mo[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, s}, /* first: it sees every message */
        {MHD_OPTION_LISTEN_SOCKET, s->lfd, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s},
        {MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, o->max_connections, NULL},
        /* HTTPS (--ssl-keyfile/--ssl-certfile): the PEM bytes themselves */
        {s->tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)o->tls_key},
        {s->tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)o->tls_cert},
        {MHD_OPTION_END, 0, NULL},
    };
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (s->tls)
        flags |= MHD_USE_TLS;
    s->d =
        MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, mo, MHD_OPTION_END);
    atomic_store(&s->up, true);
    if (!s->d && s->tls) /* our socket is bound already: the key or certificate is the cause */
        err_set(err, FP_ERR_USAGE, "--ssl-keyfile/--ssl-certfile: cannot start HTTPS: %s",
                s->start_why[0] ? s->start_why : "libmicrohttpd refused the key or certificate");
    if (!s->d) {
        err_set(err, FP_ERR_ADDR, "cannot start the HTTP server on %s:%d%s%s", o->host, s->port,
                s->start_why[0] ? ": " : "", s->start_why);
        goto fail;
    }
    return s;
fail:
    srv_free(s);
    return NULL;
}

bool srv_tls_supported(void)
{
    return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
}

long srv_in_flight(srv *s)
{
    return atomic_load(&s->in_flight);
}

int srv_port(const srv *s)
{
    return s->port;
}

void srv_set_ready(srv *s, const struct srv_engine *e)
{
    s->engine = *e;
    atomic_store(&s->ready, true);
}

void srv_quiesce(srv *s)
{
    atomic_store(&s->stopping, true);
    if (s->d) {
        MHD_socket fd = MHD_quiesce_daemon(s->d);
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
        s->lfd = -1;
    }
}

/* Polled rather than signalled: it runs once, at shutdown, for a few
 * milliseconds while the last events leave. */
bool srv_drain(srv *s, int timeout_ms)
{
    uint64_t end = clock_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (atomic_load(&s->in_flight) > 0 && clock_ns() < end)
        sleep_ms(5, NULL);
    return atomic_load(&s->in_flight) == 0;
}

void srv_free(srv *s)
{
    if (!s)
        return;
    if (s->d)
        MHD_stop_daemon(s->d);
    else if (s->lfd >= 0)
        close(s->lfd);
    watch_free(s->watch); /* after the daemon: every connection is closed */
    free(s->host);
    free(s->model_id);
    free(s->model_path);
    free(s->model_base);
    for (size_t i = 0; s->more_names && s->more_names[i]; i++)
        free(s->more_names[i]);
    free(s->more_names);
    free(s->model_ids);
    free(s);
}
