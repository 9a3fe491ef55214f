/*
 * loadgen: the built-in load generator of `sweep bench`. One thread drives
 * libcurl's multi interface over epoll: keep-alive connections, TCP_NODELAY,
 * exactly C requests in flight (closed loop) or a seeded Poisson schedule
 * with at most C in flight (open loop). Each request's times come from
 * CLOCK_MONOTONIC; failed requests are data, classified by kind, and no
 * request can hang the run (idle and total timeouts). lgreport.c turns the
 * records into the report block and the JSONL file.
 */
#ifndef RUNNER_LOADGEN_H
#define RUNNER_LOADGEN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

#include "client/dataset.h"
#include "client/lengths.h"
#include "client/workload.h"

/* Why a request failed. The order is the order of the report's lines. */
enum lg_fail {
    LG_OK = 0,
    LG_FAIL_CONNECT,     /* no connection (refused, unreachable, connect timeout) */
    LG_FAIL_HTTP,        /* the server answered with a status other than 200 */
    LG_FAIL_ERROR_EVENT, /* an in-band error event in a 200 stream */
    LG_FAIL_IDLE,        /* no byte arrived for idle_timeout_s (a stalled stream) */
    LG_FAIL_TRUNCATED,   /* the stream ended without [DONE] and without finish_reason */
    LG_FAIL_PARSE,       /* an event that is not a JSON object, an oversized event, or a
                            usage.completion_tokens above both max_tokens and the chunks */
    LG_FAIL_TIMEOUT,     /* request_timeout_s passed before the response ended */
    LG_FAIL_NO_CONTENT,  /* the stream ended properly but carried no text at all */
    LG_FAIL_TRANSPORT,   /* any other transport error before a response (empty reply...) */
    LG_FAIL_INTERRUPTED, /* cancelled because the run was interrupted */
    LG_FAIL_KINDS
};

/* Short name for JSON ("connect", "http", "error_event", "idle_timeout", ...). */
const char *lg_fail_name(enum lg_fail f);
/* Human label for the report ("connect error", "HTTP status", ...). */
const char *lg_fail_label(enum lg_fail f);

/*
 * The progress file (lg_config.progress_file; `sweep bench` takes its path
 * from the environment variable LG_PROGRESS_ENV, which `sweep run` sets for
 * each point's client): one line of PROGRESS_LINE_BYTES bytes, rewritten in
 * place twice a second and at the end, "DONE TOTAL TOKENS SECS" padded with
 * blanks and ending in '\n': measured requests ended of those to run,
 * output tokens streamed so far (in-flight requests included), seconds
 * since the measured phase began (0 during warmup). A reader takes only a
 * whole line that parses (exec/progress.h prog_client_file).
 */
#define PROGRESS_LINE_BYTES 64
#define LG_PROGRESS_ENV     "SWEEP_PROGRESS_FILE"

/*
 * The server's Prometheus text after the warmup (lg_config.metrics_url,
 * metrics_file; `sweep bench` takes both from these environment variables,
 * which `sweep run` sets for a point with warmup requests when it scrapes
 * the server, docs/benchmarks.md section 8): once the last warmup request
 * has ended and before the first measured one is sent, GET the URL and
 * save the answer to the file (temporary file and rename), replacing the
 * scrape sweep took before the client started. So the point's server_*
 * deltas cover the measured requests only. Environment, not flags: the
 * client argv is part of the point key, and these change no measurement.
 */
#define LG_METRICS_URL_ENV  "SWEEP_METRICS_URL"
#define LG_METRICS_FILE_ENV "SWEEP_METRICS_FILE"

struct lg_config {
    const char *base_url;         /* "http://127.0.0.1:30000"; a trailing '/' is ignored */
    const char *endpoint;         /* "/v1/completions", or a path containing "chat" for chat */
    const char *model;            /* the request's "model"; NULL leaves the field out */
    long concurrency;             /* closed loop: requests in flight; open loop: the cap */
    long n_prompts;               /* measured requests */
    long warmup;                  /* requests before the measured ones, excluded from stats */
    long input_len;               /* prompt length, tokens (ids) or words (chat) */
    long output_len;              /* max_tokens of every request */
    double request_rate;          /* open loop, requests/s (Poisson); <= 0 = closed loop */
    bool constant_rate;           /* open loop: evenly spaced arrivals instead of Poisson */
    struct len_dist in_dist;      /* per-request prompt length; max == 0: input_len for all */
    struct len_dist out_dist;     /* per-request max_tokens; max == 0: output_len for all */
    const struct ds_set *dataset; /* borrowed; non-NULL: prompts from these entries */
    struct wl *workload;          /* borrowed; non-NULL: measured prompts from it (shared-prefix,
                                     multi-turn: turns gated on answers, trace: its times) */
    const char *reset_path;       /* non-NULL: POST here before anything is sent (the
                                     server's prefix-cache reset) */
    uint64_t seed;                /* prompts and the arrival schedule */
    long vocab_size;              /* prompt ids are drawn from [0, vocab_size) */
    const char *prompt_text;      /* non-NULL: send this text as every prompt instead */
    double idle_timeout_s;        /* a request with no byte for this long fails (> 0) */
    double request_timeout_s;     /* a request still running this long fails; 0 = no limit */
    double connect_timeout_s;     /* TCP connect limit, s */
    bool preconnect;              /* open the connections before the first request */
    bool progress;                /* a progress line on stderr (for terminals) */
    const char *progress_file;    /* borrowed; non-NULL: progress rewritten here twice a
                                     second (PROGRESS_LINE_BYTES, below) for `sweep run` */
    volatile sig_atomic_t *stop;  /* may be NULL; nonzero cancels the run (from a signal) */
    const char *metrics_url;      /* borrowed; with metrics_file and warmup > 0: the server's
                                     /metrics, saved after the warmup (LG_METRICS_URL_ENV) */
    const char *metrics_file;     /* borrowed; where that scrape goes (LG_METRICS_FILE_ENV) */
};

/* One request. Times are CLOCK_MONOTONIC ns; 0 means "did not happen". */
struct lg_record {
    uint64_t t_intended_ns; /* when it was due: its slot in the schedule (open loop), or
                               when its predecessor's slot freed (closed loop) */
    uint64_t t_sent_ns;     /* handed to libcurl, which writes it at once */
    uint64_t t_first_ns;    /* first chunk that carried text (TTFT) */
    uint64_t t_last_ns;     /* last byte of the response, or the moment it failed */
    uint64_t *chunk_ns;     /* owned; arrival of each text chunk, n_chunk_times of them */
    size_t n_chunk_times;
    long n_chunks;      /* text chunks received */
    long output_tokens; /* usage.completion_tokens, else n_chunks (usage_missing) */
    long prompt_tokens; /* usage.prompt_tokens, else the ids sent; -1 unknown */
    long req_input;     /* prompt length asked for: ids, words (chat, dataset); -1 unknown */
    long req_output;    /* max_tokens sent */
    long cached_tokens; /* usage.prompt_tokens_details.cached_tokens; -1 unknown */
    long turn;          /* multi-turn: the turn's index in its session; -1 otherwise */
    long http_status;   /* 0 when no response arrived */
    bool usage_missing; /* the stream carried no usage: output_tokens counts chunks */
    bool warmup;        /* a warmup request (excluded from every statistic) */
    bool sent;          /* false when the run stopped before sending it */
    enum lg_fail fail;  /* LG_OK on success */
    char *error;        /* owned; one line saying what failed, NULL on success */
};

struct lg_result {
    struct lg_record *rec; /* owned; n_total records, the warmup ones first */
    size_t n_total;        /* warmup + measured */
    size_t n_warmup;
    uint64_t t_start_ns; /* start of the measured phase (first send or schedule origin) */
    uint64_t t_end_ns;   /* end of the last measured request */
    bool interrupted;    /* the stop flag ended the run early */
    bool open_loop;      /* request_rate was given */
    int metrics_saved;   /* the scrape after the warmup: 1 saved, -1 failed (metrics_why),
                            0 not asked (no URL or file, no warmup, interrupted) */
    char *metrics_why;   /* owned; one line: why it failed */
};

/* What GET /v1/models said. */
struct lg_server_info {
    char model[256]; /* data[0].id, "" when absent */
    long n_vocab;    /* data[0].meta.n_vocab, 0 when absent */
};

/*
 * Ask base_url/v1/models for the model id and vocabulary size. Returns 0
 * (fields filled where the server gave them, possibly none), or -1 with
 * err set (code RN_ERR_ENV) when the server cannot be reached at all.
 */
int lg_probe(const char *base_url, double timeout_s, struct lg_server_info *info, struct err *err);

/*
 * Append request number index's JSON body to out: the prompt for that
 * index (token ids from the seeded generator, the fixed text, or words for
 * chat), max_tokens, ignore_eos, stream with usage, temperature 0. Warmup
 * requests use their own prompts (warmup = true), so the measured prompts
 * do not depend on the warmup count. Returns the number of prompt ids
 * sent, or -1 when the prompt is text (its length is up to the tokenizer).
 */
long lg_build_body(const struct lg_config *cfg, size_t index, bool warmup, struct buf *out);
/* The same, and the requested prompt length (ids or words; -1 for
 * --prompt-text) and max_tokens of the request into *req_in and *req_out. */
long lg_build_body_len(const struct lg_config *cfg, size_t index, bool warmup, struct buf *out,
                       long *req_in, long *req_out);

/*
 * Run the warmup requests (closed loop, min(C, warmup) in flight), then
 * (with metrics_url and metrics_file) save the server's metrics, then the
 * measured ones at once. Fills res (release it with lg_result_release in
 * every case). Returns 0 when the run finished or was interrupted (failed
 * requests are data), -1 with err set when libcurl could not be set up.
 */
int lg_run(const struct lg_config *cfg, struct lg_result *res, struct err *err);

void lg_result_release(struct lg_result *res);

#endif
