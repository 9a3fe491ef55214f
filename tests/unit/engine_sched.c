/*
 * engine_sched: the scheduler in-process on a seeded tiny model. Every
 * request run inside a batch (more requests than slots, prompts split into
 * chunks) must produce exactly the tokens of a plain one-sequence loop over
 * model_step, greedy and seeded sampling alike; streams must be well formed;
 * max_tokens, end-of-generation, stop strings, cancellation and shutdown
 * must end generations as documented and give back slots and KV. A request
 * of several prompts and choices must equal its single requests (choice j
 * seeded seed + j), and echoed prompt logprobs must equal `fp4serve eval`'s.
 */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The source, not the header: the tests read struct sched_req's private fields. */
#include "rng.h"
#include "test.h"

#include "format/synth.h"
#include "model/eval.h"
#include "serve/scheduler.c"

static char model_path[64];
static tok_vocab *vocab;

/* ---- wake-ups: a counter the scheduler's wake callback bumps ---- */

static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wcv = PTHREAD_COND_INITIALIZER;
static unsigned long wakes;

static void on_wake(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&wmu);
    wakes++;
    pthread_cond_broadcast(&wcv);
    pthread_mutex_unlock(&wmu);
}

static void no_park(void *arg)
{
    (void)arg;
}

static unsigned long wake_count(void)
{
    pthread_mutex_lock(&wmu);
    unsigned long w = wakes;
    pthread_mutex_unlock(&wmu);
    return w;
}

static void wait_wake(unsigned long seen)
{
    pthread_mutex_lock(&wmu);
    while (wakes == seen)
        pthread_cond_wait(&wcv, &wmu);
    pthread_mutex_unlock(&wmu);
}

/* ---- set-up ---- */

/* The backend the scheduler drives: the CPU's, or (cudahost_sched, built
 * with CUDAHOST_SCHED) the CUDA one's through the host harness
 * (docs/cudahost.md). The CUDA backend's matmuls are batch-invariant only
 * within a regime (cuda/cuda.h CU_GEMV_MAX_ROWS), and a cached prefix
 * changes how many rows each step has, so there a logprob may move by
 * rounding: SCHED_LP_TOL nats (2.5e-5 measured on the tiny model; a
 * prefix copy missing K or V moves them by far more). The CPU backend's
 * rows never depend on their step: bit for bit. */
#ifdef CUDAHOST_SCHED
#define SCHED_DEVICE "cuda"
#define SCHED_LP_TOL 1e-3
#else
#define SCHED_DEVICE NULL
#define SCHED_LP_TOL 0.0
#endif

static struct model *load(int max_batch, int ctx, int chunk)
{
    struct model_opts o = {.threads = 1,
                           .device = SCHED_DEVICE,
                           .max_batch = max_batch,
                           .ctx = ctx,
                           .max_step_tokens = max_batch + chunk,
                           .max_logit_rows = max_batch};
    struct err err;
    err_init(&err);
    struct model *m = model_new(model_path, &o, &err);
    CHECK_MSG(m != NULL, "load: %s", err.msg);
    return m;
}

static void cleanup(void)
{
    unlink(model_path);
    tok_free(vocab);
}

static void setup(void)
{
    if (vocab)
        return;
    atexit(cleanup);
    snprintf(model_path, sizeof(model_path), "/tmp/engine_sched-%ld.gguf", (long)getpid());
    struct synth_opts so = {.preset = synth_preset_find("tiny"), .type = Q_F16, .seed = 5};
    struct err err;
    err_init(&err);
    CHECK_MSG(synth_write(&so, model_path, &err) == 0, "synth: %s", err.msg);
    struct gguf_file f;
    CHECK(gguf_open(model_path, &f, &err) == 0);
    CHECK(tok_load(&f, &vocab, &err) == 0);
    gguf_close(&f);
}

/* The reference: one sequence, whole prompt in one step, then one token per step. */
static int reference(const int32_t *prompt, int n_prompt, int n_gen, const struct sample_params *sp,
                     bool ignore_eos, int32_t *out)
{
    struct model *m = load(1, 256, 256);
    struct sampler smp;
    sampler_init(&smp, m->cfg.n_vocab, sp);
    struct err err;
    err_init(&err);
    int32_t toks[256];
    memcpy(toks, prompt, (size_t)n_prompt * sizeof(int32_t));
    struct model_seq s = {
        .slot = 0, .pos = 0, .n_tokens = n_prompt, .tokens = toks, .logits = MODEL_LOGITS_LAST};
    int n = 0;
    CHECK(model_step(m, &s, 1, &err) == 0);
    while (n < n_gen) {
        int32_t t = sampler_sample(&smp, s.out);
        out[n++] = t;
        toks[n_prompt + n - 1] = t;
        if (!ignore_eos && tok_is_eog(vocab, t))
            break;
        s = (struct model_seq){.slot = 0,
                               .pos = n_prompt + n - 1,
                               .n_tokens = 1,
                               .tokens = &toks[n_prompt + n - 1],
                               .logits = MODEL_LOGITS_LAST};
        CHECK(model_step(m, &s, 1, &err) == 0);
    }
    sampler_release(&smp);
    model_free(m);
    return n;
}

static sched_req *make(const int32_t *prompt, int n_prompt, int max_tokens,
                       const struct sample_params *sp, bool stream, bool ignore_eos,
                       char *const *stops, const size_t *lens, size_t n_stops)
{
    struct sched_prompt one = {.ids = prompt, .n_ids = (size_t)n_prompt};
    struct sched_req_params p = {.kind = API_COMPLETION,
                                 .prompts = &one,
                                 .n_prompts = 1,
                                 .max_tokens = max_tokens,
                                 .sample = *sp,
                                 .stops = stops,
                                 .stop_lens = lens,
                                 .n_stops = n_stops,
                                 .ignore_eos = ignore_eos,
                                 .stream = stream,
                                 .include_usage = true,
                                 .id = "cmpl-test",
                                 .model = "tiny",
                                 .created = 1,
                                 .fd = -1,
                                 .wake = on_wake};
    return sched_req_new(&p);
}

/* Everything a stream said. */
struct streamed {
    struct buf text;
    char finish[16];
    long usage_prompt, usage_completion, usage_cached;
    int events, content_events;
    bool done, error, empty_before_first;
};

/* Read r's stream to the end and check its shape on the way. */
static void drain(sched_req *r, struct streamed *st)
{
    memset(st, 0, sizeof(*st));
    buf_init(&st->text, 1 << 20);
    st->usage_prompt = st->usage_completion = st->usage_cached = -1;
    struct buf raw;
    buf_init(&raw, 1 << 24);
    char chunk[4096];
    for (;;) {
        unsigned long seen = wake_count();
        bool end;
        size_t n = sched_req_read(r, chunk, sizeof(chunk), no_park, NULL, &end);
        if (end)
            break;
        if (n == 0) {
            wait_wake(seen);
            continue;
        }
        buf_append(&raw, chunk, n);
    }
    const char *p = raw.data ? raw.data : "";
    while (*p) {
        const char *e = strstr(p, "\n\n");
        CHECK_MSG(e && strncmp(p, "data: ", 6) == 0, "malformed event at '%.40s'", p);
        if (!e)
            break;
        st->events++;
        CHECK_MSG(!st->done, "an event after [DONE]");
        if (strncmp(p + 6, "[DONE]", 6) == 0) {
            st->done = true;
        } else {
            json_t *j = json_loadb(p + 6, (size_t)(e - p - 6), 0, NULL);
            CHECK_MSG(j != NULL, "event is not JSON: %.80s", p);
            json_t *ch = json_object_get(j, "choices");
            json_t *c0 = json_array_get(ch, 0);
            json_t *u = json_object_get(j, "usage");
            if (json_object_get(j, "error"))
                st->error = true;
            if (u) {
                CHECK_MSG(json_is_array(ch) && json_array_size(ch) == 0,
                          "usage event with choices");
                st->usage_prompt = (long)json_integer_value(json_object_get(u, "prompt_tokens"));
                st->usage_completion =
                    (long)json_integer_value(json_object_get(u, "completion_tokens"));
                json_t *d = json_object_get(u, "prompt_tokens_details");
                st->usage_cached = (long)json_integer_value(json_object_get(d, "cached_tokens"));
            } else if (c0) {
                const char *t = json_string_value(json_object_get(c0, "text"));
                json_t *fr = json_object_get(c0, "finish_reason");
                if (t && *t) {
                    st->content_events++;
                    buf_puts(&st->text, t);
                } else if (!json_is_string(fr) && st->content_events == 0) {
                    st->empty_before_first = true;
                }
                if (json_is_string(fr))
                    snprintf(st->finish, sizeof(st->finish), "%s", json_string_value(fr));
            }
            json_decref(j);
        }
        p = e + 2;
    }
    buf_release(&raw);
}

/* Text of ids as the stream would show it (no stop strings). */
static void text_of(const int32_t *ids, int n, struct buf *out)
{
    struct tok_stream ts;
    tok_stream_init(&ts);
    char piece[4096];
    for (int i = 0; i < n; i++) {
        if (tok_is_eog(vocab, ids[i]))
            break;
        buf_append(out, piece, tok_stream_push(vocab, &ts, ids[i], piece, sizeof(piece)));
    }
    buf_append(out, piece, tok_stream_flush(&ts, piece, sizeof(piece)));
}

static void prompt_of(int k, int32_t *p, int *n)
{
    uint64_t st = 1000 + (uint64_t)k;
    *n = 3 + (k * 7) % 37;
    for (int i = 0; i < *n; i++)
        p[i] = 5 + (int32_t)(rng_next(&st) % 500);
}

TEST(batch_matches_reference)
{
    setup();
    struct model *m = load(4, 256, 7);
    struct prom met;
    prom_init(&met);
    struct err err;
    err_init(&err);
    sched *s =
        sched_new(m, vocab, &(struct sched_opts){.prefill_chunk = 7, .max_queue = 64}, &met, &err);
    enum { N = 10, GEN = 24 };
    sched_req *r[N];
    int32_t prompts[N][64];
    int np[N];
    struct sample_params sp[N];
    for (int k = 0; k < N; k++) {
        prompt_of(k, prompts[k], &np[k]);
        sp[k] = (struct sample_params){.temperature = k % 2 ? 0.8f : 0,
                                       .top_k = k % 3 ? 0 : 20,
                                       .top_p = k % 4 == 1 ? 0.9f : 1,
                                       .seed = 77 + (uint64_t)k};
        r[k] = make(prompts[k], np[k], GEN, &sp[k], k % 3 != 2, true, NULL, NULL, 0);
        struct api_error e = {0};
        CHECK_INT(sched_submit(s, r[k], &e), 0);
    }
    long prompt_total = 0;
    for (int k = 0; k < N; k++) {
        prompt_total += np[k];
        int32_t want[GEN];
        int nw = reference(prompts[k], np[k], GEN, &sp[k], true, want);
        struct streamed st = {0};
        if (k % 3 != 2) {
            drain(r[k], &st);
            CHECK(st.done && !st.error && !st.empty_before_first);
            CHECK_STR(st.finish, "length");
            CHECK_INT(st.usage_completion, GEN);
            CHECK_INT(st.usage_prompt, np[k]);
        } else {
            struct buf body;
            buf_init(&body, 1);
            int status = 0;
            for (;;) {
                unsigned long seen = wake_count();
                if (sched_req_take(r[k], &body, &status, no_park, NULL))
                    break;
                wait_wake(seen);
            }
            CHECK_INT(status, 200);
            json_t *j = json_loadb(body.data, body.len, 0, NULL);
            CHECK(j != NULL);
            CHECK_INT(json_integer_value(
                          json_object_get(json_object_get(j, "usage"), "completion_tokens")),
                      GEN);
            json_decref(j);
            buf_release(&body);
        }
        CHECK_INT(nw, GEN);
        CHECK_INT(r[k]->seqs[0].n_gen, GEN);
        bool same = memcmp(want, r[k]->seqs[0].tokens + np[k], sizeof(int32_t) * GEN) == 0;
        CHECK_MSG(same, "request %d (temperature %.1f): tokens differ from the reference", k,
                  sp[k].temperature);
        if (k % 3 != 2) {
            struct buf t;
            buf_init(&t, 1 << 20);
            text_of(want, GEN, &t);
            CHECK_MSG(t.len == st.text.len && memcmp(t.data, st.text.data, t.len) == 0,
                      "request %d: streamed text differs", k);
            buf_release(&t);
        }
        buf_release(&st.text);
        sched_req_unref(r[k]);
    }
    /* every prompt token was either computed or reused */
    CHECK_INT(atomic_load(&met.prefill_rows) + atomic_load(&met.prefix_hits), prompt_total);
    CHECK_INT(atomic_load(&met.prefix_queries), prompt_total);
    CHECK_INT(atomic_load(&met.finished[PROM_FIN_LENGTH]), N);
    struct prom_gauges g;
    sched_gauges(s, &g);
    CHECK_INT(g.running, 0);
    CHECK_INT(g.kv_positions, 0);
    CHECK(atomic_load(&met.step_seqs) > atomic_load(&met.steps)); /* batches formed */
    sched_free(s);
    model_free(m);
}

/* A one-request scheduler run: returns the stream. */
static void run_one(const int32_t *prompt, int n_prompt, int max_tokens, bool ignore_eos,
                    char *const *stops, const size_t *lens, size_t n_stops, struct streamed *st,
                    sched_req **keep)
{
    struct model *m = load(2, 256, 16);
    struct prom met;
    prom_init(&met);
    struct err err;
    err_init(&err);
    sched *s =
        sched_new(m, vocab, &(struct sched_opts){.prefill_chunk = 16, .max_queue = 8}, &met, &err);
    struct sample_params sp = {0};
    sched_req *r = make(prompt, n_prompt, max_tokens, &sp, true, ignore_eos, stops, lens, n_stops);
    struct api_error e = {0};
    CHECK_INT(sched_submit(s, r, &e), 0);
    drain(r, st);
    sched_free(s);
    model_free(m);
    *keep = r;
}

TEST(end_of_generation)
{
    setup();
    /* find a prompt whose greedy continuation reaches an EOG token */
    int32_t p[8] = {10, 20, 30, 2};
    struct sample_params sp = {0};
    int32_t want[32];
    int n = reference(p, 4, 32, &sp, false, want);
    struct streamed st;
    sched_req *r;
    run_one(p, 4, 32, false, NULL, NULL, 0, &st, &r);
    CHECK_INT(r->seqs[0].n_gen, n);
    CHECK_INT(st.usage_completion, n);
    bool eog = tok_is_eog(vocab, want[n - 1]);
    CHECK_STR(st.finish, eog ? "stop" : "length");
    CHECK_MSG(eog, "the test prompt no longer reaches an end-of-generation token (got %d tokens)",
              n);
    buf_release(&st.text);
    sched_req_unref(r);
    /* ignore_eos: the same prompt runs to max_tokens, EOG text included */
    run_one(p, 4, 32, true, NULL, NULL, 0, &st, &r);
    CHECK_INT(r->seqs[0].n_gen, 32);
    CHECK_STR(st.finish, "length");
    buf_release(&st.text);
    sched_req_unref(r);
}

TEST(stop_string_ends_text)
{
    setup();
    int32_t p[4] = {100, 200, 300, 400};
    struct sample_params sp = {0};
    int32_t want[40];
    int n = reference(p, 4, 40, &sp, true, want);
    struct buf full;
    buf_init(&full, 1 << 20);
    text_of(want, n, &full);
    CHECK(full.len > 6);
    /* stop at the first occurrence of the text's bytes 3..5 */
    char stop[4] = {full.data[3], full.data[4], 0};
    char *stops[] = {stop};
    size_t lens[] = {2};
    const char *at = memmem(full.data, full.len, stop, 2);
    struct streamed st;
    sched_req *r;
    run_one(p, 4, 40, true, stops, lens, 1, &st, &r);
    CHECK_STR(st.finish, "stop");
    CHECK_INT(st.text.len, at - full.data);
    CHECK(st.text.len == 0 || memcmp(st.text.data, full.data, st.text.len) == 0);
    CHECK(r->seqs[0].n_gen < 40);
    CHECK_INT(st.usage_completion, r->seqs[0].n_gen);
    buf_release(&st.text);
    buf_release(&full);
    sched_req_unref(r);
}

TEST(cancel_frees_slot)
{
    setup();
    struct model *m = load(2, 256, 16);
    struct prom met;
    prom_init(&met);
    struct err err;
    err_init(&err);
    sched *s =
        sched_new(m, vocab, &(struct sched_opts){.prefill_chunk = 16, .max_queue = 8}, &met, &err);
    int32_t p[3] = {7, 8, 9};
    struct sample_params sp = {0};
    sched_req *r = make(p, 3, 250, &sp, true, true, NULL, NULL, 0);
    struct api_error e = {0};
    CHECK_INT(sched_submit(s, r, &e), 0);
    for (;;) { /* wait until the first token is out: the sequence is running */
        pthread_mutex_lock(&r->mu);
        bool out = r->out.len > 0;
        pthread_mutex_unlock(&r->mu);
        if (out)
            break;
        usleep(100);
    }
    sched_req_cancel(r);
    struct streamed st;
    drain(r, &st);
    CHECK_INT(atomic_load(&met.finished[PROM_FIN_CANCELLED]), 1);
    CHECK(r->seqs[0].n_gen < 250);
    struct prom_gauges g;
    sched_gauges(s, &g);
    CHECK_INT(g.running, 0);
    CHECK_INT(g.kv_positions, 0);
    buf_release(&st.text);
    sched_req_unref(r);
    /* a request that cannot fit the context is refused before it queues */
    int32_t big[200] = {0};
    r = make(big, 200, 57, &sp, true, true, NULL, NULL, 0);
    CHECK_INT(sched_submit(s, r, &e), -1);
    CHECK_INT(e.status, 400);
    CHECK(strstr(e.msg, "200 prompt tokens plus 57 max_tokens pass the context of 256") != NULL);
    sched_req_unref(r);
    sched_free(s);
    model_free(m);
}

TEST(stop_aborts_streams)
{
    setup();
    struct model *m = load(1, 256, 16);
    struct prom met;
    prom_init(&met);
    struct err err;
    err_init(&err);
    sched *s =
        sched_new(m, vocab, &(struct sched_opts){.prefill_chunk = 16, .max_queue = 8}, &met, &err);
    int32_t p[3] = {7, 8, 9};
    struct sample_params sp = {0};
    sched_req *a = make(p, 3, 250, &sp, true, true, NULL, NULL, 0);
    sched_req *b = make(p, 3, 250, &sp, false, true, NULL, NULL, 0); /* waits: one slot */
    struct api_error e = {0};
    CHECK_INT(sched_submit(s, a, &e), 0);
    CHECK_INT(sched_submit(s, b, &e), 0);
    sched_stop(s);
    struct streamed st;
    drain(a, &st);
    CHECK(st.error && st.done);
    struct buf body;
    buf_init(&body, 1);
    int status = 0;
    CHECK(sched_req_take(b, &body, &status, no_park, NULL));
    CHECK_INT(status, 503);
    CHECK(body.data && strstr(body.data, "unavailable_error") != NULL);
    sched_req *c = make(p, 3, 5, &sp, true, true, NULL, NULL, 0);
    e = (struct api_error){0};
    CHECK_INT(sched_submit(s, c, &e), -1);
    CHECK_INT(e.status, 503);
    sched_req_unref(c);
    CHECK_INT(atomic_load(&met.finished[PROM_FIN_ABORTED]), 2);
    buf_release(&body);
    buf_release(&st.text);
    sched_req_unref(a);
    sched_req_unref(b);
    sched_free(s);
    model_free(m);
}

/* Clients that leave while their request waits for a slot (the flag, or a
 * hang-up on the socket) give their queue places back at once: they must
 * not hold --max-queue against live clients, nor be admitted later. */
TEST(cancelled_while_queued_leaves_the_queue)
{
    setup();
    struct model *m = load(1, 256, 16);
    struct prom met;
    prom_init(&met);
    struct err err;
    err_init(&err);
    sched *s =
        sched_new(m, vocab, &(struct sched_opts){.prefill_chunk = 16, .max_queue = 2}, &met, &err);
    int32_t p[3] = {7, 8, 9};
    struct sample_params sp = {0};
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    sched_req *a = make(p, 3, 250, &sp, true, true, NULL, NULL, 0); /* holds the one slot */
    sched_req *b = make(p, 3, 5, &sp, false, true, NULL, NULL, 0);
    sched_req *c = make(p, 3, 5, &sp, false, true, NULL, NULL, 0);
    b->fd = sv[0]; /* as sched_req_new's dup of the client socket */
    struct api_error e = {0};
    CHECK_INT(sched_submit(s, a, &e), 0);
    for (;;) { /* a runs once its first token is out; b and c then wait */
        pthread_mutex_lock(&a->mu);
        bool out = a->out.len > 0;
        pthread_mutex_unlock(&a->mu);
        if (out)
            break;
        usleep(100);
    }
    CHECK_INT(sched_submit(s, b, &e), 0);
    CHECK_INT(sched_submit(s, c, &e), 0);
    close(sv[1]); /* b's client hangs up */
    sched_req_cancel(c);
    struct prom_gauges g = {0};
    for (int i = 0; i < 2000; i++) {
        sched_gauges(s, &g);
        if (g.queued == 0)
            break;
        usleep(500);
    }
    CHECK_INT(g.queued, 0);
    struct streamed st;
    drain(a, &st);
    CHECK_INT(a->seqs[0].n_gen, 250);
    struct buf body;
    buf_init(&body, 1);
    int status = -1;
    CHECK(sched_req_take(b, &body, &status, no_park, NULL));
    CHECK_INT(status, 0); /* no answer: nobody is there */
    CHECK(sched_req_take(c, &body, &status, no_park, NULL));
    CHECK_INT(atomic_load(&met.finished[PROM_FIN_CANCELLED]), 2);
    CHECK_INT(atomic_load(&met.prompt_tokens), 3); /* b and c were never admitted */
    buf_release(&body);
    buf_release(&st.text);
    sched_req_unref(a);
    sched_req_unref(b);
    sched_req_unref(c);
    sched_free(s);
    model_free(m);
}

/* ---- several prompts and choices; logprobs and echo ---- */

/* Wait for r's non-streaming body and parse it. */
static json_t *take_json(sched_req *r)
{
    struct buf body;
    buf_init(&body, 1);
    int status = 0;
    for (;;) {
        unsigned long seen = wake_count();
        if (sched_req_take(r, &body, &status, no_park, NULL))
            break;
        wait_wake(seen);
    }
    CHECK_INT(status, 200);
    json_t *j = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
    CHECK_MSG(j != NULL, "body is not JSON: %.200s", body.data ? body.data : "");
    buf_release(&body);
    return j;
}

static sched *start(struct model *m, struct prom *met, int chunk)
{
    struct err err;
    err_init(&err);
    prom_init(met);
    return sched_new(m, vocab, &(struct sched_opts){.prefill_chunk = chunk, .max_queue = 64}, met,
                     &err);
}

/* n = 4 with a seed, over 3 prompts (12 sequences through 4 slots): choice
 * j of prompt i is prompt i's single request with seed + j, in the body's
 * choices[i * 4 + j]; and the same request again gives the same tokens. */
TEST(prompts_and_choices_match_single_requests)
{
    setup();
    struct model *m = load(4, 256, 5);
    struct prom met;
    sched *s = start(m, &met, 5);
    enum { NP = 3, NC = 4, GEN = 12 };
    int32_t pr[NP][64];
    int np[NP];
    struct sched_prompt sp_[NP];
    for (int i = 0; i < NP; i++) {
        prompt_of(i + 3, pr[i], &np[i]);
        sp_[i] = (struct sched_prompt){.ids = pr[i], .n_ids = (size_t)np[i]};
    }
    struct sample_params sp = {.temperature = 0.9f, .top_p = 0.95f, .seed = 1234};
    sched_req *r[2];
    for (int rep = 0; rep < 2; rep++) {
        struct sched_req_params p = {.kind = API_COMPLETION,
                                     .prompts = sp_,
                                     .n_prompts = NP,
                                     .n = NC,
                                     .logprobs = -1,
                                     .max_tokens = GEN,
                                     .sample = sp,
                                     .ignore_eos = true,
                                     .id = "cmpl-n",
                                     .model = "tiny",
                                     .fd = -1,
                                     .wake = on_wake};
        r[rep] = sched_req_new(&p);
        struct api_error e = {0};
        CHECK_INT(sched_submit(s, r[rep], &e), 0);
    }
    for (int rep = 0; rep < 2; rep++) {
        json_t *j = take_json(r[rep]);
        json_t *ch = json_object_get(j, "choices");
        CHECK_INT(json_array_size(ch), NP * NC);
        json_t *u = json_object_get(j, "usage");
        CHECK_INT(json_integer_value(json_object_get(u, "prompt_tokens")), np[0] + np[1] + np[2]);
        CHECK_INT(json_integer_value(json_object_get(u, "completion_tokens")), NP * NC * GEN);
        for (int i = 0; i < NP; i++)
            for (int c = 0; c < NC; c++) {
                int k = i * NC + c;
                struct sample_params one = sp;
                one.seed = sp.seed + (uint64_t)c;
                int32_t want[GEN];
                reference(pr[i], np[i], GEN, &one, true, want);
                CHECK_INT(json_integer_value(json_object_get(json_array_get(ch, k), "index")), k);
                struct sched_seq *q = &r[rep]->seqs[k];
                CHECK_MSG(q->n_gen == GEN && memcmp(q->tokens + np[i], want, sizeof(want)) == 0,
                          "request %d prompt %d choice %d differs from its single request", rep, i,
                          c);
                struct buf t;
                buf_init(&t, 1 << 16);
                text_of(want, GEN, &t);
                const char *got = json_string_value(json_object_get(json_array_get(ch, k), "text"));
                CHECK(got && strlen(got) == t.len && memcmp(got, t.data, t.len) == 0);
                buf_release(&t);
            }
        json_decref(j);
    }
    /* the four choices differ from each other (distinct seeds) */
    CHECK(memcmp(r[0]->seqs[0].tokens + np[0], r[0]->seqs[1].tokens + np[0],
                 GEN * sizeof(int32_t)) != 0);
    sched_req_unref(r[0]);
    sched_req_unref(r[1]);
    struct prom_gauges g;
    sched_gauges(s, &g);
    CHECK_INT(g.running, 0);
    CHECK_INT(atomic_load(&met.finished[PROM_FIN_LENGTH]), 2); /* counted per request */
    sched_free(s);
    model_free(m);
}

/* echo with logprobs, the prompt fed in chunks of 3 through a model whose
 * logits rows are few (one per slot: the chunks shrink to fit): the
 * prompt's logprobs sum to `fp4serve eval`'s NLL over the same tokens, and
 * each equals the log-softmax of the one-step reference; the first is null.
 * The generated tokens carry their own logprobs and top alternatives. */
TEST(echo_logprobs_equal_eval)
{
    setup();
    enum { N = 40, K = 3 };
    int32_t toks[N];
    uint64_t st = 99;
    for (int i = 0; i < N; i++)
        toks[i] = 5 + (int32_t)(rng_next(&st) % 500);
    /* eval's NLL */
    struct ev_opts eo = {.ctx = N, .chunk = 8, .bos = -1};
    struct model_opts mo = {.threads = 1};
    ev_model_opts(&mo, &eo);
    struct err err;
    err_init(&err);
    struct model *em = model_new(model_path, &mo, &err);
    CHECK_MSG(em != NULL, "load: %s", err.msg);
    struct ev_result er;
    CHECK_INT(ev_run(em, NULL, toks, N, &eo, &er, &err), 0);
    model_free(em);
    for (int stream = 0; stream < 2; stream++) {
        struct model *m = load(2, 256, 3);
        struct prom met;
        sched *s = start(m, &met, 3);
        struct sched_prompt one = {.ids = toks, .n_ids = N};
        struct sched_req_params p = {.kind = API_COMPLETION,
                                     .prompts = &one,
                                     .n_prompts = 1,
                                     .logprobs = K,
                                     .echo = true,
                                     .max_tokens = 2,
                                     .sample = {.temperature = 0},
                                     .ignore_eos = true,
                                     .stream = stream,
                                     .id = "cmpl-e",
                                     .model = "tiny",
                                     .fd = -1,
                                     .wake = on_wake};
        sched_req *r = sched_req_new(&p);
        struct api_error e = {0};
        CHECK_INT(sched_submit(s, r, &e), 0);
        json_t *lp = NULL;
        struct buf text;
        buf_init(&text, 1 << 16);
        if (!stream) {
            json_t *j = take_json(r);
            json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
            lp = json_deep_copy(json_object_get(c0, "logprobs"));
            buf_puts(&text, json_string_value(json_object_get(c0, "text")));
            json_decref(j);
        } else { /* the stream is well formed; the logprobs are the request's */
            struct streamed sd;
            drain(r, &sd);
            CHECK(sd.done && !sd.error);
            CHECK_STR(sd.finish, "length");
            buf_release(&sd.text);
        }
        struct sched_seq *q = &r->seqs[0];
        CHECK(isnan(q->lp[0]));
        double sum = 0;
        for (int i = 1; i < N; i++)
            sum += q->lp[i];
        CHECK_MSG(fabs(-sum / (N - 1) - er.nll) < 1e-4, "echoed mean NLL %.7f, eval %.7f",
                  -sum / (N - 1), er.nll);
        if (lp) {
            json_t *tl = json_object_get(lp, "token_logprobs");
            CHECK_INT(json_array_size(tl), N + 2);
            CHECK(json_is_null(json_array_get(tl, 0)));
            CHECK(json_is_null(json_array_get(json_object_get(lp, "top_logprobs"), 0)));
            double jsum = 0;
            for (int i = 1; i < N; i++)
                jsum += json_number_value(json_array_get(tl, i));
            CHECK(fabs(jsum - sum) < 1e-4);
            /* greedy: each generated token is its row's best alternative */
            for (int i = N; i < N + 2; i++) {
                json_t *top = json_array_get(json_object_get(lp, "top_logprobs"), i);
                CHECK_INT(json_object_size(top), K);
                double best = -1e30;
                const char *key;
                json_t *v;
                json_object_foreach(top, key, v) best =
                    json_number_value(v) > best ? json_number_value(v) : best;
                CHECK(json_number_value(json_array_get(tl, i)) == best);
            }
            CHECK_INT(json_array_size(json_object_get(lp, "tokens")), N + 2);
            CHECK_INT(json_array_size(json_object_get(lp, "text_offset")), N + 2);
            json_decref(lp);
        }
        buf_release(&text);
        sched_req_unref(r);
        sched_free(s);
        model_free(m);
    }
}

/* ---- prefix cache ---- */

/* The prefix cache's rule on a hand-built table: longest free match, the
 * last prompt token always computed, LRU when nothing matches, a busy
 * slot's prefix copied only when the backend can copy. */
TEST(prefix_choose_rule)
{
    struct pfx p;
    pfx_init(&p, 3, 16);
    int32_t a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {1, 2, 9, 9}, c[3] = {7, 7, 7};
    bool busy[3] = {false, false, false};
    int kv[3] = {0, 0, 0};
    pfx_take(&p, 0, a, 6); /* slot 0 ran a, slot 1 ran b, slot 2 never used */
    pfx_keep(&p, 0, a, 6);
    kv[0] = 6;
    pfx_take(&p, 1, b, 4);
    pfx_keep(&p, 1, b, 3);
    kv[1] = 3;
    struct pfx_choice ch = pfx_choose(&p, busy, kv, true, a, 6);
    CHECK_INT(ch.slot, 0);
    CHECK_INT(ch.reuse, 5); /* not 6: the last token gives the logits */
    CHECK_INT(ch.src, -1);
    int32_t a4[4] = {1, 2, 3, 8};
    ch = pfx_choose(&p, busy, kv, true, a4, 4);
    CHECK_INT(ch.slot, 0);
    CHECK_INT(ch.reuse, 3);
    ch = pfx_choose(&p, busy, kv, true, c, 3); /* no match: the never-used slot */
    CHECK_INT(ch.slot, 2);
    CHECK_INT(ch.reuse, 0);
    kv[0] = 4; /* only 4 positions computed: the match stops there */
    ch = pfx_choose(&p, busy, kv, true, a, 6);
    CHECK_INT(ch.reuse, 4);
    busy[0] = true; /* the best match runs: copy it into the LRU free slot */
    ch = pfx_choose(&p, busy, kv, true, a, 6);
    CHECK_INT(ch.slot, 2);
    CHECK_INT(ch.src, 0);
    CHECK_INT(ch.reuse, 4);
    ch = pfx_choose(&p, busy, kv, false, a, 6); /* cannot copy: slot 1's 2 positions */
    CHECK_INT(ch.slot, 1);
    CHECK_INT(ch.src, -1);
    CHECK_INT(ch.reuse, 2);
    pfx_release(&p);
}

/* Submit r, read its stream to the end, check it is whole. */
static void run_stream(sched *s, sched_req *r, struct streamed *st)
{
    struct api_error e = {0};
    CHECK_INT(sched_submit(s, r, &e), 0);
    drain(r, st);
    CHECK(st->done && !st->error);
}

/*
 * A fixed workload, cached and uncached: request A alone, A again (its
 * whole prompt but the last token is cached), five requests sharing A's
 * 20-token system prompt at once on 4 slots (the first reuses A's slot,
 * the next three copy the prefix out of a busy slot, the fifth reuses a
 * finished one), then A after a reset (nothing cached). Greedy tokens
 * must equal the uncached run's and the one-sequence reference; the
 * counters and each usage's cached_tokens must equal the hand count.
 */
TEST(prefix_cache_equal_output_and_counts)
{
    setup();
    enum { SYS = 20, Q = 5, GEN = 8, NB = 5 };
    int32_t pr[NB + 1][SYS + Q];
    for (int k = 0; k <= NB; k++)
        for (int i = 0; i < SYS + Q; i++)
            pr[k][i] = i < SYS ? 5 + 3 * i : 300 + 7 * k + i;
    /* per submission: prompt index, cached tokens by hand */
    const int order[] = {0, 0, 1, 2, 3, 4, 5, 0};
    const long want_cached[] = {0, SYS + Q - 1, SYS, SYS, SYS, SYS, SYS, 0};
    enum { NS = sizeof(order) / sizeof(order[0]) };
    int32_t out[2][NS][GEN];
    float lp[2][NS][GEN]; /* logprob of each generated token: any K/V difference shows */
    for (int on = 0; on < 2; on++) {
        struct model *m = load(4, 256, 7);
        struct prom met;
        prom_init(&met);
        struct err err;
        err_init(&err);
        struct sched_opts so = {.prefill_chunk = 7, .max_queue = 64, .no_prefix_cache = !on};
        sched *s = sched_new(m, vocab, &so, &met, &err);
        struct sample_params sp = {0};
        sched_req *r[NS];
        struct streamed st[NS];
        for (int i = 0; i < NS; i++) {
            if (i == NS - 1)
                sched_reset_prefix(s);
            r[i] = make(pr[order[i]], SYS + Q, GEN, &sp, true, true, NULL, NULL, 0);
            r[i]->logprobs = 1;
            if (i >= 2 && i < 2 + NB) { /* the batch: all queued before any is read */
                struct api_error e = {0};
                CHECK_INT(sched_submit(s, r[i], &e), 0);
                if (i == 1 + NB)
                    for (int k = 2; k < 2 + NB; k++)
                        drain(r[k], &st[k]);
                continue;
            }
            run_stream(s, r[i], &st[i]);
        }
        long hits = 0;
        for (int i = 0; i < NS; i++) {
            CHECK_INT(st[i].usage_cached, on ? want_cached[i] : 0);
            CHECK_INT(st[i].usage_completion, GEN);
            hits += on ? want_cached[i] : 0;
            memcpy(out[on][i], r[i]->seqs[0].tokens + SYS + Q, sizeof(out[on][i]));
            memcpy(lp[on][i], r[i]->seqs[0].lp + SYS + Q, sizeof(lp[on][i]));
            buf_release(&st[i].text);
            sched_req_unref(r[i]);
        }
        CHECK_INT(atomic_load(&met.prefix_hits), hits);
        CHECK_INT(atomic_load(&met.prefix_queries), on ? NS * (SYS + Q) : 0);
        CHECK_INT(atomic_load(&met.prefill_rows), NS * (SYS + Q) - hits);
        sched_free(s);
        model_free(m);
    }
    for (int i = 0; i < NS; i++) {
        int32_t want[GEN];
        CHECK_INT(reference(pr[order[i]], SYS + Q, GEN, &(struct sample_params){0}, true, want),
                  GEN);
        CHECK_MSG(memcmp(out[0][i], want, sizeof(want)) == 0, "uncached %d differs", i);
        CHECK_MSG(memcmp(out[1][i], want, sizeof(want)) == 0, "cached %d differs", i);
        double worst = 0;
        for (int g = 0; g < GEN; g++)
            worst = fmax(worst, fabs((double)lp[0][i][g] - lp[1][i][g]));
        CHECK_MSG(worst <= SCHED_LP_TOL,
                  "submission %d: logprobs differ with the prefix cache by %.3g (tolerance %g)", i,
                  worst, SCHED_LP_TOL);
    }
}

#ifdef CUDAHOST_SCHED
/* Through the harness only the prefix-cache tests (or those naming
 * argv[1]): the others step a reference model on this thread while the
 * scheduler's thread steps its own, and the harness runs kernels on one
 * thread at a time. */
int main(int argc, char **argv)
{
    test_run_each(argc > 1 ? argv[1] : "prefix_");
    return test_report();
}
#else
TEST_MAIN()
#endif
