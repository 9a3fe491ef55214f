/*
 * workload: request streams with shared prefixes, for measuring a server's
 * prefix cache. Three kinds (bench.dataset.kind):
 *   shared-prefix  G groups, each a system prompt of P tokens shared by Q
 *                  questions of L tokens (SGLang's generated-shared-prefix):
 *                  request i asks question (i / G) % Q of group i % G;
 *   multi-turn     S sessions of T turns: turn k sends the whole history
 *                  (every earlier user message and the answers as they
 *                  came back) plus a new user message of L tokens; a
 *                  session's next turn is sent when its answer has ended
 *                  and think_s has passed (loadgen gates them);
 *   trace          a JSONL file, one request per line: {"timestamp": ms,
 *                  "input_length": n, "output_length": n, "hash_ids": [..]}
 *                  (Mooncake's format; hash_ids optional): each hash id is a
 *                  block of block_tokens tokens that any request naming it
 *                  shares, the rest of the prompt is the request's own; sent
 *                  at (timestamp - first timestamp) x time_scale.
 * Prompts are token ids on the completions endpoint and words (one token
 * each in common vocabularies) on the chat endpoint, all from the seed.
 */
#ifndef RUNNER_WORKLOAD_H
#define RUNNER_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

enum wl_kind {
    WL_NONE = 0,
    WL_SHARED_PREFIX,
    WL_MULTI_TURN,
    WL_TRACE,
};

struct wl_opts {
    enum wl_kind kind;
    long groups, prefix_len, questions, question_len; /* shared-prefix: G, P, Q, L */
    long sessions, turns, turn_len;                   /* multi-turn: S, T, L */
    double think_s;                                   /* multi-turn: pause before a next turn */
    const char *trace_path;                           /* trace: the JSONL file */
    double time_scale;                                /* trace: recorded gaps times this */
    long block_tokens;                                /* trace: tokens per hash id */
};

/* One trace line. */
struct wl_trace_row {
    double t_ms;  /* recorded timestamp */
    long in, out; /* input and output lengths, tokens */
    long *hash;   /* owned; n_hash block ids */
    size_t n_hash;
};

struct wl {
    struct wl_opts o;
    bool chat;  /* words and messages instead of ids */
    long vocab; /* ids are drawn from [0, vocab) */
    uint64_t seed;
    struct wl_trace_row *rows; /* trace: n_rows, in file order */
    size_t n_rows;
    struct buf *answers; /* multi-turn: (sessions x turns) answer texts, filled as they end */
};

/* Uniform in [0, n) from state (multiply-shift). */
uint64_t wl_uniform(uint64_t *state, uint64_t n);
/* Append n random common words, space-separated (no quotes: they need no
 * JSON escaping). */
void wl_words(struct buf *out, long n, uint64_t *state);

/* "shared-prefix" / "multi-turn" / "trace" -> kind, else WL_NONE. */
enum wl_kind wl_kind_parse(const char *name);
const char *wl_kind_name(enum wl_kind k);

/*
 * Read a trace file into w (rows). -1 with err (code bad_code; io_code when
 * unreadable) naming "path:LINE:" for a malformed line, an unknown field, a
 * missing or out-of-range one, or timestamps that go back.
 */
int wl_load_trace(struct wl *w, const char *path, struct err *err, int io_code, int bad_code);

/* Set up w (copying o; loads the trace for WL_TRACE). Release with wl_release. */
int wl_init(struct wl *w, const struct wl_opts *o, bool chat, long vocab, uint64_t seed,
            struct err *err, int io_code, int bad_code);
void wl_release(struct wl *w);

/* Requests the workload has: S x T (multi-turn), the trace's lines, or
 * -1 (shared-prefix: as many as asked, cycling through its prompts). */
long wl_count(const struct wl *w);

/*
 * Append request index's prompt member to out ("prompt": [ids] or text, or
 * "messages": [...]), no braces. Returns the prompt ids sent (-1 for
 * text); *req_in gets the prompt length asked for (tokens or words) and
 * *req_out the trace's output length (else left alone).
 */
long wl_prompt(const struct wl *w, size_t index, struct buf *out, long *req_in, long *req_out);

/* Trace: request index's send time after the first one's, ns. */
uint64_t wl_offset_ns(const struct wl *w, size_t index);

/* Multi-turn: request index's session and turn (index = session x T +
 * turn); -1 for other kinds. */
long wl_session(const struct wl *w, size_t index);
long wl_turn(const struct wl *w, size_t index);
/* Multi-turn: where request index's answer text goes (NULL otherwise). */
struct buf *wl_answer(struct wl *w, size_t index);

#endif
