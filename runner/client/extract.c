/*
 * extract: PCRE2 metric extraction. Presets are tables of (canonical name,
 * regex) rows, one row per label spelling a tool has used; user patterns
 * replace or add names. A log is read as a stream of lines (split at
 * "\n", "\r" and "\r\n") in fixed-size chunks, so its size costs time,
 * never memory. Preset rows are matched inside the last complete result
 * block of the log (so vLLM's free-form "Traffic request rate: inf" lines
 * before the block never count); user patterns see every line. While
 * reading, three sets of preset matches are kept: the block being read,
 * the last complete block, and the lines outside any block (used when the
 * log has no block). Every match runs under a match limit, a depth limit,
 * a heap limit and a work budget per pattern that each byte of log refills
 * a little, so no regex can hang a run.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "client/extract.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "strutil.h"
#include "sweep.h"
#include "xalloc.h"

#include "client/export.h"

/* Limits (docs/reliability.md §3.2 and M13: 1e5 steps fail in ~1 ms). The match
 * limit applies per match call, so a budget of callouts bounds the work over
 * a whole log: each pattern may bank CALLOUT_BUDGET (about 0.1 s of
 * matching), and every byte of a line it is tried on adds CALLOUT_PER_BYTE,
 * far more than an ordinary pattern spends, so only a runaway one drains it. */
#define MATCH_LIMIT      1000000u
#define DEPTH_LIMIT      10000u
#define HEAP_LIMIT_KIB   (32u * 1024u)
#define CALLOUT_BUDGET   10000000L
#define CALLOUT_PER_BYTE 64L
#define VALUE_MAX_BYTES  64
#define READ_CHUNK_BYTES 65536

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
    /* sweep's own client, prefix-cache workloads */
    {"cached_token_frac", ROW("Cached prompt token fraction")},
    {"median_ttft_first_turn_ms", ROW("Median TTFT turn 0 \\(ms\\)")},
    {"median_ttft_later_turns_ms", ROW("Median TTFT later turns \\(ms\\)")},
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

/* the regex presets, then those of export.c (aiperf's console tables and
 * the exports) */
static const char *const preset_name_list[] = {"sglang",      "vllm",         "aiperf",
                                               "aiperf-json", "aiperf-csv",   "guidellm-json",
                                               "vllm-json",   "sglang-jsonl", NULL};

/* Both tools open the block with this rule and close it with a line of '='. */
static const char block_open_re[] = "^=+ Serving Benchmark Result =+[ \\t\\r]*$";
static const char block_close_re[] = "^=+[ \\t\\r]*$";

struct entry {
    char *name;     /* owned */
    char *regex;    /* owned */
    pcre2_code *re; /* owned */
    bool in_block;  /* preset row: match inside the result block only */
    char lead;      /* preset row: the byte its line starts with (a quick
                       test before PCRE2); 0 = try every line */
    size_t first;   /* the first entry with the same name (itself if none) */
};

struct ext_set {
    struct entry *e; /* owned; preset rows first (table order), then user patterns */
    size_t n, cap;
    pcre2_code *open_re, *close_re; /* owned; result block delimiters */
    const struct xp_preset *xp;     /* an export preset (export.h), or NULL */
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
    size_t first = set->n;
    for (size_t j = 0; j < set->n && first == set->n; j++)
        if (strcmp(set->e[j].name, name) == 0)
            first = j;
    /* ROW(label) is "^" label ...: its line starts with the label's first byte */
    char lead = in_block && regex[0] == '^' && isalpha((unsigned char)regex[1]) ? regex[1] : 0;
    XGROW(set->e, set->cap, set->n + 1);
    set->e[set->n] = (struct entry){xstrdup(name), xstrdup(regex), re, in_block, lead, first};
    set->n++;
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
        set->xp = p ? NULL : xp_find(preset);
        if (!p && !set->xp) {
            const char *hint = str_suggest(preset, preset_name_list);
            struct buf known;
            buf_init(&known, 512);
            for (size_t i = 0; preset_name_list[i]; i++)
                buf_printf(&known, "%s%s", i ? ", " : "", preset_name_list[i]);
            err_set(err, RN_ERR_USAGE, "unknown preset '%s'%s%s%s (known: %s)", preset,
                    hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "",
                    known.data);
            buf_release(&known);
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
    long left; /* callouts the pattern being matched may still use */
};

static int on_callout(pcre2_callout_block *block, void *data)
{
    (void)block;
    struct budget *b = data;
    return --b->left < 0 ? PCRE2_ERROR_CALLOUT : 0;
}

/* One matcher per scan: the sets stay read-only, so they can be shared
 * between threads. */
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
 * is not a decimal number, -2 for one out of range. "inf" is INFINITY;
 * "-0.00" is 0; "1,234.5" is 1234.5.
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
    if (n >= sizeof(tmp) || memchr(s, '\0', n))
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
    if (str_to_double_n(tmp, k, &d) != 0)
        return errno == ERANGE ? -2 : -1;
    *v = d == 0 ? 0.0 : d; /* "-0.00" reads as 0 */
    return 1;
}

/* ---- reading a log as lines ---- */

/* What one pattern found in one region of the log. */
struct slot {
    long line;                     /* line of the match kept; 0 = none */
    int state;                     /* 1 value, 0 not measured, -1 not a number, -2 out of range */
    double value;                  /* when state is 1 */
    char quote[EXT_QUOTE_MAX + 4]; /* the captured text when state <= 0 */
};

/* A region: a result block, or the lines outside every block, or (for user
 * patterns) the whole log. */
struct region {
    struct slot *slot; /* owned; one per entry of the set */
    long open_line;    /* line of a block's opening rule; 0 otherwise */
    long dup_a, dup_b; /* a metric matched on two lines (the first such); 0 = none */
    size_t dup_entry;  /* the entry that matched the second time */
};

struct scan {
    const ext_set *set;
    struct matcher m;
    long *budget;                       /* owned; callouts banked per entry */
    struct region outside, cur, last;   /* preset rows: see the top of the file */
    struct region all;                  /* user patterns: every line */
    bool in_block, have_last, after_cr; /* after_cr: the last byte was '\r' */
    long blocks;                        /* complete blocks so far */
    long line;                          /* number of the line being read */
    struct buf part;                    /* a line split across chunks */
    bool overlong;                      /* the current line passed EXT_LINE_MAX_BYTES */
    long long_lines, first_long;
    struct xp_stream *tee; /* a table preset's reader, fed the same chunks (export.h) */
    bool stopped;          /* a limit stopped a pattern: err is set, the rest is skipped */
    struct err *err;
};

static void region_init(struct region *r, size_t n)
{
    *r = (struct region){.slot = xcalloc(n ? n : 1, sizeof(struct slot))};
}

static void region_clear(struct region *r, size_t n)
{
    memset(r->slot, 0, (n ? n : 1) * sizeof(struct slot));
    r->open_line = r->dup_a = r->dup_b = 0;
}

static void scan_init(struct scan *s, const ext_set *set, struct err *err)
{
    *s = (struct scan){.set = set, .line = 1, .err = err};
    matcher_init(&s->m);
    s->budget = xcalloc(set->n ? set->n : 1, sizeof(long));
    for (size_t i = 0; i < set->n; i++)
        s->budget[i] = CALLOUT_BUDGET;
    region_init(&s->outside, set->n);
    region_init(&s->cur, set->n);
    region_init(&s->last, set->n);
    region_init(&s->all, set->n);
    buf_init(&s->part, EXT_LINE_MAX_BYTES);
}

static void scan_release(struct scan *s)
{
    matcher_release(&s->m);
    free(s->budget);
    free(s->outside.slot);
    free(s->cur.slot);
    free(s->last.slot);
    free(s->all.slot);
    buf_release(&s->part);
}

/* text[0..n) as a one-line quote: spaces trimmed, bytes that are not
 * printable ASCII (or are quotes) as '?', cut at EXT_QUOTE_MAX with "...". */
static void quote_into(char *out, const char *text, size_t n)
{
    while (n && isspace((unsigned char)*text))
        text++, n--;
    while (n && isspace((unsigned char)text[n - 1]))
        n--;
    size_t k = 0;
    for (; k < n && k < EXT_QUOTE_MAX; k++) {
        unsigned char c = (unsigned char)text[k];
        out[k] = c < 0x20 || c >= 0x7f || c == '\'' ? '?' : (char)c;
    }
    if (k < n) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
}

/* Keep what entry i matched on this line in region r. Preset rows keep the
 * first line of each metric and note a second one; user patterns keep the
 * last value (or, until there is one, the last text that was no value) and
 * note a second value, which fails the point as a preset's repeat does. */
static void keep(struct scan *s, struct region *r, size_t i, bool in_block, int state, double v,
                 const char *cap, size_t n)
{
    const struct entry *e = s->set->e;
    struct slot *sl = &r->slot[i];
    if (in_block) {
        for (size_t j = 0; j < s->set->n; j++)
            if (e[j].first == e[i].first && r->slot[j].line) {
                if (!r->dup_a) {
                    r->dup_a = r->slot[j].line;
                    r->dup_b = s->line;
                    r->dup_entry = i;
                }
                return;
            }
    } else if (state != 1 && sl->state == 1) {
        return;
    } else if (state == 1 && sl->state == 1 && !r->dup_a) {
        r->dup_a = sl->line;
        r->dup_b = s->line;
        r->dup_entry = i;
    }
    sl->line = s->line;
    sl->state = state;
    sl->value = v;
    if (state != 1)
        quote_into(sl->quote, cap, n);
}

/* Match entry i against one line; <0 when a limit stopped it. */
static int match_line(struct scan *s, size_t i, const char *line, size_t len, struct region *r)
{
    const struct entry *en = &s->set->e[i];
    long credit = CALLOUT_PER_BYTE * (long)(len + 1);
    s->budget[i] = s->budget[i] > CALLOUT_BUDGET - credit ? CALLOUT_BUDGET : s->budget[i] + credit;
    s->m.budget.left = s->budget[i];
    int rc = 0;
    for (size_t pos = 0; pos <= len;) {
        rc = pcre2_match(en->re, (PCRE2_SPTR)line, len, pos, 0, s->m.md, s->m.ctx);
        if (rc == PCRE2_ERROR_NOMATCH) {
            rc = 0;
            break;
        }
        if (rc < 0)
            break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->m.md);
        if (rc >= 2 && ov[2] != PCRE2_UNSET) {
            double v = 0;
            int state = ext_parse_value(line + ov[2], ov[3] - ov[2], &v);
            keep(s, r, i, en->in_block, state, v, line + ov[2], ov[3] - ov[2]);
        }
        if (en->in_block)
            break;                               /* a row is a whole line */
        pos = ov[1] > ov[0] ? ov[1] : ov[0] + 1; /* never loop on an empty match */
        rc = 0;
    }
    s->budget[i] = s->m.budget.left;
    return rc;
}

/* Whether the fixed regex re matches line (the block rules). */
static bool rule_matches(struct scan *s, const pcre2_code *re, const char *line, size_t len)
{
    s->m.budget.left = CALLOUT_BUDGET;
    return pcre2_match(re, (PCRE2_SPTR)line, len, 0, 0, s->m.md, s->m.ctx) >= 0;
}

/* One line, without its end. */
static void scan_line(struct scan *s, const char *line, size_t len)
{
    const ext_set *set = s->set;
    bool rule = false; /* a block's opening or closing line: no preset row */
    if (s->stopped)
        return;
    if (len && line[0] == '=') {
        if (rule_matches(s, set->open_re, line, len)) {
            /* a block opened inside an open one: the open one never ended */
            region_clear(&s->cur, set->n);
            s->cur.open_line = s->line;
            s->in_block = rule = true;
        } else if (s->in_block && rule_matches(s, set->close_re, line, len)) {
            struct region t = s->last;
            s->last = s->cur;
            s->cur = t;
            region_clear(&s->cur, set->n);
            s->in_block = false;
            s->have_last = rule = true;
            s->blocks++;
        }
    }
    for (size_t i = 0; i < set->n; i++) {
        const struct entry *en = &set->e[i];
        struct region *r = &s->all; /* user patterns see every line */
        if (en->in_block) {
            if (rule || (en->lead && (!len || line[0] != en->lead)))
                continue;
            r = s->in_block ? &s->cur : &s->outside;
        }
        int rc = match_line(s, i, line, len, r);
        if (rc < 0) {
            err_set(s->err, RN_ERR_USAGE, "pattern '%s' (%s): %s; simplify the regex", en->name,
                    en->regex, limit_reason(rc));
            s->stopped = true;
            return;
        }
    }
}

/* The line in s->part (or a skipped overlong one) has ended. */
static void end_line(struct scan *s, const char *line, size_t len)
{
    if (s->overlong) {
        s->long_lines++;
        if (!s->first_long)
            s->first_long = s->line;
    } else {
        scan_line(s, line, len);
    }
    s->overlong = false;
    buf_reset(&s->part);
}

/* Bytes of the log, in any split: lines end at '\n', '\r' or "\r\n". */
static void scan_feed(struct scan *s, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && p[j] != '\n' && p[j] != '\r')
            j++;
        bool whole = j < n && s->part.len == 0 && !s->overlong; /* no copy needed */
        if (j > i) {
            s->after_cr = false;
            if (!whole && !s->overlong && buf_append(&s->part, p + i, j - i) != 0)
                s->overlong = true;
            if (whole && j - i > EXT_LINE_MAX_BYTES)
                s->overlong = true;
        }
        if (j == n)
            break;
        if (p[j] == '\n' && s->after_cr) { /* the '\r' already ended this line */
            s->after_cr = false;
        } else if (whole) {
            end_line(s, p + i, j - i);
            s->after_cr = p[j] == '\r';
        } else {
            end_line(s, s->part.data ? s->part.data : "", s->part.len);
            s->after_cr = p[j] == '\r';
        }
        if (p[j] == '\n')
            s->line++;
        i = j + 1;
    }
}

/* Read the file at path through scan_feed in chunks. */
static int scan_file(struct scan *s, const char *path, struct err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, RN_ERR_ENV, "%s: %s", path, strerror(errno)), -1;
    int rc = 0;
    struct stat st;
    char *chunk = NULL;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        err_set(err, RN_ERR_ENV, "%s: is a directory", path);
        rc = -1;
        goto out;
    }
    chunk = xmalloc(READ_CHUNK_BYTES);
    for (;;) {
        ssize_t got = read(fd, chunk, READ_CHUNK_BYTES);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            err_set(err, RN_ERR_ENV, "%s: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        if (got == 0 || s->stopped)
            break;
        scan_feed(s, chunk, (size_t)got);
        if (s->tee)
            xp_stream_feed(s->tee, chunk, (size_t)got);
    }
out:
    free(chunk);
    close(fd);
    return rc;
}

/* After the last byte: the verdict on the log and its values. lenient
 * (for ext_shape) reads a block that is not to be trusted anyway: the one
 * the log ends inside, or the one with a metric twice (its first line). */
static int scan_end(struct scan *s, struct metric_set *out, struct ext_info *info, bool lenient,
                    struct err *err)
{
    const ext_set *set = s->set;
    if (s->part.len || s->overlong) /* a last line without an end */
        end_line(s, s->part.data ? s->part.data : "", s->part.len);
    if (s->stopped)
        return -1;
    const struct region *used = s->have_last ? &s->last : &s->outside;
    if (lenient && s->in_block)
        used = &s->cur;
    if (s->in_block && !lenient)
        return err_set(err, RN_ERR_POINTS,
                       "the result block opened at line %ld is not closed: the log ends inside "
                       "it (cut short?)",
                       s->cur.open_line),
               -1;
    if (used->dup_a && !lenient) {
        const char *name = set->e[used->dup_entry].name;
        if (s->have_last)
            err_set(err, RN_ERR_POINTS,
                    "'%s' is printed twice in the result block opened at line %ld: lines %ld and "
                    "%ld (output of two runs mixed?)",
                    name, used->open_line, used->dup_a, used->dup_b);
        else
            err_set(err, RN_ERR_POINTS,
                    "'%s' is printed twice in a log without a result block: lines %ld and %ld",
                    name, used->dup_a, used->dup_b);
        return -1;
    }
    if (s->all.dup_a && !lenient)
        return err_set(err, RN_ERR_POINTS,
                       "pattern '%s' matched a value twice: lines %ld and %ld (make it match "
                       "one line)",
                       set->e[s->all.dup_entry].name, s->all.dup_a, s->all.dup_b),
               -1;
    /* a name with several rows (label spellings) takes the first row that
     * has a value; a user pattern has replaced every preset row of its name */
    bool *done = xcalloc(set->n ? set->n : 1, sizeof(*done));
    for (size_t i = 0; i < set->n; i++) {
        const struct slot *sl = set->e[i].in_block ? &used->slot[i] : &s->all.slot[i];
        if (done[set->e[i].first] || sl->state != 1 || !sl->line)
            continue;
        mset_set(out, set->e[i].name, sl->value);
        done[set->e[i].first] = true;
    }
    if (info) {
        info->blocks = s->blocks;
        info->block_line = s->have_last ? s->last.open_line : 0;
        info->long_lines = s->long_lines;
        info->first_long = s->first_long;
        for (size_t i = 0; i < set->n; i++) {
            const struct slot *sl = set->e[i].in_block ? &used->slot[i] : &s->all.slot[i];
            if (done[set->e[i].first] || !sl->line)
                continue;
            done[set->e[i].first] = true;
            XGROW(info->unread, info->cap_unread, info->n_unread + 1);
            info->unread[info->n_unread++] = (struct ext_unread){
                xstrdup(set->e[i].name), xstrdup(sl->quote), sl->line, sl->state};
        }
    }
    free(done);
    return 0;
}

void ext_info_init(struct ext_info *info)
{
    *info = (struct ext_info){0};
}

void ext_info_release(struct ext_info *info)
{
    for (size_t i = 0; i < info->n_unread; i++) {
        free(info->unread[i].name);
        free(info->unread[i].text);
    }
    free(info->unread);
    ext_info_init(info);
}

/* "matched 'abc', not a number (line 12)" */
static void put_unread(struct buf *b, const struct ext_unread *u)
{
    buf_printf(b, "matched '%s', %s", u->text,
               u->kind == 0    ? "not measured"
               : u->kind == -2 ? "out of range"
                               : "not a number");
    if (u->line) /* 0: a value of an export file */
        buf_printf(b, " (line %ld)", u->line);
}

void ext_info_notes(const struct ext_info *info, struct buf *notes)
{
    if (info->blocks > 1) {
        buf_printf(notes, "%s%ld %s, last used", notes->len ? "; " : "", info->blocks,
                   info->block_word ? info->block_word : "result blocks");
        if (info->block_line)
            buf_printf(notes, " (line %ld)", info->block_line);
    }
    for (size_t i = 0; i < info->n_unread; i++) {
        if (info->unread[i].kind == 0)
            continue; /* the tool said it did not measure it */
        buf_printf(notes, "%s'%s' ", notes->len ? "; " : "", info->unread[i].name);
        put_unread(notes, &info->unread[i]);
    }
    if (info->long_lines)
        buf_printf(notes, "%s%ld line(s) over %zu bytes not read (the first at line %ld)",
                   notes->len ? "; " : "", info->long_lines, EXT_LINE_MAX_BYTES, info->first_long);
}

/* An export preset: the export's rows, then the user patterns over its
 * lines (they replace the rows of their names). */
static int run_export(const ext_set *set, const char *path, const char *text, size_t len,
                      struct metric_set *out, struct ext_info *info, struct err *err)
{
    struct strvec user = STRVEC_INIT;
    struct metric_set got;
    struct scan s;
    int rc;
    for (size_t i = 0; i < set->n; i++)
        strvec_push(&user, set->e[i].name);
    struct metric_set mine; /* the user patterns' values, which win */
    mset_init(&got);
    mset_init(&mine);
    rc = 0;
    if (set->n) { /* user patterns: over the export's lines */
        scan_init(&s, set, err);
        scan_feed(&s, text, len);
        rc = scan_end(&s, &mine, info, false, err);
        scan_release(&s);
    }
    if (rc == 0) /* after the scan, whose ext_info says nothing of runs */
        rc = xp_parse(set->xp, path, text, len, &user, &got, info, err);
    for (size_t i = 0; rc == 0 && i < mine.n; i++)
        mset_set(&got, mine.m[i].name, mine.m[i].value);
    if (rc == 0)
        for (size_t i = 0; i < got.n; i++)
            mset_set(out, got.m[i].name, got.m[i].value);
    mset_release(&got);
    mset_release(&mine);
    strvec_release(&user);
    return rc;
}

const struct xp_preset *ext_export(const ext_set *set)
{
    return set->xp;
}

char *ext_source_path(const ext_set *set, const char *log_path)
{
    return set->xp ? xp_path(set->xp, log_path) : xstrdup(log_path);
}

int ext_run(const ext_set *set, const char *text, size_t len, struct metric_set *out,
            struct ext_info *info, struct err *err)
{
    if (set->xp)
        return run_export(set, "(text)", text ? text : "", text ? len : 0, out, info, err);
    struct scan s;
    scan_init(&s, set, err);
    scan_feed(&s, text ? text : "", text ? len : 0);
    int rc = scan_end(&s, out, info, false, err);
    scan_release(&s);
    return rc;
}

int ext_run_file(const ext_set *set, const char *path, struct metric_set *out,
                 struct ext_info *info, struct err *err)
{
    if (set->xp && set->xp->format == XP_TABLE) {
        /* a console log: streamed, the table reader beside the user patterns */
        struct strvec user = STRVEC_INIT;
        struct metric_set got;
        struct scan s;
        for (size_t i = 0; i < set->n; i++)
            strvec_push(&user, set->e[i].name);
        mset_init(&got);
        scan_init(&s, set, err);
        s.tee = xp_stream_new(set->xp, path, &user, &got, info, err);
        int rc = scan_file(&s, path, err);
        int trc = xp_stream_end(s.tee);
        if (rc == 0)
            rc = trc;
        if (rc == 0)
            rc = scan_end(&s, &got, info, false, err);
        scan_release(&s);
        if (rc == 0)
            for (size_t i = 0; i < got.n; i++)
                mset_set(out, got.m[i].name, got.m[i].value);
        mset_release(&got);
        strvec_release(&user);
        return rc;
    }
    if (set->xp) {
        struct buf text;
        int rc = xp_read(path, &text, err);
        if (rc == 0)
            rc = run_export(set, path, text.data ? text.data : "", text.len, out, info, err);
        buf_release(&text);
        return rc;
    }
    struct scan s;
    scan_init(&s, set, err);
    int rc = scan_file(&s, path, err);
    if (rc == 0)
        rc = scan_end(&s, out, info, false, err);
    scan_release(&s);
    return rc;
}

int ext_require(const ext_set *set, const struct metric_set *got, const struct ext_info *info,
                const struct strvec *require, struct err *err)
{
    struct buf msg;
    int missing = 0;
    buf_init(&msg, sizeof(err->msg));
    for (size_t r = 0; r < require->n; r++) {
        const char *name = require->v[r];
        if (mset_get(got, name, NULL))
            continue;
        buf_printf(&msg, "%smissing required metric '%s'", missing ? "; " : "", name);
        missing++;
        const struct ext_unread *u = NULL;
        for (size_t i = 0; info && i < info->n_unread && !u; i++)
            if (strcmp(info->unread[i].name, name) == 0)
                u = &info->unread[i];
        if (u) {
            buf_puts(&msg, ": ");
            put_unread(&msg, u);
            continue;
        }
        int tried = 0;
        for (size_t i = 0; i < set->n; i++)
            if (strcmp(set->e[i].name, name) == 0)
                buf_printf(&msg, "%s/%s/", tried++ ? ", " : " (tried ", set->e[i].regex);
        if (!tried && set->xp) {
            size_t at = msg.len;
            buf_puts(&msg, " (tried ");
            if (xp_describe(set->xp, name, &msg))
                tried = 1;
            else
                msg.len = at, msg.data[at] = '\0';
        }
        buf_puts(&msg, tried ? ")" : " (no pattern defines it; add one under metrics.patterns)");
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
/* Is name the client's time or rate ("median_ttft_ms", "duration_s",
 * "output_throughput"), which no measurement makes negative? A server_*
 * column comes from the scrapes, not the client's log. */
static bool never_negative(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, "server_", 7) != 0 &&
           ((n > 3 && strcmp(name + n - 3, "_ms") == 0) ||
            (n > 2 && strcmp(name + n - 2, "_s") == 0) || strstr(name, "throughput") != NULL);
}

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
    for (size_t i = 0; i < m->n; i++)
        if (never_negative(m->m[i].name) && m->m[i].value < 0) {
            NOTE("%s is negative (%g): a time or rate cannot be; the client's clock or its log "
                 "is wrong",
                 m->m[i].name, m->m[i].value);
            bad = true;
        }
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

/* Lines that carry the requested concurrency: SGLang's row, vLLM's row (in
 * the block, as "@conc"), and the same lines anywhere ("@conc_any": vLLM
 * also prints a free-form line before its block). '@' keeps these names
 * apart from any a user can give. */
static const char *const shape_conc_re[] = {
    ROW("Max request concurrency"),
    ROW("Maximum request concurrency"),
};

/* The shape from the text or the file at path. */
static int shape(const char *text, size_t len, const char *path, struct ext_shape *out,
                 struct err *err)
{
    struct err e2;
    ext_set *set = NULL;
    int rc = -1;
    out->concurrency = -1;
    out->prompts = -1;
    err_init(&e2);
    if (ext_new("sglang", NULL, 0, &set, &e2) != 0) {
        err_set(err, e2.code, "%s", e2.msg);
        return -1;
    }
    for (int any = 0; any < 2; any++)
        for (size_t i = 0; i < N_OF(shape_conc_re); i++)
            add_entry(set, any ? "@conc_any" : "@conc", shape_conc_re[i],
                      compile(shape_conc_re[i], err), !any);
    struct metric_set ms;
    struct scan s;
    mset_init(&ms);
    err_init(&e2);
    scan_init(&s, set, &e2);
    if (path && scan_file(&s, path, &e2) != 0) {
        err_set(err, e2.code, "%s", e2.msg);
        goto out;
    }
    if (!path)
        scan_feed(&s, text ? text : "", text ? len : 0);
    /* a block not to be trusted still says which point it was: the judge
     * fails that point, naming why */
    if (scan_end(&s, &ms, NULL, true, &e2) != 0) {
        err_set(err, e2.code, "%s", e2.msg);
        goto out;
    }
    double v, ok, failed = 0;
    if ((mset_get(&ms, "@conc", &v) || mset_get(&ms, "@conc_any", &v)) && isfinite(v) && v >= 1 &&
        v <= 1e9 && v == floor(v))
        out->concurrency = (long)v;
    if (mset_get(&ms, "successful_requests", &ok) && isfinite(ok) && ok >= 0 && ok <= 1e12) {
        mset_get(&ms, "failed_requests", &failed);
        if (isfinite(failed) && failed >= 0 && failed <= 1e12 && ok + failed >= 1)
            out->prompts = (long)(ok + failed);
    }
    rc = 0;
out:
    scan_release(&s);
    mset_release(&ms);
    ext_free(set);
    return rc;
}

int ext_shape(const char *text, size_t len, struct ext_shape *out, struct err *err)
{
    return shape(text, len, NULL, out, err);
}

int ext_shape_file(const char *path, struct ext_shape *out, struct err *err)
{
    return shape(NULL, 0, path, out, err);
}

int ext_shape_for(const ext_set *set, const char *path, struct ext_shape *out, struct err *err)
{
    if (!set->xp)
        return shape(NULL, 0, path, out, err);
    return xp_shape(set->xp, path, &out->concurrency, &out->prompts, err);
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
