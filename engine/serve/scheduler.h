/*
 * scheduler: continuous batching over the model's KV slots. One scheduler
 * thread owns the model: each step carries one decode token for every
 * running sequence plus prompt chunks within a token budget, and the
 * tokens it samples are turned into response bytes (SSE events or a final
 * JSON body) at once. The HTTP layer submits requests and reads their
 * output; a wake callback tells it when output is ready.
 *
 * A request holds one sequence per choice (prompts x n): each takes a KV
 * slot of its own as slots free up, and the answer carries them as choices
 * in index order.
 *
 * Prefix cache (on unless no_prefix_cache): a finished sequence leaves its
 * K/V and token ids in its slot; a new sequence takes the slot sharing the
 * longest prefix with its prompt (serve/prefix.h has the rule), or copies
 * that prefix out of a busy slot, and computes only the rest. Outputs are
 * the same either way (a row's result depends only on its token, position
 * and cache: model.h).
 *
 * Request lifetime: sched_req_new gives one reference to the caller;
 * sched_submit takes another for the scheduler, dropped when the
 * generation ends (finished, cancelled or aborted). The last unref frees.
 */
#ifndef ENGINE_SCHED_H
#define ENGINE_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#include "serve/api.h"
#include "serve/prom.h"

#include "model/model.h"
#include "model/sample.h"
#include "text/tokenizer.h"

typedef struct sched sched;
typedef struct sched_req sched_req;

struct sched_opts {
    int prefill_chunk;    /* prompt tokens per step, summed over prefilling sequences (>= 1) */
    int max_queue;        /* requests waiting for a slot; more are refused with 503 */
    bool no_prefix_cache; /* wipe a slot at every admission instead of reusing its prefix */
};

/* One prompt of a request with several (completions' batches). */
struct sched_prompt {
    const int32_t *ids; /* (n_ids) token ids < n_vocab */
    size_t n_ids;       /* >= 1 */
    const char *text;   /* (len) the prompt as sent, for echo; NULL = its tokens' text */
    size_t len;
};

/* Everything a request needs; sched_req_new copies it all. */
struct sched_req_params {
    enum api_kind kind;
    const struct sched_prompt *prompts; /* (n_prompts >= 1) prompts, each answered by n
                                           choices; token ids < n_vocab */
    size_t n_prompts;
    int n;           /* choices per prompt; 0 = 1. Choice j samples with seed + j */
    int logprobs;    /* -1 = none; else logprobs with this many alternatives (<= 20) */
    bool echo;       /* completions: the prompt (and its logprobs) before the text */
    bool batch;      /* /generate: answer with a list (the prompts came as one) */
    long max_tokens; /* >= 1 (0 with echo); n_prompt + max_tokens <= the model's ctx */
    struct sample_params sample;
    char *const *stops;      /* (n_stops) stop strings */
    const size_t *stop_lens; /* (n_stops) their lengths */
    size_t n_stops;
    bool ignore_eos;         /* do not end at end-of-generation tokens */
    bool json;               /* response_format json_object: a token mask keeps the text one
                                JSON object, ended ("stop") when it closes (jsonmask.h) */
    bool stream;             /* SSE events as tokens come; else one JSON body at the end */
    bool include_usage;      /* stream: a usage event with "choices": [] before [DONE] */
    bool continuous_usage;   /* stream: every chunk carries its choice's usage so far */
    const char *id;          /* response id ("cmpl-...") */
    const char *model;       /* served model id */
    long long created;       /* Unix seconds */
    int fd;                  /* client socket to watch for hang-up (dup'ed), or -1 */
    bool probe_1xx;          /* the client takes an interim 1xx answer (HTTP/1.1, not a
                                stream): a half-close is then told from a hang-up by one */
    void (*wake)(void *arg); /* called, without locks held, when a parked reader has output */
    void *wake_arg;
};

/* A new request holding one reference (the caller's). */
sched_req *sched_req_new(const struct sched_req_params *p);
/* Output cap: unread stream bytes before a client counts as gone, and what
 * one choice of a whole answer may take. A stream's unread bytes grow only
 * when its client reads slower than tokens come; 8 MiB is tens of thousands
 * of events, far past any client still reading, so passing it ends the
 * generation instead of letting one stalled reader hold memory unbounded. */
#define SCHED_OUT_CAP ((size_t)8 << 20)
/* Bytes a non-streaming answer of n_seqs choices may take (8 MiB a choice,
 * at most 64 MiB); a longer one is a 500. */
static inline size_t sched_answer_cap(int n_seqs)
{
    return SCHED_OUT_CAP * (size_t)(n_seqs < 1 ? 1 : n_seqs < 8 ? n_seqs : 8);
}
/* Take one more reference. */
void sched_req_ref(sched_req *r);
/* Drop a reference; the last one frees. NULL is a no-op. */
void sched_req_unref(sched_req *r);
/* The client is gone: the scheduler ends the generation at its next step
 * and frees the slot. Safe from any thread, any number of times. */
void sched_req_cancel(sched_req *r);

/*
 * Streaming output. Copies up to cap pending bytes to dst and returns the
 * count. When nothing is pending: at the end sets *end and returns 0;
 * otherwise marks the request parked and calls park(arg) with the request
 * lock held (the server suspends its connection there), returns 0, and
 * the scheduler calls wake once output arrives.
 */
size_t sched_req_read(sched_req *r, char *dst, size_t cap, void (*park)(void *), void *arg,
                      bool *end);

/*
 * Non-streaming result. When the generation is over, moves the JSON body
 * into *body (caller releases it), sets *status and returns true; else
 * parks as sched_req_read does and returns false.
 */
bool sched_req_take(sched_req *r, struct buf *body, int *status, void (*park)(void *), void *arg);

/* Prompt and generated token counts so far, over every choice (for logs). */
void sched_req_counts(sched_req *r, long *prompt, long *generated);

/*
 * Start the scheduler thread over a loaded model (which it drives from
 * now on: no other thread may call model_step) and its vocabulary. met
 * receives the counters. Returns NULL with err set when the thread cannot
 * start.
 */
sched *sched_new(struct model *m, const tok_vocab *v, const struct sched_opts *o, struct prom *met,
                 struct err *err);

/*
 * Queue a request (takes the scheduler's reference). Refused with *e set
 * (status 503 when the queue is full or the scheduler is stopping, 400
 * with code context_length_exceeded when a prompt cannot fit the
 * context): returns -1, r untouched.
 */
int sched_submit(sched *s, sched_req *r, struct api_error *e);

/* Forget every cached prefix (POST /reset_prefix_cache): free slots are
 * wiped before the next admission; a running sequence's slot keeps its
 * prompt while it runs and is cached again when it ends. Safe from any
 * thread. */
void sched_reset_prefix(sched *s);

/* Gauges for /metrics (queue, running, KV positions held). */
void sched_gauges(sched *s, struct prom_gauges *g);

/* Exclusive work on the model between steps (embeddings). */
struct sched_job {
    /* Runs on the scheduler thread while no step does, with a KV slot of
     * its own (empty, and emptied again after); slot is -1 when the
     * scheduler stopped first (the job then only answers). */
    void (*run)(struct model *m, int slot, void *arg);
    void *arg;
    struct sched_job *next; /* the scheduler's */
};
/* Queue j (not copied: it must live until run is called). Runs once a slot
 * is free, before the next step. -1 with e (503) when stopping. */
int sched_submit_job(sched *s, struct sched_job *j, struct api_error *e);

/* End every generation (streams get an error event and [DONE], bodies a
 * 503), refuse new ones, and stop the thread. Returns once it has stopped. */
void sched_stop(sched *s);
/* Stop if needed and free. The model is not freed. NULL is a no-op. */
void sched_free(sched *s);

#endif
