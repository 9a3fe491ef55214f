/*
 * fakeserver: the test double for sweep. A real HTTP server on loopback
 * (libmicrohttpd, one thread per connection) that streams OpenAI-style SSE
 * with exact, documented timing, so tests know the truth, plus switches
 * that inject the faults real servers show. The timing model and every
 * flag are described in tests/fakeserver/README.md and in --help.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "opts.h"
#include "timeutil.h"
#include "xalloc.h"

#define BODY_MAX ((size_t)8 << 20)

/* Command-line settings; times in ms. */
struct fs_config {
    const char *host;
    long port;
    double prefill_ms, step_a_ms, step_b_ms;
    bool prefill_in_steps;       /* prompts run inside the decode steps */
    double prefill_ms_per_token; /* with prefill_in_steps: step cost per prompt token */
    long max_batch;              /* 0 = no cap */
    const char *model;
    long vocab;
    long die_after, die_signal;
    double die_delay_ms;
    long exit_at_start;
    bool oom_at_start;
    double unavailable_s, startup_delay_ms;
    double error_rate;
    bool ignore_sigterm;
    long fork_helpers;
    long stall_request, error_after, close_after;
    bool no_usage, role_chunk_first, split_utf8, print_argv;
    bool no_metrics;   /* GET /metrics answers 404 */
    long metrics_fail; /* the Nth GET /metrics answers 500 (0: none) */
    long metrics_pad;  /* bytes of comment lines added to /metrics */
    double usage_delay_ms;
    const char *pid_file;
    const char *log_requests; /* append {"t_ms","url","body"} per POST here */
};

enum st_state {
    ST_QUEUED,   /* waiting for a batch slot */
    ST_PREFILL,  /* admitted; first token due at prefill_end (or, --prefill-in-steps, at the end
                    of the next step, which runs its prompt) */
    ST_STEPFILL, /* --prefill-in-steps: its prompt runs in the current step */
    ST_JOINING,  /* first token sent; joins the decode loop at the next step start */
    ST_DECODE,   /* in the decode loop */
    ST_STALLED,  /* fault: no more tokens ever */
    ST_DONE,     /* all tokens produced (or a fault ended it) */
};

/* One completion request. Guarded by server.mu, except the fields that only
 * the connection thread touches (out, sent_*, times). */
struct stream {
    struct stream *next; /* all streams, newest first */
    long index;          /* 1-based completion request number */
    bool chat, streaming, include_usage;
    long max_tokens; /* tokens to produce */
    long prompt_tokens;
    enum st_state state;
    double admit_ms; /* arrival (admission ask) time */
    double prefill_end_ms;
    long ready;    /* tokens produced so far by the scheduler */
    long sent;     /* tokens handed to the socket */
    bool finished; /* the reader returned end-of-stream */
    bool role_sent, usage_sent, done_sent;
    double first_ms, last_ms; /* when the first / last token was handed over */
    pthread_cond_t cond;      /* signalled when ready grows or the stream ends */
    struct buf out;           /* bytes formatted but not yet returned to MHD */
    size_t out_pos;
    int split_phase; /* --split-utf8: 1 while the second half is pending */
};

struct sample {
    double ttft_ms, tpot_ms, e2e_ms;
};

struct server {
    struct fs_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t sched_cond; /* wakes the scheduler */
    struct stream *streams;    /* every stream not yet freed */
    long n_requests;           /* completion requests seen */
    long n_metrics;            /* GET /metrics seen */
    long n_admitted_active;    /* admitted and not done (for --max-batch) */
    double start_ms;
    double die_at_ms; /* 0 = not scheduled */
    FILE *log;        /* --log-requests, under mu */
    /* statistics since the last reset */
    struct sample *samples;
    size_t n_samples, cap_samples;
    long stat_requests, stat_steps;
    double stat_batch_sum;
    /* /metrics counters since start, in fp4serve's names (exact: step
     * seconds are the model's durations, not the clock) */
    struct {
        double steps, step_s, step_seqs, decode_tokens, prefill_tokens;
        double prompt_tokens, generation_tokens;
        double do_steps, do_step_s, do_step_seqs; /* steps that ran no prompt */
        double queue_s, queue_n;                  /* admission wait, per request */
    } m;
};

/* Request-body accumulation, attached to the MHD connection. */
struct req_ctx {
    struct buf body;
    struct stream *stream; /* set once a completion request is set up */
};

/* ---------------------------------------------------------------- timing */

static void abs_deadline(double when_ms, struct timespec *ts)
{
    double now = clock_ms();
    double wait = when_ms - now;
    if (wait < 0)
        wait = 0;
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    long long ns = (long long)mono.tv_nsec + (long long)(wait * 1e6);
    ts->tv_sec = mono.tv_sec + (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
}

static void cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

static bool available(const struct server *s)
{
    return clock_ms() - s->start_ms >= s->cfg.unavailable_s * 1000.0;
}

/* ------------------------------------------------------------- scheduler */

/* Admit queued streams while batch slots are free (FIFO: oldest first). */
static void admit_queued(struct server *s, double now)
{
    for (;;) {
        if (s->cfg.max_batch > 0 && s->n_admitted_active >= s->cfg.max_batch)
            return;
        struct stream *oldest = NULL;
        for (struct stream *st = s->streams; st; st = st->next)
            if (st->state == ST_QUEUED && (!oldest || st->index < oldest->index))
                oldest = st;
        if (!oldest)
            return;
        oldest->state = ST_PREFILL;
        oldest->prefill_end_ms = s->cfg.prefill_in_steps ? 1e300 : now + s->cfg.prefill_ms;
        s->n_admitted_active++;
        s->m.queue_s += (now - oldest->admit_ms) / 1000.0;
        s->m.queue_n += 1;
        s->m.prompt_tokens += (double)oldest->prompt_tokens;
    }
}

static void finish_stream(struct server *s, struct stream *st)
{
    st->state = ST_DONE;
    s->n_admitted_active--;
    pthread_cond_signal(&st->cond);
}

/* Produce token number ready+1 for st and apply the token-count faults. */
static void produce_token(struct server *s, struct stream *st)
{
    st->ready++;
    s->m.generation_tokens += 1;
    bool fault_end = (s->cfg.error_after > 0 && st->ready >= s->cfg.error_after) ||
                     (s->cfg.close_after > 0 && st->ready >= s->cfg.close_after);
    if (st->ready >= st->max_tokens || fault_end)
        finish_stream(s, st);
    pthread_cond_signal(&st->cond);
}

/*
 * The decode loop. Prefill completions happen at their own deadlines; a
 * step that starts with N decoding streams lasts A + B*N ms and gives each
 * of them one token at its end; steps run back to back while any stream
 * decodes.
 */
static void *scheduler(void *arg)
{
    struct server *s = arg;
    bool in_step = false;
    double step_end = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        double now = clock_ms();
        if (s->die_at_ms > 0 && now >= s->die_at_ms) {
            if (s->cfg.die_signal > 0)
                raise((int)s->cfg.die_signal);
            _exit(1);
        }
        admit_queued(s, now);
        /* prefill completions: the first token */
        for (struct stream *st = s->streams; st; st = st->next)
            if (st->state == ST_PREFILL && now >= st->prefill_end_ms) {
                st->state = ST_JOINING;
                s->m.prefill_tokens += (double)st->prompt_tokens;
                produce_token(s, st);
                if (st->state != ST_DONE && s->cfg.stall_request == st->index)
                    st->state = ST_STALLED;
            }
        /* step end: one token for every participant */
        bool just_ended = false;
        if (in_step && now >= step_end) {
            for (struct stream *st = s->streams; st; st = st->next)
                if (st->state == ST_DECODE)
                    produce_token(s, st);
            /* --prefill-in-steps: the prompts of this step give their first token */
            for (struct stream *st = s->streams; st; st = st->next)
                if (st->state == ST_STEPFILL) {
                    st->state = ST_JOINING;
                    produce_token(s, st);
                    if (st->state != ST_DONE && s->cfg.stall_request == st->index)
                        st->state = ST_STALLED;
                }
            in_step = false;
            just_ended = true;
        }
        if (!in_step) {
            long n = 0, n_fill = 0;
            double prompt = 0;
            struct stream *fill = NULL; /* --prefill-in-steps: one prompt per step, oldest first */
            for (struct stream *st = s->streams; st; st = st->next) {
                if (st->state == ST_JOINING)
                    st->state = ST_DECODE;
                if (st->state == ST_DECODE)
                    n++;
                if (s->cfg.prefill_in_steps && st->state == ST_PREFILL &&
                    (!fill || st->index < fill->index))
                    fill = st;
            }
            if (fill) {
                fill->state = ST_STEPFILL;
                prompt = (double)fill->prompt_tokens;
                n_fill = 1;
            }
            if (n > 0 || n_fill > 0) {
                in_step = true;
                /* back to back: the next step starts where the last one ended,
                 * even if this thread woke late, so lateness never accumulates */
                double start = just_ended ? step_end : now;
                double dur = s->cfg.step_a_ms + s->cfg.step_b_ms * (double)n +
                             s->cfg.prefill_ms_per_token * prompt;
                step_end = start + dur;
                s->stat_steps++;
                s->stat_batch_sum += (double)n;
                s->m.steps += 1;
                s->m.step_s += dur / 1000.0;
                s->m.step_seqs += (double)(n + n_fill);
                s->m.decode_tokens += (double)n;
                s->m.prefill_tokens += prompt;
                if (n_fill == 0) {
                    s->m.do_steps += 1;
                    s->m.do_step_s += dur / 1000.0;
                    s->m.do_step_seqs += (double)n;
                }
            }
        }
        /* sleep until the next event */
        double next = 1e300;
        if (in_step)
            next = step_end;
        for (struct stream *st = s->streams; st; st = st->next)
            if (st->state == ST_PREFILL && st->prefill_end_ms < next)
                next = st->prefill_end_ms;
        if (s->die_at_ms > 0 && s->die_at_ms < next)
            next = s->die_at_ms;
        if (next < 1e299) {
            struct timespec ts;
            abs_deadline(next, &ts);
            pthread_cond_timedwait(&s->sched_cond, &s->mu, &ts);
        } else {
            pthread_cond_wait(&s->sched_cond, &s->mu);
        }
    }
    return NULL;
}

/* -------------------------------------------------------------- emitting */

static void emit_chunk(struct stream *st, const struct fs_config *cfg, const char *text,
                       const char *finish, bool role_only)
{
    struct buf *b = &st->out;
    if (st->chat) {
        buf_puts(b, "data: {\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\","
                    "\"model\":");
        buf_json_str(b, cfg->model, strlen(cfg->model));
        buf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{");
        if (role_only)
            buf_puts(b, "\"role\":\"assistant\",\"content\":\"\"");
        else
            buf_printf(b, "\"content\":\"%s\"", text);
    } else {
        buf_puts(b, "data: {\"id\":\"cmpl-fake\",\"object\":\"text_completion\",\"model\":");
        buf_json_str(b, cfg->model, strlen(cfg->model));
        buf_printf(b, ",\"choices\":[{\"index\":0,\"text\":\"%s\"", text);
    }
    if (st->chat)
        buf_putc(b, '}');
    if (finish)
        buf_printf(b, ",\"finish_reason\":\"%s\"}]}\n\n", finish);
    else
        buf_puts(b, ",\"finish_reason\":null}]}\n\n");
}

static void emit_usage(struct stream *st, long completion_tokens)
{
    buf_printf(&st->out,
               "data: {\"id\":\"cmpl-fake\",\"object\":\"%s\",\"choices\":[],\"usage\":"
               "{\"prompt_tokens\":%ld,\"completion_tokens\":%ld,\"total_tokens\":%ld}}\n\n",
               st->chat ? "chat.completion.chunk" : "text_completion", st->prompt_tokens,
               completion_tokens, st->prompt_tokens + completion_tokens);
}

static void record_sample(struct server *s, struct stream *st)
{
    struct sample smp = {st->first_ms - st->admit_ms, NAN, st->last_ms - st->admit_ms};
    if (st->sent > 1)
        smp.tpot_ms = (st->last_ms - st->first_ms) / (double)(st->sent - 1);
    XGROW(s->samples, s->cap_samples, s->n_samples + 1);
    s->samples[s->n_samples++] = smp;
}

static const char *token_text(const struct fs_config *cfg)
{
    return cfg->split_utf8 ? "\xc3\xa9" : " tok";
}

/*
 * MHD content reader for a streaming response: blocks (thread per
 * connection) until the scheduler produced a token or the stream ended,
 * formats the events and hands them over.
 */
static ssize_t stream_reader(void *cls, uint64_t pos, char *out, size_t max)
{
    struct server *s = ((void **)cls)[0];
    struct stream *st = ((void **)cls)[1];
    const struct fs_config *cfg = &s->cfg;
    (void)pos;

    if (st->out_pos < st->out.len) {
        /* --split-utf8: hand over the rest of a split event after 1 ms */
        if (st->split_phase) {
            sleep_ms(1, NULL);
            st->split_phase = 0;
        }
        goto hand_over;
    }
    buf_reset(&st->out);
    st->out_pos = 0;
    if (st->finished)
        return MHD_CONTENT_READER_END_OF_STREAM;

    pthread_mutex_lock(&s->mu);
    if (cfg->role_chunk_first && st->chat && !st->role_sent) {
        st->role_sent = true;
        pthread_mutex_unlock(&s->mu);
        emit_chunk(st, cfg, NULL, NULL, true);
        goto hand_over;
    }
    while (st->ready <= st->sent && st->state != ST_DONE)
        pthread_cond_wait(&st->cond, &s->mu);
    long ready = st->ready;
    bool done = st->state == ST_DONE;
    pthread_mutex_unlock(&s->mu);

    if (ready > st->sent) {
        /* one event per token produced since the last call */
        while (st->sent < ready) {
            st->sent++;
            double now = clock_ms();
            if (st->sent == 1)
                st->first_ms = now;
            st->last_ms = now;
            bool last = st->sent == st->max_tokens;
            bool fault = (cfg->error_after > 0 && st->sent >= cfg->error_after) ||
                         (cfg->close_after > 0 && st->sent >= cfg->close_after);
            emit_chunk(st, cfg, token_text(cfg), last && !fault ? "length" : NULL, false);
        }
        if (cfg->split_utf8)
            st->split_phase = 1;
        goto hand_over;
    }
    if (!done)
        goto hand_over;

    /* the stream ended: faults, usage, [DONE] */
    if (cfg->close_after > 0 && st->sent >= cfg->close_after)
        return MHD_CONTENT_READER_END_WITH_ERROR; /* abrupt close, no [DONE] */
    if (cfg->error_after > 0 && st->sent >= cfg->error_after) {
        buf_puts(&st->out, "data: {\"error\":{\"message\":\"injected failure after "
                           "--error-after tokens\",\"type\":\"server_error\",\"code\":500}}\n\n"
                           "data: [DONE]\n\n");
    } else {
        if (st->include_usage && !cfg->no_usage) {
            if (cfg->usage_delay_ms > 0)
                sleep_ms(cfg->usage_delay_ms, NULL);
            emit_usage(st, st->sent);
        }
        buf_puts(&st->out, "data: [DONE]\n\n");
    }
    pthread_mutex_lock(&s->mu);
    record_sample(s, st);
    pthread_mutex_unlock(&s->mu);
    st->finished = true;

hand_over:;
    size_t left = st->out.len - st->out_pos;
    if (st->split_phase && left > 1) {
        /* split inside the first multi-byte character of the event */
        const char *p = memchr(st->out.data + st->out_pos, '\xc3', left);
        if (p) {
            size_t first = (size_t)(p - (st->out.data + st->out_pos)) + 1;
            if (first > max)
                first = max;
            memcpy(out, st->out.data + st->out_pos, first);
            st->out_pos += first;
            return (ssize_t)first;
        }
        st->split_phase = 0;
    }
    if (left > max)
        left = max;
    memcpy(out, st->out.data + st->out_pos, left);
    st->out_pos += left;
    return (ssize_t)left;
}

/* Non-streaming: wait for every token, then one JSON object. */
static void wait_complete(struct server *s, struct stream *st)
{
    pthread_mutex_lock(&s->mu);
    while (st->state != ST_DONE && st->state != ST_STALLED)
        pthread_cond_wait(&st->cond, &s->mu);
    while (st->state == ST_STALLED) /* a stalled request never answers */
        pthread_cond_wait(&st->cond, &s->mu);
    st->sent = st->ready;
    st->first_ms = st->last_ms = clock_ms();
    record_sample(s, st);
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------ HTTP */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *ctype,
                                 const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", ctype);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *type,
                                  const char *msg)
{
    struct buf b;
    buf_init(&b, 4096);
    buf_printf(&b, "{\"error\":{\"code\":%u,\"type\":\"%s\",\"message\":", status, type);
    buf_json_str(&b, msg, strlen(msg));
    buf_puts(&b, "}}");
    enum MHD_Result rc = send_text(c, status, "application/json", b.data, b.len);
    buf_release(&b);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Percentile p (0..100) of sorted v[0..n) with linear interpolation. */
static double percentile(const double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(rank), hi = (size_t)ceil(rank);
    return v[lo] + (v[hi] - v[lo]) * (rank - (double)lo);
}

static void stats_series(struct buf *b, const char *name, const double *v, size_t n)
{
    double *sorted = xmalloc((n ? n : 1) * sizeof(double));
    size_t m = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i])) {
            sorted[m++] = v[i];
            sum += v[i];
        }
    qsort(sorted, m, sizeof(double), cmp_double);
    static const struct {
        const char *label;
        double p;
    } stats[] = {{"median", 50}, {"p90", 90}, {"p99", 99}};
    buf_printf(b, ",\"mean_%s_ms\":", name);
    buf_json_num(b, m ? sum / (double)m : NAN);
    for (size_t k = 0; k < sizeof(stats) / sizeof(stats[0]); k++) {
        buf_printf(b, ",\"%s_%s_ms\":", stats[k].label, name);
        buf_json_num(b, percentile(sorted, m, stats[k].p));
    }
    free(sorted);
}

static enum MHD_Result handle_stats(struct server *s, struct MHD_Connection *c)
{
    struct buf b;
    buf_init(&b, BODY_MAX);
    pthread_mutex_lock(&s->mu);
    size_t n = s->n_samples;
    double *v[3];
    for (int k = 0; k < 3; k++)
        v[k] = xmalloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        v[0][i] = s->samples[i].ttft_ms;
        v[1][i] = s->samples[i].tpot_ms;
        v[2][i] = s->samples[i].e2e_ms;
    }
    buf_printf(&b, "{\"requests\":%ld,\"completed\":%zu,\"steps\":%ld,\"mean_batch\":",
               s->stat_requests, n, s->stat_steps);
    buf_json_num(&b, s->stat_steps ? s->stat_batch_sum / (double)s->stat_steps : 0);
    pthread_mutex_unlock(&s->mu);
    stats_series(&b, "ttft", v[0], n);
    stats_series(&b, "tpot", v[1], n);
    stats_series(&b, "e2e", v[2], n);
    static const char *arrays[] = {"ttft_ms", "tpot_ms"};
    for (int k = 0; k < 2; k++) {
        buf_printf(&b, ",\"%s\":[", arrays[k]);
        for (size_t i = 0; i < n; i++) {
            if (i)
                buf_putc(&b, ',');
            buf_json_num(&b, v[k][i]);
        }
        buf_putc(&b, ']');
    }
    buf_puts(&b, "}\n");
    for (int k = 0; k < 3; k++)
        free(v[k]);
    enum MHD_Result rc = send_text(c, 200, "application/json", b.data, b.len);
    buf_release(&b);
    return rc;
}

static long count_prompt_tokens(json_t *prompt)
{
    if (json_is_array(prompt))
        return (long)json_array_size(prompt);
    if (json_is_string(prompt)) {
        long words = 0;
        bool in = false;
        for (const char *p = json_string_value(prompt); *p; p++) {
            bool space = *p == ' ' || *p == '\n' || *p == '\t';
            if (!space && !in)
                words++;
            in = !space;
        }
        return words;
    }
    return 0;
}

static void free_stream_cb(void *cls)
{
    void **pair = cls;
    struct server *s = pair[0];
    struct stream *st = pair[1];
    pthread_mutex_lock(&s->mu);
    if (st->state != ST_DONE && st->state != ST_QUEUED)
        s->n_admitted_active--;
    for (struct stream **pp = &s->streams; *pp; pp = &(*pp)->next)
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    pthread_cond_signal(&s->sched_cond);
    pthread_mutex_unlock(&s->mu);
    pthread_cond_destroy(&st->cond);
    buf_release(&st->out);
    free(st);
    free(pair);
}

static enum MHD_Result handle_completion(struct server *s, struct MHD_Connection *c, bool chat,
                                         struct req_ctx *rc)
{
    json_error_t jerr;
    json_t *req = json_loadb(rc->body.data ? rc->body.data : "", rc->body.len, 0, &jerr);
    if (!req || !json_is_object(req)) {
        json_decref(req);
        return send_error(c, 400, "invalid_request_error", "body is not a JSON object");
    }
    pthread_mutex_lock(&s->mu);
    long index = ++s->n_requests;
    s->stat_requests++;
    pthread_mutex_unlock(&s->mu);

    if (!available(s)) {
        json_decref(req);
        return send_error(c, 503, "unavailable_error", "Loading model");
    }
    if (s->cfg.error_rate > 0 &&
        floor((double)index * s->cfg.error_rate) > floor((double)(index - 1) * s->cfg.error_rate)) {
        json_decref(req);
        return send_error(c, 503, "unavailable_error", "injected 503 (--error-rate)");
    }
    struct stream *st = xcalloc(1, sizeof(*st));
    st->index = index;
    st->chat = chat;
    json_t *mt = json_object_get(req, "max_tokens");
    if (!mt)
        mt = json_object_get(req, "max_completion_tokens");
    st->max_tokens = json_is_integer(mt) ? (long)json_integer_value(mt) : 16;
    if (st->max_tokens < 1)
        st->max_tokens = 1;
    st->streaming = json_is_true(json_object_get(req, "stream"));
    json_t *so = json_object_get(req, "stream_options");
    st->include_usage = json_is_true(json_object_get(so, "include_usage"));
    st->prompt_tokens = count_prompt_tokens(json_object_get(req, chat ? "messages" : "prompt"));
    json_decref(req);
    cond_init_mono(&st->cond);
    buf_init(&st->out, 1 << 20);
    st->admit_ms = clock_ms();
    st->state = ST_QUEUED;

    pthread_mutex_lock(&s->mu);
    st->next = s->streams;
    s->streams = st;
    if (s->cfg.die_after > 0 && index == s->cfg.die_after)
        s->die_at_ms = clock_ms() + s->cfg.die_delay_ms;
    pthread_cond_signal(&s->sched_cond);
    pthread_mutex_unlock(&s->mu);
    rc->stream = st;

    void **pair = xmalloc(2 * sizeof(void *));
    pair[0] = s;
    pair[1] = st;
    if (st->streaming) {
        struct MHD_Response *r = MHD_create_response_from_callback(
            MHD_SIZE_UNKNOWN, 4096, stream_reader, pair, free_stream_cb);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result res = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return res;
    }
    wait_complete(s, st);
    struct buf b;
    buf_init(&b, BODY_MAX);
    buf_printf(&b, "{\"id\":\"cmpl-fake\",\"object\":\"%s\",\"model\":",
               chat ? "chat.completion" : "text_completion");
    buf_json_str(&b, s->cfg.model, strlen(s->cfg.model));
    buf_puts(&b, ",\"choices\":[{\"index\":0,");
    buf_puts(&b, chat ? "\"message\":{\"role\":\"assistant\",\"content\":\"" : "\"text\":\"");
    for (long i = 0; i < st->sent; i++)
        buf_puts(&b, token_text(&s->cfg));
    buf_printf(&b,
               "\"%s,\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":%ld,"
               "\"completion_tokens\":%ld,\"total_tokens\":%ld}}\n",
               chat ? "}" : "", st->prompt_tokens, st->sent, st->prompt_tokens + st->sent);
    enum MHD_Result res = send_text(c, 200, "application/json", b.data, b.len);
    buf_release(&b);
    free_stream_cb(pair);
    rc->stream = NULL;
    return res;
}

/* GET /metrics: the counters in fp4serve's names (Prometheus text 0.0.4),
 * each with a model_name label, plus the decode-only step counters and a
 * queue-time histogram's _sum and _count. */
static enum MHD_Result handle_metrics(struct server *s, struct MHD_Connection *c)
{
    struct buf b;
    buf_init(&b, BODY_MAX);
    pthread_mutex_lock(&s->mu);
    long nth = ++s->n_metrics;
    if (nth == s->cfg.metrics_fail) {
        pthread_mutex_unlock(&s->mu);
        buf_release(&b);
        return send_error(c, 500, "server_error", "metrics failed (--metrics-fail)");
    }
    for (long i = 0; i < s->cfg.metrics_pad; i += 64)
        buf_puts(&b, "# padding (--metrics-pad) .....................................\n");
    const struct {
        const char *name;
        double v;
    } rows[] = {
        {"fp4serve_steps_total", s->m.steps},
        {"fp4serve_step_seconds_total", s->m.step_s},
        {"fp4serve_step_sequences_total", s->m.step_seqs},
        {"fp4serve_decode_tokens_total", s->m.decode_tokens},
        {"fp4serve_prefill_tokens_total", s->m.prefill_tokens},
        {"fp4serve_prompt_tokens_total", s->m.prompt_tokens},
        {"fp4serve_generation_tokens_total", s->m.generation_tokens},
        {"fp4serve_decode_only_steps_total", s->m.do_steps},
        {"fp4serve_decode_only_step_seconds_total", s->m.do_step_s},
        {"fp4serve_decode_only_step_sequences_total", s->m.do_step_seqs},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        buf_printf(&b, "# HELP %s fakeserver counter (exact).\n# TYPE %s counter\n", rows[i].name,
                   rows[i].name);
        buf_printf(&b, "%s{model_name=\"%s\"} %.9f\n", rows[i].name, s->cfg.model, rows[i].v);
    }
    buf_puts(&b, "# HELP fp4serve_request_queue_time_seconds Wait for a batch slot.\n"
                 "# TYPE fp4serve_request_queue_time_seconds histogram\n");
    buf_printf(&b, "fp4serve_request_queue_time_seconds_bucket{le=\"+Inf\"} %.0f\n", s->m.queue_n);
    buf_printf(&b, "fp4serve_request_queue_time_seconds_sum %.9f\n", s->m.queue_s);
    buf_printf(&b, "fp4serve_request_queue_time_seconds_count %.0f\n", s->m.queue_n);
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result rc = send_text(c, 200, "text/plain; version=0.0.4", b.data, b.len);
    buf_release(&b);
    return rc;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    struct server *s = cls;
    struct req_ctx *rc = *con_cls;
    if (!rc) {
        rc = xcalloc(1, sizeof(*rc));
        buf_init(&rc->body, BODY_MAX);
        *con_cls = rc;
        return MHD_YES;
    }
    if (*upload_size) {
        if (buf_append(&rc->body, upload, *upload_size) != 0) {
            *upload_size = 0;
            return MHD_NO;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (post && s->log) { /* arrival (CLOCK_MONOTONIC ms), path, and the body as sent */
        pthread_mutex_lock(&s->mu);
        fprintf(s->log, "{\"t_ms\":%.3f,\"url\":\"%s\",\"body\":%.*s}\n", clock_ms(), url,
                rc->body.len ? (int)rc->body.len : 4, rc->body.len ? rc->body.data : "null");
        fflush(s->log);
        pthread_mutex_unlock(&s->mu);
    }
    if (post && (strcmp(url, "/reset_prefix_cache") == 0 || strcmp(url, "/flush_cache") == 0))
        return send_text(c, 200, "application/json", "{}\n", 3);
    if (get && strcmp(url, "/health") == 0) {
        if (!available(s))
            return send_error(c, 503, "unavailable_error", "Loading model");
        char body[64];
        int n = snprintf(body, sizeof(body), "{\"status\":\"ok\",\"pid\":%ld}\n", (long)getpid());
        return send_text(c, 200, "application/json", body, (size_t)n);
    }
    if (get && strcmp(url, "/v1/models") == 0) {
        struct buf b;
        buf_init(&b, 4096);
        buf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
        buf_json_str(&b, s->cfg.model, strlen(s->cfg.model));
        buf_printf(
            &b, ",\"object\":\"model\",\"owned_by\":\"fakeserver\",\"meta\":{\"n_vocab\":%ld}}]}\n",
            s->cfg.vocab);
        enum MHD_Result r = send_text(c, 200, "application/json", b.data, b.len);
        buf_release(&b);
        return r;
    }
    if (get && strcmp(url, "/stats") == 0)
        return handle_stats(s, c);
    if (get && strcmp(url, "/metrics") == 0 && !s->cfg.no_metrics)
        return handle_metrics(s, c);
    if (post && strcmp(url, "/stats/reset") == 0) {
        pthread_mutex_lock(&s->mu);
        s->n_samples = 0;
        s->stat_requests = 0;
        s->stat_steps = 0;
        s->stat_batch_sum = 0;
        pthread_mutex_unlock(&s->mu);
        return send_text(c, 200, "application/json", "{\"reset\":true}\n", 15);
    }
    if (post && strcmp(url, "/v1/completions") == 0)
        return handle_completion(s, c, false, rc);
    if (post && strcmp(url, "/v1/chat/completions") == 0)
        return handle_completion(s, c, true, rc);
    return send_error(c, 404, "not_found_error", "no such endpoint");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct req_ctx *rc = *con_cls;
    if (!rc)
        return;
    buf_release(&rc->body);
    free(rc);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    if (toe != MHD_CONNECTION_NOTIFY_STARTED)
        return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) {
        int one = 1;
        setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
}

/* ------------------------------------------------------------------ main */

static int listen_socket(const char *host, long port, struct err *err)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return err_set(err, 2, "bad --host '%s' (an IPv4 address)", host), -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 1024) != 0) {
        err_set(err, 1, "cannot listen on %s:%ld: %s", host, port,
                errno == EADDRINUSE ? "address already in use" : strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int main(int argc, char **argv)
{
    static struct server server; /* lives until the process exits */
    struct server *s = &server;
    struct fs_config *c = &s->cfg;
    *c = (struct fs_config){.host = "127.0.0.1",
                            .prefill_ms = 10,
                            .step_a_ms = 20,
                            .step_b_ms = 2,
                            .model = "fake-model",
                            .vocab = 32000,
                            .die_signal = SIGKILL,
                            .die_delay_ms = 100,
                            .exit_at_start = -1};
    const struct opt opts[] = {
        {"host", 0, OPT_STR, &c->host, "ADDR", "IPv4 address to listen on (default 127.0.0.1)"},
        {"port", 0, OPT_LONG, &c->port, "PORT", "TCP port (required)", 1, 65535},
        {"prefill-ms", 0, OPT_DOUBLE, &c->prefill_ms, "MS", "first token MS after admission (10)",
         0, 1e7},
        {"step-a-ms", 0, OPT_DOUBLE, &c->step_a_ms, "MS", "decode step fixed cost (20)", 0, 1e7},
        {"step-b-ms", 0, OPT_DOUBLE, &c->step_b_ms, "MS", "decode step cost per stream (2)", 0,
         1e7},
        {"prefill-in-steps", 0, OPT_BOOL, &c->prefill_in_steps, NULL,
         "prompts run inside the decode steps (see --prefill-ms-per-token)"},
        {"prefill-ms-per-token", 0, OPT_DOUBLE, &c->prefill_ms_per_token, "MS",
         "with --prefill-in-steps: step cost per prompt token (0)", 0, 1e6},
        {"no-metrics", 0, OPT_BOOL, &c->no_metrics, NULL, "GET /metrics answers 404"},
        {"metrics-fail", 0, OPT_LONG, &c->metrics_fail, "N", "GET /metrics number N answers 500", 1,
         1e9},
        {"metrics-pad", 0, OPT_LONG, &c->metrics_pad, "BYTES",
         "add about BYTES of comment lines to /metrics", 0, 4e6},
        {"max-batch", 0, OPT_LONG, &c->max_batch, "N", "admit at most N at once (0 = no cap)", 0,
         1e9},
        {"model", 0, OPT_STR, &c->model, "NAME", "model id (fake-model)"},
        {"vocab", 0, OPT_LONG, &c->vocab, "N", "meta.n_vocab in /v1/models (32000)", 1, 1e9},
        {"die-after", 0, OPT_LONG, &c->die_after, "N", "die once request N is admitted", 1, 1e12},
        {"die-delay-ms", 0, OPT_DOUBLE, &c->die_delay_ms, "MS", "delay before dying (100)", 0, 1e9},
        {"die-signal", 0, OPT_LONG, &c->die_signal, "SIG", "signal to die by (9; 0 = exit 1)", 0,
         64},
        {"exit-at-start", 0, OPT_LONG, &c->exit_at_start, "CODE", "exit with CODE at once", 0, 255},
        {"oom-at-start", 0, OPT_BOOL, &c->oom_at_start, NULL, "print a CUDA OOM and exit 1"},
        {"unavailable-s", 0, OPT_DOUBLE, &c->unavailable_s, "S", "answer 503 for S seconds", 0,
         1e9},
        {"startup-delay-ms", 0, OPT_DOUBLE, &c->startup_delay_ms, "MS", "sleep before listening", 0,
         1e9},
        {"error-rate", 0, OPT_DOUBLE, &c->error_rate, "F", "fraction of requests answered 503", 0,
         1},
        {"ignore-sigterm", 0, OPT_BOOL, &c->ignore_sigterm, NULL, "ignore SIGTERM"},
        {"fork-helpers", 0, OPT_LONG, &c->fork_helpers, "N", "start N sleeping children", 0, 64},
        {"stall-request", 0, OPT_LONG, &c->stall_request, "K", "request K stalls after 1 token", 1,
         1e12},
        {"no-usage", 0, OPT_BOOL, &c->no_usage, NULL, "never send the usage chunk"},
        {"error-after", 0, OPT_LONG, &c->error_after, "N", "error event after N tokens", 1, 1e9},
        {"close-after", 0, OPT_LONG, &c->close_after, "N", "close the stream after N tokens", 1,
         1e9},
        {"role-chunk-first", 0, OPT_BOOL, &c->role_chunk_first, NULL,
         "chat: role-only chunk at admission"},
        {"usage-delay-ms", 0, OPT_DOUBLE, &c->usage_delay_ms, "MS", "pause before the usage chunk",
         0, 1e9},
        {"split-utf8", 0, OPT_BOOL, &c->split_utf8, NULL,
         "token text \"\xc3\xa9\", each event split inside it"},
        {"print-argv", 0, OPT_BOOL, &c->print_argv, NULL, "print argv[i]=... lines at start"},
        {"pid-file", 0, OPT_STR, &c->pid_file, "PATH", "write the pid there once listening"},
        {"log-requests", 0, OPT_STR, &c->log_requests, "PATH",
         "append one line per POST: {\"t_ms\" (monotonic), \"url\", \"body\"}"},
    };
    size_t n_opts = sizeof(opts) / sizeof(opts[0]);
    struct err err;
    err_init(&err);
    int prc = opt_parse(argc - 1, argv + 1, opts, n_opts, NULL, &err, 2);
    if (prc == 1) {
        opt_help(stdout, "fakeserver", "", "--port PORT [options]",
                 "A test double: OpenAI-style SSE with exact timing (see "
                 "tests/fakeserver/README.md).",
                 opts, n_opts);
        return 0;
    }
    if (prc != 0 || c->port == 0) {
        fprintf(stderr, "fakeserver: %s\n", prc ? err.msg : "--port is required");
        return 2;
    }
    if (c->print_argv) {
        for (int i = 0; i < argc; i++)
            printf("argv[%d]=%s\n", i, argv[i]);
        fflush(stdout);
    }
    if (c->exit_at_start >= 0) {
        fprintf(stderr, "fakeserver: exiting with status %ld as asked (--exit-at-start)\n",
                c->exit_at_start);
        return (int)c->exit_at_start;
    }
    if (c->oom_at_start) {
        fprintf(stderr, "RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB\n");
        return 1;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    for (long i = 0; i < c->fork_helpers; i++)
        if (fork() == 0) {
            for (;;)
                pause();
        }
    /* Every thread inherits this mask; main waits for the signals below. */
    sigset_t wait_set;
    sigemptyset(&wait_set);
    sigaddset(&wait_set, SIGINT);
    if (!c->ignore_sigterm)
        sigaddset(&wait_set, SIGTERM);
    else
        signal(SIGTERM, SIG_IGN);
    pthread_sigmask(SIG_BLOCK, &wait_set, NULL);
    signal(SIGPIPE, SIG_IGN);

    sleep_ms(c->startup_delay_ms, NULL);
    int lfd = listen_socket(c->host, c->port, &err);
    if (lfd < 0) {
        fprintf(stderr, "fakeserver: %s\n", err.msg);
        return err.code;
    }
    pthread_mutex_init(&s->mu, NULL);
    cond_init_mono(&s->sched_cond);
    s->start_ms = clock_ms();
    pthread_t sched;
    pthread_create(&sched, NULL, scheduler, s);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, handler, s, MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_NOTIFY_COMPLETED,
        completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)0, MHD_OPTION_THREAD_STACK_SIZE,
        (size_t)256 * 1024, MHD_OPTION_CONNECTION_LIMIT, (unsigned)8192, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "fakeserver: cannot start the HTTP daemon\n");
        return 1;
    }
    if (c->log_requests && !(s->log = fopen(c->log_requests, "a"))) {
        fprintf(stderr, "fakeserver: %s: %s\n", c->log_requests, strerror(errno));
        return 2;
    }
    if (c->pid_file) {
        FILE *f = fopen(c->pid_file, "w");
        if (f) {
            fprintf(f, "%ld\n", (long)getpid());
            fclose(f);
        }
    }
    fprintf(stderr, "fakeserver: listening on %s:%ld (pid %ld)\n", c->host, c->port,
            (long)getpid());
    int sig = 0;
    sigwait(&wait_set, &sig);
    fprintf(stderr, "fakeserver: exiting on signal %d\n", sig);
    /* Connection threads may be blocked mid-stream; a test double need not
     * drain them, so leave at once. */
    _exit(0);
}
