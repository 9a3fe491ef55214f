/*
 * lgreport: turns the load generator's per-request records into numbers
 * (DESIGN.md "Metrics"), SGLang's result block (so the `sglang` extraction
 * preset reads it unchanged) and the per-request JSONL file.
 */
#ifndef RUNNER_LGREPORT_H
#define RUNNER_LGREPORT_H

#include <stdio.h>

#include "err.h"

#include "client/loadgen.h"
#include "client/stats.h"

#define LGR_MAX_TURNS 16 /* TTFT rows by turn index; later turns still count in ttft_later */

struct lgr_summary {
    size_t n_measured;              /* measured requests in the run */
    size_t n_ok, n_failed;          /* sent requests that succeeded / failed */
    size_t n_unsent;                /* never sent (the run was interrupted) */
    size_t n_kind[LG_FAIL_KINDS];   /* failures by kind */
    size_t n_usage_missing;         /* successes whose tokens were counted from chunks */
    double error_rate;              /* n_failed / (n_ok + n_failed), 0 when none sent */
    double duration_s;              /* measured phase: start to the end of its last request */
    long total_input, total_output; /* tokens of the successful requests */
    double request_throughput;      /* req/s */
    double input_throughput, output_throughput, total_throughput; /* tok/s */
    double peak_output_throughput;              /* tok/s, the busiest 1-s bucket from the start */
    long peak_concurrent;                       /* most requests in flight at any instant */
    double concurrency;                         /* sum of E2E latencies / duration (Little's law) */
    struct stats_summary e2e, ttft, tpot, itl;  /* ms, over successful requests */
    bool open_loop;                             /* the open-loop rows below are meaningful */
    struct stats_summary queue;                 /* ms, send - intended, every sent request */
    struct stats_summary ttft_sched, e2e_sched; /* ms, from the intended send time */
    double cpu_s;               /* client CPU time (user + system), s; < 0 unknown */
    long req_input, req_output; /* requested prompt lengths (-1: unknown) and max_tokens, summed
                                   over the successful requests */
    double achieved_rate;       /* req/s: (sent - 1) / (last send - first send), measured
                                   requests; 0 with fewer than two sent */
    double cached_frac; /* prompt tokens the server reported cached (usage.prompt_tokens_details.
                           cached_tokens) / prompt tokens, over the successful requests that
                           reported it; -1 when none did */
    int n_turns;        /* multi-turn: turns with a TTFT row (at most LGR_MAX_TURNS), else 0 */
    struct stats_summary ttft_turn[LGR_MAX_TURNS]; /* ms, TTFT of each turn index */
    struct stats_summary ttft_later;               /* ms, TTFT of every turn after the first */
};

/* Compute every statistic of the measured requests of res. */
void lgr_compute(const struct lg_config *cfg, const struct lg_result *res, struct lgr_summary *sum);

/* Print the result block: SGLang's rows and label spellings ("{:<40} {:<10}",
 * rules centred in 50 columns) plus the failure rows, the client's CPU time
 * and, in open loop, the queue-delay and from-schedule sections. A statistic
 * without samples prints "n/a", never a misleading 0. */
void lgr_print(FILE *f, const struct lg_config *cfg, const struct lgr_summary *sum);

/* Write one JSON object per request (warmup included, flagged) to path,
 * atomically. Times are ms relative to the start of the measured phase.
 * Returns 0, or -1 with err set (RN_ERR_ENV). */
int lgr_write_jsonl(const char *path, const struct lg_result *res, struct err *err);

#endif
