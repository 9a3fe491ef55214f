/*
 * results: points.csv, the table every run keeps (one row per point and
 * repeat), read and written whole. Saving rewrites the file atomically
 * (temporary name + rename), so after each point the CSV on disk is
 * complete, and a crash never leaves half a row.
 *
 * Columns: variant, concurrency, prompts, repeat, status, key, cause, log,
 * started, wall_s, then one column per metric: the canonical metrics
 * that any row has, in canonical order, then other names in first-seen
 * order. Empty cell = metric absent. Numbers are written in the shortest
 * form that reads back to the same double ("inf" for infinity).
 */
#ifndef RUNNER_RESULTS_H
#define RUNNER_RESULTS_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"

#include "store/metric.h"

/* Point status values as written in the CSV. */
#define RES_OK          "ok"
#define RES_FAILED      "failed"      /* client or server failure; cause says which */
#define RES_TIMEOUT     "timeout"     /* the point passed bench.timeout_s */
#define RES_INTERRUPTED "interrupted" /* Ctrl-C during the point */

struct res_point {
    char *variant;    /* owned */
    long concurrency; /* requested C */
    long prompts;     /* requested number of measured requests */
    long repeat;      /* 1-based repeat index */
    char *status;     /* owned; one of RES_* */
    char *key;        /* owned; point key (hex), "" if unknown (imported logs) */
    char *cause;      /* owned; why it failed, "" when ok */
    char *log;        /* owned; client log path relative to the run folder */
    char *started;    /* owned; ISO-8601 UTC start time, "" if unknown */
    double wall_s;    /* wall time of the client process, NAN if unknown */
    struct metric_set metrics;
};

struct res_table {
    struct res_point *rows; /* owned */
    size_t n, cap;
};

/* One CSV cell appended to b: as is, or RFC 4180 quoted when it holds a
 * comma, quote or line break; NULL is an empty cell. */
void res_csv_cell(struct buf *b, const char *s);

void res_point_init(struct res_point *p);
/* res_point_init, then the point's identity: copies of variant, key, log
 * and started (NULL is ""); status, cause and metrics stay unset. */
void res_point_begin(struct res_point *p, const char *variant, long concurrency, long prompts,
                     long repeat, const char *key, const char *log, const char *started);
void res_point_release(struct res_point *p);

void res_table_init(struct res_table *t);
void res_table_release(struct res_table *t);
/* Append *p (the table takes ownership of its contents; *p is reset). */
void res_table_add(struct res_table *t, struct res_point *p);
/* Replace the row with the same variant/concurrency/prompts/repeat, or
 * append; takes ownership like res_table_add. */
void res_table_put(struct res_table *t, struct res_point *p);
/* The row of this variant at this concurrency, prompts and repeat (any
 * status), or NULL. */
const struct res_point *res_table_find(const struct res_table *t, const char *variant,
                                       long concurrency, long prompts, long repeat);
/* The first row of this variant with this key and status ok, or NULL. The
 * key leaves the variant's name out (renaming one reruns nothing), so two
 * variants with the same settings share keys: each still gets its rows. */
const struct res_point *res_table_find_ok(const struct res_table *t, const char *variant,
                                          const char *key);

/* True when name is one of the fixed columns (variant ... wall_s), which a
 * metric must not be called: the CSV would get two columns of that name. */
bool res_is_fixed_column(const char *name);
/* The fixed columns as "variant, concurrency, ..., wall_s", for messages. */
const char *res_fixed_columns_list(void);

/* Load a points.csv. Returns 0, or -1 with "path:line: reason" in err
 * (code RN_ERR_USAGE for a malformed file, RN_ERR_ENV if unreadable). */
int res_table_load(const char *path, struct res_table *t, struct err *err);
/* Serialise to CSV text (for tests and for saving). */
void res_table_format(const struct res_table *t, struct buf *out);
/* Write atomically. Returns 0 or -1 with err set (code RN_ERR_ENV). */
int res_table_save(const struct res_table *t, const char *path, struct err *err);

#endif
