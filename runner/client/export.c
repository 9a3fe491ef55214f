/*
 * export: the export presets (tables of key paths, one per tool file format)
 * and their reader. JSON goes through jansson after Python's non-standard
 * Infinity/NaN tokens are rewritten; CSV is AIPerf's: sections of a
 * "Metric,..." header and rows, which a row label and a column header
 * address, and AIPerf's console tables the same way, streamed line by line. Which tool name maps to
 * which canonical metric, and why, is in glossary.c and docs/benchmarks.md §3; the tables below
 * must agree with it (tests/unit/runner_extract_export.c checks them).
 */
#include "client/export.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "strutil.h"
#include "strvec.h"
#include "sweep.h"
#include "xalloc.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the presets ---- */

/* AIPerf 0.13 (profile_export_aiperf.json): one object per metric tag, with
 * "avg", "p50", "p90", "p95", "p99", "max"... Its inter_token_latency is
 * (latency - TTFT) / (output tokens - first chunk's tokens) per request, our
 * TPOT; inter_chunk_latency (the gaps between chunks, pooled) is our ITL. */
#define AIPERF_J(stem, tag)                                                                        \
    {"mean_" stem "_ms", tag ".avg", NULL, 1}, {"median_" stem "_ms", tag ".p50", NULL, 1},        \
        {"p90_" stem "_ms", tag ".p90", NULL, 1}, {"p95_" stem "_ms", tag ".p95", NULL, 1},        \
    {                                                                                              \
        "p99_" stem "_ms", tag ".p99", NULL, 1                                                     \
    }

static const struct xp_row aiperf_json_rows[] = {
    {"successful_requests", "request_count.avg", NULL, 1},
    {"failed_requests", "error_request_count.avg", NULL, 1}, /* only when some failed */
    {"duration_s", "benchmark_duration.avg", NULL, 1},
    {"total_input_tokens", "total_isl.avg", NULL, 1},
    {"total_output_tokens", "total_osl.avg", NULL, 1},
    {"request_throughput", "request_throughput.avg", NULL, 1},
    {"input_throughput", "input_token_throughput.avg", NULL, 1},
    {"output_throughput", "output_token_throughput.avg", NULL, 1},
    {"total_throughput", "total_token_throughput.avg", NULL, 1},
    {"achieved_concurrency", "effective_concurrency.avg", NULL, 1},
    AIPERF_J("ttft", "time_to_first_token"),
    AIPERF_J("tpot", "inter_token_latency"),
    AIPERF_J("itl", "inter_chunk_latency"),
    {"max_itl_ms", "inter_chunk_latency.max", NULL, 1},
    AIPERF_J("e2e", "request_latency"),
};

/* AIPerf 0.13 (profile_export_aiperf.csv): the same numbers, two decimals. */
#define AIPERF_C(stem, label)                                                                      \
    {"mean_" stem "_ms", label, "avg", 1}, {"median_" stem "_ms", label, "p50", 1},                \
        {"p90_" stem "_ms", label, "p90", 1}, {"p95_" stem "_ms", label, "p95", 1},                \
    {                                                                                              \
        "p99_" stem "_ms", label, "p99", 1                                                         \
    }

static const struct xp_row aiperf_csv_rows[] = {
    {"successful_requests", "Request Count", "Value", 1},
    {"failed_requests", "Error Request Count", "Value", 1},
    {"duration_s", "Benchmark Duration (sec)", "Value", 1},
    {"total_input_tokens", "Total Input Sequence Length (tokens)", "Value", 1},
    {"total_output_tokens", "Total Output Sequence Length (tokens)", "Value", 1},
    {"request_throughput", "Request Throughput (requests/sec)", "Value", 1},
    {"input_throughput", "Input Token Throughput (tokens/sec)", "Value", 1},
    {"output_throughput", "Output Token Throughput (tokens/sec)", "Value", 1},
    {"total_throughput", "Total Token Throughput (tokens/sec)", "Value", 1},
    {"achieved_concurrency", "Effective Concurrency", "avg", 1},
    AIPERF_C("ttft", "Time to First Token (ms)"),
    AIPERF_C("tpot", "Inter Token Latency (ms)"),
    AIPERF_C("itl", "Inter Chunk Latency (ms)"),
    {"max_itl_ms", "Inter Chunk Latency (ms)", "max", 1},
    AIPERF_C("e2e", "Request Latency (ms)"),
};

/* AIPerf 0.13's console (rich tables: a "┃ Metric ┃ avg ┃ ... ┃" header, then
 * "│ label │ value │ ..." rows; a label too long for the terminal wraps onto
 * continuation rows whose values are empty, and is joined back). Columns
 * are found by their header, so a version that orders them otherwise, or
 * adds p95, is read right. The duration is a line of its own. */
#define AIPERF_T(stem, label)                                                                      \
    {"mean_" stem "_ms", label, "avg", 1}, {"median_" stem "_ms", label, "p50", 1},                \
        {"p90_" stem "_ms", label, "p90", 1}, {"p95_" stem "_ms", label, "p95", 1},                \
    {                                                                                              \
        "p99_" stem "_ms", label, "p99", 1                                                         \
    }

static const struct xp_row aiperf_console_rows[] = {
    {"successful_requests", "Request Count (requests)", "avg", 1},
    {"duration_s", "Benchmark Duration", NULL, 1},
    {"request_throughput", "Request Throughput (requests/sec)", "avg", 1},
    {"input_throughput", "Input Token Throughput (tokens/sec)", "avg", 1},
    {"output_throughput", "Output Token Throughput (tokens/sec)", "avg", 1},
    AIPERF_T("ttft", "Time to First Token (ms)"),
    AIPERF_T("tpot", "Inter Token Latency (ms)"),
    AIPERF_T("e2e", "Request Latency (ms)"),
};

/* GuideLLM 0.8 (`--output kind=json`): benchmarks[], each with metrics.<name>
 * .successful.{mean,median,percentiles.pNN}. Its inter_token_latency_ms is
 * (latency - TTFT) / (output tokens - 1), our TPOT (GuideLLM itself uses it
 * as TPOT for SLOs); its time_per_output_token_ms is latency / output tokens,
 * which has no canonical name. request_latency is in seconds. */
#define GLLM_B "benchmarks[-1]."
#define GLLM_M GLLM_B "metrics."
#define GLLM(stem, key, scale)                                                                     \
    {"mean_" stem "_ms", GLLM_M key ".successful.mean", NULL, scale},                              \
        {"median_" stem "_ms", GLLM_M key ".successful.median", NULL, scale},                      \
        {"p90_" stem "_ms", GLLM_M key ".successful.percentiles.p90", NULL, scale},                \
        {"p95_" stem "_ms", GLLM_M key ".successful.percentiles.p95", NULL, scale},                \
    {                                                                                              \
        "p99_" stem "_ms", GLLM_M key ".successful.percentiles.p99", NULL, scale                   \
    }

static const struct xp_row guidellm_rows[] = {
    {"successful_requests", GLLM_M "request_totals.successful", NULL, 1},
    {"failed_requests", GLLM_M "request_totals.errored", NULL, 1},
    {"duration_s", GLLM_B "duration", NULL, 1},
    {"total_input_tokens", GLLM_M "prompt_token_count.successful.total_sum", NULL, 1},
    {"total_output_tokens", GLLM_M "output_token_count.successful.total_sum", NULL, 1},
    {"request_throughput", GLLM_M "requests_per_second.successful.mean", NULL, 1},
    {"input_throughput", GLLM_M "prompt_tokens_per_second.successful.mean", NULL, 1},
    {"output_throughput", GLLM_M "output_tokens_per_second.successful.mean", NULL, 1},
    {"total_throughput", GLLM_M "tokens_per_second.successful.mean", NULL, 1},
    {"achieved_concurrency", GLLM_M "request_concurrency.successful.mean", NULL, 1},
    GLLM("ttft", "time_to_first_token_ms", 1),
    GLLM("tpot", "inter_token_latency_ms", 1),
    GLLM("e2e", "request_latency", 1000),
};

/* vLLM 0.33 `bench serve --save-result`: flat keys; p90/p95 only when
 * --metric-percentiles asks for them (the default is 99). */
#define VLLM(stem, key)                                                                            \
    {"mean_" stem "_ms", "mean_" key "_ms", NULL, 1},                                              \
        {"median_" stem "_ms", "median_" key "_ms", NULL, 1},                                      \
        {"p90_" stem "_ms", "p90_" key "_ms", NULL, 1},                                            \
        {"p95_" stem "_ms", "p95_" key "_ms", NULL, 1},                                            \
    {                                                                                              \
        "p99_" stem "_ms", "p99_" key "_ms", NULL, 1                                               \
    }

static const struct xp_row vllm_json_rows[] = {
    {"successful_requests", "completed", NULL, 1},
    {"failed_requests", "failed", NULL, 1},
    {"duration_s", "duration", NULL, 1},
    {"total_input_tokens", "total_input_tokens", NULL, 1},
    {"total_output_tokens", "total_output_tokens", NULL, 1},
    {"request_throughput", "request_throughput", NULL, 1},
    {"output_throughput", "output_throughput", NULL, 1},
    {"total_throughput", "total_token_throughput", NULL, 1},
    VLLM("ttft", "ttft"),
    VLLM("tpot", "tpot"),
    VLLM("itl", "itl"),
    VLLM("e2e", "e2el"),
};

/* SGLang 0.5 `bench_serving --output-file`: one line per run, appended. */
static const struct xp_row sglang_jsonl_rows[] = {
    {"successful_requests", "completed", NULL, 1},
    {"duration_s", "duration", NULL, 1},
    {"total_input_tokens", "total_input_tokens", NULL, 1},
    {"total_output_tokens", "total_output_tokens", NULL, 1},
    {"request_throughput", "request_throughput", NULL, 1},
    {"input_throughput", "input_throughput", NULL, 1},
    {"output_throughput", "output_throughput", NULL, 1},
    {"total_throughput", "total_throughput", NULL, 1},
    {"achieved_concurrency", "concurrency", NULL, 1},
    VLLM("e2e", "e2e_latency"),
    VLLM("ttft", "ttft"),
    VLLM("tpot", "tpot"),
    VLLM("itl", "itl"),
};

static const struct xp_preset presets[] = {
    {"aiperf", XP_TABLE, NULL, NULL, NULL, aiperf_console_rows, N_OF(aiperf_console_rows)},
    {"aiperf-json", XP_JSON, "/profile_export_aiperf.json", NULL,
     "input_config.phases[-1].concurrency", aiperf_json_rows, N_OF(aiperf_json_rows)},
    {"aiperf-csv", XP_CSV, "/profile_export_aiperf.csv", NULL, NULL, aiperf_csv_rows,
     N_OF(aiperf_csv_rows)},
    {"guidellm-json", XP_JSON, ".json", "benchmarks", "benchmarks[-1].config.strategy.streams",
     guidellm_rows, N_OF(guidellm_rows)},
    {"vllm-json", XP_JSON, ".json", NULL, "max_concurrency", vllm_json_rows, N_OF(vllm_json_rows)},
    {"sglang-jsonl", XP_JSONL, ".jsonl", NULL, "max_concurrency", sglang_jsonl_rows,
     N_OF(sglang_jsonl_rows)},
};

static const char *const names[] = {"aiperf",    "aiperf-json",  "aiperf-csv", "guidellm-json",
                                    "vllm-json", "sglang-jsonl", NULL};

const struct xp_preset *xp_find(const char *name)
{
    for (size_t i = 0; name && i < N_OF(presets); i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

const char *const *xp_names(void)
{
    return names;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

char *xp_path(const struct xp_preset *p, const char *log_path)
{
    if (!p->suffix) /* the console log itself */
        return xstrdup(log_path);
    const char *ext = strrchr(p->suffix, '.'); /* ".json" of "/profile_export_aiperf.json" */
    if (ends_with(log_path, p->suffix) || (ext && ends_with(log_path, ext)))
        return xstrdup(log_path);
    size_t n = strlen(log_path);
    if (ends_with(log_path, ".log"))
        n -= 4;
    return xasprintf("%.*s%s", (int)n, log_path, p->suffix);
}

int xp_read(const char *path, struct buf *text, struct err *err)
{
    buf_init(text, XP_FILE_MAX_BYTES);
    if (file_read_all(path, text, err, RN_ERR_ENV) == 0)
        return 0;
    if (text->toobig)
        err->code = RN_ERR_POINTS; /* the message says "larger than the N-byte limit" */
    return -1;
}

/* ---- values ---- */

/* Record a metric that matched but has no number, as extract.c does. */
static void add_unread(struct ext_info *info, const char *name, const char *text, int kind)
{
    char quote[EXT_QUOTE_MAX + 4];
    size_t n = 0;
    for (const char *s = text; *s && n < EXT_QUOTE_MAX; s++)
        quote[n++] = (unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e ? '?' : *s;
    quote[n] = '\0';
    if (strlen(text) > EXT_QUOTE_MAX)
        memcpy(quote + n, "...", 4);
    XGROW(info->unread, info->cap_unread, info->n_unread + 1);
    info->unread[info->n_unread++] = (struct ext_unread){xstrdup(name), xstrdup(quote), 0, kind};
}

/* Store text (a CSV cell or a JSON string) as name's value, or note why not. */
static void put_text(const struct xp_row *r, const char *text, struct metric_set *out,
                     struct ext_info *info)
{
    double v;
    int k = ext_parse_value(text, strlen(text), &v);
    if (k == 1)
        mset_set(out, r->name, v * r->scale);
    else if (info)
        add_unread(info, r->name, text, k);
}

static bool skipped(const struct strvec *skip, const char *name)
{
    for (size_t i = 0; skip && i < skip->n; i++)
        if (strcmp(skip->v[i], name) == 0)
            return true;
    return false;
}

/* ---- JSON ---- */

/* The node at key path from root, or NULL when any step is missing. */
static json_t *lookup(json_t *root, const char *path)
{
    json_t *node = root;
    const char *s = path;
    char key[128];
    while (node && *s) {
        size_t n = strcspn(s, ".[");
        if (n) {
            if (n >= sizeof(key))
                return NULL;
            memcpy(key, s, n);
            key[n] = '\0';
            node = json_is_object(node) ? json_object_get(node, key) : NULL;
            s += n;
        }
        while (node && *s == '[') {
            char *end;
            long i = strtol(s + 1, &end, 10);
            if (*end != ']' || !json_is_array(node))
                return NULL;
            long len = (long)json_array_size(node);
            node = json_array_get(node, (size_t)(i < 0 ? len + i : i));
            s = end + 1;
        }
        if (*s == '.')
            s++;
    }
    return node;
}

/* Copy text with Python's bare Infinity, -Infinity and NaN (outside strings)
 * turned into the strings "inf", "-inf" and "nan", which put_text reads. */
static void sanitize(const char *text, size_t len, struct buf *out)
{
    bool in_str = false;
    buf_init(out, len * 2 + 16);
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\' && i + 1 < len)
                buf_putc(out, text[i++]);
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (len - i >= 9 && memcmp(text + i, "-Infinity", 9) == 0) {
            buf_puts(out, "\"-inf\"");
            i += 8;
            continue;
        } else if (len - i >= 8 && memcmp(text + i, "Infinity", 8) == 0) {
            buf_puts(out, "\"inf\"");
            i += 7;
            continue;
        } else if (len - i >= 3 && memcmp(text + i, "NaN", 3) == 0) {
            buf_puts(out, "\"nan\"");
            i += 2;
            continue;
        }
        buf_putc(out, text[i]);
    }
}

/* Parse one JSON document (line: its line number in a JSONL file, else 0). */
static json_t *load(const char *path, const char *text, size_t len, long line, struct err *err)
{
    struct buf clean;
    json_error_t je;
    sanitize(text, len, &clean);
    /* a key twice in one object is two runs' output mixed, as a row printed
     * twice in a console block is: refused, not resolved either way */
    json_t *root = json_loadb(clean.data ? clean.data : "", clean.len,
                              JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL,
                              &je); /* integers as doubles: no "too big integer" */
    buf_release(&clean);
    if (!root)
        return err_set(err, RN_ERR_POINTS, "%s:%ld:%d: not JSON: %s", path,
                       line ? line : (long)je.line, je.column, je.text),
               NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        if (line)
            return err_set(err, RN_ERR_POINTS, "%s:%ld: not a JSON object", path, line), NULL;
        return err_set(err, RN_ERR_POINTS, "%s: not a JSON object at the top", path), NULL;
    }
    return root;
}

static void read_json(const struct xp_preset *p, json_t *root, const struct strvec *skip,
                      struct metric_set *out, struct ext_info *info)
{
    for (size_t i = 0; i < p->n_rows; i++) {
        const struct xp_row *r = &p->rows[i];
        json_t *v = lookup(root, r->key);
        if (!v || skipped(skip, r->name) || mset_get(out, r->name, NULL))
            continue;
        if (json_is_number(v)) {
            double d = json_number_value(v) * r->scale;
            mset_set(out, r->name, d == 0 ? 0.0 : d); /* -0.0 reads as 0, as in a log */
        } else if (json_is_string(v))
            put_text(r, json_string_value(v), out, info);
        else if (json_is_null(v))
            continue; /* the tool did not measure it */
        else if (info)
            add_unread(info, r->name, json_is_boolean(v) ? "true/false" : "{...}/[...]", -1);
    }
}

/* ---- CSV ---- */

/* Split one CSV line into cells (double quotes around a cell, "" inside). */
static void csv_cells(const char *s, size_t n, struct strvec *cells)
{
    struct buf cell;
    size_t i = 0;
    strvec_release(cells);
    buf_init(&cell, n + 1);
    for (;;) {
        bool quoted = i < n && s[i] == '"';
        buf_reset(&cell);
        if (quoted) {
            for (i++; i < n; i++) {
                if (s[i] == '"' && i + 1 < n && s[i + 1] == '"')
                    buf_putc(&cell, s[i++]);
                else if (s[i] == '"')
                    break;
                else
                    buf_putc(&cell, s[i]);
            }
            i++;
        }
        for (; i < n && s[i] != ','; i++)
            buf_putc(&cell, s[i]);
        strvec_push(cells, cell.data ? cell.data : "");
        if (i >= n)
            break;
        i++;
    }
    buf_release(&cell);
}

static int read_csv(const struct xp_preset *p, const char *path, const char *text, size_t len,
                    const struct strvec *skip, struct metric_set *out, struct ext_info *info,
                    struct err *err)
{
    struct strvec head = STRVEC_INIT, cells = STRVEC_INIT;
    bool any_header = false;
    long line = 0, *seen = xcalloc(p->n_rows + 1, sizeof(*seen)); /* line a row was read on */
    int rc = 0;
    for (size_t at = 0; at < len && rc == 0;) {
        line++;
        size_t n = 0;
        while (at + n < len && text[at + n] != '\n')
            n++;
        size_t end = n;
        if (end && text[at + end - 1] == '\r')
            end--;
        if (end == 0) {
            strvec_release(&head); /* a blank line ends the section */
        } else if (end >= 7 && memcmp(text + at, "Metric,", 7) == 0) {
            csv_cells(text + at, end, &head);
            any_header = true;
        } else if (head.n) {
            csv_cells(text + at, end, &cells);
            for (size_t i = 0; i < p->n_rows && rc == 0; i++) {
                const struct xp_row *r = &p->rows[i];
                if (strcmp(cells.v[0], r->key) != 0)
                    continue;
                if (seen[i]) { /* two runs' rows mixed: refused, as in a console block */
                    err_set(err, RN_ERR_POINTS,
                            "%s: row '%s' appears twice in the CSV export: lines %ld and %ld", path,
                            r->key, seen[i], line);
                    rc = -1;
                }
                seen[i] = line;
                if (rc || skipped(skip, r->name) || mset_get(out, r->name, NULL))
                    continue;
                for (size_t c = 1; c < head.n && c < cells.n; c++)
                    if (strcmp(head.v[c], r->col) == 0)
                        put_text(r, cells.v[c], out, info);
            }
        }
        at += n + 1;
    }
    strvec_release(&head);
    strvec_release(&cells);
    free(seen);
    if (rc)
        return -1;
    if (!any_header)
        return err_set(err, RN_ERR_POINTS,
                       "%s: no 'Metric,...' header line: not an AIPerf CSV export", path),
               -1;
    return 0;
}

/* ---- console tables ---- */

#define HEAVY_BAR "\xe2\x94\x83" /* the header's vertical line, UTF-8 */
#define LIGHT_BAR "\xe2\x94\x82" /* the rows' */

struct xp_stream {
    const struct xp_preset *p;
    const char *path;          /* borrowed, for messages */
    const struct strvec *skip; /* borrowed */
    struct metric_set *out;    /* borrowed; filled by xp_stream_end */
    struct ext_info *info;     /* borrowed; may be NULL */
    struct err *err;           /* borrowed */
    struct metric_set got;
    struct strvec head; /* the column headers of the table being read */
    struct strvec row;  /* a row not yet read: label (wrapped parts joined), values */
    long row_line;      /* its line; 0 = none pending */
    long *seen;         /* owned; per preset row, the line it was read on */
    long line;          /* the line being read (counting "\n" only, as grep -n does) */
    struct buf part;    /* a line split across chunks */
    bool overlong, after_cr;
    int rc;
};

/* Split s[0..n) at every bar into trimmed cells (the text before the first
 * bar and after the last one dropped). */
static void bar_cells(const char *s, size_t n, const char *bar, struct strvec *cells)
{
    const char *end = s + n, *at = s;
    strvec_release(cells);
    for (;;) {
        const char *next = memmem(at, (size_t)(end - at), bar, 3);
        if (!next)
            break;
        if (at != s) {
            const char *a = at, *b = next;
            while (a < b && (*a == ' ' || *a == '\t'))
                a++;
            while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                b--;
            strvec_push_owned(cells, xstrndup(a, (size_t)(b - a)));
        }
        at = next + 3;
    }
}

/* Mark preset row i as read on line; a second time is an error. */
static bool first_time(struct xp_stream *t, size_t i, long line)
{
    if (t->seen[i] && t->rc == 0) {
        err_set(t->err, RN_ERR_POINTS,
                "%s: '%s' appears twice (lines %ld and %ld): the tables of two runs mixed?",
                t->path, t->p->rows[i].key, t->seen[i], line);
        t->rc = -1;
    }
    t->seen[i] = line;
    return t->rc == 0;
}

/* Read the pending row, if any. */
static void flush_row(struct xp_stream *t)
{
    if (!t->row_line)
        return;
    for (size_t i = 0; i < t->p->n_rows; i++) {
        const struct xp_row *r = &t->p->rows[i];
        if (!r->col || strcmp(t->row.v[0], r->key) != 0 || !first_time(t, i, t->row_line))
            continue;
        if (skipped(t->skip, r->name) || mset_get(&t->got, r->name, NULL))
            continue;
        for (size_t c = 1; c < t->head.n && c < t->row.n; c++)
            if (strcmp(t->head.v[c], r->col) == 0)
                put_text(r, t->row.v[c], &t->got, t->info);
    }
    t->row_line = 0;
}

static void table_line(struct xp_stream *t, const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t')) /* a table indented by a logger */
        s++, n--;
    if (n >= 3 && memcmp(s, LIGHT_BAR, 3) == 0) {
        struct strvec cells = STRVEC_INIT;
        bool values = false;
        bar_cells(s, n, LIGHT_BAR, &cells);
        for (size_t i = 1; i < cells.n; i++)
            values = values || cells.v[i][0];
        if (cells.n && !values && t->row_line) { /* a wrapped label goes on */
            char *joined = xasprintf("%s %s", t->row.v[0], cells.v[0]);
            free(t->row.v[0]);
            t->row.v[0] = joined;
        } else if (cells.n) {
            flush_row(t);
            strvec_release(&t->row);
            t->row = cells;
            strvec_init(&cells);
            t->row_line = t->line;
        }
        strvec_release(&cells);
        return;
    }
    flush_row(t);
    if (n >= 3 && memcmp(s, HEAVY_BAR, 3) == 0) {
        bar_cells(s, n, HEAVY_BAR, &t->head);
        return;
    }
    /* a "KEY: value unit" line ("Benchmark Duration: 1.81 sec") */
    for (size_t i = 0; i < t->p->n_rows; i++) {
        const struct xp_row *r = &t->p->rows[i];
        size_t k = strlen(r->key);
        if (r->col || n < k + 2 || memcmp(s, r->key, k) != 0 || s[k] != ':' ||
            !first_time(t, i, t->line))
            continue;
        const char *v = s + k + 1, *end = s + n;
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        const char *e = v;
        while (e < end && *e != ' ' && *e != '\t')
            e++;
        char *text = xstrndup(v, (size_t)(e - v));
        if (!skipped(t->skip, r->name) && !mset_get(&t->got, r->name, NULL))
            put_text(r, text, &t->got, t->info);
        free(text);
    }
}

struct xp_stream *xp_stream_new(const struct xp_preset *p, const char *path,
                                const struct strvec *skip, struct metric_set *out,
                                struct ext_info *info, struct err *err)
{
    struct xp_stream *t = xcalloc(1, sizeof(*t));
    t->p = p;
    t->path = path;
    t->skip = skip;
    t->out = out;
    t->info = info;
    t->err = err;
    t->line = 1;
    mset_init(&t->got);
    strvec_init(&t->head);
    strvec_init(&t->row);
    t->seen = xcalloc(p->n_rows + 1, sizeof(*t->seen));
    buf_init(&t->part, EXT_LINE_MAX_BYTES);
    return t;
}

/* The line in part has ended (an overlong one is skipped). */
static void end_table_line(struct xp_stream *t)
{
    if (!t->overlong)
        table_line(t, t->part.data ? t->part.data : "", t->part.len);
    buf_reset(&t->part);
    t->overlong = false;
}

void xp_stream_feed(struct xp_stream *t, const char *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = data[i];
        if (c == '\n' && t->after_cr) { /* the end of a "\r\n": the line has ended */
            t->after_cr = false;
            t->line++;
            continue;
        }
        t->after_cr = c == '\r';
        if (c == '\n' || c == '\r') {
            end_table_line(t);
            if (c == '\n')
                t->line++;
            continue;
        }
        if (!t->overlong && buf_putc(&t->part, c) != 0)
            t->overlong = true;
    }
}

int xp_stream_end(struct xp_stream *t)
{
    if (t->part.len || t->overlong)
        end_table_line(t);
    flush_row(t);
    int rc = t->rc;
    if (rc == 0)
        for (size_t i = 0; i < t->got.n; i++)
            mset_set(t->out, t->got.m[i].name, t->got.m[i].value);
    mset_release(&t->got);
    strvec_release(&t->head);
    strvec_release(&t->row);
    buf_release(&t->part);
    free(t->seen);
    free(t);
    return rc;
}

/* ---- the reader ---- */

/* The last line of a JSONL text that is not blank: its start, length and
 * number (1-based); *results counts such lines. NULL when there is none. */
static const char *last_result(const char *text, size_t len, size_t *last_n, long *last_line,
                               long *results)
{
    const char *last = NULL;
    long line = 0;
    *last_n = 0;
    *last_line = *results = 0;
    for (size_t at = 0; at < len; line++) {
        size_t n = 0, k = 0;
        while (at + n < len && text[at + n] != '\n')
            n++;
        while (k < n && isspace((unsigned char)text[at + k]))
            k++;
        if (k < n) {
            last = text + at;
            *last_n = n;
            *last_line = line + 1;
            (*results)++;
        }
        at += n + 1;
    }
    return last;
}

int xp_parse(const struct xp_preset *p, const char *path, const char *text, size_t len,
             const struct strvec *skip, struct metric_set *out, struct ext_info *info,
             struct err *err)
{
    struct metric_set got;
    int rc = -1;
    mset_init(&got);
    if (p->format == XP_TABLE) {
        struct xp_stream *t = xp_stream_new(p, path, skip, &got, info, err);
        xp_stream_feed(t, text, len);
        rc = xp_stream_end(t);
    } else if (p->format == XP_CSV) {
        rc = read_csv(p, path, text, len, skip, &got, info, err);
    } else if (p->format == XP_JSON) {
        json_t *root = load(path, text, len, 0, err);
        if (root) {
            json_t *runs = p->runs_key ? json_object_get(root, p->runs_key) : NULL;
            if (p->runs_key && (!json_is_array(runs) || json_array_size(runs) == 0)) {
                err_set(err, RN_ERR_POINTS, "%s: no '%s' in the report (or it is empty)", path,
                        p->runs_key);
            } else {
                if (info && runs && json_array_size(runs) > 1) {
                    info->blocks = (long)json_array_size(runs);
                    info->block_word = p->runs_key;
                }
                read_json(p, root, skip, &got, info);
                rc = 0;
            }
            json_decref(root);
        }
    } else {
        /* JSONL: the tool appends one line per run; the last one counts */
        long last_line, results;
        size_t last_n;
        const char *last = last_result(text, len, &last_n, &last_line, &results);
        if (!last) {
            err_set(err, RN_ERR_POINTS, "%s: no result line (the file is empty)", path);
        } else {
            json_t *root = load(path, last, last_n, last_line, err);
            if (root) {
                if (info && results > 1) {
                    info->blocks = results;
                    info->block_line = last_line;
                    info->block_word = "results";
                }
                read_json(p, root, skip, &got, info);
                json_decref(root);
                rc = 0;
            }
        }
    }
    if (rc == 0)
        for (size_t i = 0; i < got.n; i++)
            mset_set(out, got.m[i].name, got.m[i].value);
    mset_release(&got);
    return rc;
}

size_t xp_describe(const struct xp_preset *p, const char *name, struct buf *b)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n_rows; i++) {
        const struct xp_row *r = &p->rows[i];
        if (strcmp(r->name, name) != 0)
            continue;
        if (p->format == XP_TABLE && r->col)
            buf_printf(b, "%srow '%s' column '%s' of the console table", k++ ? ", " : "", r->key,
                       r->col);
        else if (p->format == XP_TABLE)
            buf_printf(b, "%sthe line '%s: ...'", k++ ? ", " : "", r->key);
        else if (r->col)
            buf_printf(b, "%srow '%s' column '%s' of the CSV export", k++ ? ", " : "", r->key,
                       r->col);
        else
            buf_printf(b, "%skey '%s' in the JSON export", k++ ? ", " : "", r->key);
    }
    return k;
}

/* Feed the file at path to a table stream in chunks (a console log: any size). */
static int feed_file(struct xp_stream *t, const char *path, struct err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, RN_ERR_ENV, "%s: %s", path, strerror(errno)), -1;
    char *chunk = xmalloc(65536);
    int rc = 0;
    for (;;) {
        ssize_t got = read(fd, chunk, 65536);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            err_set(err, RN_ERR_ENV, "%s: %s", path, strerror(errno));
            rc = -1;
        }
        if (got <= 0)
            break;
        xp_stream_feed(t, chunk, (size_t)got);
    }
    free(chunk);
    close(fd);
    return rc;
}

int xp_shape(const struct xp_preset *p, const char *path, long *concurrency, long *prompts,
             struct err *err)
{
    struct metric_set ms;
    struct buf text;
    int rc = -1;
    double ok, failed = 0, c;
    *concurrency = *prompts = -1;
    mset_init(&ms);
    buf_init(&text, 0);
    if (p->format == XP_TABLE) {
        struct xp_stream *t = xp_stream_new(p, path, NULL, &ms, NULL, err);
        rc = feed_file(t, path, err);
        if (xp_stream_end(t) != 0)
            rc = -1;
    } else if (xp_read(path, &text, err) == 0) {
        const char *doc = text.data ? text.data : "";
        size_t n = text.len;
        long line = 0, results;
        rc = xp_parse(p, path, doc, n, NULL, &ms, NULL, err);
        if (p->format == XP_JSONL)
            doc = last_result(doc, n, &n, &line, &results);
        json_t *root = rc == 0 && doc && p->conc_key ? load(path, doc, n, line, err) : NULL;
        json_t *v = root ? lookup(root, p->conc_key) : NULL;
        c = json_is_number(v) ? json_number_value(v) : -1;
        if (c >= 1 && c <= 1e9 && c == floor(c))
            *concurrency = (long)c;
        json_decref(root);
    }
    if (rc == 0 && mset_get(&ms, "successful_requests", &ok) && isfinite(ok) && ok >= 0 &&
        ok <= 1e12) {
        mset_get(&ms, "failed_requests", &failed);
        if (isfinite(failed) && failed >= 0 && failed <= 1e12 && ok + failed >= 1)
            *prompts = (long)(ok + failed);
    }
    buf_release(&text);
    mset_release(&ms);
    return rc;
}
