/*
 * scrape: a Prometheus text parser, the table of known server counters, the
 * column expressions over counter deltas, and fetching /metrics.
 */
#include "client/scrape.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "http.h"
#include "strutil.h"
#include "sweep.h"
#include "xalloc.h"

/* ---- parsing ---- */

void scrape_set_init(struct scrape_set *set)
{
    memset(set, 0, sizeof(*set));
}

void scrape_set_release(struct scrape_set *set)
{
    for (size_t i = 0; i < set->n; i++) {
        free(set->s[i].name);
        free(set->s[i].labels);
    }
    free(set->s);
    scrape_set_init(set);
}

static bool name_start(char c)
{
    return isalpha((unsigned char)c) || c == '_' || c == ':';
}

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == ':';
}

/* A sample value: a float, +Inf, -Inf, Inf or NaN (case as the format allows). */
static int parse_value(const char *s, size_t n, double *v)
{
    static const struct {
        const char *text;
        double v;
    } special[] = {{"+Inf", INFINITY}, {"Inf", INFINITY}, {"-Inf", -INFINITY}, {"NaN", NAN}};
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        if (strlen(special[i].text) == n && strncasecmp(s, special[i].text, n) == 0) {
            *v = special[i].v;
            return 0;
        }
    if (n && s[0] == '+') { /* str_to_double takes no '+' */
        s++;
        n--;
    }
    return str_to_double_n(s, n, v);
}

/* Labels "{a="x",b="y\"z"}" starting at *p (on the '{'); unescaped into out
 * as a="x",b="y"z". Returns 0 with *p past the '}', or -1. */
static int parse_labels(const char **p, const char *end, struct buf *out)
{
    const char *s = *p + 1;
    for (;;) {
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        if (s < end && *s == '}')
            break;
        if (s >= end || !name_start(*s))
            return -1;
        const char *name = s;
        while (s < end && name_char(*s))
            s++;
        size_t name_len = (size_t)(s - name);
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        if (s >= end || *s != '=')
            return -1;
        s++;
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        if (s >= end || *s != '"')
            return -1;
        s++;
        if (out->len)
            buf_putc(out, ',');
        buf_append(out, name, name_len);
        buf_puts(out, "=\"");
        for (;;) {
            if (s >= end)
                return -1;
            if (*s == '"')
                break;
            if (*s == '\\') {
                if (s + 1 >= end)
                    return -1;
                s++;
                buf_putc(out, *s == 'n' ? '\n' : *s); /* \\ \" \n */
                s++;
                continue;
            }
            buf_putc(out, *s++);
        }
        buf_putc(out, '"');
        s++; /* the closing quote */
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        if (s < end && *s == ',') {
            s++;
            continue;
        }
        if (s < end && *s == '}')
            break;
        return -1;
    }
    *p = s + 1;
    return 0;
}

/* One line (without its newline). Returns 1 for a sample (added), 0 for a
 * comment or a blank line, -1 for anything else. */
static int parse_line(const char *s, const char *end, struct scrape_set *set)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    if (s == end || *s == '#')
        return 0; /* # HELP, # TYPE, # EOF, other comments */
    if (!name_start(*s))
        return -1;
    const char *name = s;
    while (s < end && name_char(*s))
        s++;
    size_t name_len = (size_t)(s - name);
    struct buf labels;
    buf_init(&labels, 1 << 20);
    int rc = -1;
    if (s < end && *s == '{' && parse_labels(&s, end, &labels) != 0)
        goto out;
    if (s >= end || (*s != ' ' && *s != '\t'))
        goto out;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    const char *val = s;
    while (s < end && *s != ' ' && *s != '\t')
        s++;
    double v;
    if (parse_value(val, (size_t)(s - val), &v) != 0)
        goto out;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    if (s < end) { /* a timestamp: an integer (ms); OpenMetrics allows a float */
        double ts;
        if (parse_value(s, (size_t)(end - s), &ts) != 0 || !isfinite(ts))
            goto out;
    }
    if (labels.toobig)
        goto out;
    XGROW(set->s, set->cap, set->n + 1);
    set->s[set->n].name = xstrndup(name, name_len);
    set->s[set->n].labels = xstrdup(labels.data ? labels.data : "");
    set->s[set->n].value = v;
    set->n++;
    rc = 1;
out:
    buf_release(&labels);
    return rc;
}

void scrape_parse(const char *text, size_t len, struct scrape_set *set)
{
    const char *p = text, *end = text + len;
    long line = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        int rc = parse_line(p, le, set);
        if (rc < 0) {
            if (!set->n_bad)
                set->bad_line = line;
            set->n_bad++;
        } else if (rc > 0) {
            set->s[set->n - 1].line = line;
        }
        p = nl ? nl + 1 : end;
    }
}

bool scrape_sum(const struct scrape_set *set, const char *name, double *out)
{
    bool any = false;
    double sum = 0;
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->s[i].name, name) == 0) {
            sum += set->s[i].value;
            any = true;
        }
    if (any)
        *out = sum;
    return any;
}

/* Order of samples by name, then labels, then line (qsort_r over indexes). */
static int cmp_series(const void *pa, const void *pb, void *arg)
{
    const struct scrape_sample *s = arg;
    const struct scrape_sample *a = &s[*(const size_t *)pa], *b = &s[*(const size_t *)pb];
    int c = strcmp(a->name, b->name);
    if (!c)
        c = strcmp(a->labels, b->labels);
    return c ? c : (a->line > b->line) - (a->line < b->line);
}

bool scrape_duplicate(const struct scrape_set *set, size_t *a, size_t *b)
{
    if (set->n < 2)
        return false;
    size_t *idx = xcalloc(set->n, sizeof(*idx));
    for (size_t i = 0; i < set->n; i++)
        idx[i] = i;
    qsort_r(idx, set->n, sizeof(*idx), cmp_series, set->s);
    bool found = false;
    for (size_t i = 1; i < set->n && !found; i++) {
        const struct scrape_sample *x = &set->s[idx[i - 1]], *y = &set->s[idx[i]];
        if (strcmp(x->name, y->name) == 0 && strcmp(x->labels, y->labels) == 0) {
            *a = idx[i - 1];
            *b = idx[i];
            found = true;
        }
    }
    free(idx);
    return found;
}

/* ---- columns ---- */

static const struct scrape_column columns[] = {
    {"server_step_ms", "ms",
     "mean decode step time (steps that ran no prompt tokens when the "
     "server tells them apart)"},
    {"server_batch", "", "mean running batch: sequences per step over the same steps"},
    {"server_steps", "", "model steps during the point"},
    {"server_decode_steps", "", "steps that ran no prompt tokens (server_step_ms is their mean)"},
    {"server_prefill_tokens", "tokens", "prompt tokens the server ran through the model"},
    {"server_decode_tokens", "tokens", "tokens the server generated"},
    {"server_queue_ms", "ms", "mean time a request waited for a batch slot"},
    {"server_ttft_ms", "ms", "server's mean time to first token"},
    {"server_itl_ms", "ms", "server's mean inter-token latency"},
    {"server_e2e_ms", "ms", "server's mean request latency"},
    {"server_prefix_hit_rate", "",
     "prompt tokens the server's prefix cache supplied / prompt tokens looked up"},
    {"server_weight_bytes", "bytes", "weights one batched decode step reads (a model constant)"},
    {"server_flops_per_token", "FLOP", "matmul FLOPs per token: 2 x parameters (a constant)"},
    {"server_mem_gbs", "GB/s",
     "memory read bandwidth the server measured at startup (fp4serve --probe-bandwidth)"},
    {"server_weight_bytes_per_step", "bytes",
     "weight bytes the steps really read, mean per decode-only step where the server counts "
     "them apart, else per step (a mixture of experts: grows with the experts the batch "
     "touches; per-request decode: one read per sequence)"},
    {"server_experts_per_step", "",
     "mixture of experts: (layer, expert) pairs whose weights a step read, mean per "
     "decode-only step where the server counts them apart, else per step (empty for a dense "
     "model)"},
    {"server_model_experts", "",
     "mixture of experts: the model's (layer, expert) pairs, what experts per step reach when "
     "a step touches every expert (a constant)"},
};
#define N_COLUMNS (sizeof(columns) / sizeof(columns[0]))

const struct scrape_column *scrape_columns(size_t *n)
{
    *n = N_COLUMNS;
    return columns;
}

/*
 * Known servers. Per column, the first row whose series exist in both
 * scrapes (and whose divisors moved) wins; rows of a column are ordered
 * best first. Sources (docs/benchmarks.md): fp4serve engine/serve/prom.c;
 * vLLM's design doc metrics.md (v0.11, V1 engine); SGLang
 * python/sglang/srt/metrics/collector.py (v0.5).
 */
static const struct rule {
    const char *family, *column, *expr;
    bool positive; /* only a value > 0 counts: 0 means the server has none (a dense model) */
} rules[] = {
    /* fp4serve: steps that ran no prompt rows first (a decode step alone),
     * then every step (prefill chunks included) */
    {"fp4serve", "server_step_ms",
     "fp4serve_decode_only_step_seconds_total / fp4serve_decode_only_steps_total * 1000"},
    {"fp4serve", "server_batch",
     "fp4serve_decode_only_step_sequences_total / fp4serve_decode_only_steps_total"},
    {"fp4serve", "server_step_ms", "fp4serve_step_seconds_total / fp4serve_steps_total * 1000"},
    {"fp4serve", "server_prefix_hit_rate",
     "fp4serve_prefix_cache_hits_total / fp4serve_prefix_cache_queries_total"},
    {"fp4serve", "server_batch", "fp4serve_step_sequences_total / fp4serve_steps_total"},
    {"fp4serve", "server_steps", "fp4serve_steps_total"},
    /* decode-only steps first (a prompt step touches most experts whatever
     * the batch), then every step: a server without the decode-only series,
     * or a point without a decode-only step */
    {"fp4serve", "server_weight_bytes_per_step",
     "fp4serve_decode_only_weight_bytes_read_total / fp4serve_decode_only_steps_total", true},
    {"fp4serve", "server_weight_bytes_per_step",
     "fp4serve_weight_bytes_read_total / fp4serve_steps_total"},
    {"fp4serve", "server_experts_per_step",
     "fp4serve_decode_only_expert_activations_total / fp4serve_decode_only_steps_total", true},
    {"fp4serve", "server_experts_per_step",
     "fp4serve_expert_activations_total / fp4serve_steps_total", true},
    {"fp4serve", "server_decode_steps", "fp4serve_decode_only_steps_total"},
    {"fp4serve", "server_prefill_tokens", "fp4serve_prefill_tokens_total"},
    {"fp4serve", "server_decode_tokens", "fp4serve_generation_tokens_total"},
    {"fp4serve", "server_queue_ms",
     "fp4serve_request_queue_time_seconds_sum / fp4serve_request_queue_time_seconds_count * 1000"},
    {"fp4serve", "server_ttft_ms",
     "fp4serve_time_to_first_token_seconds_sum / fp4serve_time_to_first_token_seconds_count * "
     "1000"},
    {"fp4serve", "server_itl_ms",
     "fp4serve_inter_token_latency_seconds_sum / fp4serve_inter_token_latency_seconds_count * "
     "1000"},
    {"fp4serve", "server_e2e_ms",
     "fp4serve_e2e_request_latency_seconds_sum / fp4serve_e2e_request_latency_seconds_count * "
     "1000"},
    /* vLLM: no step timer; the inter-token latency is the step a stream sees */
    {"vllm", "server_step_ms",
     "vllm:inter_token_latency_seconds_sum / vllm:inter_token_latency_seconds_count * 1000"},
    {"vllm", "server_step_ms",
     "vllm:time_per_output_token_seconds_sum / vllm:time_per_output_token_seconds_count * 1000"},
    {"vllm", "server_batch", "vllm:generation_tokens_total / vllm:iteration_tokens_total_count"},
    {"vllm", "server_steps", "vllm:iteration_tokens_total_count"},
    {"vllm", "server_prefill_tokens", "vllm:prompt_tokens_total"},
    {"vllm", "server_prefix_hit_rate",
     "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total"},
    {"vllm", "server_prefix_hit_rate", "vllm:prefix_cache_hits / vllm:prefix_cache_queries"},
    {"vllm", "server_decode_tokens", "vllm:generation_tokens_total"},
    {"vllm", "server_queue_ms",
     "vllm:request_queue_time_seconds_sum / vllm:request_queue_time_seconds_count * 1000"},
    {"vllm", "server_ttft_ms",
     "vllm:time_to_first_token_seconds_sum / vllm:time_to_first_token_seconds_count * 1000"},
    {"vllm", "server_itl_ms",
     "vllm:inter_token_latency_seconds_sum / vllm:inter_token_latency_seconds_count * 1000"},
    {"vllm", "server_itl_ms",
     "vllm:time_per_output_token_seconds_sum / vllm:time_per_output_token_seconds_count * 1000"},
    {"vllm", "server_e2e_ms",
     "vllm:e2e_request_latency_seconds_sum / vllm:e2e_request_latency_seconds_count * 1000"},
    /* SGLang (--enable-metrics) */
    {"sglang", "server_step_ms",
     "sglang:inter_token_latency_seconds_sum / sglang:inter_token_latency_seconds_count * 1000"},
    {"sglang", "server_step_ms",
     "sglang:time_per_output_token_seconds_sum / sglang:time_per_output_token_seconds_count * "
     "1000"},
    {"sglang", "server_prefill_tokens", "sglang:prompt_tokens_total"},
    {"sglang", "server_decode_tokens", "sglang:generation_tokens_total"},
    {"sglang", "server_queue_ms",
     "sglang:queue_time_seconds_sum / sglang:queue_time_seconds_count "
     "* 1000"},
    {"sglang", "server_ttft_ms",
     "sglang:time_to_first_token_seconds_sum / sglang:time_to_first_token_seconds_count * 1000"},
    {"sglang", "server_itl_ms",
     "sglang:inter_token_latency_seconds_sum / sglang:inter_token_latency_seconds_count * 1000"},
    {"sglang", "server_e2e_ms",
     "sglang:e2e_request_latency_seconds_sum / sglang:e2e_request_latency_seconds_count * 1000"},
};

/* Gauges that are constants of the server (read from the scrape after the
 * point, not as deltas), times scale. */
static const struct gauge_rule {
    const char *family, *column, *name;
    double scale;
} gauge_rules[] = {
    {"fp4serve", "server_weight_bytes", "fp4serve_model_weight_bytes", 1},
    {"fp4serve", "server_flops_per_token", "fp4serve_model_flops_per_token", 1},
    {"fp4serve", "server_mem_gbs", "fp4serve_memory_read_bytes_per_second", 1e-9},
    {"fp4serve", "server_model_experts", "fp4serve_model_experts", 1},
};

/* The next token of an expression: a name, a number, or '*' / '/'. Sets
 * *tok and *len; returns the kind ('n' name, '0' number, the operator, 0 at
 * the end, '?' for anything else). */
static char next_token(const char **p, const char **tok, size_t *len)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    *tok = s;
    char kind;
    if (!*s) {
        kind = 0;
    } else if (*s == '*' || *s == '/') {
        kind = *s++;
    } else if (isdigit((unsigned char)*s) || *s == '.') {
        while (isalnum((unsigned char)*s) || *s == '.' ||
               ((*s == '+' || *s == '-') && (s[-1] == 'e' || s[-1] == 'E')))
            s++;
        kind = '0';
    } else if (name_start(*s)) {
        while (name_char(*s))
            s++;
        kind = 'n';
    } else {
        s++;
        kind = '?';
    }
    *len = (size_t)(s - *tok);
    *p = s;
    return kind;
}

/*
 * Evaluate expr over the deltas of (before, after); with both NULL only
 * the syntax is checked. Returns 0 with *v, or -1: err (may be NULL) says
 * why for a syntax error; a series missing, a counter that went backwards
 * (the server restarted) or a zero divisor leave err alone.
 */
static int eval(const char *expr, const struct scrape_set *before, const struct scrape_set *after,
                double *v, struct err *err)
{
    const char *p = expr, *tok;
    size_t len;
    double acc = NAN;
    char op = 0; /* 0 before the first operand */
    bool want_operand = true;
    for (;;) {
        char k = next_token(&p, &tok, &len);
        if (want_operand) {
            double x;
            if (k == 'n') {
                char *name = xstrndup(tok, len);
                double b, a;
                bool have = before && scrape_sum(before, name, &b) && scrape_sum(after, name, &a);
                free(name);
                if (before && !have)
                    return -1;
                x = before ? a - b : 1;
                if (before && !(x >= 0))
                    return -1; /* reset or NaN: the delta means nothing */
            } else if (k == '0') {
                if (str_to_double_n(tok, len, &x) != 0)
                    return err
                           ? err_set(err, RN_ERR_USAGE, "'%.*s' is not a number", (int)len, tok),
                           -1 : -1;
            } else {
                return err ? err_set(err, RN_ERR_USAGE, "expected a metric name or a number %s",
                                     k ? "before '*' or '/'" : "at the end"),
                       -1  : -1;
            }
            if (op == 0)
                acc = x;
            else if (op == '*')
                acc *= x;
            else if (x == 0)
                return -1; /* nothing moved: no mean */
            else
                acc /= x;
            want_operand = false;
            continue;
        }
        if (k == 0)
            break;
        if (k != '*' && k != '/')
            return err ? err_set(err, RN_ERR_USAGE,
                                 "expected '*' or '/' before '%.*s' (an expression is NAME, or "
                                 "NAME / NAME, with * or / constants)",
                                 (int)len, tok),
                   -1  : -1;
        op = k;
        want_operand = true;
    }
    *v = acc;
    return 0;
}

int scrape_expr_check(const char *expr, struct err *err)
{
    double v;
    return eval(expr, NULL, NULL, &v, err);
}

size_t scrape_columns_from(const struct scrape_set *before, const struct scrape_set *after,
                           const struct scrape_map *map, size_t n_map, struct metric_set *out,
                           const char **family)
{
    bool done[N_COLUMNS] = {false};
    size_t n = 0;
    if (family)
        *family = "";
    for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
        size_t c = 0;
        while (c < N_COLUMNS && strcmp(columns[c].name, rules[r].column) != 0)
            c++;
        double v;
        if (c == N_COLUMNS || done[c] || eval(rules[r].expr, before, after, &v, NULL) != 0 ||
            (rules[r].positive && !(v > 0)))
            continue;
        done[c] = true;
        mset_set(out, columns[c].name, v);
        if (family && !**family)
            *family = rules[r].family;
        n++;
    }
    for (size_t r = 0; r < sizeof(gauge_rules) / sizeof(gauge_rules[0]); r++) {
        double v;
        if (!scrape_sum(after, gauge_rules[r].name, &v) || !(v > 0) || !isfinite(v))
            continue;
        mset_set(out, gauge_rules[r].column, v * gauge_rules[r].scale);
        if (family && !**family)
            *family = gauge_rules[r].family;
        n++;
    }
    for (size_t i = 0; i < n_map; i++) {
        double v;
        if (eval(map[i].expr, before, after, &v, NULL) != 0)
            continue;
        mset_set(out, map[i].column, v);
        n++;
    }
    return n;
}

char *scrape_path(const char *log_path, bool before)
{
    size_t n = strlen(log_path);
    if (str_ends_with(log_path, ".log"))
        n -= 4;
    return xasprintf("%.*s.metrics-%s.txt", (int)n, log_path, before ? "before" : "after");
}

/* Read and parse one saved scrape. */
static int load(const char *path, struct scrape_set *set)
{
    struct buf b;
    struct err e;
    buf_init(&b, SCRAPE_MAX_BYTES);
    err_init(&e);
    int rc = -1;
    if (path_exists(path) && file_read_all(path, &b, &e, RN_ERR_ENV) == 0) {
        scrape_parse(b.data ? b.data : "", b.len, set);
        rc = 0;
    }
    buf_release(&b);
    return rc;
}

/* Whether set holds a series twice; if so, why gets the reason. */
static bool refuse_duplicate(const struct scrape_set *set, const char *path, struct buf *why)
{
    size_t a, b;
    if (!scrape_duplicate(set, &a, &b))
        return false;
    const struct scrape_sample *x = &set->s[a], *y = &set->s[b];
    if (why)
        buf_printf(why,
                   "server metrics not used: series '%s%s%s%s' appears twice in %s (lines %ld "
                   "and %ld, values %.10g and %.10g); the server_* columns stay empty",
                   x->name, *x->labels ? "{" : "", x->labels, *x->labels ? "}" : "",
                   path_base(path), x->line, y->line, x->value, y->value);
    return true;
}

size_t scrape_point_columns(const char *log_path, const struct scrape_map *map, size_t n_map,
                            struct metric_set *out, struct buf *why)
{
    char *bp = scrape_path(log_path, true), *ap = scrape_path(log_path, false);
    struct scrape_set before, after;
    scrape_set_init(&before);
    scrape_set_init(&after);
    size_t n = 0;
    /* like a metric printed twice in a client log: which value is meant
     * cannot be known, so none is used (and the reason is said) */
    if (load(bp, &before) == 0 && load(ap, &after) == 0 && !refuse_duplicate(&before, bp, why) &&
        !refuse_duplicate(&after, ap, why))
        n = scrape_columns_from(&before, &after, map, n_map, out, NULL);
    scrape_set_release(&before);
    scrape_set_release(&after);
    free(bp);
    free(ap);
    return n;
}

int scrape_fetch_save(const char *url, const char *path, bool *write_failed, struct err *err)
{
    struct buf body;
    *write_failed = false;
    char why[256] = "";
    buf_init(&body, SCRAPE_MAX_BYTES);
    int rc = -1;
    long status = http_get(url, 2000, SCRAPE_TIMEOUT_MS, &body, why, sizeof(why));
    if (status != 200) {
        err_set(err, RN_ERR_ENV, "%s", status ? why : (why[0] ? why : "no answer"));
        goto out;
    }
    if (body.toobig) {
        err_set(err, RN_ERR_ENV, "answer larger than %zu MiB", SCRAPE_MAX_BYTES >> 20);
        goto out;
    }
    struct scrape_set set;
    scrape_set_init(&set);
    scrape_parse(body.data ? body.data : "", body.len, &set);
    size_t n = set.n;
    scrape_set_release(&set);
    if (n == 0) {
        err_set(err, RN_ERR_ENV, "HTTP 200 but no Prometheus sample in the answer");
        goto out;
    }
    rc = file_write_atomic(path, body.data, body.len, err, RN_ERR_ENV);
    *write_failed = rc != 0;
out:
    buf_release(&body);
    return rc;
}
