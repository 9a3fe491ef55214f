/*
 * progress: what `sweep run` shows while it works: point k of n, the
 * variant, C and P, time spent on the point and an ETA for the session.
 * On a terminal it is one line redrawn in place; otherwise plain lines, one
 * when a point starts and one when it ends, so logs stay readable.
 *
 * The ETA: the run loop may set one from a scaling-law model (estimate.h)
 * before each point, which then counts down. Without one: seconds per unit
 * of work (prompts x output_len of a point) averaged over the points
 * finished so far, times the work left, minus the time already spent on
 * the current point. Unknown until a point finishes. bench.find_max
 * probes are counted apart ("probe 3 (find_max, at most 9)"): how many a
 * search makes is only known when it ends, so while one is to come the
 * ETA is a lower bound.
 *
 * During a point, what the client says of itself (the builtin client's
 * progress file, client/loadgen.h) adds requests done of total and the
 * current output tok/s (over the last 5 s or more) to the live line; when
 * not on a terminal a plain line repeats them at most every 30 s
 * (SWEEP_PROGRESS_EVERY_S overrides; a point shorter than that shows none).
 */
#ifndef RUNNER_PROGRESS_H
#define RUNNER_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct progress {
    FILE *out;           /* where lines go (stderr) */
    bool tty;            /* redraw one line in place */
    size_t n_total;      /* points this session will run */
    size_t n_started;    /* points begun so far (k of "k of n") */
    double work_left;    /* prompts x output_len of points not finished */
    double work_done;    /* ... of finished points */
    double secs_done;    /* seconds those finished points took */
    char label[160];     /* current point: "mxfp4 c=16 n=48" */
    double cur_work;     /* work of the current point */
    double cur_start_ms; /* CLOCK_MONOTONIC ms when the current point began */
    double last_draw_ms; /* last redraw, to redraw at most ~4 times a second */
    bool active;         /* a point is running (a progress line may be on screen) */
    double eta_hint_s;   /* ETA set by prog_set_eta, < 0 when none */
    double eta_hint_ms;  /* CLOCK_MONOTONIC ms when it was set */
    bool eta_lower;      /* the hint is a lower bound: shown as ">= 46s" */
    bool searching;      /* a bench.find_max search is still to come or running: the
                            ETA leaves out its probes, so it is a lower bound */
    size_t probe;        /* > 0: the current point is probe `probe` of a search ... */
    size_t probe_max;    /* ... that makes at most this many (not in n_total) */
    /* the current point as its client reports it (prog_client_file) */
    long req_done, req_total; /* measured requests ended, of; -1 while unknown */
    double tok_s;             /* current output tok/s; < 0 while unknown */
    double ref_tokens;        /* tokens and client seconds at the start of the rate's window */
    double ref_secs;          /* ... (< 0: no reading yet) */
    double last_read_ms;      /* CLOCK_MONOTONIC ms of the last look at the file */
    double last_plain_ms;     /* not a terminal: the last line printed for the point */
    double plain_every_s;     /* not a terminal: seconds between two such lines (30) */
};

/* n_total points with work_total = sum of prompts x output_len to run. */
void prog_init(struct progress *pr, FILE *out, bool tty, size_t n_total, double work_total);
/* A point starts: prints "[k/n] label" (plain) or starts the live line. */
void prog_begin(struct progress *pr, const char *label, double work);
/* Called often while the point runs; redraws the live line (terminal only). */
void prog_tick(struct progress *pr);
/* The next prog_begin is probe k of a bench.find_max search of at most
 * `at_most` probes: shown as "probe k (find_max, at most N)", not counted
 * in n_total, its work not taken from the work left. */
void prog_probe(struct progress *pr, size_t k, size_t at_most);
/*
 * What the client says of its progress, looked at most twice a second:
 * its progress file at path (client/loadgen.h: "DONE TOTAL TOKENS SECS";
 * the builtin client), else the last tqdm bar ("| 12/48 [", as vLLM's and
 * SGLang's benchmark clients draw on stderr) in the last 4 KiB its log
 * got since byte from (requests only: no tok/s). Either may be NULL. A
 * missing, partial or malformed file or bar leaves what is shown as it was.
 * Returns 1 when a reading was taken, else 0.
 */
int prog_client_file(struct progress *pr, const char *path, const char *log, long long from);
/* One reading of the client: done of total requests, output tokens so far
 * and its seconds since the measured phase began (the window of the rate). */
void prog_client(struct progress *pr, long done, long total, double tokens, double secs);
/* The point ended with status ("ok", "failed", ...) and cause (may be ""). */
void prog_end(struct progress *pr, const char *status, const char *cause);
/* Drop a point that will not run (its work leaves the ETA). */
void prog_skip(struct progress *pr, double work);
/* Print a message line without garbling the live line. */
void prog_note(struct progress *pr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Set the ETA from a better model (seconds from now; < 0 clears it). */
void prog_set_eta(struct progress *pr, double seconds);
/* prog_set_eta, and whether the model only gives a lower bound (a variant
 * with fewer than two concurrency levels run assumes perfect batching). */
void prog_set_eta_bound(struct progress *pr, double seconds, bool lower);
/* The ETA as shown: "4m05s", ">= 46s" for a lower bound (or while
 * pr->searching), "?" while unknown. */
void prog_format_eta(const struct progress *pr, char *out, size_t size);
/* Seconds left for the session, or a negative value while unknown. */
double prog_eta_s(const struct progress *pr);
/* "1h02m", "4m05s", "12s" into out. */
void prog_format_duration(double s, char *out, size_t size);

#endif
