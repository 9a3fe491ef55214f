/*
 * workload: the shared-prefix, multi-turn and trace request streams (see
 * workload.h). Every prompt is derived from the seed and the part's
 * identity (group, question, session and turn, hash id), never from the
 * order of sending, so the same seed sends the same prompts.
 */
#include "client/workload.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "rng.h"
#include "sweep.h"
#include "xalloc.h"

static const char *const kind_names[] = {"", "shared-prefix", "multi-turn", "trace"};

enum wl_kind wl_kind_parse(const char *name)
{
    for (int k = 1; k < 4; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return (enum wl_kind)k;
    return WL_NONE;
}

const char *wl_kind_name(enum wl_kind k)
{
    return (unsigned)k < 4 ? kind_names[k] : "unknown";
}

/* ---- words and ids ---- */

uint64_t wl_uniform(uint64_t *state, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rng_next(state) * n) >> 64);
}

/* Common English words, one token each (with their leading space) in the
 * usual BPE vocabularies. */
static const char *const words[] = {
    "the",  "of",    "and",   "to",    "in",    "is",   "that",  "for",  "it",    "as",   "with",
    "was",  "on",    "be",    "at",    "by",    "this", "had",   "not",  "are",   "but",  "from",
    "or",   "have",  "an",    "they",  "which", "one",  "you",   "were", "all",   "we",   "her",
    "she",  "there", "would", "their", "will",  "when", "who",   "him",  "been",  "has",  "more",
    "if",   "no",    "out",   "so",    "said",  "what", "up",    "its",  "about", "into", "than",
    "them", "can",   "only",  "other", "new",   "some", "could", "time", "these",
};

void wl_words(struct buf *out, long n, uint64_t *state)
{
    for (long i = 0; i < n; i++)
        buf_printf(out, "%s%s", i ? " " : "",
                   words[wl_uniform(state, sizeof(words) / sizeof(words[0]))]);
}

/* A stream of its own for each part of a prompt. */
static uint64_t part_state(const struct wl *w, uint64_t what, uint64_t a, uint64_t b)
{
    uint64_t st = w->seed ^ (0x9e3779b97f4a7c15ull * (what + 1)) ^
                  (0xbf58476d1ce4e5b9ull * (a + 1)) ^ (0x94d049bb133111ebull * (b + 1));
    rng_next(&st);
    return st;
}

/* n ids (comma-separated, a comma first when more follow earlier ones) or words. */
static void put_part(const struct wl *w, struct buf *out, long n, uint64_t st, bool first)
{
    if (w->chat) {
        if (!first && n > 0)
            buf_putc(out, ' ');
        wl_words(out, n, &st);
        return;
    }
    uint64_t v = w->vocab > 0 ? (uint64_t)w->vocab : 1;
    for (long i = 0; i < n; i++)
        buf_printf(out, first && i == 0 ? "%llu" : ",%llu", (unsigned long long)wl_uniform(&st, v));
}

/* A JSON string holding words (words need no escaping). */
static void put_words_str(const struct wl *w, struct buf *out, long n, uint64_t st)
{
    buf_putc(out, '"');
    put_part(w, out, n, st, true);
    buf_putc(out, '"');
}

/* ---- the trace file ---- */

static const char *const trace_fields[] = {"timestamp", "input_length", "output_length",
                                           "hash_ids"};

/* One line into row; a message (static or in msg) on error. */
static const char *trace_row(json_t *j, struct wl_trace_row *row, char *msg, size_t cap)
{
    if (!json_is_object(j))
        return "not a JSON object";
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v)
    {
        bool known = false;
        for (size_t i = 0; i < sizeof(trace_fields) / sizeof(trace_fields[0]); i++)
            known |= strcmp(key, trace_fields[i]) == 0;
        if (!known) {
            snprintf(msg, cap,
                     "unknown field '%.64s' (expected timestamp, input_length, output_length, "
                     "hash_ids)",
                     key);
            return msg;
        }
    }
    json_t *ts = json_object_get(j, "timestamp"), *in = json_object_get(j, "input_length"),
           *out = json_object_get(j, "output_length"), *h = json_object_get(j, "hash_ids");
    if (!json_is_number(ts) || json_number_value(ts) < 0 || !isfinite(json_number_value(ts)))
        return "'timestamp' wants a number of milliseconds >= 0";
    if (!json_is_integer(in) || json_integer_value(in) < 1 || json_integer_value(in) > 10000000)
        return "'input_length' wants an integer in [1, 10000000]";
    if (!json_is_integer(out) || json_integer_value(out) < 1 || json_integer_value(out) > 10000000)
        return "'output_length' wants an integer in [1, 10000000]";
    if (h && !json_is_array(h))
        return "'hash_ids' wants a list of integers >= 0";
    row->t_ms = json_number_value(ts);
    row->in = (long)json_integer_value(in);
    row->out = (long)json_integer_value(out);
    row->n_hash = h ? json_array_size(h) : 0;
    row->hash = xcalloc(row->n_hash ? row->n_hash : 1, sizeof(*row->hash));
    for (size_t i = 0; i < row->n_hash; i++) {
        json_t *x = json_array_get(h, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return "'hash_ids' wants a list of integers >= 0";
        row->hash[i] = (long)json_integer_value(x);
    }
    return NULL;
}

int wl_load_trace(struct wl *w, const char *path, struct err *err, int io_code, int bad_code)
{
    struct buf buf;
    buf_init(&buf, (size_t)1 << 30);
    if (file_read_all(path, &buf, err, io_code) != 0) {
        buf_release(&buf);
        return -1;
    }
    const char *text = buf.data ? buf.data : "";
    size_t len = buf.len;
    size_t cap = 0;
    long line = 0;
    int rc = 0;
    for (size_t at = 0; at < len && rc == 0;) {
        const char *s = text + at, *nl = memchr(s, '\n', len - at);
        size_t n = nl ? (size_t)(nl - s) : len - at;
        at += n + 1;
        line++;
        size_t k = 0;
        while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r'))
            k++;
        if (k == n)
            continue; /* blank line */
        json_error_t je;
        json_t *j = json_loadb(s, n, 0, &je);
        char msg[160];
        if (!j) {
            rc = err_set(err, bad_code, "%s:%ld: not JSON: %s", path, line, je.text);
            break;
        }
        XGROW(w->rows, cap, w->n_rows + 1);
        struct wl_trace_row *row = &w->rows[w->n_rows];
        memset(row, 0, sizeof(*row));
        const char *why = trace_row(j, row, msg, sizeof(msg));
        json_decref(j);
        w->n_rows++;
        if (!why && w->n_rows > 1 && row->t_ms < w->rows[w->n_rows - 2].t_ms)
            why = "'timestamp' goes back (the trace must be in time order)";
        if (why)
            rc = err_set(err, bad_code, "%s:%ld: %s", path, line, why);
    }
    if (rc == 0 && w->n_rows == 0)
        rc = err_set(err, bad_code, "%s: no requests in the trace", path);
    buf_release(&buf);
    return rc ? -1 : 0;
}

/* ---- set-up ---- */

int wl_init(struct wl *w, const struct wl_opts *o, bool chat, long vocab, uint64_t seed,
            struct err *err, int io_code, int bad_code)
{
    memset(w, 0, sizeof(*w));
    w->o = *o;
    w->chat = chat;
    w->vocab = vocab;
    w->seed = seed;
    if (w->o.kind == WL_TRACE) {
        if (w->o.block_tokens < 1)
            w->o.block_tokens = 512;
        if (w->o.time_scale <= 0)
            w->o.time_scale = 1;
        return wl_load_trace(w, o->trace_path, err, io_code, bad_code);
    }
    if (w->o.kind == WL_MULTI_TURN) {
        size_t n = (size_t)w->o.sessions * (size_t)w->o.turns;
        w->answers = xcalloc(n ? n : 1, sizeof(*w->answers));
        for (size_t i = 0; i < n; i++)
            buf_init(&w->answers[i], BUF_MAX_DEFAULT);
    }
    return 0;
}

void wl_release(struct wl *w)
{
    for (size_t i = 0; i < w->n_rows; i++)
        free(w->rows[i].hash);
    free(w->rows);
    if (w->answers) {
        size_t n = (size_t)w->o.sessions * (size_t)w->o.turns;
        for (size_t i = 0; i < n; i++)
            buf_release(&w->answers[i]);
        free(w->answers);
    }
    memset(w, 0, sizeof(*w));
}

long wl_count(const struct wl *w)
{
    if (w->o.kind == WL_MULTI_TURN)
        return w->o.sessions * w->o.turns;
    if (w->o.kind == WL_TRACE)
        return (long)w->n_rows;
    return -1;
}

/* ---- prompts ---- */

enum { PART_SYSTEM, PART_QUESTION, PART_TURN, PART_BLOCK, PART_OWN };

static long shared_prefix(const struct wl *w, size_t index, struct buf *out, long *req_in)
{
    long g = (long)(index % (size_t)w->o.groups);
    long q = (long)((index / (size_t)w->o.groups) % (size_t)w->o.questions);
    uint64_t sys = part_state(w, PART_SYSTEM, (uint64_t)g, 0);
    uint64_t qs = part_state(w, PART_QUESTION, (uint64_t)g, (uint64_t)q);
    *req_in = w->o.prefix_len + w->o.question_len;
    if (w->chat) {
        buf_puts(out, "\"messages\":[{\"role\":\"system\",\"content\":");
        put_words_str(w, out, w->o.prefix_len, sys);
        buf_puts(out, "},{\"role\":\"user\",\"content\":");
        put_words_str(w, out, w->o.question_len, qs);
        buf_puts(out, "}]");
        return -1;
    }
    buf_puts(out, "\"prompt\":[");
    put_part(w, out, w->o.prefix_len, sys, true);
    put_part(w, out, w->o.question_len, qs, w->o.prefix_len == 0);
    buf_puts(out, "]");
    return *req_in;
}

/* Multi-turn: the history as chat messages, or as one text (user and
 * assistant texts joined by "\n"). */
static long multi_turn(const struct wl *w, size_t index, struct buf *out, long *req_in)
{
    long T = w->o.turns, s = (long)index / T, k = (long)index % T;
    *req_in = (k + 1) * w->o.turn_len;
    buf_puts(out, w->chat ? "\"messages\":[" : "\"prompt\":\"");
    for (long j = 0; j <= k; j++) {
        uint64_t st = part_state(w, PART_TURN, (uint64_t)s, (uint64_t)j);
        if (w->chat) {
            buf_puts(out,
                     j ? ",{\"role\":\"user\",\"content\":" : "{\"role\":\"user\",\"content\":");
            put_words_str(w, out, w->o.turn_len, st);
            buf_puts(out, "}");
        } else {
            buf_puts(out, j ? "\\n" : "");
            wl_words(out, w->o.turn_len, &st);
        }
        if (j == k)
            break;
        const struct buf *a = &w->answers[(size_t)s * (size_t)T + (size_t)j];
        if (w->chat) {
            buf_puts(out, ",{\"role\":\"assistant\",\"content\":");
            buf_json_str(out, a->data ? a->data : "", a->len);
            buf_puts(out, "}");
        } else {
            /* the answer inside the open string: escaped, without its quotes */
            struct buf tmp;
            buf_init(&tmp, BUF_MAX_DEFAULT);
            buf_json_str(&tmp, a->data ? a->data : "", a->len);
            buf_puts(out, "\\n");
            buf_append(out, tmp.data + 1, tmp.len - 2);
            buf_release(&tmp);
        }
    }
    buf_puts(out, w->chat ? "]" : "\"");
    return -1;
}

/* Trace: hash blocks first (shared by every request naming the id), then
 * the request's own tokens, cut to input_length. */
static long trace(const struct wl *w, size_t index, struct buf *out, long *req_in, long *req_out)
{
    const struct wl_trace_row *r = &w->rows[index];
    *req_in = r->in;
    *req_out = r->out;
    buf_puts(out, w->chat ? "\"messages\":[{\"role\":\"user\",\"content\":\"" : "\"prompt\":[");
    long left = r->in;
    bool first = true;
    for (size_t i = 0; i < r->n_hash && left > 0; i++) {
        long n = left < w->o.block_tokens ? left : w->o.block_tokens;
        put_part(w, out, n, part_state(w, PART_BLOCK, (uint64_t)r->hash[i], 0), first);
        left -= n;
        first = false;
    }
    if (left > 0)
        put_part(w, out, left, part_state(w, PART_OWN, (uint64_t)index, 0), first);
    buf_puts(out, w->chat ? "\"}]" : "]");
    return w->chat ? -1 : r->in;
}

long wl_prompt(const struct wl *w, size_t index, struct buf *out, long *req_in, long *req_out)
{
    switch (w->o.kind) {
    case WL_SHARED_PREFIX:
        return shared_prefix(w, index, out, req_in);
    case WL_MULTI_TURN:
        return multi_turn(w, index, out, req_in);
    case WL_TRACE:
        return trace(w, index, out, req_in, req_out);
    default:
        return -1;
    }
}

uint64_t wl_offset_ns(const struct wl *w, size_t index)
{
    if (w->o.kind != WL_TRACE || index >= w->n_rows)
        return 0;
    double ms = (w->rows[index].t_ms - w->rows[0].t_ms) * w->o.time_scale;
    return (uint64_t)llround(ms * 1e6);
}

long wl_session(const struct wl *w, size_t index)
{
    return w->o.kind == WL_MULTI_TURN ? (long)index / w->o.turns : -1;
}

long wl_turn(const struct wl *w, size_t index)
{
    return w->o.kind == WL_MULTI_TURN ? (long)index % w->o.turns : -1;
}

struct buf *wl_answer(struct wl *w, size_t index)
{
    if (w->o.kind != WL_MULTI_TURN || index >= (size_t)(w->o.sessions * w->o.turns))
        return NULL;
    return &w->answers[index];
}
