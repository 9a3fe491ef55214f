/*
 * sched_int: what scheduler.c and schedjob.c share: a sequence (struct
 * sched_seq) and the scheduler (struct sched). Private to those files;
 * everything else goes through scheduler.h. struct sched_req stays in
 * scheduler.c, the only file that reads it.
 */
#ifndef ENGINE_SCHED_INT_H
#define ENGINE_SCHED_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#include "serve/prefix.h"
#include "serve/prom.h"
#include "serve/scheduler.h"

#include "model/model.h"
#include "model/sample.h"
#include "text/jsonfsm.h"
#include "text/stop.h"
#include "text/tokenizer.h"

/* One sequence: a choice of a request, in a KV slot of its own once admitted. */
struct sched_seq {
    sched_req *req;  /* the request it answers (not a reference) */
    int index;       /* OpenAI's choice index: prompt x n + choice */
    int32_t *tokens; /* (n_prompt + max_tokens) prompt, then generated ids; owned */
    int n_prompt;
    char *echo; /* (echo_len) the prompt's text for echo, owned; NULL without echo */
    size_t echo_len;
    struct sample_params sp; /* the request's, seed + choice */

    /* the scheduler thread's */
    int slot;        /* KV slot, -1 while waiting or after the end */
    int n_tokens;    /* ids in tokens */
    int n_cached;    /* positions in the slot's KV cache */
    int n_reused;    /* prompt positions the prefix cache supplied at admission */
    int n_gen;       /* generated ids */
    bool sent_first; /* a content chunk went out (chat: it carried the role) */
    bool ended;      /* finished (finish says why) */
    const char *finish;
    struct sampler sampler;
    struct jfsm jf; /* JSON mode: the text so far, a JSON prefix (zeroed = empty) */
    struct tok_stream ts;
    struct stop_filter stop;
    struct buf text;  /* non-streaming: the answer so far */
    float *lp;        /* (n_prompt + max_tokens) logprob of each token, NAN = none; owned,
                         NULL without logprobs */
    int32_t *top_ids; /* (n_prompt + max_tokens, k) the k likeliest at each position; owned */
    float *top_lp;    /* (n_prompt + max_tokens, k) their logprobs; owned */
    uint64_t t_last;  /* clock_ns at the latest generated token, 0 before */
    int lp_from;      /* stream: first position whose logprobs are not sent yet */
    long lp_offset;   /* stream: text_offset of that position */
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
    struct sched_job *jobs;     /* exclusive jobs waiting (sched_submit_job) */
    long q_len;
    bool stopping;
    bool reset_prefix;              /* POST /reset_prefix_cache: wipe free slots before admitting */
    long g_running, g_kv_positions; /* gauges published after each step */

    /* the scheduler thread's */
    sched_req *adm;         /* off the queue, some of its seqs still waiting for a slot */
    struct sched_seq **run; /* (max_batch) running sequences in admission order */
    int n_run;
    bool *slot_used;          /* (max_batch) */
    bool prefix;              /* the prefix cache is on */
    struct pfx pfx;           /* what each slot's KV holds */
    int *kv_len;              /* (max_batch) positions per slot, for pfx_choose */
    struct model_seq *seqs;   /* (max_batch) one step */
    struct sched_seq **owner; /* (max_batch) sequence of seqs[i] */
    struct pollfd *pfd;       /* (max_batch) */
    struct jmask *jm;         /* JSON mode's token texts, made at the first use */
    char *piece;              /* detokenizer output, piece_cap bytes */
    size_t piece_cap;
    char *text; /* stop-filter output, text_cap bytes */
    size_t text_cap;
};

/* Run the waiting jobs (schedjob.c), each on a free slot, while no step
 * runs; those that find none wait for the next turn. Scheduler thread. */
void sched_run_jobs(sched *s);
/* At stop (stopping set, so no job comes any more): each waiting job is
 * run with slot -1, to answer. Scheduler thread. */
void sched_end_jobs(sched *s);

#endif
