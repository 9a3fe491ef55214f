/*
 * scheduler: the continuous-batching loop (see scheduler.h). The scheduler thread
 * admits queued requests into free KV slots, builds a step (decode rows
 * first, then prompt chunks oldest first within --prefill-chunk), runs
 * model_step, samples, detokenizes, applies stop strings and appends the
 * response bytes, then wakes the readers. Cancellation is checked before
 * every step: a flag from the HTTP layer, and a poll for hang-up on each
 * running client's socket, so a client that vanished while its connection
 * was suspended is noticed within one step too.
 */
#include "serve/scheduler.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fp4.h"
#include "log.h"
#include "timeutil.h"
#include "xalloc.h"

#include "serve/jsonmask.h"
#include "serve/prefix.h"
#include "serve/sched_int.h"

#include "text/stop.h"

/* non-streaming text: its JSON reply (escaping can make a byte six) must
 * still fit in SCHED_OUT_CAP, or the answer would be an empty 200 */
#define TEXT_CAP  (SCHED_OUT_CAP / 8)
#define OUT_START 4096 /* bytes reserved at admission */

struct sched_req {
    /* set by sched_req_new, read-only afterwards */
    enum api_kind kind;
    bool stream, include_usage, ignore_eos, echo, cont_usage;
    bool batch;   /* /generate: a list of answers */
    int logprobs; /* -1, or alternatives per token */
    int max_tokens;
    bool json;         /* response_format json_object: the token mask of jsonmask.h */
    char **stops;      /* (n_stops) owned */
    size_t *stop_lens; /* (n_stops) owned */
    size_t n_stops;
    char *id, *model; /* owned */
    long long created;
    void (*wake)(void *arg);
    void *wake_arg;
    atomic_int refs;
    struct sched_seq *seqs; /* (n_seqs) in choice order; owned */
    int n_seqs;
    int n_prompt; /* prompt tokens, each prompt once (usage) */
    int n_per;    /* choices per prompt */

    /* shared with the HTTP layer, under mu */
    pthread_mutex_t mu;
    struct buf out; /* SSE bytes not yet read, or the final JSON body */
    int status;     /* HTTP status of the final body */
    bool done;      /* no more output will be appended */
    bool parked;    /* a reader waits for wake */
    bool cancel;    /* the client is gone */
    int n_gen;      /* generated tokens over every choice */
    int n_cached;   /* prompt tokens from the prefix cache, each prompt once (usage) */

    /* the scheduler thread's */
    int fd;            /* dup of the client socket, or -1; closed when the generation ends */
    bool probe_1xx;    /* a half-closed socket may be probed with an interim answer */
    bool probed;       /* it was */
    int n_admitted;    /* seqs given a slot so far */
    int n_live;        /* seqs not ended */
    bool ended;        /* the scheduler's part is over (reference dropped) */
    uint64_t t_submit; /* clock_ns at submit */
    uint64_t t_admit;  /* clock_ns at admission (a slot), 0 before */
    uint64_t t_first;  /* clock_ns at the first generated token, 0 before */
    uint64_t t_last;   /* clock_ns at the latest generated token, 0 before */
    sched_req *next;   /* queue link */
};

/* ---- requests ---- */

/* Everything is copied, so the HTTP layer may free its parse at once. Each
 * sequence's token array has room for its whole generation: decoding only
 * appends. The client socket is dup'ed so the scheduler can poll it for
 * hang-up without racing libmicrohttpd closing (and the kernel reusing)
 * the original fd. */
sched_req *sched_req_new(const struct sched_req_params *p)
{
    sched_req *r = xcalloc(1, sizeof(*r));
    r->kind = p->kind;
    r->stream = p->stream;
    r->include_usage = p->include_usage;
    r->cont_usage = p->continuous_usage && p->include_usage; /* usage in every chunk, as vLLM */
    r->ignore_eos = p->ignore_eos;
    r->json = p->json;
    r->echo = p->echo;
    r->batch = p->batch || p->n_prompts > 1 || p->n > 1;
    r->logprobs = p->logprobs > SAMPLE_MAX_TOP ? SAMPLE_MAX_TOP : p->logprobs;
    r->max_tokens = (int)p->max_tokens;
    const struct sched_prompt *pr = p->prompts;
    size_t n_pr = p->n_prompts;
    int n = p->n > 0 ? p->n : 1;
    r->n_per = n;
    r->n_seqs = (int)n_pr * n;
    r->seqs = xcalloc((size_t)r->n_seqs, sizeof(*r->seqs));
    for (size_t i = 0; i < n_pr; i++) {
        r->n_prompt += (int)pr[i].n_ids;
        for (int j = 0; j < n; j++) {
            struct sched_seq *q = &r->seqs[i * (size_t)n + (size_t)j];
            q->req = r;
            q->index = (int)i * n + j;
            q->n_prompt = (int)pr[i].n_ids;
            q->tokens = xmalloc(((size_t)q->n_prompt + (size_t)r->max_tokens) * sizeof(int32_t));
            memcpy(q->tokens, pr[i].ids, pr[i].n_ids * sizeof(int32_t));
            q->n_tokens = q->n_prompt;
            q->sp = p->sample;
            q->sp.seed = p->sample.seed + (uint64_t)j; /* vLLM's per-choice seeds */
            if (p->echo && pr[i].text) {
                q->echo = xmemdup0(pr[i].text, pr[i].len);
                q->echo_len = pr[i].len;
            }
            q->slot = -1;
        }
    }
    r->n_live = r->n_seqs;
    r->n_stops = p->n_stops;
    r->stops = xcalloc(p->n_stops + 1, sizeof(*r->stops));
    r->stop_lens = xcalloc(p->n_stops + 1, sizeof(*r->stop_lens));
    for (size_t i = 0; i < p->n_stops; i++) {
        r->stops[i] = xmemdup0(p->stops[i], p->stop_lens[i]); /* may hold NUL */
        r->stop_lens[i] = p->stop_lens[i];
    }
    r->id = xstrdup(p->id);
    r->model = xstrdup(p->model);
    r->created = p->created;
    r->wake = p->wake;
    r->wake_arg = p->wake_arg;
    atomic_init(&r->refs, 1);
    pthread_mutex_init(&r->mu, NULL);
    /* a whole answer of many choices (with logprobs) may pass one stream's cap */
    buf_init(&r->out, r->stream ? SCHED_OUT_CAP : sched_answer_cap(r->n_seqs));
    r->fd = p->fd >= 0 ? fcntl(p->fd, F_DUPFD_CLOEXEC, 0) : -1;
    r->probe_1xx = p->probe_1xx;
    return r;
}

void sched_req_ref(sched_req *r)
{
    atomic_fetch_add(&r->refs, 1);
}

/* What a sequence holds from admission on; safe to call twice. */
static void seq_release(struct sched_seq *q)
{
    sampler_release(&q->sampler);
    stop_release(&q->stop);
    buf_release(&q->text);
    free(q->lp);
    free(q->top_ids);
    free(q->top_lp);
    q->lp = q->top_lp = NULL;
    q->top_ids = NULL;
}

void sched_req_unref(sched_req *r)
{
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    if (r->fd >= 0)
        close(r->fd);
    pthread_mutex_destroy(&r->mu);
    buf_release(&r->out);
    for (int i = 0; i < r->n_seqs; i++) {
        seq_release(&r->seqs[i]);
        free(r->seqs[i].tokens);
        free(r->seqs[i].echo);
    }
    free(r->seqs);
    for (size_t i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    free(r->stops);
    free(r->stop_lens);
    free(r->id);
    free(r->model);
    free(r);
}

void sched_req_cancel(sched_req *r)
{
    pthread_mutex_lock(&r->mu);
    r->cancel = true;
    pthread_mutex_unlock(&r->mu);
}

/* Parking happens under the request lock, and publish() clears parked
 * under the same lock before it wakes: so the reader's suspend always
 * precedes the scheduler's resume, and no wake-up can be lost between "no
 * output yet" and "suspended". */
size_t sched_req_read(sched_req *r, char *dst, size_t cap, void (*park)(void *), void *arg,
                      bool *end)
{
    size_t n = 0;
    *end = false;
    pthread_mutex_lock(&r->mu);
    if (r->out.len) {
        n = r->out.len < cap ? r->out.len : cap;
        memcpy(dst, r->out.data, n);
        buf_consume(&r->out, n);
    } else if (r->done) {
        *end = true;
    } else {
        r->parked = true;
        park(arg);
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* The body is handed over by swapping buffers (no copy of a long answer). */
bool sched_req_take(sched_req *r, struct buf *body, int *status, void (*park)(void *), void *arg)
{
    bool done;
    pthread_mutex_lock(&r->mu);
    done = r->done;
    if (done) {
        *status = r->status;
        struct buf t = *body;
        *body = r->out;
        r->out = t;
    } else {
        r->parked = true;
        park(arg);
    }
    pthread_mutex_unlock(&r->mu);
    return done;
}

void sched_req_counts(sched_req *r, long *prompt, long *generated)
{
    pthread_mutex_lock(&r->mu);
    *prompt = r->n_prompt;
    *generated = r->n_gen;
    pthread_mutex_unlock(&r->mu);
}

/* ---- output: the scheduler thread appends, then wakes a parked reader ---- */

/* Run f(r, ctx) on r->out under the lock; wake the reader if it waits.
 * done marks the end of the output. Returns f's result. */
static int publish(sched_req *r, int (*f)(sched_req *r, const void *ctx), const void *ctx,
                   bool done)
{
    pthread_mutex_lock(&r->mu);
    int rc = f ? f(r, ctx) : 0;
    if (done)
        r->done = true;
    bool wake = r->parked && (r->out.len || r->done);
    if (wake)
        r->parked = false;
    pthread_mutex_unlock(&r->mu);
    if (wake && r->wake)
        r->wake(r->wake_arg);
    return rc;
}

/* The fields every response of r repeats. */
static struct api_resp resp_of(const sched_req *r)
{
    return (struct api_resp){
        .kind = r->kind, .id = r->id, .created = r->created, .model = r->model};
}

/* Logprobs of q's positions [from, to) for a response. */
static struct api_logprobs lp_of(const sched *s, const struct sched_seq *q, int from, int to,
                                 long *offset)
{
    size_t k = (size_t)q->req->logprobs;
    return (struct api_logprobs){.v = s->v,
                                 .ids = q->tokens + from,
                                 .lp = q->lp + from,
                                 .top_ids = q->top_ids + (size_t)from * k,
                                 .top_lp = q->top_lp + (size_t)from * k,
                                 .n = to - from,
                                 .k = (int)k,
                                 .offset = offset};
}

/* What one publish() appends for a sequence: text, and a finish reason on
 * its last token. */
struct chunk_ctx {
    const sched *s;
    struct sched_seq *q;
    const char *text;
    size_t n;
    const char *finish; /* NULL = more to come */
};

/* One SSE event for a sequence's text, with the logprobs of the tokens
 * since its last event. The last sequence's last event is followed, in
 * the same append, by the usage event and [DONE], so a reader never sees
 * a finished stream without its end marker. */
/* /generate's event: the choice's whole text so far (SGLang's cumulative
 * stream); [DONE] after the last sequence's last one. */
static int put_gen_chunk(sched_req *r, const struct chunk_ctx *c)
{
    struct sched_seq *q = c->q;
    if (c->n)
        buf_append(&q->text, c->text, c->n);
    if (!c->n && !c->finish)
        return 0;
    size_t start = r->out.len;
    r->out.toobig = false;
    buf_puts(&r->out, "data: ");
    api_gen_json(&r->out, r->id, r->batch ? q->index : -1, q->text.data ? q->text.data : "",
                 q->text.len, c->finish, q->n_prompt, q->n_gen, q->n_reused);
    buf_puts(&r->out, "\n\n");
    if (c->finish && r->n_live == 0)
        buf_puts(&r->out, "data: [DONE]\n\n");
    if (!r->out.toobig)
        return 0;
    r->out.len = start;
    return -1;
}

static int put_chunk(sched_req *r, const void *vctx)
{
    const struct chunk_ctx *c = vctx;
    struct sched_seq *q = c->q;
    if (r->kind == API_GENERATE)
        return put_gen_chunk(r, c);
    struct api_resp rp = resp_of(r);
    long offset = q->lp_offset;
    struct api_logprobs lp;
    if (q->lp)
        lp = lp_of(c->s, q, q->lp_from, q->n_tokens, &offset);
    long usage[3] = {q->n_prompt, q->n_gen, q->n_reused}; /* this choice's, as vLLM's */
    struct api_choice ch = {.index = q->index,
                            .text = c->text,
                            .n = c->n,
                            .role = r->kind == API_CHAT && !q->sent_first,
                            .finish = c->finish,
                            .lp = q->lp ? &lp : NULL,
                            .usage = r->cont_usage ? usage : NULL};
    int rc = api_sse_choice(&r->out, &rp, &ch);
    if (rc == 0) {
        q->lp_from = q->n_tokens;
        q->lp_offset = offset;
        if (c->n)
            q->sent_first = true;
    }
    if (rc == 0 && c->finish && r->n_live == 0) {
        if (r->include_usage)
            rc = api_sse_usage(&r->out, &rp, r->n_prompt, r->n_gen, r->n_cached);
        if (rc == 0)
            rc = api_sse_done(&r->out);
    }
    return rc;
}

/* The whole non-streaming answer, built once every sequence has ended. A
 * body past the cap is a 500 rather than an empty 200. */
static int put_final(sched_req *r, const void *vctx)
{
    const sched *s = vctx;
    struct api_resp rp = resp_of(r);
    buf_reset(&r->out);
    r->status = 200;
    if (r->kind == API_GENERATE) { /* SGLang's: an object, or a list of them */
        r->out.toobig = false;
        buf_puts(&r->out, r->batch ? "[" : "");
        for (int i = 0; i < r->n_seqs; i++) {
            const struct sched_seq *q = &r->seqs[i];
            buf_puts(&r->out, i ? "," : "");
            api_gen_json(&r->out, r->id, r->batch ? q->index : -1, q->text.data ? q->text.data : "",
                         q->text.len, q->finish, q->n_prompt, q->n_gen, q->n_reused);
        }
        buf_puts(&r->out, r->batch ? "]" : "");
        if (!r->out.toobig)
            return 0;
        buf_reset(&r->out);
        struct api_error e = {0};
        api_error_set(&e, 500, "internal_error", NULL, "the answer passed %zu bytes", r->out.max);
        api_error_json(&r->out, &e);
        r->status = 500;
        return -1;
    }
    size_t start = api_final_begin(&r->out, &rp);
    for (int i = 0; i < r->n_seqs; i++) {
        struct sched_seq *q = &r->seqs[i];
        long offset = 0;
        struct api_logprobs lp;
        if (q->lp)
            lp = lp_of(s, q, r->echo ? 0 : q->n_prompt, q->n_tokens, &offset);
        struct api_choice ch = {.index = q->index,
                                .text = q->text.data ? q->text.data : "",
                                .n = q->text.len,
                                .finish = q->finish,
                                .lp = q->lp ? &lp : NULL};
        api_final_choice(&r->out, &rp, &ch, i == 0);
    }
    if (api_final_end(&r->out, start, r->n_prompt, r->n_gen, r->n_cached) == 0)
        return 0;
    struct api_error e = {0};
    api_error_set(&e, 500, "internal_error", NULL,
                  "the answer passed %zu bytes; ask for fewer choices, tokens or logprobs",
                  r->out.max);
    api_error_json(&r->out, &e);
    r->status = 500;
    return -1;
}

/* Shutdown or a model error: a stream gets an error event then [DONE]
 * (headers are out, so the status can no longer change); a waiting
 * non-streaming request gets the error as its status and body. */
static int put_abort(sched_req *r, const void *vctx)
{
    const struct api_error *e = vctx;
    if (r->stream) {
        api_sse_error(&r->out, e);
        api_sse_done(&r->out);
    } else {
        buf_reset(&r->out);
        api_error_json(&r->out, e);
        r->status = e->status;
    }
    return 0;
}

/* ---- slots ---- */

static const char *const finish_names[PROM_N_FINISH] = {"stop", "length", "cancelled", "aborted"};

/* Publish the gauges a scrape reads: the scheduler thread's view of the
 * running set and of the KV positions its slots hold (a free slot's cached
 * prefix is not counted: any admission may take it). */
static void gauges(sched *s)
{
    long kv = 0;
    for (int i = 0; i < s->max_batch; i++)
        kv += s->slot_used[i] ? model_slot_len(s->m, i) : 0;
    pthread_mutex_lock(&s->mu);
    s->g_running = s->n_run;
    s->g_kv_positions = kv;
    pthread_mutex_unlock(&s->mu);
}

/* Give q's slot back and take it out of the running set. With the prefix
 * cache the slot keeps its K/V and the table learns its token ids. */
static void seq_free_slot(sched *s, struct sched_seq *q)
{
    if (q->slot < 0)
        return;
    if (s->prefix)
        pfx_keep(&s->pfx, q->slot, q->tokens, model_slot_len(s->m, q->slot));
    else
        model_slot_free(s->m, q->slot);
    s->slot_used[q->slot] = false;
    int k = 0;
    for (int i = 0; i < s->n_run; i++)
        if (s->run[i] != q)
            s->run[k++] = s->run[i];
    s->n_run = k;
    q->slot = -1;
    gauges(s);
}

/* The scheduler's part of r is over: socket closed, counted and logged,
 * before the last output is published (a reader that sees the end also
 * sees it counted); the caller then drops the scheduler's reference. */
static void req_over(sched *s, sched_req *r, enum prom_finish why)
{
    r->ended = true;
    if (s->adm == r)
        s->adm = NULL;
    if (r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
    }
    atomic_fetch_add_explicit(&s->met->finished[why], 1, memory_order_relaxed);
    uint64_t now = clock_ns();
    if (why == PROM_FIN_STOP || why == PROM_FIN_LENGTH) /* served: before its reader wakes */
        prom_request_done(s->met, r->t_submit, r->t_admit, r->t_first, now, r->n_prompt, r->n_gen);
    log_debug("%s: %d prompt + %d generated tokens (%d choices), %s, ttft %.1f ms, e2e %.1f ms",
              r->id, r->n_prompt, r->n_gen, r->n_seqs, finish_names[why],
              r->t_first ? (double)(r->t_first - r->t_submit) / 1e6 : -1.0,
              (double)(now - r->t_submit) / 1e6);
}

/* End the whole request before its sequences are done: every slot it holds
 * is given back first (so a reader that sees the end also sees them free),
 * then the last output goes out by reason. Once per request. */
static void req_end(sched *s, sched_req *r, enum prom_finish why)
{
    if (r->ended)
        return;
    for (int i = 0; i < r->n_seqs; i++)
        seq_free_slot(s, &r->seqs[i]);
    req_over(s, r, why);
    if (why == PROM_FIN_ABORTED) {
        struct api_error e = {0};
        api_error_set(&e, 503, "unavailable_error", NULL,
                      "the server is shutting down; generation stopped after %d tokens", r->n_gen);
        publish(r, put_abort, &e, true);
    } else {
        publish(r, NULL, NULL, true); /* cancelled: nobody reads; let the server close */
    }
    sched_req_unref(r);
}

/* End one sequence normally (why: stop or length) with its last text;
 * the request ends with its last sequence. */
static void seq_end(sched *s, struct sched_seq *q, enum prom_finish why, const char *text, size_t n)
{
    sched_req *r = q->req;
    seq_free_slot(s, q);
    q->ended = true;
    q->finish = finish_names[why];
    r->n_live--;
    if (r->n_live == 0)
        req_over(s, r, why);
    if (r->stream) {
        struct chunk_ctx c = {.s = s, .q = q, .text = text, .n = n, .finish = q->finish};
        publish(r, put_chunk, &c, r->n_live == 0);
    } else {
        if (n)
            buf_append(&q->text, text, n);
        if (r->n_live == 0)
            publish(r, put_final, s, true);
    }
    if (r->n_live == 0)
        sched_req_unref(r);
}

/* A slot for q and the prompt positions it can reuse. Without the prefix
 * cache: the first free slot, wiped. With it: pfx_choose's slot, trimmed
 * to the matched prefix (or given a copy of a busy slot's), so a sequence
 * never sees K/V that is not its own prompt's. Echoed prompt logprobs need
 * every prompt row's logits: those prompts are computed whole. */
static int take_slot(sched *s, struct sched_seq *q)
{
    sched_req *r = q->req;
    if (!s->prefix) {
        int slot = 0;
        while (s->slot_used[slot])
            slot++;
        model_slot_free(s->m, slot);
        q->n_reused = 0;
        return slot;
    }
    for (int i = 0; i < s->max_batch; i++)
        s->kv_len[i] = model_slot_len(s->m, i);
    bool whole = r->echo && r->logprobs >= 0;
    struct pfx_choice c = pfx_choose(&s->pfx, s->slot_used, s->kv_len, model_can_copy_kv(s->m),
                                     q->tokens, whole ? 1 : q->n_prompt);
    if (c.src >= 0) {
        struct err err;
        err_init(&err);
        if (model_slot_copy(s->m, c.src, c.slot, c.reuse, &err) != 0) {
            log_warn("prefix cache: %s; computing the prompt whole", err.msg);
            c.reuse = 0;
        }
    }
    model_slot_trim(s->m, c.slot, c.reuse);
    pfx_take(&s->pfx, c.slot, q->tokens, q->n_prompt);
    q->n_reused = c.reuse;
    if (q->index % r->n_per == 0) /* usage counts each prompt once */
        r->n_cached += c.reuse;
    atomic_fetch_add_explicit(&s->met->prefix_queries, (uint64_t)q->n_prompt, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->met->prefix_hits, (uint64_t)c.reuse, memory_order_relaxed);
    return c.slot;
}

/* Give q a slot and its sampling state. Allocation happens here, at
 * admission, never inside a step: the sampler's candidate arrays, the stop
 * filter's held text, the logprobs and the first 4 KiB of output. */
static void admit(sched *s, struct sched_seq *q)
{
    sched_req *r = q->req;
    int slot = take_slot(s, q);
    s->slot_used[slot] = true;
    q->slot = slot;
    q->n_cached = q->n_reused;
    s->run[s->n_run++] = q;
    if (!r->t_admit)
        r->t_admit = clock_ns();
    sampler_init(&q->sampler, s->m->cfg.n_vocab, &q->sp);
    tok_stream_init(&q->ts);
    stop_init(&q->stop, r->stops, r->stop_lens, r->n_stops, s->piece_cap);
    buf_init(&q->text, TEXT_CAP);
    if (!r->stream)
        buf_reserve(&q->text, OUT_START);
    if (r->logprobs >= 0) {
        size_t pos = (size_t)q->n_prompt + (size_t)r->max_tokens, k = (size_t)r->logprobs;
        q->lp = xmalloc(pos * sizeof(*q->lp));
        size_t nk = pos * k > 0 ? pos * k : 1;
        q->top_ids = xmalloc(nk * sizeof(*q->top_ids));
        q->top_lp = xmalloc(nk * sizeof(*q->top_lp));
        q->lp[0] = NAN; /* the first prompt token has no prediction */
        q->lp_from = r->echo ? 0 : q->n_prompt;
    }
    atomic_fetch_add_explicit(&s->met->prompt_tokens, (uint64_t)q->n_prompt, memory_order_relaxed);
}

/* Give free slots to waiting sequences: first those of a request already
 * under way, then queued requests in order. */
static void admit_waiting(sched *s)
{
    while (s->n_run < s->max_batch) {
        if (!s->adm) {
            pthread_mutex_lock(&s->mu);
            sched_req *r = s->q_head;
            if (r) {
                s->q_head = r->next;
                if (!s->q_head)
                    s->q_tail = NULL;
                s->q_len--;
                r->next = NULL;
            }
            pthread_mutex_unlock(&s->mu);
            if (!r)
                return;
            s->adm = r;
            buf_reserve(&r->out, OUT_START);
        }
        sched_req *r = s->adm;
        admit(s, &r->seqs[r->n_admitted++]);
        if (r->n_admitted == r->n_seqs)
            s->adm = NULL;
    }
}

/* Whether the client of r, whose socket polled revents, is gone. A reset
 * (POLLHUP, POLLERR) is. POLLRDHUP alone, the peer's end of input, is
 * not: it is also a client that half-closed its sending side after a
 * whole request and still reads the answer (docs/reliability.md W3-N2).
 * Only a write tells the two apart, since a closed socket answers it with
 * a reset: a stream writes its events anyway, and a non-streaming HTTP/1.1
 * request is sent one interim "100 Continue" (which HTTP/1.1 clients must
 * accept before the final answer, RFC 9110 §15.2), so a client that hung
 * up shows a reset at the next step. An HTTP/1.0 client cannot be sent
 * one: its generation runs to its end. */
static bool client_gone(sched_req *r, short revents)
{
    if (r->fd < 0)
        return false;
    if (revents & (POLLHUP | POLLERR))
        return true;
    if ((revents & POLLRDHUP) && r->probe_1xx && !r->probed) {
        static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
        r->probed = true; /* MHD writes nothing while the request runs: no interleaving */
        if (send(r->fd, probe, sizeof(probe) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
            return true;
    }
    return false;
}

/* Finish every running request whose client is gone: the flag, or a
 * hang-up on its socket. */
static void reap_cancelled(sched *s)
{
    /* One poll() over every running client per step: POLLRDHUP is the peer
     * shutting its side (see client_gone), POLLHUP/POLLERR a reset. libmicrohttpd cannot see
     * these while a connection is suspended, which is most of a stream's
     * life, so without this a vanished client would keep its slot until
     * the next token failed to send. */
    int n = 0;
    for (int i = 0; i < s->n_run; i++) {
        s->pfd[i] = (struct pollfd){.fd = s->run[i]->req->fd, .events = POLLRDHUP};
        n += s->run[i]->req->fd >= 0;
    }
    int np = s->n_run;
    if (n && poll(s->pfd, (nfds_t)np, 0) < 0 && errno != EINTR)
        log_warn("poll on client sockets: %s", strerror(errno));
    /* collect first: req_end() reorders s->run */
    sched_req *gone[np ? np : 1];
    int n_gone = 0;
    for (int i = 0; i < np; i++) {
        sched_req *r = s->run[i]->req;
        pthread_mutex_lock(&r->mu);
        bool c = r->cancel;
        pthread_mutex_unlock(&r->mu);
        bool seen = false; /* each request once: req_end may free it */
        for (int k = 0; k < n_gone && !seen; k++)
            seen = gone[k] == r;
        if (!seen && (c || (n && client_gone(r, s->pfd[i].revents))))
            gone[n_gone++] = r;
    }
    for (int i = 0; i < n_gone; i++)
        req_end(s, gone[i], PROM_FIN_CANCELLED);
}

/* Unlink every queued request whose client is gone (the flag, or a
 * hang-up on its socket: a waiting connection is suspended, so the HTTP
 * layer cannot see it leave) and return them linked through next, for
 * finish() once s->mu is released. Without this they would keep their
 * places under --max-queue, refusing live clients, until admitted. The
 * sockets are polled QPOLL at a time, from the stack. Caller holds s->mu. */
#define QPOLL 64
static sched_req *unlink_gone_queued(sched *s)
{
    sched_req *gone = NULL, **gone_tail = &gone;
    sched_req **link = &s->q_head;
    while (*link) {
        struct pollfd pfd[QPOLL];
        sched_req *who[QPOLL];
        int n = 0;
        for (sched_req *r = *link; r && n < QPOLL; r = r->next, n++) {
            who[n] = r;
            pfd[n] = (struct pollfd){.fd = r->fd, .events = POLLRDHUP};
        }
        if (poll(pfd, (nfds_t)n, 0) < 0 && errno != EINTR) {
            log_warn("poll on waiting clients' sockets: %s", strerror(errno));
            for (int i = 0; i < n; i++)
                pfd[i].revents = 0;
        }
        for (int i = 0; i < n; i++) {
            sched_req *r = who[i];
            pthread_mutex_lock(&r->mu);
            bool c = r->cancel;
            pthread_mutex_unlock(&r->mu);
            if (c || client_gone(r, pfd[i].revents)) {
                *link = r->next; /* r is at *link: the walk follows the queue */
                r->next = NULL;
                *gone_tail = r;
                gone_tail = &r->next;
                s->q_len--;
            } else {
                link = &r->next;
            }
        }
    }
    s->q_tail = NULL;
    for (sched_req *r = s->q_head; r; r = r->next)
        s->q_tail = r;
    return gone;
}

/* ---- tokens out ---- */

/* Logprobs of token tok at position pos of q, from the raw logits row
 * that predicted it (before penalties and temperature, as vLLM reports). */
static void note_logprobs(struct sched_seq *q, int pos, const float *row, int n_vocab, int32_t tok)
{
    size_t k = (size_t)q->req->logprobs;
    q->lp[pos] = sample_logprobs(row, n_vocab, tok, (int)k, q->top_ids + (size_t)pos * k,
                                 q->top_lp + (size_t)pos * k);
}

/* echo, once the prompt is in: a stream's first event is the prompt's text
 * with its logprobs; a body's text starts with it. */
static void put_echo(sched *s, struct sched_seq *q)
{
    sched_req *r = q->req;
    const char *t = q->echo ? q->echo : "";
    size_t n = q->echo_len;
    struct buf tmp;
    buf_init(&tmp, TEXT_CAP);
    if (!q->echo) { /* token ids were sent: their text */
        struct tok_stream ts;
        tok_stream_init(&ts);
        for (int i = 0; i < q->n_prompt; i++)
            buf_append(&tmp, s->piece,
                       tok_stream_push(s->v, &ts, q->tokens[i], s->piece, s->piece_cap));
        buf_append(&tmp, s->piece, tok_stream_flush(&ts, s->piece, s->piece_cap));
        t = tmp.data ? tmp.data : "";
        n = tmp.len;
    }
    if (r->stream) {
        /* lp_from is 0 with echo: the event carries the prompt's logprobs */
        struct chunk_ctx c = {.s = s, .q = q, .text = t, .n = n};
        publish(r, put_chunk, &c, false);
    } else {
        buf_append(&q->text, t, n);
    }
    buf_release(&tmp);
}

/* A token was sampled for q: stream it, or end the sequence. */
static void on_token(sched *s, struct sched_seq *q, int32_t tok)
{
    /* The order matters: end-of-generation first (its text is never
     * sent), then the detokenizer (whole UTF-8 characters only), then the
     * stop filter (whole stop strings only), then max_tokens, which
     * flushes whatever both held back into the last event. */
    sched_req *r = q->req;
    q->tokens[q->n_tokens++] = tok;
    q->n_gen++;
    pthread_mutex_lock(&r->mu);
    r->n_gen++;
    pthread_mutex_unlock(&r->mu);
    /* inter-token latency per sequence: the gap between its own tokens */
    uint64_t now = clock_ns();
    if (q->t_last)
        prom_observe(&s->met->hist[PROM_H_ITL], now - q->t_last);
    if (!r->t_first)
        r->t_first = now;
    q->t_last = now;
    atomic_fetch_add_explicit(&s->met->generated_tokens, 1, memory_order_relaxed);
    bool json_end = r->json && jmask_push(s->jm, &q->jf, tok); /* the object closed */
    if (!r->ignore_eos && tok_is_eog(s->v, tok)) {
        size_t n = tok_stream_flush(&q->ts, s->piece, s->piece_cap);
        bool hit;
        size_t w = stop_push(&q->stop, s->piece, n, s->text, s->text_cap, &hit);
        if (!hit)
            w += stop_flush(&q->stop, s->text + w, s->text_cap - w);
        seq_end(s, q, PROM_FIN_STOP, s->text, w);
        return;
    }
    size_t n = tok_stream_push(s->v, &q->ts, tok, s->piece, s->piece_cap);
    bool hit = false;
    size_t w = stop_push(&q->stop, s->piece, n, s->text, s->text_cap, &hit);
    if (hit) {
        seq_end(s, q, PROM_FIN_STOP, s->text, w);
        return;
    }
    if (json_end || q->n_gen >= r->max_tokens || q->n_tokens >= s->ctx) {
        n = tok_stream_flush(&q->ts, s->piece, s->piece_cap);
        size_t w2 = stop_push(&q->stop, s->piece, n, s->text + w, s->text_cap - w, &hit);
        w += w2;
        if (!hit)
            w += stop_flush(&q->stop, s->text + w, s->text_cap - w);
        seq_end(s, q, hit || json_end ? PROM_FIN_STOP : PROM_FIN_LENGTH, s->text, w);
        return;
    }
    if (w == 0)
        return; /* held back: part of a character or of a stop string */
    if (!r->stream) {
        if (buf_append(&q->text, s->text, w) != 0) {
            log_warn("%s: answer passed %zu bytes; generation stopped", r->id, TEXT_CAP);
            seq_end(s, q, PROM_FIN_LENGTH, NULL, 0);
        }
        return;
    }
    struct chunk_ctx c = {.s = s, .q = q, .text = s->text, .n = w, .finish = NULL};
    if (publish(r, put_chunk, &c, false) != 0) {
        log_warn("%s: the client left %zu bytes unread; treating it as gone", r->id, SCHED_OUT_CAP);
        req_end(s, r, PROM_FIN_CANCELLED);
    }
}

/* The logits a step returned for q: prompt logprobs (echo), then the next
 * token from the last row, if the prompt is all in. */
static void after_step(sched *s, struct sched_seq *q, const struct model_seq *ms)
{
    sched_req *r = q->req;
    int V = s->m->cfg.n_vocab;
    q->n_cached = ms->pos + ms->n_tokens;
    if (!ms->out)
        return;
    const float *row = ms->out;
    if (ms->logits == MODEL_LOGITS_ALL) {
        /* row j predicts the token at pos + j + 1: the prompt's, except
         * for the last row of the last chunk, which predicts the first
         * generated token */
        for (int j = 0; j < ms->n_tokens; j++) {
            int at = ms->pos + j + 1;
            const float *x = ms->out + (size_t)j * (size_t)V;
            if (at < q->n_prompt)
                note_logprobs(q, at, x, V, q->tokens[at]);
            row = x;
        }
    }
    if (q->n_cached < q->n_prompt)
        return; /* more prompt to come */
    if (q->n_tokens == q->n_prompt && r->echo)
        put_echo(s, q);
    if (r->max_tokens == 0) { /* echo only: the prompt's logprobs were the point */
        seq_end(s, q, PROM_FIN_LENGTH, NULL, 0);
        return;
    }
    const float *l = sampler_penalize(&q->sampler, row, q->tokens, q->n_prompt, q->n_tokens);
    int32_t tok = r->json ? jmask_sample(&s->jm, s->v, &q->jf, &q->sampler, l, V)
                          : sampler_sample(&q->sampler, l);
    if (tok < 0) { /* JSON mode: no token can continue the object */
        seq_end(s, q, PROM_FIN_STOP, NULL, 0);
        return;
    }
    if (q->lp)
        note_logprobs(q, q->n_tokens, row, V, tok);
    on_token(s, q, tok);
}

/* ---- the step ---- */

/* One model step over the running set. Returns -1 on a model error (every
 * running request is aborted then). */
static int step(sched *s)
{
    /* Decode rows go first and are never limited: a running stream gets
     * its token every step whatever arrives. Prompt chunks fill the budget
     * after them, oldest request first, so a long prompt is spread over
     * several steps instead of stalling every stream for one long step.
     * An echo prompt needs a logits row per token, within the model's
     * max_logit_rows. */
    int n = 0, rows = 0, budget = s->o.prefill_chunk, n_dec = 0, n_pre = 0, lrows = 0;
    for (int i = 0; i < s->n_run; i++) { /* decode rows first */
        struct sched_seq *q = s->run[i];
        if (q->n_cached < q->n_prompt)
            continue;
        s->seqs[n] = (struct model_seq){.slot = q->slot,
                                        .pos = q->n_tokens - 1,
                                        .n_tokens = 1,
                                        .tokens = &q->tokens[q->n_tokens - 1],
                                        .logits = MODEL_LOGITS_LAST};
        s->owner[n++] = q;
        rows++;
        lrows++;
        n_dec++;
    }
    for (int i = 0; i < s->n_run && budget > 0 && rows < s->m->max_rows; i++) {
        struct sched_seq *q = s->run[i]; /* then prompt chunks, oldest first */
        if (q->n_cached >= q->n_prompt)
            continue;
        bool all = q->req->echo && q->lp;
        int k = q->n_prompt - q->n_cached;
        if (k > budget)
            k = budget;
        if (k > s->m->max_rows - rows)
            k = s->m->max_rows - rows;
        if (all && k > s->m->max_logit_rows - lrows)
            k = s->m->max_logit_rows - lrows;
        bool last = q->n_cached + k == q->n_prompt;
        if (k < 1 || (last && lrows >= s->m->max_logit_rows))
            continue;
        s->seqs[n] = (struct model_seq){.slot = q->slot,
                                        .pos = q->n_cached,
                                        .n_tokens = k,
                                        .tokens = &q->tokens[q->n_cached],
                                        .logits = all    ? MODEL_LOGITS_ALL
                                                  : last ? MODEL_LOGITS_LAST
                                                         : MODEL_LOGITS_NONE};
        s->owner[n++] = q;
        rows += k;
        lrows += all ? k : last;
        budget -= k;
        n_pre += k;
    }
    if (n == 0)
        return 0;
    struct err err;
    err_init(&err);
    uint64_t t0 = clock_ns();
    if (model_step(s->m, s->seqs, n, &err) != 0) {
        log_error("model step over %d sequences failed: %s", n, err.msg);
        while (s->n_run)
            req_end(s, s->run[0]->req, PROM_FIN_ABORTED);
        return -1;
    }
    prom_step(s->met, n, n_dec, n_pre, s->m->last_passes, clock_ns() - t0, s->m->last.attn_ns,
              s->m->last.matmul_ns, s->m->last.other_ns);
    prom_step_weights(s->met, n_pre, s->m->last_experts, s->m->last_expert_bytes,
                      model_last_weight_bytes(s->m));
    /* a sequence ended here may free its request, and a cancelled stream
     * ends every sequence of its request: skip what is no longer running */
    for (int i = 0; i < n; i++) {
        struct sched_seq *q = s->owner[i];
        bool running = false;
        for (int k = 0; k < s->n_run && !running; k++)
            running = s->run[k] == q;
        if (running)
            after_step(s, q, &s->seqs[i]);
    }
    return 0;
}

/* The scheduler thread: sleep while there is nothing to do, else admit
 * what fits, drop the clients that left, run one step, publish gauges. */
static void *loop(void *arg)
{
    sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && s->n_run == 0 && !s->adm && !s->q_head && !s->reset_prefix &&
               !s->jobs)
            pthread_cond_wait(&s->cv, &s->mu);
        bool stopping = s->stopping, reset = s->reset_prefix;
        s->reset_prefix = false;
        sched_req *gone = stopping ? NULL : unlink_gone_queued(s);
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; reset && i < s->max_batch; i++) {
            pfx_forget(&s->pfx, i);
            if (!s->slot_used[i])
                model_slot_free(s->m, i);
        }
        while (gone) {
            sched_req *next = gone->next;
            req_end(s, gone, PROM_FIN_CANCELLED);
            gone = next;
        }
        if (stopping)
            break;
        sched_run_jobs(s);
        admit_waiting(s);
        reap_cancelled(s);
        step(s);
        gauges(s);
    }
    /* stopping: abort what runs and what waits */
    while (s->n_run)
        req_end(s, s->run[0]->req, PROM_FIN_ABORTED);
    if (s->adm)
        req_end(s, s->adm, PROM_FIN_ABORTED);
    pthread_mutex_lock(&s->mu);
    sched_req *q = s->q_head;
    s->q_head = s->q_tail = NULL;
    s->q_len = 0;
    pthread_mutex_unlock(&s->mu);
    while (q) {
        sched_req *next = q->next;
        req_end(s, q, PROM_FIN_ABORTED);
        q = next;
    }
    sched_end_jobs(s);
    gauges(s);
    return NULL;
}

/* ---- lifecycle ---- */

sched *sched_new(struct model *m, const tok_vocab *v, const struct sched_opts *o, struct prom *met,
                 struct err *err)
{
    sched *s = xcalloc(1, sizeof(*s));
    s->m = m;
    s->v = v;
    s->met = met;
    s->o = *o;
    if (s->o.prefill_chunk < 1)
        s->o.prefill_chunk = 1;
    s->max_batch = m->max_batch;
    s->ctx = m->ctx;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    size_t mb = (size_t)s->max_batch;
    s->run = xcalloc(mb, sizeof(*s->run));
    s->slot_used = xcalloc(mb, sizeof(*s->slot_used));
    s->prefix = !o->no_prefix_cache;
    pfx_init(&s->pfx, s->max_batch, s->ctx);
    s->kv_len = xcalloc(mb, sizeof(*s->kv_len));
    s->seqs = xcalloc(mb, sizeof(*s->seqs));
    s->owner = xcalloc(mb, sizeof(*s->owner));
    s->pfd = xcalloc(mb, sizeof(*s->pfd));
    s->piece_cap = TOK_STREAM_CAP(tok_max_piece(v));
    s->piece = xmalloc(s->piece_cap);
    s->text_cap = API_MAX_STOP_LEN + 2 * s->piece_cap;
    s->text = xmalloc(s->text_cap);
    int rc = pthread_create(&s->thread, NULL, loop, s);
    if (rc != 0) {
        err_set(err, FP_ERR_RESOURCE, "cannot start the scheduler thread: %s", strerror(rc));
        sched_free(s);
        return NULL;
    }
    s->started = true;
    return s;
}

/* Checked again here (the HTTP layer checks first, with the prompt's own
 * numbers in the message) so that no caller can queue a request whose
 * positions would run past its slot. */
int sched_submit(sched *s, sched_req *r, struct api_error *e)
{
    for (int i = 0; i < r->n_seqs; i++)
        if ((long)r->seqs[i].n_prompt + r->max_tokens > s->ctx) {
            api_error_set(e, 400, "invalid_request_error", "max_tokens",
                          "%d prompt tokens plus %d max_tokens pass the context of %d",
                          r->seqs[i].n_prompt, r->max_tokens, s->ctx);
            api_error_code(e, "context_length_exceeded");
            return -1;
        }
    int rc = 0;
    r->t_submit = clock_ns();
    pthread_mutex_lock(&s->mu);
    if (s->stopping)
        rc = api_error_set(e, 503, "unavailable_error", NULL, "the server is shutting down");
    else if (s->q_len >= s->o.max_queue)
        rc = api_error_set(e, 503, "unavailable_error", NULL,
                           "the queue is full (%ld requests waiting; --max-queue)", s->q_len);
    if (rc == 0) {
        atomic_fetch_add(&r->refs, 1);
        if (s->q_tail)
            s->q_tail->next = r;
        else
            s->q_head = r;
        s->q_tail = r;
        s->q_len++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void sched_reset_prefix(sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->reset_prefix = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void sched_gauges(sched *s, struct prom_gauges *g)
{
    pthread_mutex_lock(&s->mu);
    g->queued = s->q_len;
    g->running = s->g_running;
    g->kv_positions = s->g_kv_positions;
    pthread_mutex_unlock(&s->mu);
    g->slots = s->max_batch;
    g->kv_capacity = (long)s->max_batch * s->ctx;
    g->ready = 1;
}

void sched_stop(sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->started) {
        pthread_join(s->thread, NULL);
        s->started = false;
    }
}

void sched_free(sched *s)
{
    if (!s)
        return;
    sched_stop(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->run);
    free(s->slot_used);
    pfx_release(&s->pfx);
    free(s->kv_len);
    free(s->seqs);
    free(s->owner);
    free(s->pfd);
    free(s->piece);
    free(s->text);
    jmask_free(s->jm);
    free(s);
}
