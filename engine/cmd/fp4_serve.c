/*
 * fp4_serve: `fp4serve serve`: listen first (so /health can say 503 while
 * the model loads), load the model and tokenizer on a loader thread, then
 * run the scheduler behind the HTTP server until SIGTERM or SIGINT. The
 * first signal drains: the listening socket closes, new requests on open
 * connections get 503, and the requests in flight run to their end for up
 * to --drain-timeout seconds; then (or at a second signal) the rest end
 * with an error event and the process exits 0. The main thread does
 * nothing but wait for signals (sigwait, sigtimedwait).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "fp4.h"
#include "log.h"
#include "opts.h"
#include "timeutil.h"
#include "xalloc.h"

#include "model/membw.h"
#include "model/model.h"
#include "model/threadpool.h"
#include "serve/embed.h"
#include "serve/guard.h"
#include "serve/prom.h"
#include "serve/scheduler.h"
#include "serve/server.h"
#include "text/chat.h"
#include "text/tokenizer.h"

/* The command line, as parsed. */
struct serve_args {
    const char *model, *host, *device, *isa, *quant, *head, *decode, *attention, *kv;
    const char *api_key, *allowed_origins, *ssl_keyfile, *ssl_certfile, *pooling;
    struct strvec names; /* --served-model-name and --alias, in order (owned) */
    long port, threads, max_batch, ctx, prefill_chunk, max_queue, max_body, timeout_s,
        request_timeout_s, max_connections, load_delay_ms, drain_timeout_s;
    bool verbose, probe_bandwidth, no_prefix_cache, api_key_all;
};

/* What the loader thread builds; owned here until shutdown. */
struct engine {
    struct serve_args *a;
    srv *http;
    struct prom met;
    pthread_t main_thread;
    atomic_int state; /* 0 loading, 1 ready, 2 failed */
    struct err err;
    struct model *m;
    tok_vocab *vocab;
    struct chat_template chat;
    sched *sched;
    char quant_name[32];
    const char *model_id; /* served model id (the metrics' model_name) */
};

enum { LOADING = 0, READY = 1, FAILED = 2 };

/* The loader thread: tokenizer and model from one GGUF mapping, the chat
 * template, then the scheduler; only then does /health turn 200. On failure
 * it wakes the main thread (SIGUSR1 into its sigwait), which exits with the
 * error's code, so a supervisor sees a bad model as a fast exit, not as a
 * server that never gets ready. */
static void *load(void *arg)
{
    struct engine *e = arg;
    struct serve_args *a = e->a;
    struct gguf_file f;
    if (a->load_delay_ms > 0)
        sleep_ms((double)a->load_delay_ms, NULL);
    uint64_t t0 = clock_ns();
    if (gguf_open(a->model, &f, &e->err) != 0)
        goto fail;
    if (tok_load(&f, &e->vocab, &e->err) != 0) {
        err_prefix(&e->err, "%s", a->model);
        gguf_close(&f);
        goto fail;
    }
    struct model_opts mo = {
        .threads = (int)a->threads,
        .max_batch = (int)a->max_batch,
        .ctx = (int)a->ctx,
        .max_step_tokens = (int)(a->max_batch + a->prefill_chunk),
        /* echo with logprobs needs a logits row per prompt token */
        .max_logit_rows = (int)(a->max_batch + a->prefill_chunk),
        .kv_f32 = strcmp(a->kv, "f32") == 0,
        .device = a->device,
        .isa = a->isa,
    };
    if (model_opts_parse(&mo, a->quant, a->head, a->decode, a->attention, &e->err) != 0) {
        gguf_close(&f);
        goto fail;
    }
    e->m = model_from_gguf(&f, &mo, &e->err);
    if (!e->m) {
        err_prefix(&e->err, "%s", a->model);
        goto fail;
    }
    double read_gbs = 0; /* before the scheduler thread can use the pool */
    if (a->probe_bandwidth) {
        double copy_gbs;
        membw_probe(e->m->pool, &copy_gbs, &read_gbs);
        log_info("memory: read %.1f GB/s (%d threads), memcpy %.1f GB/s; weights read per step "
                 "%.2f MB",
                 read_gbs, tp_threads(e->m->pool), copy_gbs,
                 (double)model_weight_bytes_per_step(e->m) / 1e6);
    }
    chat_template_init(&e->chat, tok_chat_template(e->vocab));
    struct sched_opts so = {.prefill_chunk = (int)a->prefill_chunk,
                            .max_queue = (int)a->max_queue,
                            .no_prefix_cache = a->no_prefix_cache};
    e->sched = sched_new(e->m, e->vocab, &so, &e->met, &e->err);
    if (!e->sched)
        goto fail;
    snprintf(e->quant_name, sizeof(e->quant_name), "%s", a->quant ? a->quant : "native");
    struct srv_engine se = {
        .sched = e->sched,
        .vocab = e->vocab,
        .chat = &e->chat,
        .n_vocab = e->m->cfg.n_vocab,
        .n_ctx = e->m->ctx,
        .n_ctx_train = e->m->cfg.n_ctx_train,
        .max_batch = e->m->max_batch,
        .quant = e->quant_name,
        .decode = e->m->opts.decode == MODEL_DECODE_PER_REQUEST ? "per-request" : "batched",
        .weight_bytes = model_weight_bytes_per_step(e->m),
        .flops_per_token = model_flops_per_token(e->m),
        .attn_flops_per_pos = model_attn_flops_per_position(e->m),
        .mem_read_gbs = read_gbs,
        .n_embd = e->m->cfg.n_embd,
        .max_step_tokens = e->m->max_rows,
    };

    log_info("%s", e->chat.note);
    log_info("ready in %.2f s: %d layers, vocab %d, ctx %d x %d slots, decode %s, attention %s, "
             "prefill chunk %ld, %d threads",
             (double)(clock_ns() - t0) / 1e9, e->m->cfg.n_layer, e->m->cfg.n_vocab, e->m->ctx,
             e->m->max_batch, se.decode,
             e->m->opts.attention == MODEL_ATTN_SERIAL ? "serial" : "split", a->prefill_chunk,
             tp_threads(e->m->pool));
    prom_set_model(&e->met, e->model_id, e->m->ctx);
    prom_set_roofline(&e->met, (double)se.weight_bytes, se.flops_per_token, se.attn_flops_per_pos,
                      se.mem_read_gbs * 1e9);
    prom_set_experts(&e->met, (double)e->m->cfg.n_layer * e->m->cfg.n_expert);
    srv_set_ready(e->http, &se);
    atomic_store(&e->state, READY);
    return NULL;
fail:
    atomic_store(&e->state, FAILED);
    pthread_kill(e->main_thread, SIGUSR1); /* wake sigwait */
    return NULL;
}

/* "models/x.Q4_1.gguf" -> "x.Q4_1" */
static char *model_id_of(const char *path)
{
    return path_stem(path, ".gguf");
}

/* vLLM's "--served-model-name a b c": every word after the flag's value
 * that is not a flag gets a "--served-model-name" of its own, so the flag
 * table (one value per flag) takes them all. serve has no positional
 * arguments, so such a word can mean nothing else. The array is owned by
 * the caller; its strings are argv's. */
static char **names_argv(int argc, char **argv, int *out_argc)
{
    char **v = xcalloc((size_t)argc * 2 + 1, sizeof(char *));
    int n = 0;
    bool in_names = false;
    for (int i = 0; i < argc; i++) {
        bool flag = argv[i][0] == '-';
        if (in_names && !flag)
            v[n++] = "--served-model-name";
        in_names = in_names && !flag;
        v[n++] = argv[i];
        if (strcmp(argv[i], "--served-model-name") == 0 && i + 1 < argc) {
            v[n++] = argv[++i];
            in_names = true;
        } else if (strncmp(argv[i], "--served-model-name=", 20) == 0) {
            in_names = true;
        }
    }
    *out_argc = n;
    return v;
}

/* --ssl-keyfile and --ssl-certfile read whole (PEM text), or neither given.
 * A libmicrohttpd without TLS is named as the reason, in one line. */
static int read_tls(const struct serve_args *a, struct buf *key, struct buf *cert, struct err *err)
{
    if (!a->ssl_keyfile && !a->ssl_certfile)
        return 0;
    if (!a->ssl_keyfile || !a->ssl_certfile)
        return err_set(err, FP_ERR_USAGE, "%s needs %s too (HTTPS takes both)",
                       a->ssl_keyfile ? "--ssl-keyfile" : "--ssl-certfile",
                       a->ssl_keyfile ? "--ssl-certfile" : "--ssl-keyfile"),
               -1;
    if (!srv_tls_supported())
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "--ssl-keyfile: this libmicrohttpd was built without TLS "
                       "(MHD_FEATURE_TLS is off); use a build with GnuTLS, such as Debian's "
                       "libmicrohttpd12, or a TLS proxy in front"),
               -1;
    if (file_read_all(a->ssl_keyfile, key, err, FP_ERR_IO) != 0)
        return err_prefix(err, "--ssl-keyfile"), -1;
    if (file_read_all(a->ssl_certfile, cert, err, FP_ERR_IO) != 0)
        return err_prefix(err, "--ssl-certfile"), -1;
    if (!strstr(key->data ? key->data : "", "-----BEGIN"))
        return err_set(err, FP_ERR_USAGE, "--ssl-keyfile: '%s' is not PEM (no -----BEGIN line)",
                       a->ssl_keyfile),
               -1;
    if (!strstr(cert->data ? cert->data : "", "-----BEGIN CERTIFICATE"))
        return err_set(err, FP_ERR_USAGE,
                       "--ssl-certfile: '%s' is not a PEM certificate (no -----BEGIN "
                       "CERTIFICATE line)",
                       a->ssl_certfile),
               -1;
    return 0;
}

/* The first SIGTERM or SIGINT: wait for the requests in flight to end, up
 * to drain_s seconds, while the main thread still takes signals (a second
 * one ends the wait at once). Returns the signal that cut it short, or 0. */
static int drain(srv *http, long drain_s, const sigset_t *sigs)
{
    long n = srv_in_flight(http);
    if (n == 0 || drain_s == 0)
        return 0;
    log_info("draining: %ld request%s in flight, up to %ld s (--drain-timeout; signal again to "
             "stop now)",
             n, n == 1 ? "" : "s", drain_s);
    uint64_t end = clock_ns() + (uint64_t)drain_s * 1000000000ull;
    while (srv_in_flight(http) > 0) {
        uint64_t now = clock_ns();
        if (now >= end) {
            log_warn("drain: %ld request%s still in flight after %ld s: ending them",
                     srv_in_flight(http), srv_in_flight(http) == 1 ? "" : "s", drain_s);
            return 0;
        }
        struct timespec ts = {0, 20 * 1000000L}; /* the in-flight count is polled */
        int sig = sigtimedwait(sigs, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            log_info("%s again: stopping now", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            return sig;
        }
    }
    log_info("drained: every request in flight ended");
    return 0;
}

static const struct opt_cmd usage = {
    "fp4serve", "serve", "--model PATH [options]",
    "OpenAI-compatible server with continuous batching: GET /health, "
    "/v1/models, /metrics;\nPOST /v1/completions, /v1/chat/completions "
    "(stream or not), /v1/embeddings, /reset_prefix_cache.\nSIGTERM or SIGINT drain it (requests "
    "in flight finish, up to --drain-timeout; a second\nsignal stops at once) and exit 0.",
    FP_ERR_USAGE};

/* Defaults: 16 slots and the model's context up to 2048 positions (the KV
 * cache is allocated once, from these), prompt chunks of 128 tokens, 1 MiB
 * bodies, 10 s idle timeout, 30 s to read a request. The flag table below
 * is also the --help. */
int fp4_serve(int argc, char **argv)
{
    struct serve_args a = {.host = "127.0.0.1",
                           .kv = "f16",
                           .port = 30000,
                           .max_batch = 16,
                           .prefill_chunk = 128,
                           .max_queue = 1024,
                           .max_body = 1 << 20,
                           .timeout_s = 10,
                           .request_timeout_s = 30,
                           .max_connections = 2048,
                           .drain_timeout_s = 30};
    strvec_init(&a.names);
    const struct opt opts[] = {
        {"model", 'm', OPT_STR, &a.model, "PATH", "GGUF model (required)"},
        {"host", 0, OPT_STR, &a.host, "ADDR", "address to listen on (default 127.0.0.1)"},
        {"port", 'p', OPT_LONG, &a.port, "N", "TCP port; 0 = any free one (default 30000)", 0,
         65535},
        {"device", 0, OPT_STR, &a.device, "DEV", "cpu|cuda (default cpu)"},
        {"isa", 0, OPT_STR, &a.isa, "ISA",
         "CPU kernels: auto|avx512|avx2|neon|portable (default auto: the best the CPU has)"},
        {"threads", 't', OPT_LONG, &a.threads, "N", "compute threads (default: online cores)", 0,
         1024},
        {"quant", 0, OPT_STR, &a.quant, "Q",
         "requantize weights at load: native|q8_0|mxfp4|nvfp4 (default native)"},
        {"head", 0, OPT_STR, &a.head, "H",
         "output head when requantizing: q8_0|same (default q8_0)"},
        {"max-batch", 0, OPT_LONG, &a.max_batch, "N",
         "sequences decoded together = KV slots (default 16)", 1, 4096},
        {"ctx", 0, OPT_LONG, &a.ctx, "N",
         "positions per sequence, prompt + max_tokens (default: min(training context, 2048))", 0,
         1 << 20},
        {"decode", 0, OPT_STR, &a.decode, "MODE",
         "batched (one pass over all sequences per step) | per-request (one pass each); "
         "default batched"},
        {"attention", 0, OPT_STR, &a.attention, "MODE", "split|serial (default split)"},
        {"kv", 0, OPT_STR, &a.kv, "TYPE", "K/V cache type: f16|f32 (default f16)"},
        {"prefill-chunk", 0, OPT_LONG, &a.prefill_chunk, "N",
         "prompt tokens per step over all new requests (default 128)", 1, 65536},
        {"max-queue", 0, OPT_LONG, &a.max_queue, "N",
         "requests waiting for a slot; more get 503 (default 1024)", 1, 1 << 20},
        {"no-prefix-cache", 0, OPT_BOOL, &a.no_prefix_cache, NULL,
         "compute every prompt whole (default: reuse the longest cached prefix of a finished "
         "or running sequence's KV)"},
        {"max-body", 0, OPT_LONG, &a.max_body, "BYTES",
         "largest request body; more get 413 (default 1048576)", 1024, 1L << 30},
        {"timeout", 0, OPT_LONG, &a.timeout_s, "S",
         "close connections idle this long, seconds; 0 = never (default 10)", 0, 86400},
        {"request-timeout", 0, OPT_LONG, &a.request_timeout_s, "S",
         "a request (headers and body) must arrive whole within this many seconds of its first "
         "byte, else 408 and the connection is closed; 0 = never (default 30)",
         0, 86400},
        {"max-connections", 0, OPT_LONG, &a.max_connections, "N",
         "open connections at once (default 2048)", 1, 1 << 20},
        {"served-model-name", 0, OPT_LIST, &a.names, "NAME...",
         "names the model is served under, as vLLM's flag (several allowed: --served-model-name "
         "a b); /v1/models lists each, requests may use any, answers carry the first (default: "
         "the file name without .gguf)"},
        {"alias", 0, OPT_LIST, &a.names, "NAME", "the old spelling of --served-model-name"},
        {"api-key", 0, OPT_STR, &a.api_key, "KEY",
         "requests must carry 'Authorization: Bearer KEY', else 401 (default: "
         "$FP4SERVE_API_KEY, else none); /health and /metrics stay open"},
        {"api-key-all", 0, OPT_BOOL, &a.api_key_all, NULL,
         "the API key guards /health and /metrics too"},
        {"allowed-origins", 0, OPT_STR, &a.allowed_origins, "LIST",
         "CORS: origins whose pages may read the answers, a JSON list or comma-separated; "
         "\"\" = none (default \"*\", any, as vLLM)"},
        {"ssl-keyfile", 0, OPT_STR, &a.ssl_keyfile, "PATH",
         "serve HTTPS with this PEM private key (with --ssl-certfile)"},
        {"ssl-certfile", 0, OPT_STR, &a.ssl_certfile, "PATH",
         "the PEM certificate (chain) for --ssl-keyfile"},
        {"pooling", 0, OPT_STR, &a.pooling, "HOW",
         "/v1/embeddings: the final hidden state of the last token, or the mean over every "
         "token: last|mean, then L2-normalised (default last, as vLLM pools a decoder-only "
         "model)"},
        {"drain-timeout", 0, OPT_LONG, &a.drain_timeout_s, "S",
         "on SIGTERM, let requests in flight finish for up to this many seconds, then end the "
         "rest with an error; 0 = end them at once (default 30)",
         0, 86400},
        {"verbose", 'v', OPT_BOOL, &a.verbose, NULL, "log every request and HTTP diagnostics"},
        {"probe-bandwidth", 0, OPT_BOOL, &a.probe_bandwidth, NULL,
         "measure memory read bandwidth after loading (about a second, 512 MiB) and report it "
         "in /v1/models and /metrics (CPU only)"},
        {"load-delay-ms", 0, OPT_LONG, &a.load_delay_ms, "MS",
         "wait this long before loading the model (to test clients against 503); default 0", 0,
         600000},
    };
    struct err err;
    int n_args;
    char **args = names_argv(argc, argv, &n_args);
    int rc = opt_cmd_parse(&usage, opts, OPT_N(opts), n_args, args, NULL, &err);
    free(args);
    if (rc == 1) {
        strvec_release(&a.names);
        return FP_OK;
    }
    if (rc == 0 && !a.model)
        err_set(&err, FP_ERR_USAGE, "serve needs --model PATH (see --help)");
    if (rc == 0 && strcmp(a.kv, "f16") != 0 && strcmp(a.kv, "f32") != 0)
        err_set(&err, FP_ERR_USAGE, "--kv: unknown type '%s' (expected f16 or f32)", a.kv);
    if (rc == 0 && a.probe_bandwidth && a.device && strcmp(a.device, "cpu") != 0)
        err_set(&err, FP_ERR_USAGE,
                "--probe-bandwidth measures host memory; with --device %s the weights are read "
                "from device memory (drop the flag)",
                a.device);
    /* check the spellings now, not after the socket is up */
    struct model_opts probe = {0};
    if (!err.code)
        model_opts_parse(&probe, a.quant, a.head, a.decode, a.attention, &err);
    if (!a.api_key)
        a.api_key = getenv("FP4SERVE_API_KEY");
    if (!err.code && a.pooling && strcmp(a.pooling, "last") != 0 && strcmp(a.pooling, "mean") != 0)
        err_set(&err, FP_ERR_USAGE, "--pooling: unknown '%s' (expected last or mean)", a.pooling);
    struct guard guard;
    struct buf tls_key, tls_cert;
    buf_init(&tls_key, (size_t)1 << 20);
    buf_init(&tls_cert, (size_t)1 << 20);
    if (guard_init(&guard, a.api_key, a.api_key_all, a.allowed_origins, &err) == 0 && !err.code)
        read_tls(&a, &tls_key, &tls_cert, &err);
    if (err.code) {
        log_error("%s", err.msg);
        guard_release(&guard);
        buf_release(&tls_key);
        buf_release(&tls_cert);
        strvec_release(&a.names);
        return err.code;
    }
    log_setup("fp4serve", a.verbose ? LOG_DEBUG : LOG_INFO, 1);

    /* Signals are taken by sigwait on this thread only: block them before
     * any thread starts, so every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct engine *e = xcalloc(1, sizeof(*e));
    e->a = &a;
    e->main_thread = pthread_self();
    err_init(&e->err);
    prom_init(&e->met);
    char *model_id = a.names.n ? xstrdup(a.names.v[0]) : model_id_of(a.model);
    e->model_id = model_id;
    prom_set_model(&e->met, model_id, 0); /* the label from the first scrape (ctx once loaded) */
    struct srv_opts so = {.host = a.host,
                          .port = (int)a.port,
                          .max_body = (size_t)a.max_body,
                          .timeout_s = (unsigned)a.timeout_s,
                          .req_deadline_s = (unsigned)a.request_timeout_s,
                          .max_connections = (unsigned)a.max_connections,
                          .model_id = model_id,
                          .more_names = a.names.n > 1 ? (const char *const *)a.names.v + 1 : NULL,
                          .model_path = a.model,
                          .guard = &guard,
                          .tls_key = tls_key.len ? tls_key.data : NULL,
                          .tls_cert = tls_cert.len ? tls_cert.data : NULL,
                          .pooling = a.pooling && strcmp(a.pooling, "mean") == 0 ? EMBED_MEAN
                                                                                 : EMBED_LAST};
    e->http = srv_new(&so, &e->met, &err);
    pthread_t loader;
    bool loader_started = false;
    if (!e->http)
        goto out;
    log_info("listening on %s://%s:%d (pid %ld)%s; loading %s", tls_key.len ? "https" : "http",
             a.host, srv_port(e->http), (long)getpid(), guard.key ? ", API key required" : "",
             a.model);
    if (pthread_create(&loader, NULL, load, e) != 0) {
        err_set(&err, FP_ERR_RESOURCE, "cannot start the loader thread");
        goto out;
    }
    loader_started = true;
    for (;;) {
        int sig = 0;
        sigwait(&sigs, &sig);
        if (sig == SIGUSR1 && atomic_load(&e->state) != FAILED)
            continue;
        if (sig == SIGUSR1) {
            err = e->err;
            break;
        }
        log_info("%s: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        break;
    }
    /* Shutdown: stop accepting, let the requests in flight finish (up to
     * --drain-timeout, or until a second signal), end the rest (streams get
     * an error event and [DONE]), give the last bytes a moment to leave,
     * then close everything. While still loading there is nothing to end:
     * exit now rather than wait for a long requantization. */
    srv_quiesce(e->http);
    if (!err.code && atomic_load(&e->state) == READY)
        drain(e->http, a.drain_timeout_s, &sigs);
    if (atomic_load(&e->state) == LOADING) {
        /* no request can be running; the loader may be deep in a requantization */
        log_info("stopped while loading");
        srv_free(e->http);
        _exit(err.code ? err.code : FP_OK);
    }
    pthread_join(loader, NULL);
    loader_started = false;
    if (e->sched) {
        sched_stop(e->sched);
        if (!srv_drain(e->http, 3000))
            log_warn("some responses were still being sent at exit");
    }
out:
    if (err.code)
        log_error("%s", err.msg);
    if (loader_started)
        pthread_join(loader, NULL);
    srv_free(e->http);
    sched_free(e->sched);
    model_free(e->m);
    tok_free(e->vocab);
    chat_template_release(&e->chat);
    guard_release(&guard);
    buf_release(&tls_key);
    buf_release(&tls_cert);
    strvec_release(&a.names);
    free(model_id);
    free(e);
    return err.code;
}
