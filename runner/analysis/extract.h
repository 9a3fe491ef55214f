/*
 * extract: metrics out of benchmark output with PCRE2. A preset (sglang,
 * vllm, ...) holds the label regexes of one tool family, across the label
 * spellings its versions used; user patterns override or add names. Each
 * regex has exactly one capture group: the value ("inf" -> INFINITY,
 * "not set"/"N/A" -> absent). Every match runs under a match limit, so a
 * pathological user regex fails fast instead of hanging.
 *
 * Where patterns look: preset rows only inside the last result block
 * ("==== Serving Benchmark Result ====" up to the closing "====" line, or
 * the whole log when there is none), so free-form lines such as vLLM's
 * "Traffic request rate: inf" before the block never count; user patterns
 * over the whole log. When a regex matches several times, the last match
 * that carries a value wins.
 */
#ifndef RUNNER_EXTRACT_H
#define RUNNER_EXTRACT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"
#include "analysis/metric.h"
#include "strvec.h"

typedef struct ext_set ext_set; /* compiled patterns: a preset plus user patterns */

struct ext_pattern {
    const char *name;  /* canonical metric name, or a new name the user picked */
    const char *regex; /* PCRE2 pattern with exactly one capture group */
};

/* NULL-terminated list of preset names ("sglang", "vllm", ...). */
const char *const *ext_preset_names(void);

/*
 * Check that regex compiles and has exactly one capture group. On failure
 * returns -1 with a message such as "missing closing parenthesis at offset
 * 12" in err (code RN_ERR_USAGE); the caller prefixes the location.
 */
int ext_regex_check(const char *regex, struct err *err);

/*
 * Compile preset (NULL = no preset) plus user patterns (a user pattern with
 * the same name as a preset one replaces it). Returns 0, or -1 with err set
 * (unknown preset, bad regex naming the pattern and offset).
 */
int ext_new(const char *preset, const struct ext_pattern *user, size_t n_user, ext_set **out,
            struct err *err);
void ext_free(ext_set *set);

/*
 * Run every pattern over text[0..len) and put what matched into out (which
 * the caller initialised; existing names are overwritten). Returns 0, or -1
 * with err set when a pattern hit the match limit (the message names it).
 */
int ext_run(const ext_set *set, const char *text, size_t len, struct metric_set *out,
            struct err *err);

/*
 * Check that every name in require is present in got. Returns 0, or -1 with
 * a message (code RN_ERR_POINTS) naming every missing metric and, for each,
 * every regex that was tried (or saying that no pattern defines it). The
 * message is cut at the length of err's buffer.
 */
int ext_require(const ext_set *set, const struct metric_set *got, const struct strvec *require,
                struct err *err);

/*
 * Names of the required metrics that got lacks, pushed onto out (in
 * require's order). For failed-row causes that must name every one.
 */
void ext_missing(const struct metric_set *got, const struct strvec *require, struct strvec *out);

/*
 * The regexes set tries for name, in order: up to max of them stored in
 * regexes (borrowed from set); returns how many there are.
 */
size_t ext_patterns(const ext_set *set, const char *name, const char **regexes, size_t max);

/*
 * Parse one captured value s[0..n) (surrounding spaces ignored). Returns 1
 * with *v set ("inf" -> INFINITY, "-0.00" -> 0, "1,234.5" -> 1234.5), 0 for
 * a value that means "not measured" ("not set", "N/A", "None", "nan",
 * "trace", empty), -1 for anything that is not a number.
 */
int ext_parse_value(const char *s, size_t n, double *v);

/*
 * Split a command-line "NAME=REGEX" (--pattern) into *p: p->name is a fresh
 * heap string (the caller frees it), p->regex points into arg. Returns 0,
 * or -1 with err set (RN_ERR_USAGE) when there is no '=' or no name. The
 * regex itself is checked by ext_new.
 */
int ext_pattern_arg(const char *arg, struct ext_pattern *p, struct err *err);

/* The most of one client log that is read (a runaway client can write more). */
#define EXT_LOG_MAX_BYTES ((size_t)64 << 20)

#define EXT_FAILED_SHARE_MAX  0.05 /* more failed requests than this fails the point */
#define EXT_CONCURRENCY_FLOOR 0.5  /* achieved below this share of min(C, P) is noted */

/*
 * The invariants every good measurement satisfies, checked on the metrics
 * extracted from one point's log (by `sweep run`, and again when `sweep
 * plot` or `sweep import` rebuild a point from a log). Violations are
 * appended to notes ("; "-separated); returns true when one of them means
 * the numbers cannot be trusted (then the point fails):
 *   - median TTFT <= median E2E (a first token cannot come after the end);
 *   - successful + failed == prompts (every request accounted for), with at
 *     most EXT_FAILED_SHARE_MAX of them failed, and at least one success;
 *   - achieved concurrency not far below min(C, prompts) in closed loop
 *     (request_rate <= 0; only noted: the client, not the server, fell short).
 *   - in closed loop, prompts >= C (only noted: with fewer, at most
 *     `prompts` requests ran at once, whatever the fit's x says).
 */
bool ext_check_invariants(const struct metric_set *m, long concurrency, long prompts,
                          double request_rate, struct buf *notes);

/* What a log says about the point it measured; -1 where it says nothing. */
struct ext_shape {
    long concurrency; /* requested maximum concurrency ("Max request concurrency:",
                         vLLM "Maximum request concurrency:"); "not set" -> -1 */
    long prompts;     /* successful + failed requests (the failed row when printed) */
};

/*
 * Read the requested concurrency and the number of prompts from a log's own
 * lines (for `sweep import`). Returns 0 (fields left at -1 where the log is
 * silent), or -1 with err set when a limit stopped a match.
 */
int ext_shape(const char *text, size_t len, struct ext_shape *out, struct err *err);

/*
 * Read concurrency and prompts from a log's file name (for `sweep import`).
 * regex NULL tries the usual tags after dropping the folder and ".log":
 * "c16-n48", "c16_n48", "16_48", "16:48", "16x48", "16-48", then "c16"
 * alone. A user regex has named groups "c" and "p" (either may be absent),
 * or one group (concurrency) or two (concurrency, prompts). Fields not
 * found are -1. Returns 0, or -1 with err set (RN_ERR_USAGE) for a bad
 * regex or one whose group holds no number.
 */
int ext_tag(const char *regex, const char *path, long *concurrency, long *prompts, struct err *err);

#endif
