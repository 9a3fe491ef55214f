/*
 * extract: metrics out of benchmark output with PCRE2. A preset (sglang,
 * vllm, ...) holds the label regexes of one tool family, across the label
 * spellings its versions used; user patterns override or add names. Each
 * regex has exactly one capture group: the value ("inf" -> INFINITY,
 * "not set"/"N/A" -> absent). Every match runs under a match limit, so a
 * pathological user regex fails fast instead of hanging.
 *
 * A log is read as a stream of lines, with bounded memory whatever its size:
 * a line ends at "\n", "\r" (a progress bar redrawing itself) or "\r\n", a
 * last line without an end counts, and a line over EXT_LINE_MAX_BYTES is
 * skipped (and noted). Every regex sees one line at a time, without its end.
 * Line numbers count "\n" as grep -n does.
 *
 * Where patterns look: preset rows only inside the last complete result
 * block ("==== Serving Benchmark Result ====" up to the next line of '='),
 * or the whole log when it has no block, so free-form lines such as vLLM's
 * "Traffic request rate: inf" before the block never count. Within that
 * block each metric is printed once: a second line for the same metric
 * (the same label again, even with the same value, or another spelling of
 * it) is an error naming both lines, as is a block the log ends inside.
 * Several complete blocks (a warm-up run, then the real one) are fine: the
 * last is used and the notes say so. User patterns see every line of the
 * log; one that finds a value twice (two lines, or twice on one line) is an
 * error naming both lines, as for a preset; matches without a value do not
 * count.
 */
#ifndef RUNNER_EXTRACT_H
#define RUNNER_EXTRACT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

#include "store/metric.h"

typedef struct ext_set ext_set; /* compiled patterns: a preset plus user patterns */

struct ext_pattern {
    const char *name;  /* canonical metric name, or a new name the user picked */
    const char *regex; /* PCRE2 pattern with exactly one capture group */
};

/* NULL-terminated list of preset names: the regex presets ("sglang",
 * "vllm", "aiperf"), then the export presets of export.h ("vllm-json", ...). */
const char *const *ext_preset_names(void);

/*
 * Check that regex compiles and has exactly one capture group. On failure
 * returns -1 with a message such as "missing closing parenthesis at offset
 * 12" in err (code RN_ERR_USAGE); the caller prefixes the location.
 */
int ext_regex_check(const char *regex, struct err *err);

/*
 * Compile preset (NULL = no preset) plus user patterns (a user pattern with
 * the same name as a preset one replaces it). preset may name an export
 * preset (export.h): then ext_run reads the text as that export and the
 * user patterns as usual over its lines. Returns 0, or -1 with err set
 * (unknown preset, bad regex naming the pattern and offset).
 */
int ext_new(const char *preset, const struct ext_pattern *user, size_t n_user, ext_set **out,
            struct err *err);
void ext_free(ext_set *set);

/* A value a pattern matched that is not a number, or says "not measured". */
struct ext_unread {
    char *name; /* owned; the metric */
    char *text; /* owned; what the group captured, spaces trimmed, control and
                   non-ASCII bytes as '?', cut at EXT_QUOTE_MAX bytes ("...") */
    long line;  /* where (1-based); 0 in an export file */
    int kind;   /* 0 not measured ("N/A"), -1 not a number, -2 out of range */
};

/* What extraction saw besides the values, for causes and messages. */
struct ext_info {
    long blocks;               /* complete result blocks in the log (an export: its runs) */
    long block_line;           /* line of the opening rule of the block used; 0 = none */
    const char *block_word;    /* static; what blocks counts when not "result blocks" */
    long long_lines;           /* lines over EXT_LINE_MAX_BYTES (not read) */
    long first_long;           /* the first of them; 0 = none */
    struct ext_unread *unread; /* owned; metrics without a value that matched */
    size_t n_unread, cap_unread;
};

#define EXT_LINE_MAX_BYTES ((size_t)64 << 10) /* a longer line is skipped */
#define EXT_QUOTE_MAX      40                 /* bytes of a bad value quoted */

void ext_info_init(struct ext_info *info);
void ext_info_release(struct ext_info *info);

/*
 * Append to notes ("; "-separated) what a user should know about a log
 * that extracted fine: "3 result blocks, last used (line 40)", values that
 * matched but are not numbers ("'p99_ttft_ms' matched '12 ms', not a number
 * (line 30)"), lines too long to read. Nothing when there is nothing to say.
 */
void ext_info_notes(const struct ext_info *info, struct buf *notes);

/*
 * Run every pattern over text[0..len) (a whole log, read as lines) and put
 * what matched into out (which the caller initialised; existing names are
 * overwritten). info (NULL: not wanted) is filled as described above; the
 * caller initialised it. Returns 0, or -1 with err set and out left alone:
 * a pattern hit a limit (RN_ERR_USAGE, the message names it), a metric was
 * printed twice in the block used, or the log ends inside a result block
 * (RN_ERR_POINTS, naming the lines).
 */
int ext_run(const ext_set *set, const char *text, size_t len, struct metric_set *out,
            struct ext_info *info, struct err *err);

/*
 * ext_run on the file at path, read in chunks (memory stays bounded
 * whatever the size of the file). A file that cannot be opened or read
 * fails with "path: reason" (RN_ERR_ENV). With an export preset the file
 * is read whole, up to XP_FILE_MAX_BYTES (a larger one fails, RN_ERR_POINTS).
 */
int ext_run_file(const ext_set *set, const char *path, struct metric_set *out,
                 struct ext_info *info, struct err *err);

/*
 * The file a point's metrics are read from, given its client log: log_path
 * for a regex preset, the tool's export beside it for an export preset
 * (xp_path: "c4-n16.log" -> "c4-n16.json"). Returns a fresh string.
 */
char *ext_source_path(const ext_set *set, const char *log_path);

/* The export preset set reads (export.h), or NULL for a console preset. */
const struct xp_preset *ext_export(const ext_set *set);

/*
 * Check that every name in require is present in got. Returns 0, or -1 with
 * a message (code RN_ERR_POINTS) naming every missing metric and, for each,
 * what its pattern matched when that was not a number ("missing required
 * metric 'x': matched 'abc', not a number (line 12)", from info, which may
 * be NULL), else every regex that was tried (or saying that no pattern
 * defines it). The message is cut at the length of err's buffer.
 */
int ext_require(const ext_set *set, const struct metric_set *got, const struct ext_info *info,
                const struct strvec *require, struct err *err);

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
 * "trace", empty), -1 for anything that is not a decimal number as
 * str_to_double reads it ("0x1p3", "12 ms", "12abc", a NUL byte), -2 for a
 * number beyond a double's range ("1e999").
 */
int ext_parse_value(const char *s, size_t n, double *v);

/*
 * Split a command-line "NAME=REGEX" (--pattern) into *p: p->name is a fresh
 * heap string (the caller frees it), p->regex points into arg. Returns 0,
 * or -1 with err set (RN_ERR_USAGE) when there is no '=' or no name. The
 * regex itself is checked by ext_new.
 */
int ext_pattern_arg(const char *arg, struct ext_pattern *p, struct err *err);

#define EXT_FAILED_SHARE_MAX  0.05 /* more failed requests than this fails the point */
#define EXT_CONCURRENCY_FLOOR 0.5  /* achieved below this share of min(C, P) is noted */

/*
 * The invariants every good measurement satisfies, checked on the metrics
 * extracted from one point's log (by `sweep run`, and again when `sweep
 * plot` or `sweep import` rebuild a point from a log). Violations are
 * appended to notes ("; "-separated); returns true when one of them means
 * the numbers cannot be trusted (then the point fails):
 *   - no time or rate of the client's is negative (a name ending in _ms or
 *     _s, or holding "throughput"; server_* columns excepted);
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
 * lines (for `sweep import`): the block's row first, else the last such
 * line anywhere; a block that cannot be trusted (a metric twice, a block
 * the log ends inside) is read all the same, since the judge will fail the
 * point naming why. Returns 0 (fields left at -1 where the log is silent),
 * or -1 with err set when a limit stopped a match. ext_shape_file reads the
 * file at path in chunks, and fails with "path: reason" (RN_ERR_ENV) when it
 * cannot be read.
 */
int ext_shape(const char *text, size_t len, struct ext_shape *out, struct err *err);
int ext_shape_file(const char *path, struct ext_shape *out, struct err *err);

/*
 * ext_shape_file as set reads the file: a console preset's log as above, an
 * export preset's file by its keys (xp_shape: vLLM's "max_concurrency",
 * "completed" + "failed", ...).
 */
int ext_shape_for(const ext_set *set, const char *path, struct ext_shape *out, struct err *err);

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
