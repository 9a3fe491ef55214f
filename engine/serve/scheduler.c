/*
 * scheduler: the continuous-batching loop (see sched.h). The scheduler thread
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
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp4.h"
#include "log.h"
#include "text/stop.h"
#include "timeutil.h"
#include "xalloc.h"

/* Output caps. A stream's unread bytes grow only when its client reads
 * slower than tokens come; 8 MiB is tens of thousands of events, far past
 * any client that is still reading, so passing it ends the generation
 * instead of letting one stalled reader hold memory without bound. */
#define OUT_CAP ((size_t)8 << 20) /* unread stream bytes before a client counts as gone */
/* non-streaming text: its JSON reply (escaping can make a byte six) must
 * still fit in OUT_CAP, or the answer would be an empty 200 */
#define TEXT_CAP  (OUT_CAP / 8)
#define OUT_START 4096 /* bytes reserved at admission */

struct sched_req {
    /* set by sched_req_new, read-only afterwards */
    enum api_kind kind;
    bool stream, include_usage, ignore_eos;
    int32_t *tokens; /* (n_prompt + max_tokens) prompt, then generated ids; owned */
    int n_prompt;
    int max_tokens;
    struct sample_params sp;
    char **stops;      /* (n_stops) owned */
    size_t *stop_lens; /* (n_stops) owned */
    size_t n_stops;
    char *id, *model; /* owned */
    long long created;
    void (*wake)(void *arg);
    void *wake_arg;
    atomic_int refs;

    /* shared with the HTTP layer, under mu */
    pthread_mutex_t mu;
    struct buf out; /* SSE bytes not yet read, or the final JSON body */
    int status;     /* HTTP status of the final body */
    bool done;      /* no more output will be appended */
    bool parked;    /* a reader waits for wake */
    bool cancel;    /* the client is gone */

    /* the scheduler thread's */
    int fd;          /* dup of the client socket, or -1; closed when the generation ends */
    int slot;        /* KV slot, -1 while queued */
    int n_tokens;    /* ids in tokens */
    int n_cached;    /* positions in the slot's KV cache */
    int n_gen;       /* generated ids */
    bool sent_first; /* a content chunk went out (chat: it carried the role) */
    struct sampler sampler;
    struct tok_stream ts;
    struct stop_filter stop;
    struct buf text;   /* non-streaming: the answer so far */
    uint64_t t_submit; /* clock_ns at submit */
    uint64_t t_admit;  /* clock_ns at admission (a slot), 0 before */
    uint64_t t_first;  /* clock_ns at the first generated token, 0 before */
    uint64_t t_last;   /* clock_ns at the latest generated token, 0 before */
    sched_req *next;   /* queue link */
};

struct sched {
    struct model *m;
    const tok_vocab *v;
    struct prom *met;
    struct sched_opts o;
    int max_batch, ctx;
    pthread_t thread;
    bool started;

    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sched_req *q_head, *q_tail; /* waiting requests, FIFO */
    long q_len;
    bool stopping;
    long g_running, g_kv_positions; /* gauges published after each step */

    /* the scheduler thread's */
    sched_req **run; /* (max_batch) running requests in admission order */
    int n_run;
    bool *slot_used;        /* (max_batch) */
    struct model_seq *seqs; /* (max_batch) one step */
    sched_req **owner;      /* (max_batch) request of seqs[i] */
    struct pollfd *pfd;     /* (max_batch) */
    char *piece;            /* detokenizer output, piece_cap bytes */
    size_t piece_cap;
    char *text; /* stop-filter output, text_cap bytes */
    size_t text_cap;
};

/* ---- requests ---- */

/* Everything is copied, so the HTTP layer may free its parse at once. The
 * token array has room for the whole generation: decoding only appends. The
 * client socket is dup'ed so the scheduler can poll it for hang-up without
 * racing libmicrohttpd closing (and the kernel reusing) the original fd. */
sched_req *sched_req_new(const struct sched_req_params *p)
{
    sched_req *r = xcalloc(1, sizeof(*r));
    r->kind = p->kind;
    r->stream = p->stream;
    r->include_usage = p->include_usage;
    r->ignore_eos = p->ignore_eos;
    r->n_prompt = (int)p->n_prompt;
    r->max_tokens = (int)p->max_tokens;
    r->tokens = xmalloc(((size_t)r->n_prompt + (size_t)r->max_tokens) * sizeof(int32_t));
    memcpy(r->tokens, p->prompt, p->n_prompt * sizeof(int32_t));
    r->n_tokens = r->n_prompt;
    r->sp = p->sample;
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
    buf_init(&r->out, OUT_CAP);
    buf_init(&r->text, TEXT_CAP);
    r->fd = p->fd >= 0 ? fcntl(p->fd, F_DUPFD_CLOEXEC, 0) : -1;
    r->slot = -1;
    return r;
}

void sched_req_ref(sched_req *r)
{
    atomic_fetch_add(&r->refs, 1);
}

void sched_req_unref(sched_req *r)
{
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    if (r->fd >= 0)
        close(r->fd);
    pthread_mutex_destroy(&r->mu);
    buf_release(&r->out);
    buf_release(&r->text);
    for (size_t i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    free(r->stops);
    free(r->stop_lens);
    free(r->tokens);
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

/* What one publish() appends: text, and a finish reason on the last token. */
struct chunk_ctx {
    const char *text;
    size_t n;
    const char *finish; /* NULL = more to come */
};

/* One SSE event for a token's text. The last token's event carries the
 * finish reason; the usage event and [DONE] follow it in the same append,
 * so a reader never sees a finished stream without its end marker. */
static int put_chunk(sched_req *r, const void *vctx)
{
    const struct chunk_ctx *c = vctx;
    struct api_resp rp = resp_of(r);
    int rc = api_sse_chunk(&r->out, &rp, c->text, c->n, r->kind == API_CHAT && !r->sent_first,
                           c->finish);
    if (rc == 0 && c->n)
        r->sent_first = true;
    if (rc == 0 && c->finish) {
        if (r->include_usage)
            rc = api_sse_usage(&r->out, &rp, r->n_prompt, r->n_gen);
        if (rc == 0)
            rc = api_sse_done(&r->out);
    }
    return rc;
}

/* The whole non-streaming answer, built once at the end. */
static int put_final(sched_req *r, const void *vctx)
{
    const struct chunk_ctx *c = vctx;
    struct api_resp rp = resp_of(r);
    buf_reset(&r->out);
    r->status = 200;
    return api_final_json(&r->out, &rp, r->text.data ? r->text.data : "", r->text.len, c->finish,
                          r->n_prompt, r->n_gen);
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
 * running set and of the KV positions held over every slot. */
static void gauges(sched *s)
{
    long kv = 0;
    for (int i = 0; i < s->max_batch; i++)
        kv += model_slot_len(s->m, i);
    pthread_mutex_lock(&s->mu);
    s->g_running = s->n_run;
    s->g_kv_positions = kv;
    pthread_mutex_unlock(&s->mu);
}

/* End r's generation: the slot, KV and socket are given back and counted
 * first (so a reader that sees the end also sees them free), then the last
 * output goes out by reason, and the scheduler's reference is dropped. */
static void finish(sched *s, sched_req *r, enum prom_finish why, const char *text, size_t n)
{
    if (r->slot >= 0) {
        model_slot_free(s->m, r->slot);
        s->slot_used[r->slot] = false;
        int k = 0;
        for (int i = 0; i < s->n_run; i++)
            if (s->run[i] != r)
                s->run[k++] = s->run[i];
        s->n_run = k;
        sampler_release(&r->sampler);
        stop_release(&r->stop);
        r->slot = -1;
        gauges(s);
    }
    if (r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
    }
    atomic_fetch_add_explicit(&s->met->finished[why], 1, memory_order_relaxed);
    if (why == PROM_FIN_STOP || why == PROM_FIN_LENGTH) /* served: before its reader wakes */
        prom_request_done(s->met, r->t_submit, r->t_admit, r->t_first, clock_ns(), r->n_prompt,
                          r->n_gen);
    if (why == PROM_FIN_STOP || why == PROM_FIN_LENGTH) {
        struct chunk_ctx c = {.text = text, .n = n, .finish = finish_names[why]};
        if (!r->stream)
            buf_append(&r->text, text, n);
        publish(r, r->stream ? put_chunk : put_final, &c, true);
    } else if (why == PROM_FIN_ABORTED) {
        struct api_error e = {0};
        api_error_set(&e, 503, "unavailable_error", NULL,
                      "the server is shutting down; generation stopped after %d tokens", r->n_gen);
        publish(r, put_abort, &e, true);
    } else {
        publish(r, NULL, NULL, true); /* cancelled: nobody reads; let the server close */
    }
    uint64_t now = clock_ns();
    log_debug("%s: %d prompt + %d generated tokens, %s, ttft %.1f ms, e2e %.1f ms", r->id,
              r->n_prompt, r->n_gen, finish_names[why],
              r->t_first ? (double)(r->t_first - r->t_submit) / 1e6 : -1.0,
              (double)(now - r->t_submit) / 1e6);
    sched_req_unref(r);
}

/* Give r a slot and its sampling state. Allocation happens here, at
 * admission, never inside a step: the sampler's candidate arrays, the stop
 * filter's held text and the first 4 KiB of output. The slot is wiped
 * first, so a sequence never sees a previous tenant's KV. */
static void admit(sched *s, sched_req *r)
{
    int slot = 0;
    while (s->slot_used[slot])
        slot++;
    s->slot_used[slot] = true;
    r->slot = slot;
    model_slot_free(s->m, slot);
    r->n_cached = 0;
    s->run[s->n_run++] = r;
    r->t_admit = clock_ns();
    sampler_init(&r->sampler, s->m->cfg.n_vocab, &r->sp);
    tok_stream_init(&r->ts);
    stop_init(&r->stop, r->stops, r->stop_lens, r->n_stops, s->piece_cap);
    buf_reserve(r->stream ? &r->out : &r->text, OUT_START);
    atomic_fetch_add_explicit(&s->met->prompt_tokens, (uint64_t)r->n_prompt, memory_order_relaxed);
}

/* Finish every running request whose client is gone: the flag, or a
 * hang-up on its socket. */
static void reap_cancelled(sched *s)
{
    /* One poll() over every running client per step: POLLRDHUP is the peer
     * shutting its side, POLLHUP/POLLERR a reset. libmicrohttpd cannot see
     * these while a connection is suspended, which is most of a stream's
     * life, so without this a vanished client would keep its slot until
     * the next token failed to send. */
    int n = 0;
    for (int i = 0; i < s->n_run; i++) {
        s->pfd[i] = (struct pollfd){.fd = s->run[i]->fd, .events = POLLRDHUP};
        n += s->run[i]->fd >= 0;
    }
    int np = s->n_run;
    if (n && poll(s->pfd, (nfds_t)np, 0) < 0 && errno != EINTR)
        log_warn("poll on client sockets: %s", strerror(errno));
    /* collect first: finish() reorders s->run */
    sched_req *gone[np ? np : 1];
    int n_gone = 0;
    for (int i = 0; i < np; i++) {
        sched_req *r = s->run[i];
        pthread_mutex_lock(&r->mu);
        bool c = r->cancel;
        pthread_mutex_unlock(&r->mu);
        if (c || (n && r->fd >= 0 && (s->pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR))))
            gone[n_gone++] = r;
    }
    for (int i = 0; i < n_gone; i++)
        finish(s, gone[i], PROM_FIN_CANCELLED, NULL, 0);
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
            if (c || (r->fd >= 0 && (pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR)))) {
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

/* A token was sampled for r: stream it, or end the generation. */
static void on_token(sched *s, sched_req *r, int32_t tok)
{
    /* The order matters: end-of-generation first (its text is never
     * sent), then the detokenizer (whole UTF-8 characters only), then the
     * stop filter (whole stop strings only), then max_tokens, which
     * flushes whatever both held back into the last event. */
    r->tokens[r->n_tokens++] = tok;
    r->n_gen++;
    uint64_t now = clock_ns();
    if (r->t_last)
        prom_observe(&s->met->hist[PROM_H_ITL], now - r->t_last);
    else
        r->t_first = now;
    r->t_last = now;
    atomic_fetch_add_explicit(&s->met->generated_tokens, 1, memory_order_relaxed);
    if (!r->ignore_eos && tok_is_eog(s->v, tok)) {
        size_t n = tok_stream_flush(&r->ts, s->piece, s->piece_cap);
        bool hit;
        size_t w = stop_push(&r->stop, s->piece, n, s->text, s->text_cap, &hit);
        if (!hit)
            w += stop_flush(&r->stop, s->text + w, s->text_cap - w);
        finish(s, r, PROM_FIN_STOP, s->text, w);
        return;
    }
    size_t n = tok_stream_push(s->v, &r->ts, tok, s->piece, s->piece_cap);
    bool hit = false;
    size_t w = stop_push(&r->stop, s->piece, n, s->text, s->text_cap, &hit);
    if (hit) {
        finish(s, r, PROM_FIN_STOP, s->text, w);
        return;
    }
    if (r->n_gen >= r->max_tokens || r->n_tokens >= s->ctx) {
        n = tok_stream_flush(&r->ts, s->piece, s->piece_cap);
        size_t w2 = stop_push(&r->stop, s->piece, n, s->text + w, s->text_cap - w, &hit);
        w += w2;
        if (!hit)
            w += stop_flush(&r->stop, s->text + w, s->text_cap - w);
        finish(s, r, hit ? PROM_FIN_STOP : PROM_FIN_LENGTH, s->text, w);
        return;
    }
    if (w == 0)
        return; /* held back: part of a character or of a stop string */
    if (!r->stream) {
        if (buf_append(&r->text, s->text, w) != 0) {
            log_warn("%s: answer passed %zu bytes; generation stopped", r->id, TEXT_CAP);
            finish(s, r, PROM_FIN_LENGTH, NULL, 0);
        }
        return;
    }
    struct chunk_ctx c = {.text = s->text, .n = w, .finish = NULL};
    if (publish(r, put_chunk, &c, false) != 0) {
        log_warn("%s: the client left %zu bytes unread; treating it as gone", r->id, OUT_CAP);
        finish(s, r, PROM_FIN_CANCELLED, NULL, 0);
    }
}

/* ---- the step ---- */

/* One model step over the running set. Returns -1 on a model error (every
 * running request is aborted then). */
static int step(sched *s)
{
    /* Decode rows go first and are never limited: a running stream gets
     * its token every step whatever arrives. Prompt chunks fill the budget
     * after them, oldest request first, so a long prompt is spread over
     * several steps instead of stalling every stream for one long step. */
    int n = 0, rows = 0, budget = s->o.prefill_chunk, n_dec = 0, n_pre = 0;
    for (int i = 0; i < s->n_run; i++) { /* decode rows first */
        sched_req *r = s->run[i];
        if (r->n_cached < r->n_prompt)
            continue;
        s->seqs[n] = (struct model_seq){.slot = r->slot,
                                        .pos = r->n_tokens - 1,
                                        .n_tokens = 1,
                                        .tokens = &r->tokens[r->n_tokens - 1],
                                        .logits = MODEL_LOGITS_LAST};
        s->owner[n++] = r;
        rows++;
        n_dec++;
    }
    for (int i = 0; i < s->n_run && budget > 0 && rows < s->m->max_rows; i++) {
        sched_req *r = s->run[i]; /* then prompt chunks, oldest first */
        if (r->n_cached >= r->n_prompt)
            continue;
        int k = r->n_prompt - r->n_cached;
        if (k > budget)
            k = budget;
        if (k > s->m->max_rows - rows)
            k = s->m->max_rows - rows;
        bool last = r->n_cached + k == r->n_prompt;
        s->seqs[n] = (struct model_seq){.slot = r->slot,
                                        .pos = r->n_cached,
                                        .n_tokens = k,
                                        .tokens = &r->tokens[r->n_cached],
                                        .logits = last ? MODEL_LOGITS_LAST : MODEL_LOGITS_NONE};
        s->owner[n++] = r;
        rows += k;
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
            finish(s, s->run[0], PROM_FIN_ABORTED, NULL, 0);
        return -1;
    }
    struct prom *met = s->met;
    uint64_t step_ns = clock_ns() - t0;
    atomic_fetch_add_explicit(&met->step_ns, step_ns, memory_order_relaxed);
    if (n_pre == 0) {
        atomic_fetch_add_explicit(&met->do_step_ns, step_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&met->do_steps, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&met->do_step_seqs, (uint64_t)n, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&met->steps, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&met->step_seqs, (uint64_t)n, memory_order_relaxed);
    atomic_fetch_add_explicit(&met->decode_rows, (uint64_t)n_dec, memory_order_relaxed);
    atomic_fetch_add_explicit(&met->prefill_rows, (uint64_t)n_pre, memory_order_relaxed);
    atomic_fetch_add_explicit(&met->attn_ns, s->m->last.attn_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&met->matmul_ns, s->m->last.matmul_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&met->other_ns, s->m->last.other_ns, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        sched_req *r = s->owner[i];
        r->n_cached = s->seqs[i].pos + s->seqs[i].n_tokens;
        if (s->seqs[i].out)
            on_token(s, r, sampler_sample(&r->sampler, s->seqs[i].out));
    }
    return 0;
}

/* The scheduler thread: sleep while there is nothing to do, else admit
 * what fits, drop the clients that left, run one step, publish gauges. */
static void *loop(void *arg)
{
    sched *s = arg;
    sched_req *admitted[s->max_batch];
    for (;;) {
        int n_adm = 0;
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && s->n_run == 0 && !s->q_head)
            pthread_cond_wait(&s->cv, &s->mu);
        bool stopping = s->stopping;
        sched_req *gone = stopping ? NULL : unlink_gone_queued(s);
        while (!stopping && s->q_head && s->n_run + n_adm < s->max_batch) {
            sched_req *r = s->q_head;
            s->q_head = r->next;
            if (!s->q_head)
                s->q_tail = NULL;
            s->q_len--;
            r->next = NULL;
            admitted[n_adm++] = r;
        }
        pthread_mutex_unlock(&s->mu);
        while (gone) {
            sched_req *next = gone->next;
            finish(s, gone, PROM_FIN_CANCELLED, NULL, 0);
            gone = next;
        }
        if (stopping)
            break;
        for (int i = 0; i < n_adm; i++)
            admit(s, admitted[i]);
        reap_cancelled(s);
        step(s);
        gauges(s);
    }
    /* stopping: abort what runs and what waits */
    while (s->n_run)
        finish(s, s->run[0], PROM_FIN_ABORTED, NULL, 0);
    pthread_mutex_lock(&s->mu);
    sched_req *q = s->q_head;
    s->q_head = s->q_tail = NULL;
    s->q_len = 0;
    pthread_mutex_unlock(&s->mu);
    while (q) {
        sched_req *next = q->next;
        finish(s, q, PROM_FIN_ABORTED, NULL, 0);
        q = next;
    }
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
    if ((long)r->n_prompt + r->max_tokens > s->ctx)
        return api_error_set(e, 400, "invalid_request_error", "max_tokens",
                             "%d prompt tokens plus %d max_tokens pass the context of %d",
                             r->n_prompt, r->max_tokens, s->ctx);
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
    free(s->seqs);
    free(s->owner);
    free(s->pfd);
    free(s->piece);
    free(s->text);
    free(s);
}
