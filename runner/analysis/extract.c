/*
 * extract: PCRE2 metric extraction. Presets are tables of (canonical name,
 * regex) rows, one row per label spelling a tool has used; user patterns
 * replace or add names. Preset rows are matched inside the last result
 * block of the log (so vLLM's free-form "Traffic request rate: inf" lines
 * before the block never count); user patterns see the whole log. Every
 * match runs under a match limit, a depth limit, a heap limit and a total
 * work budget per pattern and log, so no regex can hang a run.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "analysis/extract.h"

#include <ctype.h>
#include <math.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "strutil.h"
#include "xalloc.h"

/* Limits (docs/reliability.md §3.2 and M13: 1e5 steps fail in ~1 ms). The match
 * limit applies per start position, so the callout budget bounds the work
 * over a whole log (about 0.1 s of matching per pattern at worst). */
#define MATCH_LIMIT     1000000u
#define DEPTH_LIMIT     10000u
#define HEAP_LIMIT_KIB  (32u * 1024u)
#define CALLOUT_BUDGET  10000000L
#define MAX_MATCHES     100000L /* matches looked at per pattern and log */
#define VALUE_MAX_BYTES 64

/* A preset row: label text (a regex fragment, without the colon) for one
 * canonical name. ROW() turns it into an anchored line regex whose group
 * captures the value, trailing spaces excluded. */
#define ROW(label) "^" label ":[ \\t]+([^\\r\\n]*?)[ \\t\\r]*$"

struct preset_row {
    const char *name;  /* canonical metric */
    const char *regex; /* PCRE2, one capture group */
};

struct preset {
    const char *name;
    const struct preset_row *rows;
    size_t n_rows;
};

/* Rows shared by both tools' latency sections: Mean/Median/P90/P95/P99. */
#define LAT_ROWS(what, label)                                                                      \
    {"mean_" what "_ms", ROW("Mean " label " \\(ms\\)")},                                          \
        {"median_" what "_ms", ROW("Median " label " \\(ms\\)")},                                  \
        {"p90_" what "_ms", ROW("P90 " label " \\(ms\\)")},                                        \
        {"p95_" what "_ms", ROW("P95 " label " \\(ms\\)")},                                        \
    {                                                                                              \
        "p99_" what "_ms", ROW("P99 " label " \\(ms\\)")                                           \
    }

/* SGLang bench_serving, every version in docs/benchmarks.md §2, and
 * sweep's own client (which adds "Failed requests:"). Mid-2025 versions
 * print no TPOT section: those names are then simply absent. */
static const struct preset_row sglang_rows[] = {
    {"successful_requests", ROW("Successful requests")},
    {"failed_requests", ROW("Failed requests")},
    {"duration_s", ROW("Benchmark duration \\(s\\)")},
    {"total_input_tokens", ROW("Total input tokens")},
    {"total_output_tokens", ROW("Total generated tokens")},
    {"request_throughput", ROW("Request throughput \\(req/s\\)")},
    {"input_throughput", ROW("Input token throughput \\(tok/s\\)")},
    {"output_throughput", ROW("Output token throughput \\(tok/s\\)")},
    {"total_throughput", ROW("Total [Tt]oken throughput \\(tok/s\\)")},
    {"total_throughput", ROW("Total throughput \\(tok/s\\)")}, /* older SGLang */
    {"achieved_concurrency", ROW("Concurrency")},
    LAT_ROWS("e2e", "E2E Latency"),
    LAT_ROWS("ttft", "TTFT"),
    LAT_ROWS("tpot", "TPOT"),
    LAT_ROWS("itl", "ITL"),
    {"max_itl_ms", ROW("Max ITL \\(ms\\)")},
};

/* vLLM `vllm bench serve` (and benchmark_serving.py before it). Older
 * versions lack "Failed requests" and write "Total Token throughput". */
static const struct preset_row vllm_rows[] = {
    {"successful_requests", ROW("Successful requests")},
    {"failed_requests", ROW("Failed requests")},
    {"duration_s", ROW("Benchmark duration \\(s\\)")},
    {"total_input_tokens", ROW("Total input tokens")},
    {"total_output_tokens", ROW("Total generated tokens")},
    {"request_throughput", ROW("Request throughput \\(req/s\\)")},
    {"output_throughput", ROW("Output token throughput \\(tok/s\\)")},
    {"total_throughput", ROW("Total [Tt]oken throughput \\(tok/s\\)")},
    LAT_ROWS("ttft", "TTFT"),
    LAT_ROWS("tpot", "TPOT"),
    LAT_ROWS("itl", "ITL"),
    LAT_ROWS("e2e", "E2EL"),
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const struct preset presets[] = {
    {"sglang", sglang_rows, N_OF(sglang_rows)},
    {"vllm", vllm_rows, N_OF(vllm_rows)},
};

static const char *const preset_name_list[] = {"sglang", "vllm", NULL};

/* Both tools open the block with this rule and close it with a line of '='. */
static const char block_open_re[] = "^=+ Serving Benchmark Result =+[ \\t\\r]*$";
static const char block_close_re[] = "^=+[ \\t\\r]*$";

struct entry {
    char *name;     /* owned */
    char *regex;    /* owned */
    pcre2_code *re; /* owned */
    bool in_block;  /* preset row: match inside the result block only */
};

struct ext_set {
    struct entry *e; /* owned; preset rows first (table order), then user patterns */
    size_t n, cap;
    pcre2_code *open_re, *close_re; /* owned; result block delimiters */
};

const char *const *ext_preset_names(void)
{
    return preset_name_list;
}

/* Compile regex; on failure put "reason at offset N" into err. */
static pcre2_code *compile(const char *regex, struct err *err)
{
    int code;
    PCRE2_SIZE offset;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED,
                                   PCRE2_MULTILINE | PCRE2_AUTO_CALLOUT, &code, &offset, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof(msg));
        err_set(err, RN_ERR_USAGE, "bad regex: %s at offset %zu", (char *)msg, (size_t)offset);
    }
    return re;
}

int ext_regex_check(const char *regex, struct err *err)
{
    pcre2_code *re = compile(regex, err);
    if (!re)
        return -1;
    uint32_t groups = 0;
    pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
    pcre2_code_free(re);
    if (groups != 1)
        return err_set(err, RN_ERR_USAGE, "regex must have exactly one capture group, it has %u",
                       groups),
               -1;
    return 0;
}

static bool valid_name(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-')
            return false;
    return true;
}

static void add_entry(ext_set *set, const char *name, const char *regex, pcre2_code *re,
                      bool in_block)
{
    XGROW(set->e, set->cap, set->n + 1);
    set->e[set->n++] = (struct entry){xstrdup(name), xstrdup(regex), re, in_block};
}

static const struct preset *find_preset(const char *name)
{
    for (size_t i = 0; i < N_OF(presets); i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

int ext_new(const char *preset, const struct ext_pattern *user, size_t n_user, ext_set **out,
            struct err *err)
{
    ext_set *set = xcalloc(1, sizeof(*set));
    const struct preset *p = NULL;
    *out = NULL;
    if (preset) {
        p = find_preset(preset);
        if (!p) {
            const char *hint = str_suggest(preset, preset_name_list);
            err_set(err, RN_ERR_USAGE, "unknown preset '%s'%s%s%s (known: sglang, vllm)", preset,
                    hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
            goto fail;
        }
    }
    for (size_t i = 0; i < n_user; i++) {
        if (!valid_name(user[i].name)) {
            err_set(err, RN_ERR_USAGE,
                    "pattern name '%s' is not valid (use letters, digits, '_', '.', '-')",
                    user[i].name);
            goto fail;
        }
        if (ext_regex_check(user[i].regex, err) != 0) {
            err_prefix(err, "pattern '%s'", user[i].name);
            goto fail;
        }
    }
    /* preset rows, except names a user pattern replaces */
    for (size_t r = 0; p && r < p->n_rows; r++) {
        bool replaced = false;
        for (size_t i = 0; i < n_user && !replaced; i++)
            replaced = strcmp(user[i].name, p->rows[r].name) == 0;
        if (replaced)
            continue;
        pcre2_code *re = compile(p->rows[r].regex, err);
        if (!re) {
            err_prefix(err, "preset '%s' row '%s'", p->name, p->rows[r].name);
            goto fail;
        }
        add_entry(set, p->rows[r].name, p->rows[r].regex, re, true);
    }
    for (size_t i = 0; i < n_user; i++)
        add_entry(set, user[i].name, user[i].regex, compile(user[i].regex, err), false);
    set->open_re = compile(block_open_re, err);
    set->close_re = compile(block_close_re, err);
    *out = set;
    return 0;
fail:
    ext_free(set);
    return -1;
}

void ext_free(ext_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++) {
        free(set->e[i].name);
        free(set->e[i].regex);
        pcre2_code_free(set->e[i].re);
    }
    free(set->e);
    pcre2_code_free(set->open_re);
    pcre2_code_free(set->close_re);
    free(set);
}

/* ---- matching ---- */

struct budget {
    long left; /* callouts this pattern may still use on this log */
};

static int on_callout(pcre2_callout_block *block, void *data)
{
    (void)block;
    struct budget *b = data;
    return --b->left < 0 ? PCRE2_ERROR_CALLOUT : 0;
}

/* One matcher per ext_run/ext_shape call: the sets stay read-only, so they
 * can be shared between threads. */
struct matcher {
    pcre2_match_context *ctx;
    pcre2_match_data *md;
    struct budget budget;
};

static void matcher_init(struct matcher *m)
{
    m->ctx = pcre2_match_context_create(NULL);
    pcre2_set_match_limit(m->ctx, MATCH_LIMIT);
    pcre2_set_depth_limit(m->ctx, DEPTH_LIMIT);
    pcre2_set_heap_limit(m->ctx, HEAP_LIMIT_KIB);
    pcre2_set_callout(m->ctx, on_callout, &m->budget);
    m->md = pcre2_match_data_create(8, NULL);
    m->budget.left = CALLOUT_BUDGET;
}

static void matcher_release(struct matcher *m)
{
    pcre2_match_data_free(m->md);
    pcre2_match_context_free(m->ctx);
}

/* Why a match stopped, in words, for the error message. */
static const char *limit_reason(int rc)
{
    switch (rc) {
    case PCRE2_ERROR_MATCHLIMIT:
        return "match limit exceeded";
    case PCRE2_ERROR_DEPTHLIMIT:
        return "depth limit exceeded";
    case PCRE2_ERROR_HEAPLIMIT:
        return "heap limit exceeded";
    case PCRE2_ERROR_CALLOUT:
        return "work budget for one log exceeded";
    default:
        return "matching failed";
    }
}

/*
 * Parse a captured value. Returns 1 with *v set, 0 for a value that means
 * "not measured" ("not set", "N/A", "None", "nan", empty), -1 for text that
 * is not a number. "inf" is INFINITY; "-0.00" is 0; "1,234.5" is 1234.5.
 */
int ext_parse_value(const char *s, size_t n, double *v)
{
    char tmp[VALUE_MAX_BYTES];
    size_t k = 0;
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 0)
        return 0;
    if (n >= sizeof(tmp))
        return -1;
    /* copy, dropping thousands separators that sit between digits */
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ',' && i > 0 && isdigit((unsigned char)s[i - 1]) && i + 1 < n &&
            isdigit((unsigned char)s[i + 1]))
            continue;
        tmp[k++] = s[i];
    }
    tmp[k] = '\0';
    static const char *const absent[] = {"not set", "n/a", "na", "none", "null",
                                         "nan",     "-",   "--", "trace"};
    for (size_t i = 0; i < N_OF(absent); i++)
        if (strcasecmp(tmp, absent[i]) == 0)
            return 0;
    const char *t = tmp;
    int sign = 1;
    if (*t == '+' || *t == '-')
        sign = *t++ == '-' ? -1 : 1;
    if (strcasecmp(t, "inf") == 0 || strcasecmp(t, "infinity") == 0) {
        *v = sign * INFINITY;
        return 1;
    }
    double d;
    if (str_to_double(tmp, &d) != 0)
        return -1;
    *v = d == 0 ? 0.0 : d; /* "-0.00" reads as 0 */
    return 1;
}

/*
 * Run re over text[from..to) and keep the value of the last match that
 * carries one. Returns 1 (found), 0 (no value), or a negative PCRE2 error
 * when a limit stopped the search.
 */
static int match_last(struct matcher *m, const pcre2_code *re, const char *text, size_t from,
                      size_t to, double *out)
{
    size_t pos = from;
    int found = 0;
    m->budget.left = CALLOUT_BUDGET;
    for (long count = 0; pos <= to && count < MAX_MATCHES; count++) {
        int rc = pcre2_match(re, (PCRE2_SPTR)text, to, pos, 0, m->md, m->ctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return rc;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
        if (rc >= 2 && ov[2] != PCRE2_UNSET) {
            double v;
            if (ext_parse_value(text + ov[2], ov[3] - ov[2], &v) == 1) {
                *out = v;
                found = 1;
            }
        }
        pos = ov[1] > ov[0] ? ov[1] : ov[0] + 1; /* never loop on an empty match */
    }
    return found;
}

/* The first match of re in text[from..to): 1 with [*s, *e), 0 or <0. */
static int match_first(struct matcher *m, const pcre2_code *re, const char *text, size_t from,
                       size_t to, size_t *s, size_t *e)
{
    m->budget.left = CALLOUT_BUDGET;
    int rc = pcre2_match(re, (PCRE2_SPTR)text, to, from, 0, m->md, m->ctx);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc < 0)
        return rc;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
    *s = ov[0];
    *e = ov[1];
    return 1;
}

/* The last result block: [*from, *to) runs from after its opening rule to
 * its closing rule (or the end of the text). Without one, the whole text. */
static void find_block(struct matcher *m, const ext_set *set, const char *text, size_t len,
                       size_t *from, size_t *to)
{
    size_t pos = 0, s, e;
    bool seen = false;
    *from = 0;
    *to = len;
    while (pos < len && match_first(m, set->open_re, text, pos, len, &s, &e) == 1) {
        *from = e;
        seen = true;
        pos = e > s ? e : s + 1;
    }
    if (seen && match_first(m, set->close_re, text, *from, len, &s, &e) == 1)
        *to = s;
}

int ext_run(const ext_set *set, const char *text, size_t len, struct metric_set *out,
            struct err *err)
{
    struct matcher m;
    size_t bfrom, bto;
    int rc = 0;
    if (!text)
        text = "";
    matcher_init(&m);
    find_block(&m, set, text, len, &bfrom, &bto);
    /* a name with several rows (label spellings) takes the first row that
     * matches; a user pattern has replaced every preset row of its name */
    bool *hit = xcalloc(set->n ? set->n : 1, sizeof(*hit));
    for (size_t i = 0; i < set->n; i++) {
        const struct entry *en = &set->e[i];
        bool earlier = false;
        for (size_t j = 0; j < i && !earlier; j++)
            earlier = hit[j] && strcmp(set->e[j].name, en->name) == 0;
        if (earlier)
            continue;
        double v;
        int r = en->in_block ? match_last(&m, en->re, text, bfrom, bto, &v)
                             : match_last(&m, en->re, text, 0, len, &v);
        if (r < 0) {
            err_set(err, RN_ERR_USAGE, "pattern '%s' (%s): %s; simplify the regex", en->name,
                    en->regex, limit_reason(r));
            rc = -1;
            break;
        }
        if (r == 1) {
            mset_set(out, en->name, v);
            hit[i] = true;
        }
    }
    free(hit);
    matcher_release(&m);
    return rc;
}

int ext_require(const ext_set *set, const struct metric_set *got, const struct strvec *require,
                struct err *err)
{
    struct buf msg;
    int missing = 0;
    buf_init(&msg, sizeof(err->msg));
    for (size_t r = 0; r < require->n; r++) {
        const char *name = require->v[r];
        if (mset_get(got, name, NULL))
            continue;
        buf_printf(&msg, "%smissing required metric '%s'", missing ? "; " : "", name);
        int tried = 0;
        for (size_t i = 0; i < set->n; i++)
            if (strcmp(set->e[i].name, name) == 0)
                buf_printf(&msg, "%s/%s/", tried++ ? ", " : " (tried ", set->e[i].regex);
        buf_puts(&msg, tried ? ")" : " (no pattern defines it; add one under metrics.patterns)");
        missing++;
    }
    if (missing)
        err_set(err, RN_ERR_POINTS, "%s", msg.data);
    buf_release(&msg);
    return missing ? -1 : 0;
}

void ext_missing(const struct metric_set *got, const struct strvec *require, struct strvec *out)
{
    for (size_t r = 0; r < require->n; r++)
        if (!mset_get(got, require->v[r], NULL))
            strvec_push(out, require->v[r]);
}

size_t ext_patterns(const ext_set *set, const char *name, const char **regexes, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->e[i].name, name) == 0) {
            if (k < max)
                regexes[k] = set->e[i].regex;
            k++;
        }
    return k;
}

int ext_pattern_arg(const char *arg, struct ext_pattern *p, struct err *err)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return err_set(err, RN_ERR_USAGE, "pattern '%s' is not NAME=REGEX", arg), -1;
    p->name = xstrndup(arg, (size_t)(eq - arg));
    p->regex = eq + 1;
    return 0;
}

/* ---- judging a point ---- */

/* One rule set for every place that judges a point: a run, and a point
 * rebuilt from its log later. */
bool ext_check_invariants(const struct metric_set *m, long conc, long prompts, double rate,
                          struct buf *notes)
{
    bool bad = false;
    double ttft, e2e, ok, failed, got;
#define NOTE(...)                                                                                  \
    do {                                                                                           \
        if (notes->len)                                                                            \
            buf_puts(notes, "; ");                                                                 \
        buf_printf(notes, __VA_ARGS__);                                                            \
    } while (0)
    if (mset_get(m, "median_ttft_ms", &ttft) && mset_get(m, "median_e2e_ms", &e2e) &&
        ttft > e2e * (1 + 1e-9) + 1e-6) {
        NOTE("median TTFT %.2f ms exceeds median E2E %.2f ms", ttft, e2e);
        bad = true;
    }
    if (mset_get(m, "successful_requests", &ok)) {
        bool have_failed = mset_get(m, "failed_requests", &failed);
        if (!have_failed)
            failed = 0;
        if (ok <= 0) {
            NOTE("no request succeeded");
            bad = true;
        } else if (have_failed && fabs(ok + failed - (double)prompts) > 0.5) {
            NOTE("%.0f successful + %.0f failed requests, but %ld were planned", ok, failed,
                 prompts);
            bad = true;
        } else if (!have_failed && ok < (double)prompts - 0.5) {
            NOTE("only %.0f of %ld requests succeeded", ok, prompts);
            bad = (double)prompts - ok > EXT_FAILED_SHARE_MAX * (double)prompts;
        } else if (failed > 0) {
            NOTE("%.0f of %ld requests failed", failed, prompts);
            bad = failed > EXT_FAILED_SHARE_MAX * (double)prompts;
        }
    }
    if (rate <= 0 && prompts < conc)
        NOTE("only %ld prompts for concurrency %ld: at most %ld requests ran at once", prompts,
             conc, prompts);
    if (rate <= 0 && mset_get(m, "achieved_concurrency", &got)) {
        double want = (double)(conc < prompts ? conc : prompts);
        if (got < EXT_CONCURRENCY_FLOOR * want)
            NOTE("achieved concurrency %.2f is far below the requested %.0f", got, want);
    }
#undef NOTE
    return bad;
}

/* ---- what the log says about the point it measured ---- */

/* Lines that carry the requested concurrency, in the order tried: SGLang's
 * row, vLLM's row, then vLLM's free-form line before its block. */
static const char *const shape_conc_re[] = {
    ROW("Max request concurrency"),
    ROW("Maximum request concurrency"),
};

int ext_shape(const char *text, size_t len, struct ext_shape *out, struct err *err)
{
    struct err e2;
    ext_set *set = NULL;
    struct matcher m;
    int rc = -1;
    out->concurrency = -1;
    out->prompts = -1;
    err_init(&e2);
    if (ext_new("sglang", NULL, 0, &set, &e2) != 0) {
        err_set(err, e2.code, "%s", e2.msg);
        return -1;
    }
    matcher_init(&m);
    size_t bfrom, bto;
    if (!text)
        text = "";
    find_block(&m, set, text, len, &bfrom, &bto);
    for (size_t i = 0; i < N_OF(shape_conc_re) && out->concurrency < 0; i++) {
        pcre2_code *re = compile(shape_conc_re[i], err);
        double v;
        /* inside the block first; vLLM also prints a free-form line before it */
        int r = match_last(&m, re, text, bfrom, bto, &v);
        if (r == 0)
            r = match_last(&m, re, text, 0, len, &v);
        pcre2_code_free(re);
        if (r < 0) {
            err_set(err, RN_ERR_USAGE, "requested concurrency: %s", limit_reason(r));
            goto out;
        }
        if (r == 1 && isfinite(v) && v >= 1 && v <= 1e9 && v == floor(v))
            out->concurrency = (long)v;
    }
    struct metric_set ms;
    mset_init(&ms);
    if (ext_run(set, text, len, &ms, err) != 0) {
        mset_release(&ms);
        goto out;
    }
    double ok, failed = 0;
    if (mset_get(&ms, "successful_requests", &ok) && isfinite(ok) && ok >= 0 && ok <= 1e12) {
        mset_get(&ms, "failed_requests", &failed);
        if (isfinite(failed) && failed >= 0 && failed <= 1e12 && ok + failed >= 1)
            out->prompts = (long)(ok + failed);
    }
    mset_release(&ms);
    rc = 0;
out:
    matcher_release(&m);
    ext_free(set);
    return rc;
}

/* ---- tags in file names ---- */

/* Tags shell sweeps put in file names, tried in order (first match wins). */
static const char *const default_tags[] = {
    "(?<![A-Za-z0-9])c(?<c>[0-9]+)[-_]n(?<p>[0-9]+)(?![0-9])",
    "(?<![A-Za-z0-9.])(?<c>[0-9]+)[_:x-](?<p>[0-9]+)(?![0-9])",
    "(?<![A-Za-z0-9])c(?<c>[0-9]+)(?![0-9])",
};

/* The number captured by group (by name, else by index), or -1. */
static long group_num(pcre2_code *re, pcre2_match_data *md, const char *name, int index,
                      const char *subject)
{
    int n = pcre2_substring_number_from_name(re, (PCRE2_SPTR)name);
    uint32_t groups = 0;
    pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
    if (n < 0)
        n = index <= (int)groups ? index : -1;
    if (n < 0)
        return -1;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (ov[2 * n] == PCRE2_UNSET)
        return -1;
    char tmp[24];
    size_t len = ov[2 * n + 1] - ov[2 * n];
    if (len == 0 || len >= sizeof(tmp))
        return -1;
    memcpy(tmp, subject + ov[2 * n], len);
    tmp[len] = '\0';
    long v;
    return str_to_long(tmp, &v) == 0 && v >= 1 ? v : -1;
}

int ext_tag(const char *regex, const char *path, long *concurrency, long *prompts, struct err *err)
{
    char *name = path_stem(path, ".log");
    size_t len = strlen(name);
    struct matcher m;
    int rc = 0;
    *concurrency = *prompts = -1;
    matcher_init(&m);
    size_t n = regex ? 1 : N_OF(default_tags);
    for (size_t i = 0; i < n && *concurrency < 0; i++) {
        const char *r = regex ? regex : default_tags[i];
        pcre2_code *re = compile(r, err);
        if (!re) {
            err_prefix(err, "--tag-regex");
            rc = -1;
            break;
        }
        uint32_t groups = 0;
        pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
        m.budget.left = CALLOUT_BUDGET;
        int mr = groups ? pcre2_match(re, (PCRE2_SPTR)name, len, 0, 0, m.md, m.ctx)
                        : PCRE2_ERROR_NOMATCH;
        if (regex && !groups) {
            err_set(err, RN_ERR_USAGE, "--tag-regex '%s' has no capture group", regex);
            rc = -1;
        } else if (mr >= 0) {
            *concurrency = group_num(re, m.md, "c", 1, name);
            *prompts = group_num(re, m.md, "p", 2, name);
        } else if (mr != PCRE2_ERROR_NOMATCH) {
            err_set(err, RN_ERR_USAGE, "--tag-regex '%s': %s", r, limit_reason(mr));
            rc = -1;
        }
        pcre2_code_free(re);
        if (rc)
            break;
    }
    matcher_release(&m);
    free(name);
    return rc;
}
