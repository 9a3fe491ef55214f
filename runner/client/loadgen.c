/*
 * loadgen: libcurl multi_socket + epoll, one thread. The loop: send what is
 * due (closed loop: refill to C the moment a request ends; open loop: each
 * request at its scheduled time, a timerfd waking us to the nanosecond),
 * wait for sockets, let libcurl read them, hand the bytes with one arrival
 * stamp per wakeup to the stream parser, reap finished transfers, and every
 * 100 ms fail the requests that went idle or ran past their limit.
 */
#include "client/loadgen.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "http.h"
#include "rng.h"
#include "sweep.h"
#include "timeutil.h"
#include "xalloc.h"

#include "client/scrape.h"
#include "client/stream.h"

#define MAX_EVENTS      64                 /* per wakeup: bounds one batch's stamp skew */
#define SWEEP_NS        (100ull * 1000000) /* timeout checks, ns */
#define PROGRESS_NS     (500ull * 1000000) /* progress line refresh, ns */
#define MAX_EVENT_BYTES ((size_t)4 << 20)  /* one SSE line or event, bytes */
#define MAX_CHUNK_TIMES ((size_t)1 << 20)  /* chunk times kept per request */
#define ERRBODY_BYTES   1024               /* kept of a non-200 response body */
#define NO_TIME         UINT64_MAX

/* ---- failure kinds: one table for names and labels ---- */

static const struct {
    const char *name;  /* JSON */
    const char *label; /* report */
} fail_kinds[LG_FAIL_KINDS] = {
    [LG_OK] = {"ok", "ok"},
    [LG_FAIL_CONNECT] = {"connect", "connect error"},
    [LG_FAIL_HTTP] = {"http", "HTTP status"},
    [LG_FAIL_ERROR_EVENT] = {"error_event", "error event"},
    [LG_FAIL_IDLE] = {"idle_timeout", "idle timeout"},
    [LG_FAIL_TRUNCATED] = {"truncated", "truncated stream"},
    [LG_FAIL_PARSE] = {"parse", "parse error"},
    [LG_FAIL_TIMEOUT] = {"timeout", "request timeout"},
    [LG_FAIL_NO_CONTENT] = {"no_content", "no content"},
    [LG_FAIL_TRANSPORT] = {"transport", "transport error"},
    [LG_FAIL_INTERRUPTED] = {"interrupted", "interrupted"},
};

const char *lg_fail_name(enum lg_fail f)
{
    return (unsigned)f < LG_FAIL_KINDS ? fail_kinds[f].name : "unknown";
}

const char *lg_fail_label(enum lg_fail f)
{
    return (unsigned)f < LG_FAIL_KINDS ? fail_kinds[f].label : "unknown";
}

/* ---- prompts and request bodies ---- */

long lg_build_body(const struct lg_config *cfg, size_t index, bool warmup, struct buf *out)
{
    long in, outlen;
    return lg_build_body_len(cfg, index, warmup, out, &in, &outlen);
}

/* Words of text as a JSON string: the chat prompt of n random words. */
static void random_words(struct buf *out, long n, uint64_t *state)
{
    buf_putc(out, '"');
    wl_words(out, n, state);
    buf_putc(out, '"');
}

long lg_build_body_len(const struct lg_config *cfg, size_t index, bool warmup, struct buf *out,
                       long *req_in, long *req_out)
{
    /* each request has its own stream of random numbers, derived from the
     * seed and its index, so prompts do not depend on the order of sending */
    uint64_t state = cfg->seed ^ (0x6a09e667f3bcc909ull * (index + 1));
    if (warmup)
        state ^= 0xbb67ae8584caa73bull;
    /* lengths from a stream of their own: a fixed length draws nothing, and
     * the prompt ids of a request stay what they were without distributions */
    uint64_t len_state = state ^ 0x510e527fade682d1ull;
    rng_next(&state);
    bool chat = cfg->endpoint && strstr(cfg->endpoint, "chat") != NULL;
    long ids = -1;
    long input_len = cfg->in_dist.max > 0 ? len_sample(&cfg->in_dist, &len_state) : cfg->input_len;
    long output_len =
        cfg->out_dist.max > 0 ? len_sample(&cfg->out_dist, &len_state) : cfg->output_len;
    const struct wl *wk = warmup ? NULL : cfg->workload; /* warmup: random prompts */
    const struct ds_entry *e = cfg->dataset && !wk ? ds_pick(cfg->dataset, index, warmup) : NULL;
    if (e && e->output_len > 0)
        output_len = e->output_len; /* the entry's own length wins */
    *req_in = e ? e->prompt_words : cfg->prompt_text ? -1 : input_len;
    *req_out = output_len;

    buf_puts(out, "{");
    if (cfg->model) {
        buf_puts(out, "\"model\":");
        buf_json_str(out, cfg->model, strlen(cfg->model));
        buf_puts(out, ",");
    }
    if (wk) {
        long wl_in = -1;
        ids = wl_prompt(wk, index, out, &wl_in, &output_len);
        *req_in = wl_in;
        *req_out = output_len;
    } else if (chat && e && e->messages) {
        buf_puts(out, "\"messages\":");
        buf_puts(out, e->messages);
    } else if (chat) {
        buf_puts(out, "\"messages\":[{\"role\":\"user\",\"content\":");
        const char *text = e ? e->prompt : cfg->prompt_text;
        if (text)
            buf_json_str(out, text, strlen(text));
        else
            random_words(out, input_len, &state);
        buf_puts(out, "}]");
    } else if (e || cfg->prompt_text) {
        const char *text = e ? e->prompt : cfg->prompt_text;
        buf_puts(out, "\"prompt\":");
        buf_json_str(out, text, strlen(text));
    } else {
        buf_puts(out, "\"prompt\":[");
        uint64_t vocab = cfg->vocab_size > 0 ? (uint64_t)cfg->vocab_size : 1;
        for (long i = 0; i < input_len; i++)
            buf_printf(out, i ? ",%llu" : "%llu", (unsigned long long)wl_uniform(&state, vocab));
        buf_puts(out, "]");
        ids = input_len;
    }
    buf_printf(out,
               ",\"max_tokens\":%ld,\"ignore_eos\":true,\"stream\":true,"
               "\"stream_options\":{\"include_usage\":true},\"temperature\":0}",
               output_len);
    return ids;
}

/* ---- the probe: GET /v1/models ---- */

int lg_probe(const char *base_url, double timeout_s, struct lg_server_info *info, struct err *err)
{
    memset(info, 0, sizeof(*info));
    int rc = -1;
    struct buf body;
    buf_init(&body, (size_t)1 << 20);
    char *url = http_join_url(base_url, "/v1/models");
    char why[CURL_ERROR_SIZE] = "";
    long status =
        http_get(url, (long)(timeout_s * 1000), (long)(timeout_s * 1000), &body, why, sizeof(why));
    if (status == 0) {
        err_set(err, RN_ERR_ENV, "cannot reach the server at '%s': %s", url, why);
        goto out;
    }
    rc = 0;
    if (status != 200)
        goto out; /* reachable, but no model list: the caller uses its flags */
    json_t *j = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
    json_t *first = json_array_get(json_object_get(j, "data"), 0);
    json_t *id = json_object_get(first, "id");
    json_t *vocab = json_object_get(json_object_get(first, "meta"), "n_vocab");
    if (json_is_string(id))
        snprintf(info->model, sizeof(info->model), "%s", json_string_value(id));
    if (json_is_integer(vocab) && json_integer_value(vocab) > 0)
        info->n_vocab = (long)json_integer_value(vocab);
    json_decref(j);
out:
    free(url);
    buf_release(&body);
    return rc;
}

static size_t discard(char *p, size_t size, size_t nmemb, void *ud);

/* POST cfg->reset_path (the server's prefix-cache reset). A failure is a
 * warning: the point still runs, its first requests maybe warm. */
static void reset_cache(const struct lg_config *cfg)
{
    char *url = http_join_url(cfg->base_url, cfg->reset_path);
    CURL *e = curl_easy_init();
    char why[CURL_ERROR_SIZE] = "";
    long status = 0;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, why);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(cfg->connect_timeout_s * 1000) + 30000);
    if (curl_easy_perform(e) == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status > 299)
        fprintf(stderr, "sweep bench: warning: POST %s: %s\n", url,
                status ? "the server refused the cache reset" : why);
    curl_easy_cleanup(e);
    free(url);
}

/* The server's metrics once the warmup has drained (loadgen.h,
 * LG_METRICS_URL_ENV): the "before" scrape of the measured requests. A
 * failure leaves the file as it was (sweep's own scrape, taken before the
 * client started) and is kept in res for the caller to say. */
static void scrape_after_warmup(const struct lg_config *cfg, struct lg_result *res)
{
    struct err e;
    err_init(&e);
    bool unsaved = false;
    if (scrape_fetch_save(cfg->metrics_url, cfg->metrics_file, &unsaved, &e) == 0) {
        res->metrics_saved = 1;
        return;
    }
    res->metrics_saved = -1;
    res->metrics_why =
        xasprintf("%s %s: %s", unsaved ? "cannot save the answer of" : "no metrics from",
                  cfg->metrics_url, e.msg);
}

/* ---- the load loop ---- */

struct lg_ctx;

/* One transfer slot: a reusable easy handle and the state of its request. */
struct slot {
    CURL *easy;
    struct lg_ctx *lg;
    struct stream st;   /* the response being parsed */
    struct buf body;    /* the request body (libcurl reads it in place) */
    struct buf errbody; /* the start of a non-200 response body */
    char errbuf[CURL_ERROR_SIZE];
    size_t rec;            /* index of the record being served */
    long status;           /* HTTP status once the headers arrived, else 0 */
    uint64_t last_byte_ns; /* latest arrival, or the send time before any byte */
    bool busy;
};

struct lg_ctx {
    const struct lg_config *cfg;
    struct lg_result *res;
    CURLM *multi;
    int epfd;             /* epoll over libcurl's sockets and tfd */
    int tfd;              /* timerfd for the next deadline (absolute, monotonic) */
    int progress_fd;      /* cfg->progress_file opened, -1 when none */
    uint64_t curl_due_ns; /* libcurl's timer, NO_TIME when unset */
    uint64_t armed_ns;    /* what tfd is armed for */
    uint64_t now_ns;      /* arrival stamp for bytes read in this wakeup */
    bool stamp_on_read;   /* in a timer action: bytes are stamped when read (on_write) */
    struct slot *slots;   /* n_slots of them */
    size_t n_slots;
    size_t *free_slots; /* stack of idle slot indices */
    size_t n_free;
    struct curl_slist *headers;
    char *url;
    size_t next, end; /* records [next, end) of this phase are still to send */
    size_t limit;     /* in-flight cap of this phase */
    size_t in_flight;
    bool open_loop; /* this phase sends on the schedule */
    bool stopped;   /* the stop flag was seen */
    uint64_t next_sweep_ns, next_progress_ns;
    CURL **pre; /* connection openers, n_pre of them; NULL once done */
    size_t n_pre;
    size_t n_preconnect;  /* connection openers still running */
    size_t n_finished;    /* records finished so far, both phases */
    long tokens_finished; /* output tokens of finished measured requests */
    /* multi-turn (measured phase): a session sends its next turn once the
     * previous one has ended and think_s has passed */
    bool mt;
    size_t n_sess;
    long *sess_turn;      /* next turn to send, per session */
    bool *sess_busy;      /* a turn in flight */
    uint64_t *sess_ready; /* its next turn may go from then on, ns */
    size_t sess_rr;       /* round-robin start */
};

/*
 * libcurl hands over response bytes. Their arrival time is lg->now_ns, taken
 * once when epoll_wait returned, not the time of this call: in a burst of
 * 64 ready sockets, the last one's bytes had arrived as early as the first
 * one's, and stamping each when its turn comes would charge our own
 * processing to the server. Bytes read in a timer action (which also sends
 * new requests) were not announced by epoll and may have arrived during
 * it, after a request it sent: they are stamped when read. A non-200 body
 * is kept (capped) for the message.
 */
static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    struct slot *s = ud;
    size_t n = size * nmemb;
    uint64_t now = s->lg->stamp_on_read ? clock_ns() : s->lg->now_ns;
    s->last_byte_ns = now;
    if (s->status == 0)
        curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &s->status);
    if (s->status != 200) {
        size_t room = ERRBODY_BYTES - s->errbody.len;
        buf_append(&s->errbody, p, n < room ? n : room);
        return n;
    }
    /* returning 0 makes libcurl abort the transfer: the stream has failed */
    return stream_feed(&s->st, p, n, now) == 0 ? n : 0;
}

/* libcurl says which sockets to watch for what: mirror it into epoll
 * (level-triggered, so nothing is lost between calls). A socket may already
 * be closed on REMOVE, and a reused descriptor number may still be
 * registered: both are fine. */
static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct lg_ctx *lg = userp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(lg->epfd, EPOLL_CTL_DEL, fd, NULL); /* may already be closed: fine */
        return 0;
    }
    struct epoll_event ev = {0};
    ev.data.fd = fd;
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    if (epoll_ctl(lg->epfd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT)
        epoll_ctl(lg->epfd, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

/* libcurl wants CURL_SOCKET_TIMEOUT in timeout_ms (-1: no timer). */
static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
    struct lg_ctx *lg = userp;
    lg->curl_due_ns = timeout_ms < 0 ? NO_TIME : clock_ns() + (uint64_t)timeout_ms * 1000000;
    return 0;
}

static void curl_timeout_action(struct lg_ctx *lg)
{
    int running;
    lg->now_ns = clock_ns();
    lg->curl_due_ns = NO_TIME; /* libcurl sets it again through on_timer if needed */
    lg->stamp_on_read = true;
    curl_multi_socket_action(lg->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    lg->stamp_on_read = false;
}

static bool is_measured(const struct lg_ctx *lg, size_t rec)
{
    return rec >= lg->res->n_warmup;
}

/* Close the books on slot s's request: record what happened, free the slot. */
static void finish(struct lg_ctx *lg, struct slot *s, enum lg_fail kind, char *msg, uint64_t t_last)
{
    struct lg_record *r = &lg->res->rec[s->rec];
    curl_multi_remove_handle(lg->multi, s->easy);
    r->t_last_ns = t_last;
    r->http_status = s->status;
    r->fail = kind;
    r->error = msg;
    r->n_chunks = (long)s->st.n_chunks;
    r->t_first_ns = s->st.first_ns;
    r->chunk_ns = stream_take_chunks(&s->st, &r->n_chunk_times);
    r->usage_missing = s->st.usage_completion < 0;
    r->output_tokens = r->usage_missing ? r->n_chunks : s->st.usage_completion;
    if (s->st.usage_prompt >= 0)
        r->prompt_tokens = s->st.usage_prompt;
    r->cached_tokens = s->st.usage_cached;
    s->st.text = NULL;
    if (lg->mt && is_measured(lg, s->rec)) {
        size_t sess = (size_t)wl_session(lg->cfg->workload, s->rec - lg->res->n_warmup);
        lg->sess_busy[sess] = false;
        lg->sess_ready[sess] = t_last + (uint64_t)(lg->cfg->workload->o.think_s * 1e9);
    }
    s->busy = false;
    lg->free_slots[lg->n_free++] = (size_t)(s - lg->slots);
    lg->in_flight--;
    lg->n_finished++;
    if (is_measured(lg, s->rec)) {
        if (kind == LG_OK)
            lg->tokens_finished += r->output_tokens;
        if (t_last > lg->res->t_end_ns)
            lg->res->t_end_ns = t_last;
    }
}

/* Content-Type: text/event-stream (parameters such as charset allowed). */
static bool is_event_stream(CURL *easy)
{
    char *ct = NULL;
    curl_easy_getinfo(easy, CURLINFO_CONTENT_TYPE, &ct);
    return ct && strncasecmp(ct, "text/event-stream", 17) == 0;
}

static bool connect_code(CURLcode c)
{
    return c == CURLE_COULDNT_CONNECT || c == CURLE_COULDNT_RESOLVE_HOST ||
           c == CURLE_COULDNT_RESOLVE_PROXY || c == CURLE_OPERATION_TIMEDOUT;
}

/*
 * A transfer libcurl says is done: decide what it was. The stream's own
 * verdict comes first (an error event or bad JSON made us abort it); then
 * no status at all is a connect or transport failure; a status other than
 * 200 is an HTTP failure; a 200 stream is complete only with [DONE] or a
 * finish_reason, whatever libcurl thought of the connection's end.
 */
static void classify_done(struct lg_ctx *lg, struct slot *s, CURLcode cc)
{
    const char *cerr = s->errbuf[0] ? s->errbuf : curl_easy_strerror(cc);
    if (s->status == 0)
        curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &s->status);
    uint64_t t = s->last_byte_ns;
    if (s->st.failed) {
        enum lg_fail k =
            s->st.fail_kind == STREAM_ERROR_EVENT ? LG_FAIL_ERROR_EVENT : LG_FAIL_PARSE;
        finish(lg, s, k, xstrdup(s->st.msg), t);
    } else if (s->status == 0) {
        finish(lg, s, connect_code(cc) ? LG_FAIL_CONNECT : LG_FAIL_TRANSPORT, xstrdup(cerr),
               lg->now_ns);
    } else if (s->status != 200) {
        char *body = s->errbody.data ? s->errbody.data : "";
        for (char *c = body; *c; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
        finish(lg, s, LG_FAIL_HTTP, xasprintf("HTTP %ld: %.300s", s->status, body), t);
    } else if (s->st.sse.n_events == 0 && !is_event_stream(s->easy)) {
        /* e.g. a server that ignores "stream": one JSON object, no events */
        char *ct = NULL;
        curl_easy_getinfo(s->easy, CURLINFO_CONTENT_TYPE, &ct);
        finish(
            lg, s, LG_FAIL_PARSE,
            xasprintf("the response is not an event stream (Content-Type '%s')", ct ? ct : "none"),
            t);
    } else {
        switch (stream_end(&s->st)) {
        case STREAM_OK: /* complete even if the connection broke after it */
            /* a server cannot make more than max_tokens; a count above it and
             * above the text chunks seen is no measurement (9e11 tok/s) */
            if (s->st.usage_completion > lg->res->rec[s->rec].req_output &&
                s->st.usage_completion > (long)s->st.n_chunks) {
                char *why = xasprintf("usage.completion_tokens %ld is above max_tokens %ld and "
                                      "the %ld text chunks received",
                                      s->st.usage_completion, lg->res->rec[s->rec].req_output,
                                      (long)s->st.n_chunks);
                s->st.usage_completion = -1; /* the record keeps the chunks, not the claim */
                finish(lg, s, LG_FAIL_PARSE, why, t);
            } else
                finish(lg, s, LG_OK, NULL, t);
            break;
        case STREAM_NO_CONTENT:
            finish(lg, s, LG_FAIL_NO_CONTENT, xstrdup("the stream ended without any text"), t);
            break;
        default:
            finish(
                lg, s, LG_FAIL_TRUNCATED,
                cc == CURLE_OK
                    ? xstrdup("the stream ended without [DONE] or finish_reason")
                    : xasprintf("the stream was cut off without [DONE] or finish_reason: %s", cerr),
                t);
        }
    }
}

/* Reap transfers libcurl finished; returns how many. */
static size_t reap(struct lg_ctx *lg)
{
    size_t n = 0;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(lg->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *easy = m->easy_handle;
        CURLcode cc = m->data.result;
        struct slot *s = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&s);
        if (s) {
            classify_done(lg, s, cc);
        } else { /* a connection opener: its connection stays in the cache */
            for (size_t i = 0; i < lg->n_pre; i++)
                if (lg->pre[i] == easy)
                    lg->pre[i] = NULL;
            curl_multi_remove_handle(lg->multi, easy);
            curl_easy_cleanup(easy);
            lg->n_preconnect--;
        }
        n++;
    }
    return n;
}

/* Send record i on a free slot. The body is built before the send time is
 * taken, so building it never counts as latency. */
static void send_request(struct lg_ctx *lg, size_t i)
{
    struct lg_record *r = &lg->res->rec[i];
    struct slot *s = &lg->slots[lg->free_slots[--lg->n_free]];
    bool warm = !is_measured(lg, i);
    size_t index = warm ? i : i - lg->res->n_warmup;
    buf_reset(&s->body);
    buf_reset(&s->errbody);
    r->prompt_tokens =
        lg_build_body_len(lg->cfg, index, warm, &s->body, &r->req_input, &r->req_output);
    r->cached_tokens = -1;
    r->turn = warm || !lg->cfg->workload ? -1 : wl_turn(lg->cfg->workload, index);
    stream_reset(&s->st);
    if (!warm && lg->mt) /* its answer is the next turn's history */
        s->st.text = wl_answer(lg->cfg->workload, index);
    s->rec = i;
    s->status = 0;
    s->errbuf[0] = '\0';
    s->busy = true;
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body.data);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->body.len);
    r->sent = true;
    r->t_sent_ns = clock_ns();
    if (!lg->open_loop)
        r->t_intended_ns = r->t_sent_ns;
    s->last_byte_ns = r->t_sent_ns;
    curl_multi_add_handle(lg->multi, s->easy);
    lg->in_flight++;
    /* start it now, not at the next wakeup: the send time must be the real one */
    curl_timeout_action(lg);
}

/* The record to send now, or SIZE_MAX: the next in order (when due), or
 * in a multi-turn phase the next turn of a session that is ready. */
static size_t pick(struct lg_ctx *lg)
{
    uint64_t now = clock_ns();
    if (!lg->mt || lg->end <= lg->res->n_warmup) {
        if (lg->open_loop && lg->res->rec[lg->next].t_intended_ns > now)
            return SIZE_MAX;
        return lg->next;
    }
    long T = lg->cfg->workload->o.turns;
    for (size_t k = 0; k < lg->n_sess; k++) {
        size_t s = (lg->sess_rr + k) % lg->n_sess;
        if (lg->sess_busy[s] || lg->sess_turn[s] >= T || lg->sess_ready[s] > now)
            continue;
        lg->sess_rr = s + 1;
        lg->sess_busy[s] = true;
        return lg->res->n_warmup + s * (size_t)T + (size_t)lg->sess_turn[s]++;
    }
    return SIZE_MAX;
}

/* Send everything that is due, reap what finished, until neither happens. */
static void dispatch(struct lg_ctx *lg)
{
    for (;;) {
        while (!lg->stopped && lg->next < lg->end && lg->in_flight < lg->limit) {
            size_t i = pick(lg);
            if (i == SIZE_MAX)
                break;
            send_request(lg, i);
            lg->next++; /* counts sends: multi-turn sends out of record order */
        }
        if (reap(lg) == 0)
            break;
    }
}

static void abort_slot(struct lg_ctx *lg, struct slot *s, enum lg_fail kind, char *msg)
{
    finish(lg, s, kind, msg, clock_ns());
}

/* Fail requests that went quiet or ran too long. Our own timers rather than
 * CURLOPT_LOW_SPEED_*: libcurl averages speed over seconds, so a stall would
 * be noticed several seconds late and labelled a generic timeout. */
static void check_deadlines(struct lg_ctx *lg, uint64_t now)
{
    const struct lg_config *cfg = lg->cfg;
    uint64_t idle_ns = (uint64_t)(cfg->idle_timeout_s * 1e9);
    uint64_t total_ns = (uint64_t)(cfg->request_timeout_s * 1e9);
    for (size_t i = 0; i < lg->n_slots; i++) {
        struct slot *s = &lg->slots[i];
        if (!s->busy)
            continue;
        const struct lg_record *r = &lg->res->rec[s->rec];
        if (now - s->last_byte_ns >= idle_ns)
            abort_slot(lg, s, LG_FAIL_IDLE,
                       xasprintf("no byte for %.1f s (idle timeout) after %ld text chunks",
                                 cfg->idle_timeout_s, (long)s->st.n_chunks));
        else if (total_ns && now - r->t_sent_ns >= total_ns)
            abort_slot(
                lg, s, LG_FAIL_TIMEOUT,
                xasprintf("still running after %.1f s (request timeout)", cfg->request_timeout_s));
    }
}

static void cancel_all(struct lg_ctx *lg)
{
    for (size_t i = 0; i < lg->n_slots; i++)
        if (lg->slots[i].busy)
            abort_slot(lg, &lg->slots[i], LG_FAIL_INTERRUPTED,
                       xstrdup("cancelled: the run was interrupted"));
}

static void progress(struct lg_ctx *lg, uint64_t now)
{
    const struct lg_result *res = lg->res;
    long tokens = lg->tokens_finished;
    for (size_t i = 0; i < lg->n_slots; i++)
        if (lg->slots[i].busy && is_measured(lg, lg->slots[i].rec))
            tokens += (long)lg->slots[i].st.n_chunks;
    bool warm = lg->end <= res->n_warmup;
    double secs = warm || !res->t_start_ns ? 0 : (double)(now - res->t_start_ns) / 1e9;
    size_t done = lg->n_finished > res->n_warmup ? lg->n_finished - res->n_warmup : 0;
    if (lg->progress_fd >= 0) {
        /* one fixed-width line rewritten in place (no fsync: a display aid
         * must not cost the measurement a disk flush); loadgen.h has the format */
        char line[PROGRESS_LINE_BYTES + 1];
        int n = snprintf(line, sizeof(line), "%zu %zu %ld %.3f", done, res->n_total - res->n_warmup,
                         tokens, secs);
        if (n > 0 && n < PROGRESS_LINE_BYTES) {
            memset(line + n, ' ', PROGRESS_LINE_BYTES - 1 - (size_t)n);
            line[PROGRESS_LINE_BYTES - 1] = '\n';
            if (pwrite(lg->progress_fd, line, PROGRESS_LINE_BYTES, 0) < 0) {
                close(lg->progress_fd); /* a full disk: no more progress */
                lg->progress_fd = -1;
            }
        }
    }
    if (!lg->cfg->progress)
        return;
    if (warm)
        fprintf(stderr, "\rwarmup: %zu/%zu requests\033[K", lg->n_finished, res->n_warmup);
    else
        fprintf(stderr, "\rbench: %zu/%zu requests, %zu in flight, %.0f tok/s, %.1f s\033[K", done,
                res->n_total - res->n_warmup, lg->in_flight, secs > 0 ? tokens / secs : 0.0, secs);
}

/* Arm tfd for the earliest deadline (if it changed) and wait for events.
 * The deadlines: libcurl's timer, the next scheduled send (open loop, when
 * a slot is free), the timeout sweep and the progress line. A timerfd has
 * nanosecond resolution, where epoll_wait's own timeout has milliseconds. */
static void wait_events(struct lg_ctx *lg)
{
    uint64_t due = lg->curl_due_ns;
    if (lg->next_sweep_ns < due)
        due = lg->next_sweep_ns;
    if ((lg->cfg->progress || lg->progress_fd >= 0) && lg->next_progress_ns < due)
        due = lg->next_progress_ns;
    if (lg->open_loop && lg->next < lg->end && lg->in_flight < lg->limit &&
        lg->res->rec[lg->next].t_intended_ns < due)
        due = lg->res->rec[lg->next].t_intended_ns;
    if (lg->mt && lg->end > lg->res->n_warmup && lg->in_flight < lg->limit)
        for (size_t s = 0; s < lg->n_sess; s++) /* a session's think time ends */
            if (!lg->sess_busy[s] && lg->sess_turn[s] < lg->cfg->workload->o.turns &&
                lg->sess_ready[s] < due)
                due = lg->sess_ready[s];
    if (due != lg->armed_ns) {
        struct itimerspec its = {0};
        uint64_t at = due ? due : 1; /* 0 would disarm */
        its.it_value.tv_sec = (time_t)(at / 1000000000ull);
        its.it_value.tv_nsec = (long)(at % 1000000000ull);
        timerfd_settime(lg->tfd, TFD_TIMER_ABSTIME, &its, NULL);
        lg->armed_ns = due;
    }
    struct epoll_event evs[MAX_EVENTS];
    int n = epoll_wait(lg->epfd, evs, MAX_EVENTS, 1000);
    lg->now_ns = clock_ns();
    int running;
    for (int i = 0; i < n; i++) {
        int fd = evs[i].data.fd;
        if (fd == lg->tfd) {
            uint64_t expirations;
            if (read(lg->tfd, &expirations, sizeof(expirations)) < 0)
                continue;               /* EAGAIN: already consumed */
            lg->armed_ns = NO_TIME - 1; /* fired: re-arm next time */
            continue;
        }
        int mask = ((evs[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                   ((evs[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                   ((evs[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
        curl_multi_socket_action(lg->multi, fd, mask, &running);
    }
    if (clock_ns() >= lg->curl_due_ns)
        curl_timeout_action(lg);
}

static size_t discard(char *p, size_t size, size_t nmemb, void *ud)
{
    return size * nmemb;
}

/*
 * Open k keep-alive connections before anything is measured, with k
 * concurrent GET /v1/models, and wait for them: the requests then find warm
 * connections in libcurl's cache, so no TTFT contains a TCP handshake (or a
 * server's accept-and-spawn). Failures are ignored here: a server that
 * cannot be reached shows up as connect errors of the real requests.
 */
static void preconnect(struct lg_ctx *lg, size_t k)
{
    const struct lg_config *cfg = lg->cfg;
    char *url = http_join_url(cfg->base_url, "/v1/models");
    lg->pre = xcalloc(k ? k : 1, sizeof(*lg->pre));
    for (size_t i = 0; i < k; i++) {
        CURL *e = lg->pre[lg->n_pre++] = curl_easy_init();
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_PROXY, "");
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(cfg->connect_timeout_s * 1000));
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(cfg->connect_timeout_s * 1000) + 5000);
        curl_multi_add_handle(lg->multi, e);
        lg->n_preconnect++;
    }
    free(url);
    curl_timeout_action(lg);
    while (lg->n_preconnect > 0 && !(cfg->stop && *cfg->stop)) {
        reap(lg);
        if (lg->n_preconnect == 0)
            break;
        wait_events(lg);
        uint64_t now = clock_ns();
        if (now >= lg->next_sweep_ns) {
            curl_timeout_action(lg);
            lg->next_sweep_ns = now + SWEEP_NS;
        }
    }
}

/* Run records [first, end) with at most limit in flight until all ended. */
static void run_phase(struct lg_ctx *lg, size_t first, size_t end, size_t limit, bool open_loop)
{
    lg->next = first;
    lg->end = end;
    lg->limit = limit;
    lg->open_loop = open_loop;
    for (;;) {
        if (lg->cfg->stop && *lg->cfg->stop && !lg->stopped) {
            lg->stopped = true;
            lg->res->interrupted = true;
            cancel_all(lg);
        }
        dispatch(lg);
        if (lg->in_flight == 0 && (lg->next >= lg->end || lg->stopped))
            break;
        wait_events(lg);
        uint64_t now = clock_ns();
        if (now >= lg->next_sweep_ns) {
            check_deadlines(lg, now);
            curl_timeout_action(lg); /* a safety net should a libcurl timer be lost */
            lg->next_sweep_ns = now + SWEEP_NS;
        }
        if ((lg->cfg->progress || lg->progress_fd >= 0) && now >= lg->next_progress_ns) {
            progress(lg, now);
            lg->next_progress_ns = now + PROGRESS_NS;
        }
    }
}

static void setup_slot(struct lg_ctx *lg, struct slot *s)
{
    const struct lg_config *cfg = lg->cfg;
    s->lg = lg;
    s->easy = curl_easy_init();
    stream_init(&s->st, MAX_EVENT_BYTES, MAX_CHUNK_TIMES);
    buf_init(&s->body, BUF_MAX_DEFAULT);
    buf_init(&s->errbody, ERRBODY_BYTES);
    CURL *e = s->easy;
    curl_easy_setopt(e, CURLOPT_URL, lg->url);
    curl_easy_setopt(e, CURLOPT_PROXY, ""); /* never measure through a proxy */
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, lg->headers);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(e, CURLOPT_PRIVATE, s);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(cfg->connect_timeout_s * 1000));
}

void lg_result_release(struct lg_result *res)
{
    for (size_t i = 0; i < res->n_total; i++) {
        free(res->rec[i].chunk_ns);
        free(res->rec[i].error);
    }
    free(res->rec);
    free(res->metrics_why);
    memset(res, 0, sizeof(*res));
}

/* The schedule: request j is due at t0 + offset_j, the first at t0, with
 * gaps of exactly 1/rate (constant_rate) or, by default (Poisson),
 * exponential gaps of mean 1/rate from its own seeded stream. Fixed up
 * front, so a late client cannot stretch it: lateness shows as queue delay. */
static void make_schedule(const struct lg_config *cfg, struct lg_result *res, uint64_t t0)
{
    if (cfg->workload && cfg->workload->o.kind == WL_TRACE) { /* the recorded times */
        for (size_t j = res->n_warmup; j < res->n_total; j++)
            res->rec[j].t_intended_ns = t0 + wl_offset_ns(cfg->workload, j - res->n_warmup);
        return;
    }
    uint64_t state = cfg->seed ^ 0x3c6ef372fe94f82bull;
    double at_s = 0;
    for (size_t j = res->n_warmup; j < res->n_total; j++) {
        if (j > res->n_warmup)
            at_s += cfg->constant_rate ? 1.0 / cfg->request_rate
                                       : -log(1.0 - rng_unit(&state)) / cfg->request_rate;
        res->rec[j].t_intended_ns = t0 + (uint64_t)(at_s * 1e9);
    }
}

int lg_run(const struct lg_config *cfg, struct lg_result *res, struct err *err)
{
    memset(res, 0, sizeof(*res));
    res->n_warmup = (size_t)cfg->warmup;
    res->n_total = res->n_warmup + (size_t)cfg->n_prompts;
    res->rec = xcalloc(res->n_total ? res->n_total : 1, sizeof(*res->rec));
    res->open_loop = cfg->request_rate > 0 || (cfg->workload && cfg->workload->o.kind == WL_TRACE);
    for (size_t i = 0; i < res->n_total; i++) {
        res->rec[i].warmup = i < res->n_warmup;
        res->rec[i].cached_tokens = res->rec[i].turn = -1;
    }

    int rc = -1;
    struct lg_ctx lg = {0};
    lg.cfg = cfg;
    lg.res = res;
    lg.curl_due_ns = NO_TIME;
    lg.armed_ns = NO_TIME;
    if (cfg->workload && cfg->workload->o.kind == WL_MULTI_TURN) {
        lg.mt = true;
        lg.n_sess = (size_t)cfg->workload->o.sessions;
        lg.sess_turn = xcalloc(lg.n_sess, sizeof(*lg.sess_turn));
        lg.sess_busy = xcalloc(lg.n_sess, sizeof(*lg.sess_busy));
        lg.sess_ready = xcalloc(lg.n_sess, sizeof(*lg.sess_ready));
    }
    lg.progress_fd = -1;
    if (cfg->progress_file && *cfg->progress_file) /* unopenable: no progress, no error */
        lg.progress_fd = open(cfg->progress_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    lg.epfd = epoll_create1(EPOLL_CLOEXEC);
    lg.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (lg.epfd < 0 || lg.tfd < 0) {
        err_set(err, RN_ERR_ENV, "cannot create the event loop: %s", strerror(errno));
        goto out_fds;
    }
    struct epoll_event tev = {.events = EPOLLIN, .data.fd = lg.tfd};
    epoll_ctl(lg.epfd, EPOLL_CTL_ADD, lg.tfd, &tev);

    curl_global_init(CURL_GLOBAL_DEFAULT);
    lg.multi = curl_multi_init();
    size_t c = (size_t)(cfg->concurrency > 0 ? cfg->concurrency : 1);
    size_t need =
        res->n_total - res->n_warmup > res->n_warmup ? res->n_total - res->n_warmup : res->n_warmup;
    lg.n_slots = c < need ? c : need;
    if (lg.n_slots == 0)
        lg.n_slots = 1;
    curl_multi_setopt(lg.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(lg.multi, CURLMOPT_SOCKETDATA, &lg);
    curl_multi_setopt(lg.multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(lg.multi, CURLMOPT_TIMERDATA, &lg);
    curl_multi_setopt(lg.multi, CURLMOPT_MAXCONNECTS, (long)lg.n_slots + 4);
    lg.url = http_join_url(cfg->base_url, cfg->endpoint);
    lg.headers = curl_slist_append(NULL, "Content-Type: application/json");
    lg.headers = curl_slist_append(lg.headers, "Accept: text/event-stream");
    lg.headers = curl_slist_append(lg.headers, "Expect:"); /* no 100-continue round trip */
    lg.slots = xcalloc(lg.n_slots, sizeof(*lg.slots));
    lg.free_slots = xcalloc(lg.n_slots, sizeof(*lg.free_slots));
    for (size_t i = 0; i < lg.n_slots; i++) {
        setup_slot(&lg, &lg.slots[i]);
        lg.free_slots[lg.n_free++] = lg.n_slots - 1 - i;
    }

    uint64_t now = clock_ns();
    lg.next_sweep_ns = now + SWEEP_NS;
    lg.next_progress_ns = now + PROGRESS_NS;
    if (cfg->preconnect)
        preconnect(&lg, lg.n_slots);
    if (cfg->reset_path) /* a point must not start warm from the last one's prompts */
        reset_cache(cfg);
    if (res->n_warmup)
        run_phase(&lg, 0, res->n_warmup, c < res->n_warmup ? c : res->n_warmup, false);
    /* nothing is in flight now, and the servers we know count a request's
     * steps and tokens before its last byte goes out: a scrape here holds
     * all of the warmup and none of the measured requests */
    if (res->n_warmup && !lg.stopped && cfg->metrics_url && *cfg->metrics_url &&
        cfg->metrics_file && *cfg->metrics_file)
        scrape_after_warmup(cfg, res);
    /* the measured phase starts the moment warmup has drained (and the
     * scrape, a few ms, is done): no idle gap */
    res->t_start_ns = clock_ns();
    res->t_end_ns = res->t_start_ns;
    if (res->open_loop)
        make_schedule(cfg, res, res->t_start_ns);
    if (!lg.stopped)
        run_phase(&lg, res->n_warmup, res->n_total, c, res->open_loop);
    if (cfg->progress || lg.progress_fd >= 0)
        progress(&lg, clock_ns());
    if (cfg->progress)
        fputc('\n', stderr);
    rc = 0;

    for (size_t i = 0; i < lg.n_slots; i++) {
        curl_multi_remove_handle(lg.multi, lg.slots[i].easy);
        curl_easy_cleanup(lg.slots[i].easy);
        stream_release(&lg.slots[i].st);
        buf_release(&lg.slots[i].body);
        buf_release(&lg.slots[i].errbody);
    }
    free(lg.slots);
    free(lg.free_slots);
    for (size_t i = 0; i < lg.n_pre; i++) /* openers still running after an interrupt */
        if (lg.pre[i]) {
            curl_multi_remove_handle(lg.multi, lg.pre[i]);
            curl_easy_cleanup(lg.pre[i]);
        }
    free(lg.pre);
    curl_multi_cleanup(lg.multi);
    curl_slist_free_all(lg.headers);
    free(lg.url);
    curl_global_cleanup();
out_fds:
    free(lg.sess_turn);
    free(lg.sess_busy);
    free(lg.sess_ready);
    if (lg.tfd >= 0)
        close(lg.tfd);
    if (lg.progress_fd >= 0)
        close(lg.progress_fd);
    if (lg.epfd >= 0)
        close(lg.epfd);
    return rc;
}
