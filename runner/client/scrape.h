/*
 * scrape: the server's own view of a point. `sweep run` saves the server's
 * Prometheus text (GET /metrics) before and after each point, beside the
 * client log (c16-n48.metrics-before.txt, c16-n48.metrics-after.txt); the
 * judge (analysis/judge.c) turns the two into server_* columns of
 * points.csv, so `sweep run` and `sweep plot` compute them the same way.
 *
 * A column is an expression over counter deltas (after - before, summed
 * over every label set of a name): "NAME", "NAME / NAME", with "* K" or
 * "/ K" constants, left to right. The known servers (fp4serve, vLLM,
 * SGLang) are rows of one table written in that language; a user's
 * metrics.server_map adds or replaces columns the same way.
 */
#ifndef RUNNER_SCRAPE_H
#define RUNNER_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"

#include "store/metric.h"

#define SCRAPE_MAX_BYTES  ((size_t)16 << 20) /* a larger /metrics answer is cut (and said) */
#define SCRAPE_TIMEOUT_MS 5000

/* One sample line of the exposition. */
struct scrape_sample {
    char *name;   /* owned; metric name as written (histograms: NAME_sum, NAME_count, ...) */
    char *labels; /* owned; label pairs as NAME="value" joined by ',', unescaped; "" if none */
    double value; /* +Inf, -Inf and NaN as IEEE values */
    long line;    /* 1-based line of the text it came from */
};

struct scrape_set {
    struct scrape_sample *s; /* owned */
    size_t n, cap;
    size_t n_bad;  /* lines that are not a sample or a comment (skipped) */
    long bad_line; /* 1-based number of the first of them, 0 when none */
};

void scrape_set_init(struct scrape_set *set);
void scrape_set_release(struct scrape_set *set);

/*
 * Parse Prometheus text format 0.0.4 (and OpenMetrics' "# EOF"): comments,
 * labels with escaped quotes, backslashes and newlines, +Inf/-Inf/NaN,
 * optional timestamps. A line that is none of these is counted in n_bad and
 * skipped: one odd line does not lose the others. Appends to *set.
 */
void scrape_parse(const char *text, size_t len, struct scrape_set *set);

/* Sum of name's samples over every label set; false when there is none. */
bool scrape_sum(const struct scrape_set *set, const char *name, double *out);

/* A server column and what it means (for the README and REPORT.md). */
struct scrape_column {
    const char *name; /* server_step_ms, ... */
    const char *unit;
    const char *doc;
};
/* The server_* columns, in points.csv order. */
const struct scrape_column *scrape_columns(size_t *n);

/* One user mapping: column name (server_*) -> expression. */
struct scrape_map {
    const char *column;
    const char *expr;
};

/* 0 when expr is a valid column expression, else -1 with err (RN_ERR_USAGE)
 * naming the offending part. */
int scrape_expr_check(const char *expr, struct err *err);

/*
 * The server_* columns from two scrapes: every known rule whose series are
 * in both and whose divisors moved (the first rule per column wins; a rule
 * only a mixture of experts fills, such as experts per step, also needs a
 * value above 0), then
 * map[0..n_map) over them. Writes into *out (names already there are
 * replaced). family gets which known server matched ("fp4serve", "vllm",
 * "sglang", "" when none; may be NULL). Returns the number of columns set.
 */
size_t scrape_columns_from(const struct scrape_set *before, const struct scrape_set *after,
                           const struct scrape_map *map, size_t n_map, struct metric_set *out,
                           const char **family);

/* "DIR/c16-n48.metrics-before.txt" for log "DIR/c16-n48.log" (when "before",
 * else -after). Heap string. */
char *scrape_path(const char *log_path, bool before);

/*
 * A series (name and label set) that appears twice in set: the first such
 * pair as indexes a < b into set->s. Returns false when every series is
 * there once. Sums over label sets would count it twice, and which value
 * is meant cannot be known.
 */
bool scrape_duplicate(const struct scrape_set *set, size_t *a, size_t *b);

/*
 * The columns of the point whose client log is log_path, from the two saved
 * scrapes beside it. Returns the number of columns set; 0 (nothing set) when
 * either file is missing or unreadable, or the server gave no known series.
 * A scrape that holds a series twice (scrape_duplicate) gives no column
 * either: why (may be NULL) then gets the reason, naming the file, the
 * series, its lines and values.
 */
size_t scrape_point_columns(const char *log_path, const struct scrape_map *map, size_t n_map,
                            struct metric_set *out, struct buf *why);

/*
 * GET url and save the body to path (atomically). Returns 0, or -1 with a
 * one-line reason in err (RN_ERR_ENV): no answer, an HTTP status other than
 * 200 ("HTTP 404"), an answer with no sample line, or a write error; then
 * *write_failed says whether the server answered well and the file could
 * not be written (a full disk: not the server's fault).
 */
int scrape_fetch_save(const char *url, const char *path, bool *write_failed, struct err *err);

#endif
