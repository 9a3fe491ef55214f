/*
 * results: points.csv reading and writing (RFC 4180 quoting). The whole
 * table is small (one row per point), so it is kept in memory and the file
 * is rewritten atomically whenever a row is added.
 */
#include "store/results.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "strutil.h"
#include "strvec.h"
#include "sweep.h"
#include "xalloc.h"

static const char *const fixed_cols[] = {"variant", "concurrency", "prompts", "repeat",  "status",
                                         "key",     "cause",       "log",     "started", "wall_s"};
#define N_FIXED (sizeof(fixed_cols) / sizeof(fixed_cols[0]))
#define CSV_MAX ((size_t)256 << 20)

bool res_is_fixed_column(const char *name)
{
    for (size_t c = 0; c < N_FIXED; c++)
        if (strcmp(name, fixed_cols[c]) == 0)
            return true;
    return false;
}

const char *res_fixed_columns_list(void)
{
    static char list[128]; /* built once from fixed_cols, so the two cannot differ */
    if (!list[0])
        for (size_t c = 0, o = 0; c < N_FIXED && o < sizeof(list); c++)
            o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", c ? ", " : "", fixed_cols[c]);
    return list;
}

void res_point_init(struct res_point *p)
{
    memset(p, 0, sizeof(*p));
    p->wall_s = NAN;
    mset_init(&p->metrics);
}

void res_point_begin(struct res_point *p, const char *variant, long concurrency, long prompts,
                     long repeat, const char *key, const char *log, const char *started)
{
    res_point_init(p);
    p->variant = xstrdup(variant ? variant : "");
    p->concurrency = concurrency;
    p->prompts = prompts;
    p->repeat = repeat;
    p->key = xstrdup(key ? key : "");
    p->log = xstrdup(log ? log : "");
    p->started = xstrdup(started ? started : "");
}

void res_point_release(struct res_point *p)
{
    free(p->variant);
    free(p->status);
    free(p->key);
    free(p->cause);
    free(p->log);
    free(p->started);
    mset_release(&p->metrics);
    res_point_init(p);
}

void res_table_init(struct res_table *t)
{
    *t = (struct res_table){0};
}

void res_table_release(struct res_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        res_point_release(&t->rows[i]);
    free(t->rows);
    res_table_init(t);
}

void res_table_add(struct res_table *t, struct res_point *p)
{
    XGROW(t->rows, t->cap, t->n + 1);
    t->rows[t->n++] = *p;
    res_point_init(p);
}

static int same_point(const struct res_point *a, const struct res_point *b)
{
    return strcmp(a->variant ? a->variant : "", b->variant ? b->variant : "") == 0 &&
           a->concurrency == b->concurrency && a->prompts == b->prompts && a->repeat == b->repeat &&
           /* rate points share C and P; their logs ("rate2-n64.log") tell them apart */
           (!a->log || !b->log || strcmp(path_base(a->log), path_base(b->log)) == 0);
}

void res_table_put(struct res_table *t, struct res_point *p)
{
    for (size_t i = 0; i < t->n; i++)
        if (same_point(&t->rows[i], p)) {
            res_point_release(&t->rows[i]);
            t->rows[i] = *p;
            res_point_init(p);
            return;
        }
    res_table_add(t, p);
}

const struct res_point *res_table_find(const struct res_table *t, const char *variant,
                                       long concurrency, long prompts, long repeat)
{
    struct res_point like = {.variant = (char *)variant,
                             .concurrency = concurrency,
                             .prompts = prompts,
                             .repeat = repeat};
    for (size_t i = 0; i < t->n; i++)
        if (same_point(&t->rows[i], &like))
            return &t->rows[i];
    return NULL;
}

const struct res_point *res_table_find_ok(const struct res_table *t, const char *variant,
                                          const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].key && strcmp(t->rows[i].key, key) == 0 && t->rows[i].variant &&
            strcmp(t->rows[i].variant, variant) == 0 && t->rows[i].status &&
            strcmp(t->rows[i].status, RES_OK) == 0)
            return &t->rows[i];
    return NULL;
}

/* ---- writing ---- */

void res_csv_cell(struct buf *b, const char *s)
{
    if (!s)
        return;
    if (!strpbrk(s, ",\"\r\n")) {
        buf_puts(b, s);
        return;
    }
    buf_putc(b, '"');
    for (; *s; s++) {
        if (*s == '"')
            buf_putc(b, '"');
        buf_putc(b, *s);
    }
    buf_putc(b, '"');
}

static void put_num(struct buf *b, double v)
{
    if (isnan(v))
        return;
    if (isinf(v)) {
        buf_puts(b, v > 0 ? "inf" : "-inf");
        return;
    }
    buf_json_num(b, v);
}

/* Metric columns: canonical ones present in any row, then the others. */
static void metric_columns(const struct res_table *t, struct strvec *cols)
{
    size_t n_defs;
    const struct metric_def *defs = metric_defs(&n_defs);
    for (size_t d = 0; d < n_defs; d++)
        for (size_t i = 0; i < t->n; i++)
            if (mset_get(&t->rows[i].metrics, defs[d].name, NULL)) {
                strvec_push(cols, defs[d].name);
                break;
            }
    for (size_t i = 0; i < t->n; i++)
        for (size_t k = 0; k < t->rows[i].metrics.n; k++) {
            const char *name = t->rows[i].metrics.m[k].name;
            if (!metric_find(name) && strvec_find(cols, name) < 0)
                strvec_push(cols, name);
        }
}

void res_table_format(const struct res_table *t, struct buf *out)
{
    struct strvec cols = STRVEC_INIT;
    metric_columns(t, &cols);
    for (size_t c = 0; c < N_FIXED; c++) {
        if (c)
            buf_putc(out, ',');
        buf_puts(out, fixed_cols[c]);
    }
    for (size_t c = 0; c < cols.n; c++) {
        buf_putc(out, ',');
        res_csv_cell(out, cols.v[c]);
    }
    buf_putc(out, '\n');
    for (size_t i = 0; i < t->n; i++) {
        const struct res_point *p = &t->rows[i];
        res_csv_cell(out, p->variant);
        buf_printf(out, ",%ld,%ld,%ld,", p->concurrency, p->prompts, p->repeat);
        res_csv_cell(out, p->status);
        buf_putc(out, ',');
        res_csv_cell(out, p->key);
        buf_putc(out, ',');
        res_csv_cell(out, p->cause);
        buf_putc(out, ',');
        res_csv_cell(out, p->log);
        buf_putc(out, ',');
        res_csv_cell(out, p->started);
        buf_putc(out, ',');
        put_num(out, p->wall_s);
        for (size_t c = 0; c < cols.n; c++) {
            double v;
            buf_putc(out, ',');
            if (mset_get(&p->metrics, cols.v[c], &v))
                put_num(out, v);
        }
        buf_putc(out, '\n');
    }
    strvec_release(&cols);
}

int res_table_save(const struct res_table *t, const char *path, struct err *err)
{
    struct buf b;
    buf_init(&b, CSV_MAX);
    res_table_format(t, &b);
    int rc = file_write_atomic(path, b.data, b.len, err, RN_ERR_ENV);
    buf_release(&b);
    return rc;
}

/* ---- reading ---- */

/* Split one CSV record starting at *pos into cells; advances *pos past the
 * record's line end. Returns 0, or -1 on an unterminated quote. */
static int read_record(const char *s, size_t len, size_t *pos, struct strvec *cells, int *lines)
{
    size_t i = *pos;
    struct buf cell;
    buf_init(&cell, CSV_MAX);
    for (;;) {
        buf_reset(&cell);
        if (i < len && s[i] == '"') {
            i++;
            for (;;) {
                if (i >= len) {
                    buf_release(&cell);
                    return -1;
                }
                if (s[i] == '"') {
                    if (i + 1 < len && s[i + 1] == '"') {
                        buf_putc(&cell, '"');
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                if (s[i] == '\n')
                    (*lines)++;
                buf_putc(&cell, s[i++]);
            }
        }
        while (i < len && s[i] != ',' && s[i] != '\n' && s[i] != '\r')
            buf_putc(&cell, s[i++]);
        strvec_push(cells, cell.data ? cell.data : "");
        if (i < len && s[i] == ',') {
            i++;
            continue;
        }
        if (i < len && s[i] == '\r')
            i++;
        if (i < len && s[i] == '\n')
            i++;
        break;
    }
    (*lines)++;
    *pos = i;
    buf_release(&cell);
    return 0;
}

static int parse_num(const char *cell, double *v)
{
    if (!*cell) {
        *v = NAN;
        return 0;
    }
    if (strcmp(cell, "inf") == 0 || strcmp(cell, "-inf") == 0) {
        *v = cell[0] == '-' ? -INFINITY : INFINITY;
        return 0;
    }
    return str_to_double(cell, v);
}

int res_table_load(const char *path, struct res_table *t, struct err *err)
{
    struct buf b;
    buf_init(&b, CSV_MAX);
    int rc = -1;
    struct strvec header = STRVEC_INIT, cells = STRVEC_INIT;
    if (file_read_all(path, &b, err, RN_ERR_ENV) != 0)
        goto out;
    size_t pos = 0;
    int line = 1;
    const char *s = b.data ? b.data : "";
    if (read_record(s, b.len, &pos, &header, &line) != 0 || header.n < N_FIXED) {
        err_set(err, RN_ERR_USAGE, "%s:1: not a points.csv header", path);
        goto out;
    }
    for (size_t c = 0; c < N_FIXED; c++)
        if (strcmp(header.v[c], fixed_cols[c]) != 0) {
            err_set(err, RN_ERR_USAGE, "%s:1: column %zu is '%s', expected '%s'", path, c + 1,
                    header.v[c], fixed_cols[c]);
            goto out;
        }
    while (pos < b.len) {
        int at = line;
        strvec_release(&cells);
        if (read_record(s, b.len, &pos, &cells, &line) != 0) {
            err_set(err, RN_ERR_USAGE, "%s:%d: unterminated quoted cell", path, at);
            goto out;
        }
        if (cells.n == 1 && cells.v[0][0] == '\0')
            continue; /* blank line */
        if (cells.n != header.n) {
            err_set(err, RN_ERR_USAGE, "%s:%d: %zu cells, the header has %zu", path, at, cells.n,
                    header.n);
            goto out;
        }
        struct res_point p;
        res_point_init(&p);
        long nums[3];
        for (int k = 0; k < 3; k++)
            if (str_to_long(cells.v[1 + k], &nums[k]) != 0) {
                err_set(err, RN_ERR_USAGE, "%s:%d: %s '%s' is not an integer", path, at,
                        fixed_cols[1 + k], cells.v[1 + k]);
                res_point_release(&p);
                goto out;
            }
        p.variant = xstrdup(cells.v[0]);
        p.concurrency = nums[0];
        p.prompts = nums[1];
        p.repeat = nums[2];
        p.status = xstrdup(cells.v[4]);
        p.key = xstrdup(cells.v[5]);
        p.cause = xstrdup(cells.v[6]);
        p.log = xstrdup(cells.v[7]);
        p.started = xstrdup(cells.v[8]);
        if (parse_num(cells.v[9], &p.wall_s) != 0) {
            err_set(err, RN_ERR_USAGE, "%s:%d: wall_s '%s' is not a number", path, at, cells.v[9]);
            res_point_release(&p);
            goto out;
        }
        for (size_t c = N_FIXED; c < header.n; c++) {
            double v;
            if (!cells.v[c][0])
                continue;
            if (parse_num(cells.v[c], &v) != 0) {
                err_set(err, RN_ERR_USAGE, "%s:%d: %s '%s' is not a number", path, at, header.v[c],
                        cells.v[c]);
                res_point_release(&p);
                goto out;
            }
            mset_set(&p.metrics, header.v[c], v);
        }
        res_table_add(t, &p);
    }
    rc = 0;
out:
    strvec_release(&header);
    strvec_release(&cells);
    buf_release(&b);
    return rc;
}
