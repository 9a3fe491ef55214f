/*
 * export: metrics out of the files benchmark clients export (docs/benchmarks.md
 * §2.6): AIPerf's profile_export_aiperf.json and .csv, GuideLLM's JSON report,
 * vLLM's `bench serve --save-result` JSON and SGLang's `bench_serving
 * --output-file` JSONL. An export preset is a table of (canonical name, key
 * path) rows read with jansson, beside the regex presets of extract.c, which
 * dispatches to it: ext_new accepts these preset names too, and "aiperf", the
 * console tables of AIPerf read the same way (XP_TABLE).
 *
 * Key paths: keys joined by '.', each optionally followed by an array index
 * "[N]" ("[-1]" is the last element): "benchmarks[-1].metrics.request_latency
 * .successful.median". CSV rows name a row label (first column) and a column
 * header of the section the row is in ("Time to First Token (ms)", "p50").
 *
 * The aiperf preset reads AIPerf's console tables the same way (a row label
 * and a column header, in whatever order the columns come), streamed like
 * any console log. Unlike a console log, an export is read whole: these
 * files are small (a few
 * KiB for vLLM, SGLang and AIPerf; GuideLLM's report carries every request,
 * about 10 KiB per 1,000 tokens of prompt text), so a file over
 * XP_FILE_MAX_BYTES is refused rather than parsed.
 */
#ifndef RUNNER_EXPORT_H
#define RUNNER_EXPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

#include "client/extract.h"

#include "store/metric.h"

#define XP_FILE_MAX_BYTES ((size_t)64 << 20) /* a larger export is refused */

enum xp_format {
    XP_JSON,  /* one JSON document */
    XP_JSONL, /* one JSON document per line, appended run after run: the last counts */
    XP_CSV,   /* sections of "Metric,<column>..." header then rows, blank-line separated */
    XP_TABLE, /* a console log with box-drawn tables (AIPerf's rich tables), read as
                 a stream of lines like any console log: no size limit */
};

struct xp_row {
    const char *name; /* canonical metric */
    const char *key;  /* JSON key path, or the CSV or table row label */
    const char *col;  /* CSV, table: column header; NULL for JSON, and in a table for a
                         "KEY: value unit" line outside the tables */
    double scale;     /* the value is multiplied by this (s -> ms: 1000) */
};

struct xp_preset {
    const char *name; /* "vllm-json" */
    enum xp_format format;
    const char *suffix;   /* where `sweep run` finds it: the log's path less ".log", plus
                             this; NULL: the log itself (XP_TABLE) */
    const char *runs_key; /* JSON: array of runs in one file, the last is used; NULL = none */
    const char *conc_key; /* JSON: the requested concurrency (for sweep import); NULL = none */
    const struct xp_row *rows;
    size_t n_rows;
};

/* The export preset called name, or NULL. */
const struct xp_preset *xp_find(const char *name);

/* NULL-terminated list of the export presets' names. */
const char *const *xp_names(void);

/*
 * The file `sweep run` reads for a point whose console log is log_path:
 * log_path itself when it already ends in the preset's suffix or its file
 * extension (`sweep extract FILE.json`), else log_path less ".log" plus the
 * suffix ("c4-n16.log" -> "c4-n16.json", or "c4-n16/profile_export_aiperf.json"
 * for AIPerf's artifact folder). Returns a fresh string.
 */
char *xp_path(const struct xp_preset *p, const char *log_path);

/*
 * Parse text[0..len) (the whole export; path names it in messages) and put
 * every row that has a value into out, except names in skip (the user
 * patterns that replace them; NULL = none). A key that is absent, or null,
 * leaves its metric absent; a value that is not a number is recorded in info
 * as extract.c records a bad match (info may be NULL). Returns 0, or -1 with
 * err set (RN_ERR_POINTS): not JSON ("path:3:14: not JSON: ..."), not an
 * object at the top, no result line in a JSONL file, a CSV without a
 * "Metric," header. JSON's non-standard Infinity, -Infinity and NaN, which
 * Python writes, are read as inf, -inf and "not measured".
 */
int xp_parse(const struct xp_preset *p, const char *path, const char *text, size_t len,
             const struct strvec *skip, struct metric_set *out, struct ext_info *info,
             struct err *err);

/*
 * Read the file at path (at most XP_FILE_MAX_BYTES) into text. Returns 0, or
 * -1 with "path: reason" in err: RN_ERR_ENV when it cannot be read,
 * RN_ERR_POINTS when it is too large.
 */
int xp_read(const char *path, struct buf *text, struct err *err);

/*
 * A table log read as a stream (XP_TABLE): xp_stream_new, then the bytes in
 * any chunks (xp_stream_feed), then xp_stream_end, which stores the values
 * in out as xp_parse does, frees the stream and returns 0, or -1 with err
 * set (a row twice: two runs' tables mixed, RN_ERR_POINTS). Lines end at
 * "\n", "\r" or "\r\n"; a line over EXT_LINE_MAX_BYTES is skipped.
 */
struct xp_stream;
struct xp_stream *xp_stream_new(const struct xp_preset *p, const char *path,
                                const struct strvec *skip, struct metric_set *out,
                                struct ext_info *info, struct err *err);
void xp_stream_feed(struct xp_stream *t, const char *data, size_t n);
int xp_stream_end(struct xp_stream *t);

/*
 * What an export says about its point (for `sweep import`): the requested
 * concurrency (conc_key; -1 when the preset has none or the file says
 * nothing usable) and the prompts (successful + failed requests; -1 when
 * absent). Returns 0, or -1 with err set as xp_read and xp_parse fail.
 */
int xp_shape(const struct xp_preset *p, const char *path, long *concurrency, long *prompts,
             struct err *err);

/* Append "key 'a.b' in the JSON export" for each row of name (", "-separated)
 * to b; returns how many rows name has. */
size_t xp_describe(const struct xp_preset *p, const char *name, struct buf *b);

#endif
