/*
 * cmd_bench: `sweep bench`, the built-in load test against a running
 * OpenAI-compatible server. Asks /v1/models for the model and vocabulary,
 * runs the load (loadgen.c), prints SGLang's result block (lgreport.c) on
 * stdout and optionally one JSON line per request. `sweep run` starts it as
 * a child for `bench.tool: builtin` and keeps its output as the point log.
 */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "err.h"
#include "http.h"
#include "opts.h"
#include "strutil.h"
#include "sweep.h"
#include "version.h"

#include "client/dataset.h"
#include "client/lengths.h"
#include "client/lgreport.h"
#include "client/loadgen.h"

#define DEFAULT_VOCAB 1000 /* ids below 1000 exist in every vocabulary we know */

/* Set by SIGINT/SIGTERM; the load loop polls it. The one signal flag. */
static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static const char synopsis[] =
    "--url URL -c CONC -n PROMPTS [--input-len LEN] [--output-len LEN] [--request-rate R]\n"
    "       [--rate-kind poisson|constant] [--dataset FILE [--dataset-kind jsonl|sharegpt]]\n"
    "       [--warmup N] [--model NAME] [--endpoint chat|completions|PATH] [--seed S]\n"
    "       [--jsonl FILE]\n"
    "       [--vocab-size N] [--prompt-text TEXT] [--idle-timeout S] [--request-timeout S]\n"
    "       [--connect-timeout S] [--no-preconnect]\n"
    "       [--dataset-kind shared-prefix [--groups G] [--prefix-len P] [--questions Q]\n"
    "        [--question-len L]]\n"
    "       [--dataset-kind multi-turn [--sessions S] [--turns T] [--turn-len L]\n"
    "        [--think-time S]]\n"
    "       [--dataset FILE --dataset-kind trace [--time-scale F] [--block-tokens N]]\n"
    "       [--reset-cache PATH]";

static const char summary[] =
    "Load-test a running OpenAI-compatible server and print SGLang's result block.\n"
    "Closed loop by default (exactly CONC requests in flight until PROMPTS were sent);\n"
    "with --request-rate, Poisson arrivals on a seeded schedule with at most CONC in\n"
    "flight, and latencies reported from the intended send time too. Prompts are\n"
    "INPUT_LEN random token ids (text words for chat endpoints) unless --prompt-text\n"
    "or --dataset (entries in a seeded order). A LEN is a number, uniform:MIN:MAX or\n"
    "normal:MEAN:SD[:MIN[:MAX]], drawn per request from the seed. Prefix-cache\n"
    "workloads: shared-prefix (groups of questions sharing a system prompt),\n"
    "multi-turn (sessions resending their history; a turn waits for the last answer)\n"
    "and trace (Mooncake-style JSONL replayed at its recorded times).\n"
    "Failed requests are counted by kind and excluded from latencies and throughput.\n"
    "\n"
    "exit status: 0 the run completed (failed requests are data and are reported);\n"
    "2 usage error; 3 the server cannot be reached or every request failed;\n"
    "130 interrupted (the block covers what was measured).";

static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* One socket per request in flight: lift the soft limit on open files
 * (often 1024) to the hard one when the concurrency needs it. */
static void raise_fd_limit(long concurrency)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= (rlim_t)concurrency + 64)
        return;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < (rlim_t)concurrency + 64)
        fprintf(stderr,
                "sweep bench: warning: the open-file limit (%ld) is low for %ld "
                "connections; raise it with ulimit -n\n",
                (long)rl.rlim_cur, concurrency);
}

/*
 * The flags opts.h cannot check: --url must be an http(s) base URL with a
 * host (and no query or fragment, since paths are appended to it), and
 * --endpoint a path. A mistake here is a usage error (2), found before
 * anything is sent, never "cannot reach" (3).
 */
static int check_flags(const char *url, const char *endpoint, struct err *err)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *query = NULL, *fragment = NULL;
    bool ok = u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
              (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0) &&
              curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && *host &&
              (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_NO_PORT ||
               (port && strcmp(port, "0") != 0)) &&
              curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_NO_QUERY &&
              curl_url_get(u, CURLUPART_FRAGMENT, &fragment, 0) == CURLUE_NO_FRAGMENT;
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(query);
    curl_free(fragment);
    curl_url_cleanup(u);
    if (!ok)
        return err_set(err, RN_ERR_USAGE,
                       "option '--url' wants a server base URL such as "
                       "http://127.0.0.1:30000 (http or https, a host, an optional port 1-65535, "
                       "no query), got '%s'",
                       url),
               -1;
    if (endpoint[0] != '/' || strpbrk(endpoint, " \t\r\n?#"))
        return err_set(err, RN_ERR_USAGE,
                       "option '--endpoint' wants a path such as /v1/completions, got '%s'",
                       endpoint),
               -1;
    return 0;
}

/* Up to five failures, on stderr, so a log says why without the JSONL. */
static void print_failures(const struct lg_result *res, const struct lgr_summary *sum)
{
    if (sum->n_failed == 0)
        return;
    fprintf(stderr, "sweep bench: %zu of %zu requests failed", sum->n_failed,
            sum->n_ok + sum->n_failed);
    int shown = 0;
    for (size_t i = res->n_warmup; i < res->n_total && shown < 5; i++) {
        const struct lg_record *r = &res->rec[i];
        if (r->sent && r->fail != LG_OK && r->fail != LG_FAIL_INTERRUPTED) {
            fprintf(stderr, "%s\n  request %zu: %s: %s",
                    shown ? "" : "; the first:", i - res->n_warmup, lg_fail_label(r->fail),
                    r->error ? r->error : "");
            shown++;
        }
    }
    fputc('\n', stderr);
}

static const struct opt_cmd usage = {"sweep", "bench", synopsis, summary, RN_ERR_USAGE};

/*
 * The flow: flags -> GET /v1/models (model id, vocabulary; unreachable is
 * exit 3 before anything runs) -> header lines -> lg_run -> statistics ->
 * the block on stdout, the first failures on stderr, JSONL if asked.
 * The exit status says whether there is anything to read in the block.
 */
int cmd_bench(int argc, char **argv)
{
    struct lg_config cfg = {
        .endpoint = "/v1/completions",
        .input_len = 256,
        .output_len = 128,
        .warmup = 1,
        .idle_timeout_s = 120,
        .request_timeout_s = 1800,
        .connect_timeout_s = 10,
    };
    const char *url = NULL, *model = NULL, *jsonl = NULL;
    const char *in_text = "256", *out_text = "128", *rate_kind = "poisson";
    const char *dataset = NULL, *dataset_kind = NULL;
    struct ds_set ds = {0};
    struct wl wl = {0};
    struct wl_opts wo = {.groups = 8,
                         .prefix_len = 512,
                         .questions = 16,
                         .question_len = 32,
                         .sessions = 8,
                         .turns = 4,
                         .turn_len = 64,
                         .time_scale = 1,
                         .block_tokens = 512};
    const char *reset = NULL;
    long seed = 42, vocab = 0;
    bool no_preconnect = false;
    cfg.concurrency = 0;
    cfg.n_prompts = 0;
    /* the flag table drives parsing, range checks, "did you mean" and --help */
    const struct opt opts[] = {
        {"url", 0, OPT_STR, &url, "URL", "server base URL, e.g. http://127.0.0.1:30000 (required)"},
        {"concurrency", 'c', OPT_LONG, &cfg.concurrency, "CONC",
         "requests in flight (closed loop) or the in-flight cap (open loop) (required)", 1, 100000},
        {"prompts", 'n', OPT_LONG, &cfg.n_prompts, "PROMPTS", "measured requests (required)", 1,
         1e9},
        {"input-len", 0, OPT_STR, &in_text, "LEN",
         "prompt length in tokens, or a distribution (default 256)"},
        {"output-len", 0, OPT_STR, &out_text, "LEN",
         "max_tokens per request, ignore_eos set, or a distribution (default 128)"},
        {"request-rate", 0, OPT_DOUBLE, &cfg.request_rate, "R",
         "open loop: R requests/s arrive (default: closed loop)", 1e-6, 1e9},
        {"rate-kind", 0, OPT_STR, &rate_kind, "KIND",
         "open-loop arrivals: poisson (default) or constant (evenly spaced)"},
        {"dataset", 0, OPT_STR, &dataset, "FILE",
         "prompts from FILE (JSONL or ShareGPT JSON) instead of random ones"},
        {"dataset-kind", 0, OPT_STR, &dataset_kind, "KIND",
         "jsonl or sharegpt (default: sharegpt for *.json, else jsonl); or a generated "
         "workload: shared-prefix, multi-turn, trace (--dataset is the trace)"},
        {"groups", 0, OPT_LONG, &wo.groups, "G", "shared-prefix: system prompts (default 8)", 1,
         1e6},
        {"prefix-len", 0, OPT_LONG, &wo.prefix_len, "P",
         "shared-prefix: tokens per system prompt (default 512)", 0, 1e7},
        {"questions", 0, OPT_LONG, &wo.questions, "Q",
         "shared-prefix: questions per system prompt (default 16)", 1, 1e6},
        {"question-len", 0, OPT_LONG, &wo.question_len, "L",
         "shared-prefix: tokens per question (default 32)", 1, 1e7},
        {"sessions", 0, OPT_LONG, &wo.sessions, "S",
         "multi-turn: conversations; S x T requests are sent, -n is ignored (default 8)", 1, 1e6},
        {"turns", 0, OPT_LONG, &wo.turns, "T", "multi-turn: turns per conversation (default 4)", 1,
         1e4},
        {"turn-len", 0, OPT_LONG, &wo.turn_len, "L",
         "multi-turn: tokens of each new user message (default 64)", 1, 1e7},
        {"think-time", 0, OPT_DOUBLE, &wo.think_s, "S",
         "multi-turn: pause between an answer and the next turn, seconds (default 0)", 0, 1e5},
        {"time-scale", 0, OPT_DOUBLE, &wo.time_scale, "F",
         "trace: recorded gaps are multiplied by F (default 1)", 1e-6, 1e6},
        {"block-tokens", 0, OPT_LONG, &wo.block_tokens, "N",
         "trace: tokens per hash id (default 512, Mooncake's)", 1, 1e6},
        {"reset-cache", 0, OPT_STR, &reset, "PATH",
         "POST PATH before the first request (the server's prefix-cache reset: "
         "/reset_prefix_cache, SGLang /flush_cache)"},
        {"warmup", 0, OPT_LONG, &cfg.warmup, "N",
         "warmup requests at the same concurrency, excluded (default 1)", 0, 1e6},
        {"model", 0, OPT_STR, &model, "NAME", "model field (default: /v1/models data[0].id)"},
        {"endpoint", 0, OPT_STR, &cfg.endpoint, "PATH",
         "completions (/v1/completions, default), chat (/v1/chat/completions) or a path"},
        {"seed", 0, OPT_LONG, &seed, "S", "seed of prompts and arrival times (default 42)"},
        {"jsonl", 0, OPT_STR, &jsonl, "FILE", "write one JSON object per request to FILE"},
        {"vocab-size", 0, OPT_LONG, &vocab, "N",
         "draw prompt ids from [0, N) (default: /v1/models meta.n_vocab, else 1000)", 1, 1e9},
        {"prompt-text", 0, OPT_STR, &cfg.prompt_text, "TEXT",
         "send TEXT as every prompt instead of random ids"},
        {"idle-timeout", 0, OPT_DOUBLE, &cfg.idle_timeout_s, "S",
         "fail a request that receives no byte for S seconds (default 120)", 0.01, 1e6},
        {"request-timeout", 0, OPT_DOUBLE, &cfg.request_timeout_s, "S",
         "fail a request still running after S seconds; 0 = no limit (default 1800)", 0, 1e7},
        {"connect-timeout", 0, OPT_DOUBLE, &cfg.connect_timeout_s, "S",
         "TCP connect limit in seconds (default 10)", 0.01, 1e4},
        {"no-preconnect", 0, OPT_BOOL, &no_preconnect, NULL,
         "do not open the connections (GET /v1/models) before the first request"},
    };
    struct err err;
    int prc = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, NULL, &err);
    if (prc == 1)
        return RN_OK;
    /* opts.h has no "required": the three without a sensible default */
    if (prc == 0 && (!url || !cfg.concurrency || !cfg.n_prompts))
        err_set(&err, RN_ERR_USAGE, "missing required option '%s' (see --help)",
                !url               ? "--url"
                : !cfg.concurrency ? "-c"
                                   : "-n");
    /* the short names of the two endpoints every OpenAI-style server has */
    if (strcmp(cfg.endpoint, "chat") == 0)
        cfg.endpoint = "/v1/chat/completions";
    else if (strcmp(cfg.endpoint, "completions") == 0)
        cfg.endpoint = "/v1/completions";
    if (prc == 0 && !err.code)
        check_flags(url, cfg.endpoint, &err);
    if (prc == 0 && !err.code &&
        len_parse(in_text, "option '--input-len'", &cfg.in_dist, &err, RN_ERR_USAGE) == 0 &&
        len_parse(out_text, "option '--output-len'", &cfg.out_dist, &err, RN_ERR_USAGE) == 0) {
        cfg.input_len = len_mean(&cfg.in_dist);
        cfg.output_len = len_mean(&cfg.out_dist);
        if (strcmp(rate_kind, "poisson") != 0 && strcmp(rate_kind, "constant") != 0)
            err_set(&err, RN_ERR_USAGE, "option '--rate-kind' wants poisson or constant, got '%s'",
                    rate_kind);
        cfg.constant_rate = strcmp(rate_kind, "constant") == 0;
        int kind = dataset_kind ? ds_kind_parse(dataset_kind) : -1;
        wo.kind = dataset_kind ? wl_kind_parse(dataset_kind) : WL_NONE;
        if (wo.kind != WL_NONE) {
            wo.trace_path = dataset;
            if (wo.kind == WL_TRACE && !dataset)
                err_set(&err, RN_ERR_USAGE, "'--dataset-kind trace' needs '--dataset FILE'");
            else if (wo.kind != WL_TRACE && dataset)
                err_set(&err, RN_ERR_USAGE,
                        "'--dataset-kind %s' generates its prompts: drop "
                        "'--dataset'",
                        dataset_kind);
            else if (cfg.prompt_text)
                err_set(&err, RN_ERR_USAGE,
                        "options '--dataset-kind %s' and '--prompt-text' exclude each other",
                        dataset_kind);
            else if (wo.kind == WL_MULTI_TURN && cfg.request_rate > 0)
                err_set(&err, RN_ERR_USAGE,
                        "'--dataset-kind multi-turn' is closed loop (a turn waits for the last "
                        "answer): drop '--request-rate'");
            else if (wl_init(&wl, &wo, strstr(cfg.endpoint, "chat") != NULL, 0, (uint64_t)seed,
                             &err, RN_ERR_USAGE, RN_ERR_USAGE) == 0) {
                cfg.workload = &wl;
                long n = wl_count(&wl);
                if (n > 0 && (wo.kind == WL_MULTI_TURN || n < cfg.n_prompts))
                    cfg.n_prompts = n;
            }
        } else if (dataset_kind && kind != DS_JSONL && kind != DS_SHAREGPT)
            err_set(&err, RN_ERR_USAGE,
                    "option '--dataset-kind' wants jsonl, sharegpt, shared-prefix, multi-turn or "
                    "trace, got '%s'",
                    dataset_kind);
        else if (dataset_kind && !dataset)
            err_set(&err, RN_ERR_USAGE, "option '--dataset-kind' needs '--dataset FILE'");
        else if (cfg.workload || err.code)
            ;
        else if (dataset && cfg.prompt_text)
            err_set(&err, RN_ERR_USAGE,
                    "options '--dataset' and '--prompt-text' exclude each other");
        /* a bad file is a usage error (2): found before anything is sent */
        else if (dataset && ds_load(dataset,
                                    kind >= 0                         ? (enum ds_kind)kind
                                    : str_ends_with(dataset, ".json") ? DS_SHAREGPT
                                                                      : DS_JSONL,
                                    (uint64_t)seed, &ds, &err, RN_ERR_USAGE, RN_ERR_USAGE) == 0)
            cfg.dataset = &ds;
    }
    if (err.code) {
        fprintf(stderr, "sweep bench: %s\n", err.msg);
        return err.code;
    }
    cfg.base_url = url;
    cfg.seed = (uint64_t)seed;

    /* once for the process: lg_probe and lg_run then only take references,
     * so TLS libraries are not set up twice (and not inside the measurement) */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct lg_result res = {0};
    int rc = RN_OK;
    struct lg_server_info info;
    if (lg_probe(url, cfg.connect_timeout_s + 10, &info, &err) != 0) {
        fprintf(stderr, "sweep bench: %s (is the server running?)\n", err.msg);
        rc = err.code;
        goto out;
    }
    /* the flag wins; else what the server lists; else no model field at all
     * (servers with one model accept that) */
    cfg.model = model ? model : info.model[0] ? info.model : NULL;
    cfg.vocab_size = vocab ? vocab : info.n_vocab ? info.n_vocab : DEFAULT_VOCAB;
    wl.vocab = cfg.vocab_size;
    cfg.reset_path = reset;
    bool chat = strstr(cfg.endpoint, "chat") != NULL;
    cfg.preconnect = !no_preconnect;
    cfg.progress = isatty(STDERR_FILENO);
    cfg.progress_file = getenv(LG_PROGRESS_ENV); /* set by sweep run (client/loadgen.h) */
    /* the server's metrics after the warmup, where sweep run reads them
     * (client/loadgen.h): both set by sweep run, or neither */
    cfg.metrics_url = getenv(LG_METRICS_URL_ENV);
    cfg.metrics_file = getenv(LG_METRICS_FILE_ENV);
    raise_fd_limit(cfg.concurrency);
    cfg.stop = &stop_flag;

    /* "#" lines before the block say what was run; no preset pattern
     * matches them (SGLang prints its own set of such lines there too) */
    char *target = http_join_url(url, cfg.endpoint); /* as requested: one '/' between */
    printf("#sweep bench %s: %s\n", BUILD_VERSION, target);
    free(target);
    printf("#model: %s\n", cfg.model ? cfg.model : "(none given; the field is left out)");
    char in_desc[96], out_desc[96];
    len_format(&cfg.in_dist, in_desc, sizeof(in_desc));
    len_format(&cfg.out_dist, out_desc, sizeof(out_desc));
    if (cfg.workload) {
        if (wo.kind == WL_SHARED_PREFIX)
            printf("#prompt: shared-prefix: %ld groups of a %ld-token system prompt x %ld "
                   "questions of %ld tokens (%s)\n",
                   wo.groups, wo.prefix_len, wo.questions, wo.question_len,
                   chat ? "words" : "token ids");
        else if (wo.kind == WL_MULTI_TURN)
            printf("#prompt: multi-turn: %ld sessions x %ld turns, %ld-token user messages, "
                   "think time %g s\n",
                   wo.sessions, wo.turns, wo.turn_len, wo.think_s);
        else
            printf("#prompt: trace %s: %zu requests, times x %g, %ld tokens per hash id\n", dataset,
                   wl.n_rows, wo.time_scale, wo.block_tokens);
    } else if (cfg.dataset) {
        printf("#prompt: dataset %s (%s): %zu entries in a seeded order", ds.path,
               ds_kind_name(ds.kind), ds.n);
        if (ds.n_skipped)
            printf("; %zu skipped without a human turn and a reply (the first: entry %ld)",
                   ds.n_skipped, ds.first_skipped);
        printf("\n");
    } else if (cfg.prompt_text)
        printf("#prompt: fixed text of %zu bytes\n", strlen(cfg.prompt_text));
    else if (chat)
        printf("#prompt: %s random words (chat takes no token ids)\n", in_desc);
    else
        printf("#prompt: %s random token ids from [0, %ld)%s\n", in_desc, cfg.vocab_size,
               vocab          ? ""
               : info.n_vocab ? " (n_vocab from /v1/models)"
                              : " (default range)");
    printf("#load: %ld requests + %ld warmup, %s, concurrency %ld, max_tokens %s%s, seed %ld\n",
           cfg.n_prompts, cfg.warmup,
           cfg.request_rate <= 0 ? "closed loop"
           : cfg.constant_rate   ? "open loop (constant)"
                                 : "open loop (Poisson)",
           cfg.concurrency, out_desc, cfg.dataset ? " (unless the entry gives one)" : "", seed);
    fflush(stdout);

    /* epoll_wait is never restarted after a handler (signal(7)): it returns
     * EINTR and the loop sees the flag at once */
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    double cpu0 = cpu_seconds();
    if (lg_run(&cfg, &res, &err) != 0) {
        fprintf(stderr, "sweep bench: %s\n", err.msg);
        rc = err.code;
        goto out;
    }
    /* said once, before the block: which window the server's deltas cover */
    if (res.metrics_saved > 0)
        printf("#metrics: server metrics saved after the %zu warmup requests: %s\n", res.n_warmup,
               cfg.metrics_file);
    else if (res.metrics_saved < 0)
        fprintf(stderr,
                "sweep bench: warning: %s; the scrape taken before the client started stays, so "
                "this point's server_* columns include the %zu warmup requests\n",
                res.metrics_why, res.n_warmup);
    struct lgr_summary sum;
    lgr_compute(&cfg, &res, &sum);
    sum.cpu_s = cpu0 >= 0 ? cpu_seconds() - cpu0 : -1;
    lgr_print(stdout, &cfg, &sum);
    fflush(stdout);
    print_failures(&res, &sum);
    if (jsonl && lgr_write_jsonl(jsonl, &res, &err) != 0) {
        fprintf(stderr, "sweep bench: %s\n", err.msg);
        rc = err.code;
    }
    if (res.interrupted) {
        fprintf(stderr, "sweep bench: interrupted; the block covers the %zu requests that ended\n",
                sum.n_ok + sum.n_failed);
        rc = RN_ERR_INTERRUPTED;
    } else if (sum.n_ok == 0 && rc == RN_OK) {
        fprintf(stderr, "sweep bench: every request failed (see the failure rows above)\n");
        rc = RN_ERR_ENV;
    }
out:
    lg_result_release(&res);
    ds_release(&ds);
    wl_release(&wl);
    curl_global_cleanup();
    return rc;
}
