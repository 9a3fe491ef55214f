/*
 * experiment: experiment files. One key table (path, type, default, unit,
 * doc, where the value lives) drives loading, type checks, defaults, "did
 * you mean" hints, `sweep check --schema` and the resolved dump, so none of
 * them can drift from the others. ytree.c reads the YAML; this file gives
 * the tree its meaning.
 *
 * Loading runs in two passes over the tree:
 *   A. the whole file as written: every value is type-checked where it
 *      stands, experiment-level defaults are filled in, variants are listed;
 *   B. per variant: the base server/bench/metrics with the variant's
 *      overrides merged on top (maps merge, lists and scalars replace), then
 *      decoded with defaults, required keys and cross-key rules.
 * Every error is one line "file:line:col: message" (code RN_ERR_USAGE).
 */
#include "config/experiment.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sweep.h"
#include "client/dataset.h"
#include "client/lengths.h"
#include "config/expr.h"
#include "config/matrix.h"
#include "config/schema.h"
#include "analysis/extract.h"
#include "analysis/metric.h"
#include "client/scrape.h"
#include "store/results.h"
#include "fileio.h"
#include "strutil.h"
#include "config/tmpl.h"
#include "xalloc.h"
#include "config/ytree.h"

#define E RN_ERR_USAGE

struct dctx;
/* Section finishers (defined below), run once a section's keys and defaults are in. */
static int finish_bench(struct dctx *c, const struct ynode *map, int line, int col);
static int finish_metrics(struct dctx *c, const struct ynode *map, int line, int col);
static int finish_executor(struct dctx *c, const struct ynode *map, int line, int col);

/* Cross-key checks run after a section is decoded (and its defaults set). */
static const struct {
    const char *path;
    int (*fn)(struct dctx *c, const struct ynode *map, int line, int col);
} finishers[] = {
    {"bench", finish_bench},
    {"metrics", finish_metrics},
    {"executor", finish_executor},
};

/* Decoding state for one pass over one tree. */
struct dctx {
    const char *file;
    struct err *err;
    struct experiment *exp;                    /* experiment-level fields go here */
    struct exp_variant *var;                   /* variant-level fields go here */
    bool full_exp, full_var;                   /* apply defaults, required keys, cross-key rules */
    bool have_model;                           /* the merged server has a model (pass B) */
    const char *vname;                         /* variant name for messages; NULL: no variants */
    const struct ynode *grid, *conc, *prompts; /* grid-form nodes of the bench map */
    const struct ynode *rates;                 /* bench.rates, the open-loop list form */
    const struct ynode **variants;             /* pass A: the variant maps */
    const struct ynode *matrix;                /* pass A: the matrix map, NULL when none */
    size_t n_variants;
};

/* ---- small helpers ---- */

/* Record "file:line:col: message" as the error (the first one wins); returns -1. */
static int cerr(struct dctx *c, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int cerr(struct dctx *c, int line, int col, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    err_set(c->err, E, "%s:%d:%d: %s", c->file, line, col, msg);
    return -1;
}

/* " (variant 'x')" for rules that depend on the merged variant, else "". */
static const char *vsuffix(const struct dctx *c, char *buf, size_t size)
{
    if (!c->vname)
        return "";
    snprintf(buf, size, " (variant '%s')", c->vname);
    return buf;
}

#define QUOTE(n, q) ytree_quote((n)->text, (n)->len, (q), sizeof(q))

/* Experiment and variant names become folder names: [A-Za-z0-9._-]{1,64},
 * and not "." or ".." (or any run of dots). */
static bool name_ok(const char *s, size_t n)
{
    bool only_dots = true;
    if (n == 0 || n > SCHEMA_MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!isalnum(ch) && ch != '.' && ch != '_' && ch != '-')
            return false;
        only_dots = only_dots && ch == '.';
    }
    return !only_dots;
}

/* Variant names may also hold the '=' and ',' of the names a matrix makes
 * ("max-batch=8,quant=mxfp4"), up to SCHEMA_MAX_MATRIX_NAME bytes. */
static bool variant_name_ok(const char *s, size_t n)
{
    bool only_dots = true;
    if (n == 0 || n > SCHEMA_MAX_MATRIX_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!isalnum(ch) && ch != '.' && ch != '_' && ch != '-' && ch != '=' && ch != ',')
            return false;
        only_dots = only_dots && ch == '.';
    }
    return !only_dots;
}

/* "-1" or "2.5e3": a negative number is a flag value, not an option. */
static bool looks_like_number(const char *s)
{
    double d;
    return str_to_double(s, &d) == 0;
}

/* Shorthands for the table lookups that need the current experiment and variant. */
static char *base_of(const struct dctx *c, const struct schema_key *k)
{
    return schema_base(k, c->exp, c->var);
}

static bool when_holds(const struct dctx *c, const struct schema_key *k)
{
    return schema_when_holds(k, c->exp, c->var);
}

static void when_now(const struct dctx *c, const struct schema_key *k, char *out, size_t size)
{
    schema_when_now(k, c->exp, c->var, out, size);
}

/* ---- values ---- */

/* The node as a non-null scalar, or an error naming what k wants. */
static int want_scalar(struct dctx *c, const struct schema_key *k, const struct ynode *n,
                       const char *what)
{
    if (n->kind == Y_SCALAR && !ytree_is_null(n))
        return 0;
    return cerr(c, n->line, n->col, "'%s' wants %s, got %s", k->path, what, ytree_kind_name(n));
}

/* Strings are capped so that 64 variants of a 1 MiB file stay small in memory. */
static int check_length(struct dctx *c, const struct schema_key *k, const struct ynode *n,
                        size_t max)
{
    if (n->len <= max)
        return 0;
    return cerr(c, n->line, n->col, "'%s' is %zu bytes long; the limit is %zu", k->path, n->len,
                max);
}

/* Check a template for syntax and for variables that are not available. */
static int check_template(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    /* server templates cannot use per-point variables; ${model} needs a model
     * (known only in pass B, the merged view) and not inside the model itself */
    unsigned allowed = (k->flags & KF_SRV) ? TMPL_SERVER_SET : TMPL_ALL;
    char where[160];
    snprintf(where, sizeof(where), "'%s'", k->path);
    if (strcmp(k->path, "server.model") == 0) {
        allowed &= ~(1u << TMPL_MODEL);
        snprintf(where, sizeof(where), "'server.model' itself");
    } else if (c->full_var && !c->have_model) {
        allowed &= ~(1u << TMPL_MODEL);
        snprintf(where, sizeof(where), "'%s' because server.model is not set", k->path);
    }
    struct err e; /* tmpl knows nothing of positions: add the scalar's */
    err_init(&e);
    if (tmpl_check(n->text, allowed, where, &e, E) != 0)
        return cerr(c, n->line, n->col, "%s", e.msg);
    return 0;
}

/*
 * CWE-88: a positional value that starts with '-' becomes an option of the
 * server ("--model --config=/x"). Refused for the keys flagged KF_NODASH;
 * plan.c checks the expanded values again.
 */
static int check_nodash(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    char q[80];
    if ((k->flags & KF_NODASH) && n->text[0] == '-')
        return cerr(c, n->line, n->col,
                    "'%s' value '%s' starts with '-' and would be read as an option%s", k->path,
                    QUOTE(n, q), strcmp(k->path, "server.model") == 0 ? " (write './-...')" : "");
    return 0;
}

/* The string-valued types: check the value for its type, then store a copy. */
static int decode_string(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    char q[80], list[128];
    if (want_scalar(c, k, n, "a string") != 0)
        return -1;
    if (check_length(c, k, n, (k->flags & KF_VAR) ? SCHEMA_MAX_STRING : SCHEMA_MAX_TEXT) != 0 ||
        check_nodash(c, k, n) != 0)
        return -1;
    switch (k->type) {
    case K_TMPL:
        if (check_template(c, k, n) != 0)
            return -1;
        break;
    case K_NAME:
        if (!name_ok(n->text, n->len))
            return cerr(c, n->line, n->col,
                        "'%s' value '%s' is not a valid name (1 to %d of A-Z a-z 0-9 . _ -, not "
                        "only dots)",
                        k->path, QUOTE(n, q), SCHEMA_MAX_NAME);
        break;
    case K_HTTPPATH:
        if (n->text[0] != '/' || strpbrk(n->text, " \t\r\n?#"))
            return cerr(c, n->line, n->col,
                        "'%s' value '%s' is not an HTTP path (it starts with '/', no spaces)",
                        k->path, QUOTE(n, q));
        break;
    case K_CHOICE:
        if (schema_choice_index(k->choices, n->text) < 0)
            return cerr(c, n->line, n->col, "'%s' must be one of %s, got '%s'", k->path,
                        schema_choices_list(k->choices, list, sizeof(list)), QUOTE(n, q));
        break;
    default:
        break;
    }
    char **dst = (char **)(base_of(c, k) + k->off);
    free(*dst);
    *dst = xstrndup(n->text, n->len);
    return 0;
}

/* Enums, integers, numbers and ports. Quoted numbers are accepted as numbers:
 * "8" cannot mean anything else here. */
static int decode_number(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    char q[80], list[128];
    char *base = base_of(c, k);
    if (k->type == K_ENUM) {
        if (want_scalar(c, k, n, "a string") != 0)
            return -1;
        int i = schema_choice_index(k->choices, n->text);
        if (i < 0)
            return cerr(c, n->line, n->col, "'%s' must be one of %s, got '%s'", k->path,
                        schema_choices_list(k->choices, list, sizeof(list)), QUOTE(n, q));
        *(int *)(base + k->off) = i;
        return 0;
    }
    if (k->type == K_PORT) {
        long v;
        if (n->kind == Y_SCALAR && strcmp(n->text, "auto") == 0) {
            *(long *)(base + k->off) = 0;
            return 0;
        }
        if (want_scalar(c, k, n, "a port number or auto") != 0)
            return -1;
        if (str_to_long(n->text, &v) != 0 || v < 1 || v > 65535)
            return cerr(c, n->line, n->col, "'%s' must be auto or a port from 1 to 65535, got '%s'",
                        k->path, QUOTE(n, q));
        *(long *)(base + k->off) = v;
        return 0;
    }
    if (k->type == K_INT) {
        long v;
        if (want_scalar(c, k, n, "an integer") != 0)
            return -1;
        if (str_to_long(n->text, &v) != 0)
            return cerr(c, n->line, n->col, "'%s' wants an integer, got '%s'", k->path,
                        QUOTE(n, q));
        if (v < (long)k->min || v > (long)k->max)
            return cerr(c, n->line, n->col, "'%s' must be from %ld to %ld, got %ld", k->path,
                        (long)k->min, (long)k->max, v);
        *(long *)(base + k->off) = v;
        return 0;
    }
    double d;
    if (want_scalar(c, k, n, "a number") != 0)
        return -1;
    if (str_to_double(n->text, &d) != 0)
        return cerr(c, n->line, n->col, "'%s' wants a number, got '%s'", k->path, QUOTE(n, q));
    if (((k->flags & KF_GT) ? d <= k->min : d < k->min) || d > k->max)
        return cerr(c, n->line, n->col, "'%s' must be %s %g and at most %g, got %s", k->path,
                    (k->flags & KF_GT) ? "greater than" : "at least", k->min, k->max, n->text);
    *(double *)(base + k->off) = d;
    return 0;
}

/*
 * Lengths (K_LEN): an integer, the text form of lengths.h ("uniform:64:512"),
 * or a map {dist: uniform, min, max} / {dist: normal, mean, sd, min, max}.
 * The mean goes to the long at off (for ${input_len} and estimates), the
 * text form (NULL for a fixed length) to the string at off_n.
 */
static int decode_len(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    static const char *const fields[] = {"dist", "min", "max", "mean", "sd"};
    char q[80], text[200];
    const struct ynode *f[5] = {NULL};
    struct len_dist d;
    struct err e;
    if (n->kind == Y_MAP) {
        for (size_t i = 0; i + 1 < n->n; i += 2) {
            size_t j = 0;
            while (j < 5 && strcmp(n->kids[i]->text, fields[j]) != 0)
                j++;
            if (j == 5)
                return cerr(c, n->kids[i]->line, n->kids[i]->col,
                            "unknown key '%s' in '%s' (known keys here: dist, min, max, mean, sd)",
                            QUOTE(n->kids[i], q), k->path);
            f[j] = n->kids[i + 1];
            if (want_scalar(c, k, f[j], "numbers in its distribution") != 0)
                return -1;
        }
        const char *dist = f[0] ? f[0]->text : "";
        bool uni = strcmp(dist, "uniform") == 0, nor = strcmp(dist, "normal") == 0;
        if (!uni && !nor)
            return cerr(c, f[0] ? f[0]->line : n->line, f[0] ? f[0]->col : n->col,
                        "'%s.dist' must be uniform or normal, got '%s'", k->path,
                        f[0] ? QUOTE(f[0], q) : "nothing");
        if (uni && (!f[1] || !f[2] || f[3] || f[4]))
            return cerr(c, n->line, n->col, "'%s' with dist: uniform wants min and max (only)",
                        k->path);
        if (nor && (!f[3] || !f[4]))
            return cerr(c, n->line, n->col,
                        "'%s' with dist: normal wants mean and sd (min and max optional)", k->path);
        if (uni)
            snprintf(text, sizeof(text), "uniform:%.40s:%.40s", f[1]->text, f[2]->text);
        else
            snprintf(text, sizeof(text), "normal:%.40s:%.40s:%.40s%s%.40s", f[3]->text, f[4]->text,
                     f[1] ? f[1]->text : "1", f[2] ? ":" : "", f[2] ? f[2]->text : "");
    } else {
        if (want_scalar(c, k, n, "a length or a distribution") != 0)
            return -1;
        snprintf(text, sizeof(text), "%.190s", n->text);
    }
    err_init(&e);
    char what[64];
    snprintf(what, sizeof(what), "'%s'", k->path);
    if (len_parse(text, what, &d, &e, E) != 0)
        return cerr(c, n->line, n->col, "%s", e.msg);
    *(long *)(base_of(c, k) + k->off) = len_mean(&d);
    char **dist = (char **)(base_of(c, k) + k->off_n);
    free(*dist);
    *dist = NULL;
    if (d.kind != LEN_FIXED) {
        len_format(&d, text, sizeof(text));
        *dist = xstrdup(text);
    }
    return 0;
}

/* The node must be a map or a list (kind), of at most SCHEMA_MAX_ITEMS entries. */
static int want_kind(struct dctx *c, const struct schema_key *k, const struct ynode *n,
                     enum ykind kind)
{
    if (n->kind != kind)
        return cerr(c, n->line, n->col, "'%s' wants %s, got %s", k->path,
                    kind == Y_MAP ? "a map" : "a list", ytree_kind_name(n));
    if (n->n / (kind == Y_MAP ? 2 : 1) > SCHEMA_MAX_ITEMS)
        return cerr(c, n->line, n->col, "'%s' has %zu entries; the limit is %d", k->path,
                    n->n / (kind == Y_MAP ? 2 : 1), SCHEMA_MAX_ITEMS);
    return 0;
}

/* Lists of strings: templates (checked), metric names (checked per variant in
 * finish_metrics) or choices. */
static int decode_list(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    char q[80], list[128];
    struct strvec *sv = (struct strvec *)(base_of(c, k) + k->off);
    if (want_kind(c, k, n, Y_SEQ) != 0)
        return -1;
    strvec_release(sv);
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *it = n->kids[i];
        if (want_scalar(c, k, it, "a list of strings") != 0 ||
            check_length(c, k, it, SCHEMA_MAX_STRING) != 0)
            return -1;
        if (k->type == K_TMPLLIST && check_template(c, k, it) != 0)
            return -1;
        if (k->type == K_CHOICELIST && schema_choice_index(k->choices, it->text) < 0)
            return cerr(c, it->line, it->col, "'%s' entries must be among %s, got '%s'", k->path,
                        schema_choices_list(k->choices, list, sizeof(list)), QUOTE(it, q));
        strvec_push(sv, it->text);
    }
    return 0;
}

/* Flag names get "--" prepended, so they must not bring their own dashes. */
static bool flag_name_ok(const char *s)
{
    if (!isalnum((unsigned char)s[0]))
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
            return false;
    return true;
}

/* POSIX environment names: what a shell or execve user would expect. */
static bool env_name_ok(const char *s)
{
    if (!isalpha((unsigned char)s[0]) && s[0] != '_')
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

/* Metric names become CSV columns and JSON keys: keep them plain. */
static bool pattern_name_ok(const char *s)
{
    if (!*s || strlen(s) > SCHEMA_MAX_NAME)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

/* server.flags, server.env, metrics.patterns: maps of name -> string. */
static int decode_map(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    char q[80], q2[80];
    char *base = base_of(c, k);
    if (want_kind(c, k, n, Y_MAP) != 0)
        return -1;
    size_t count = n->n / 2;
    struct exp_kv *kv = NULL;
    struct exp_pattern *pat = NULL;
    if (k->type == K_PATTERNS)
        pat = xcalloc(count ? count : 1, sizeof(*pat));
    else
        kv = xcalloc(count ? count : 1, sizeof(*kv));
    size_t done = 0;
    int rc = -1;
    for (; done < count; done++) {
        const struct ynode *key = n->kids[2 * done], *val = n->kids[2 * done + 1];
        const char *name = key->text;
        if (k->type == K_FLAGS && !flag_name_ok(name)) {
            cerr(c, key->line, key->col,
                 "'%s' key '%s' is not a flag name (letters, digits, '.', '_', '-'; no leading "
                 "'-': sweep adds '--')",
                 k->path, QUOTE(key, q));
            goto out;
        }
        if (k->type == K_ENV && !env_name_ok(name)) {
            cerr(c, key->line, key->col,
                 "'%s' key '%s' is not an environment variable name (letters, digits, '_')",
                 k->path, QUOTE(key, q));
            goto out;
        }
        if (k->type == K_PATTERNS && !pattern_name_ok(name)) {
            cerr(c, key->line, key->col,
                 "'%s' key '%s' is not a metric name (letters, digits, '_')", k->path,
                 QUOTE(key, q));
            goto out;
        }
        if (k->type == K_PATTERNS && res_is_fixed_column(name)) {
            cerr(c, key->line, key->col,
                 "'%s' key '%s' is a column of points.csv already (%s); give the metric another "
                 "name",
                 k->path, QUOTE(key, q), res_fixed_columns_list());
            goto out;
        }
        if (want_scalar(c, k, val, "string values") != 0 ||
            check_length(c, k, val, SCHEMA_MAX_STRING) != 0)
            goto out;
        if ((k->flags & (KF_SRV | KF_CLI)) && check_template(c, k, val) != 0)
            goto out;
        if (k->type == K_FLAGS && val->text[0] == '-' && !looks_like_number(val->text)) {
            cerr(c, val->line, val->col,
                 "'%s' value '%s' for '%s' starts with '-' and would be read as an option", k->path,
                 QUOTE(val, q), QUOTE(key, q2));
            goto out;
        }
        if (k->type == K_PATTERNS) {
            struct err e;
            err_init(&e);
            if (ext_regex_check(val->text, &e) != 0) {
                cerr(c, val->line, val->col, "'%s' pattern '%s': %s", k->path, QUOTE(key, q),
                     e.msg);
                goto out;
            }
            pat[done].name = xstrdup(name);
            pat[done].regex = xstrdup(val->text);
        } else {
            kv[done].key = xstrdup(name);
            kv[done].value = xstrdup(val->text);
            kv[done].line = val->line;
            kv[done].col = val->col;
        }
    }
    rc = 0;
out:
    if (rc != 0) {
        for (size_t i = 0; i < done; i++) {
            if (pat) {
                free(pat[i].name);
                free(pat[i].regex);
            } else {
                free(kv[i].key);
                free(kv[i].value);
            }
        }
        free(pat);
        free(kv);
        return -1;
    }
    /* replace what was there (nothing, in a fresh struct) */
    if (pat)
        *(struct exp_pattern **)(base + k->off) = pat;
    else
        *(struct exp_kv **)(base + k->off) = kv;
    *(size_t *)(base + k->off_n) = count;
    return 0;
}

/* ---- the grid ---- */

/* Digits only (no sign, no blanks), within [1, max]. */
static int parse_count(const char *s, size_t n, long max, long *out)
{
    long v = 0;
    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
        if (v > max)
            return -1;
    }
    if (v < 1)
        return -1;
    *out = v;
    return 0;
}

/* Append a point unless it is already there (grids hold at most a few
 * thousand points, so a linear scan is fine). */
static void grid_add(struct exp_bench *b, size_t *cap, long conc, long prompts, double rate)
{
    if (rate > 0) /* the in-flight cap of an open-loop point */
        conc = prompts < SCHEMA_RATE_CAP ? prompts : SCHEMA_RATE_CAP;
    for (size_t i = 0; i < b->n_grid; i++)
        if (b->grid[i].concurrency == conc && b->grid[i].prompts == prompts &&
            b->grid[i].rate == rate)
            return; /* duplicates are dropped, first one kept */
    XGROW(b->grid, *cap, b->n_grid + 1);
    b->grid[b->n_grid++] = (struct exp_point){conc, prompts, rate};
}

/* A rate: a number > 0 and at most SCHEMA_MAX_RATE req/s. */
static int parse_rate(const char *s, size_t n, double *out)
{
    double v;
    if (str_to_double_n(s, n, &v) != 0 || !(v > 0) || v > SCHEMA_MAX_RATE)
        return -1;
    *out = v;
    return 0;
}

/* A grid entry written as {concurrency: C, prompts: P}. */
static int grid_entry_map(struct dctx *c, const struct ynode *it, long *conc, long *prompts)
{
    char q[80];
    const struct ynode *cn = NULL, *pn = NULL;
    for (size_t j = 0; j + 1 < it->n; j += 2) {
        const struct ynode *key = it->kids[j];
        static const char *const names[] = {"concurrency", "prompts", NULL};
        if (strcmp(key->text, "concurrency") == 0) {
            cn = it->kids[j + 1];
        } else if (strcmp(key->text, "prompts") == 0) {
            pn = it->kids[j + 1];
        } else {
            const char *hint = str_suggest(key->text, names);
            if (hint)
                return cerr(c, key->line, key->col,
                            "unknown key '%s' in a grid entry (did you mean '%s'?)", QUOTE(key, q),
                            hint);
            return cerr(c, key->line, key->col,
                        "unknown key '%s' in a grid entry (want concurrency and prompts)",
                        QUOTE(key, q));
        }
    }
    if (!cn || !pn)
        return cerr(c, it->line, it->col, "bad grid entry: missing '%s'",
                    cn ? "prompts" : "concurrency");
    if (cn->kind != Y_SCALAR || parse_count(cn->text, cn->len, SCHEMA_MAX_CONC, conc) != 0)
        return cerr(c, cn->line, cn->col,
                    "bad grid entry: concurrency must be a whole number from 1 to %d",
                    SCHEMA_MAX_CONC);
    if (pn->kind != Y_SCALAR || parse_count(pn->text, pn->len, SCHEMA_MAX_PROMPTS, prompts) != 0)
        return cerr(c, pn->line, pn->col,
                    "bad grid entry: prompts must be a whole number from 1 to %ld",
                    SCHEMA_MAX_PROMPTS);
    return 0;
}

/* bench.grid: check every entry now; the points are made in finish_bench. */
static int check_grid(struct dctx *c, const struct schema_key *k, const struct ynode *n,
                      struct exp_bench *b, size_t *cap)
{
    char q[80];
    if (want_kind(c, k, n, Y_SEQ) != 0)
        return -1;
    if (n->n == 0)
        return cerr(c, n->line, n->col, "'%s' is empty; list at least one point", k->path);
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *it = n->kids[i];
        long conc = 0, prompts;
        double rate = 0;
        if (it->kind == Y_MAP) {
            if (grid_entry_map(c, it, &conc, &prompts) != 0)
                return -1;
        } else if (it->kind == Y_SCALAR && it->len > 0 && it->text[0] == 'r') {
            /* "r2.5:64": 2.5 req/s offered, 64 prompts */
            const char *colon = memchr(it->text, ':', it->len);
            size_t rl = colon ? (size_t)(colon - it->text) - 1 : 0;
            if (!colon || parse_rate(it->text + 1, rl, &rate) != 0)
                return cerr(c, it->line, it->col,
                            "bad grid entry '%s': want 'rRATE:PROMPTS' with RATE > 0 and at most "
                            "%g req/s, e.g. 'r2:64'",
                            QUOTE(it, q), SCHEMA_MAX_RATE);
            if (parse_count(colon + 1, it->len - rl - 2, SCHEMA_MAX_PROMPTS, &prompts) != 0)
                return cerr(c, it->line, it->col,
                            "bad grid entry '%s': prompts must be a whole number from 1 to %ld",
                            QUOTE(it, q), SCHEMA_MAX_PROMPTS);
        } else if (it->kind == Y_SCALAR && !ytree_is_null(it)) {
            const char *colon = memchr(it->text, ':', it->len);
            if (!colon)
                return cerr(c, it->line, it->col,
                            "bad grid entry '%s': want 'CONCURRENCY:PROMPTS', e.g. '16:48'",
                            QUOTE(it, q));
            size_t cl = (size_t)(colon - it->text);
            if (parse_count(it->text, cl, SCHEMA_MAX_CONC, &conc) != 0)
                return cerr(c, it->line, it->col,
                            "bad grid entry '%s': concurrency must be a whole number from 1 to %d",
                            QUOTE(it, q), SCHEMA_MAX_CONC);
            if (parse_count(colon + 1, it->len - cl - 1, SCHEMA_MAX_PROMPTS, &prompts) != 0)
                return cerr(c, it->line, it->col,
                            "bad grid entry '%s': prompts must be a whole number from 1 to %ld",
                            QUOTE(it, q), SCHEMA_MAX_PROMPTS);
        } else {
            return cerr(c, it->line, it->col,
                        "bad grid entry: want 'CONCURRENCY:PROMPTS' or {concurrency: C, prompts: "
                        "P}, got %s",
                        ytree_kind_name(it));
        }
        if (b)
            grid_add(b, cap, conc, prompts, rate);
    }
    return 0;
}

/* bench.concurrency: a non-empty list of whole numbers in range. */
static int check_conc_list(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    char q[80];
    if (want_kind(c, k, n, Y_SEQ) != 0)
        return -1;
    if (n->n == 0)
        return cerr(c, n->line, n->col, "'%s' is empty; list at least one concurrency", k->path);
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *it = n->kids[i];
        long v;
        if (it->kind != Y_SCALAR)
            return cerr(c, it->line, it->col, "'%s' entries must be whole numbers, got %s", k->path,
                        ytree_kind_name(it));
        if (parse_count(it->text, it->len, SCHEMA_MAX_CONC, &v) != 0)
            return cerr(c, it->line, it->col,
                        "'%s' entries must be whole numbers from 1 to %d, got '%s'", k->path,
                        SCHEMA_MAX_CONC, QUOTE(it, q));
    }
    return 0;
}

/* bench.rates: a non-empty list of rates in range. */
static int check_rate_list(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    char q[80];
    double v;
    if (want_kind(c, k, n, Y_SEQ) != 0)
        return -1;
    if (n->n == 0)
        return cerr(c, n->line, n->col, "'%s' is empty; list at least one rate", k->path);
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *it = n->kids[i];
        if (it->kind != Y_SCALAR || parse_rate(it->text, it->len, &v) != 0)
            return cerr(c, it->line, it->col,
                        "'%s' entries must be numbers above 0 and at most %g (req/s), got '%s'",
                        k->path, SCHEMA_MAX_RATE,
                        it->kind == Y_SCALAR ? QUOTE(it, q) : ytree_kind_name(it));
    }
    return 0;
}

/* prompts for concurrency conc: a constant or the expression, rounded up. */
static int eval_prompts(struct dctx *c, const struct ynode *n, double conc, long *out,
                        bool syntax_only)
{
    char q[80];
    long v;
    if (str_to_long(n->text, &v) == 0) { /* a constant is the common case */
        if (v < 1 || v > SCHEMA_MAX_PROMPTS)
            return cerr(c, n->line, n->col, "'bench.prompts' must be from 1 to %ld, got %ld",
                        SCHEMA_MAX_PROMPTS, v);
        *out = v;
        return 0;
    }
    struct err e;
    double d;
    err_init(&e);
    enum expr_status st = expr_eval(n->text, conc, &d, &e, E);
    if (st == EXPR_SYNTAX)
        return cerr(c, n->line, n->col, "bad prompts expression '%s': %s", QUOTE(n, q), e.msg);
    if (st == EXPR_VALUE && !syntax_only)
        return cerr(c, n->line, n->col, "prompts expression '%s' has no value for c=%g: %s",
                    QUOTE(n, q), conc, e.msg);
    if (syntax_only)
        return 0;
    /* round up, forgiving binary noise such as 0.1*30 = 3.0000000000000004 */
    double up = ceil(d - 1e-9 * fmax(1.0, fabs(d))); /* 1e-9 relative slack */
    if (up < 1 || up > (double)SCHEMA_MAX_PROMPTS)
        return cerr(c, n->line, n->col,
                    "prompts expression '%s' gives %g for c=%g; it must give 1 to %ld", QUOTE(n, q),
                    d, conc, SCHEMA_MAX_PROMPTS);
    *out = (long)up;
    return 0;
}

/* bench.prompts on its own: only syntax can be checked before the
 * concurrencies are known (a variant may supply them). */
static int check_prompts(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    long dummy;
    if (want_scalar(c, k, n, "an integer or an expression in c") != 0 ||
        check_length(c, k, n, 256) != 0)
        return -1;
    return eval_prompts(c, n, 1, &dummy, true);
}

/* ---- sections ---- */

/* Decode one value by its key's type: the single switch that every key goes
 * through (defaults too, parsed from the table's YAML text). */
static int decode_value(struct dctx *c, const struct schema_key *k, const struct ynode *n);

/*
 * An unknown key: suggest a close sibling ("concurency" -> "concurrency"),
 * else the same key in another section ("port" in bench -> server.port),
 * else list the keys that are allowed here.
 */
static int unknown_key(struct dctx *c, const char *path, const struct ynode *key)
{
    char q[80];
    const char *cands[SCHEMA_MAX_KEYS + 1];
    size_t nc = 0;
    for (size_t i = 0; i < schema_n_keys; i++)
        if (schema_is_child(&schema_keys[i], path))
            cands[nc++] = schema_leaf(schema_keys[i].path);
    cands[nc] = NULL;
    const char *hint = str_suggest(key->text, cands);
    QUOTE(key, q);
    char where[80] = "";
    if (*path)
        snprintf(where, sizeof(where), " in '%s'", path);
    if (hint)
        return cerr(c, key->line, key->col, "unknown key '%s'%s (did you mean '%s'?)", q, where,
                    hint);
    for (size_t i = 0; i < schema_n_keys; i++) /* a key put in the wrong section */
        if (strcmp(schema_leaf(schema_keys[i].path), key->text) == 0 &&
            schema_keys[i].path[0] != 'v')
            return cerr(c, key->line, key->col, "unknown key '%s'%s (did you mean '%s'?)", q, where,
                        schema_keys[i].path);
    char known[400];
    size_t o = 0;
    for (size_t i = 0; i < nc && o < sizeof(known); i++)
        o += (size_t)snprintf(known + o, sizeof(known) - o, "%s%s", i ? ", " : "", cands[i]);
    return cerr(c, key->line, key->col, "unknown key '%s'%s (known keys here: %s)", q, where,
                known);
}

/*
 * Decode map (NULL when the section is absent) as section path; line/col
 * locate "missing key" errors. Absent keys get their defaults, then
 * required and only-when rules are checked, then the section's finisher.
 */
static int decode_section(struct dctx *c, const struct ynode *map, const char *path, int line,
                          int col)
{
    char full[96], vs[96], now[96];
    bool seen[SCHEMA_MAX_KEYS] = {false};
    if (map) {
        line = map->line;
        col = map->col;
    }
    if (strcmp(path, "bench") == 0)
        c->grid = c->conc = c->prompts = c->rates = NULL;
    /* the keys as written, in file order (so the first bad one is reported) */
    for (size_t i = 0; map && i + 1 < map->n; i += 2) {
        const struct ynode *key = map->kids[i], *val = map->kids[i + 1];
        snprintf(full, sizeof(full), "%s%s%.40s", path, *path ? "." : "", key->text);
        const struct schema_key *k = key->len <= 40 ? schema_find(full) : NULL;
        if (!k || !schema_is_child(k, path))
            return unknown_key(c, path, key);
        seen[k - schema_keys] = true;
        if (decode_value(c, k, val) != 0)
            return -1;
    }
    /* defaults for what is absent (only in a full pass: pass A must not fill in
     * what a variant may still provide), then the rules that need the whole
     * section */
    for (size_t i = 0; i < schema_n_keys; i++) {
        const struct schema_key *k = &schema_keys[i];
        bool full_mode = (k->flags & KF_VAR) ? c->full_var : c->full_exp;
        if (!schema_is_child(k, path) || seen[i] || !full_mode || k->type == K_VARIANTS)
            continue;
        if (k->type == K_SECTION) {
            if (decode_section(c, NULL, k->path, line, col) != 0)
                return -1;
        } else if (k->def) {
            struct ynode *d;
            struct err e;
            err_init(&e);
            if (ytree_parse("(default)", k->def, strlen(k->def), 4, &d, &e, E) != 0)
                return cerr(c, line, col, "internal error: bad default for '%s'", k->path);
            int r = decode_value(c, k, d);
            ytree_free(d);
            if (r != 0)
                return -1;
        }
    }
    /* an empty list counts as not given: a variant clears a base command with [] */
    for (size_t i = 0; i < schema_n_keys; i++) {
        const struct schema_key *k = &schema_keys[i];
        bool full_mode = (k->flags & KF_VAR) ? c->full_var : c->full_exp;
        if (!schema_is_child(k, path) || !full_mode)
            continue;
        const struct ynode *n = ytree_get(map, schema_leaf(k->path));
        bool given = seen[i] && !(n && n->kind == Y_SEQ && n->n == 0);
        if ((k->flags & KF_REQ) && !given && (!k->when || when_holds(c, k))) {
            char need[128] = "";
            if (k->when) {
                when_now(c, k, now, sizeof(now));
                snprintf(need, sizeof(need), " (needed when %s)", now);
            }
            if (seen[i])
                return cerr(c, n->line, n->col, "'%s' is empty%s%s", k->path, need,
                            vsuffix(c, vs, sizeof(vs)));
            return cerr(c, line, col, "missing required key '%s'%s%s", k->path, need,
                        vsuffix(c, vs, sizeof(vs)));
        }
        if ((k->flags & KF_ONLY) && given && !when_holds(c, k)) {
            const char *eq = strchr(k->when, '=');
            when_now(c, k, now, sizeof(now));
            return cerr(c, n ? n->line : line, n ? n->col : col,
                        "'%s' only applies when %.*s is %s, but %s%s", k->path, (int)(eq - k->when),
                        k->when, eq + 1, now, vsuffix(c, vs, sizeof(vs)));
        }
    }
    for (size_t i = 0; i < sizeof(finishers) / sizeof(finishers[0]); i++)
        if (strcmp(finishers[i].path, path) == 0)
            return finishers[i].fn(c, map, line, col);
    return 0;
}

/* ---- matrix: {dotted.key: [values]} -> one variant per combination ---- */

static int check_matrix(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    char q[80], full[160];
    size_t combos = 1;
    if (want_kind(c, k, n, Y_MAP) != 0)
        return -1;
    if (n->n == 0)
        return cerr(c, n->line, n->col, "'matrix' is empty; give at least one key: [values]");
    if (n->n / 2 > SCHEMA_MAX_MATRIX_KEYS)
        return cerr(c, n->line, n->col, "'matrix' has %zu keys; the limit is %d", n->n / 2,
                    SCHEMA_MAX_MATRIX_KEYS);
    for (size_t i = 0; i + 1 < n->n; i += 2) {
        const struct ynode *key = n->kids[i], *vals = n->kids[i + 1];
        if (key->len > 100 || !mx_target(key->text, full, sizeof(full)))
            return cerr(c, key->line, key->col,
                        "'matrix' key '%s' names no setting a variant may change (e.g. "
                        "flags.max-batch, server.env.X, bench.output_len)",
                        QUOTE(key, q));
        if (want_kind(c, k, vals, Y_SEQ) != 0)
            return -1;
        if (vals->n == 0)
            return cerr(c, vals->line, vals->col, "'matrix' key '%s' has no values", QUOTE(key, q));
        for (size_t j = 0; j < vals->n; j++) {
            if (!mx_value_ok(vals->kids[j]))
                return cerr(c, vals->kids[j]->line, vals->kids[j]->col,
                            "'matrix' values name variants: 1 to 32 of A-Z a-z 0-9 . _ -, got %s",
                            vals->kids[j]->kind == Y_SCALAR ? QUOTE(vals->kids[j], q)
                                                            : ytree_kind_name(vals->kids[j]));
            for (size_t m = 0; m < j; m++)
                if (strcmp(vals->kids[m]->text, vals->kids[j]->text) == 0)
                    return cerr(c, vals->kids[j]->line, vals->kids[j]->col,
                                "'matrix' key '%s' lists '%s' twice", QUOTE(key, q),
                                vals->kids[j]->text);
        }
        combos *= vals->n;
        if (combos > SCHEMA_MAX_VARIANTS)
            return cerr(c, n->line, n->col, "'matrix' makes more than %d variants",
                        SCHEMA_MAX_VARIANTS);
    }
    return 0;
}

/* Defined below; the value decoder dispatches to it for `variants`. */
static int decode_variants(struct dctx *c, const struct schema_key *k, const struct ynode *n);

static int decode_value(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    switch (k->type) {
    case K_SECTION:
        if (n->kind != Y_MAP)
            return cerr(c, n->line, n->col, "'%s' wants a map, got %s", k->path,
                        ytree_kind_name(n));
        return decode_section(c, n, k->path, n->line, n->col);
    case K_STR:
    case K_TMPL:
    case K_NAME:
    case K_HTTPPATH:
    case K_CHOICE:
    case K_METRIC:
        return decode_string(c, k, n);
    case K_ENUM:
    case K_INT:
    case K_NUM:
    case K_PORT:
        return decode_number(c, k, n);
    case K_TMPLLIST:
    case K_METRICLIST:
    case K_CHOICELIST:
    case K_STRLIST:
        return decode_list(c, k, n);
    case K_FLAGS:
    case K_ENV:
    case K_PATTERNS:
        return decode_map(c, k, n);
    case K_GRID:
        c->grid = n;
        return check_grid(c, k, n, NULL, NULL);
    case K_CONCLIST:
        c->conc = n;
        return check_conc_list(c, k, n);
    case K_PROMPTS:
        c->prompts = n;
        return check_prompts(c, k, n);
    case K_RATELIST:
        c->rates = n;
        return check_rate_list(c, k, n);
    case K_VARIANTS:
        return decode_variants(c, k, n);
    case K_LEN:
        return decode_len(c, k, n);
    case K_MATRIX:
        c->matrix = n;
        return check_matrix(c, k, n);
    }
    return 0;
}

/*
 * bench.dataset in a full pass: a path exactly when the kind reads a file,
 * and the builtin client only. The file itself is read by the plan (like
 * the model), so a saved experiment.yaml loads without it.
 */
static int check_dataset(struct dctx *c, const struct ynode *map, int line, int col)
{
    char vs[96];
    struct exp_bench *b = &c->var->bench;
    const struct ynode *dn = ytree_get(map, "dataset");
    const struct ynode *pn = ytree_get(dn, "path");
    const struct ynode *at = pn ? pn : dn ? dn : map;
    if (at) {
        line = at->line;
        col = at->col;
    }
    if (b->dataset_path && !*b->dataset_path) { /* "" clears a base's path (a variant's choice) */
        free(b->dataset_path);
        b->dataset_path = NULL;
    }
    if (b->dataset_kind > DS_SHAREGPT) { /* a generated workload (client/workload.h) */
        static const char *const names[] = {"shared-prefix", "multi-turn", "trace"};
        const char *kind = names[(b->dataset_kind - DS_SHAREGPT - 1) % 3];
        if (b->tool != EXP_TOOL_BUILTIN)
            return cerr(c, line, col, "'bench.dataset.kind' %s needs tool: builtin%s", kind,
                        vsuffix(c, vs, sizeof(vs)));
        if (b->dataset_kind == DS_SHAREGPT + 3 && !b->dataset_path)
            return cerr(c, line, col,
                        "missing required key 'bench.dataset.path' (the trace, needed when "
                        "bench.dataset.kind is trace)%s",
                        vsuffix(c, vs, sizeof(vs)));
        if (b->dataset_kind != DS_SHAREGPT + 3 && b->dataset_path)
            return cerr(c, line, col,
                        "'bench.dataset.path' does not apply to kind %s (it generates its "
                        "prompts)%s",
                        kind, vsuffix(c, vs, sizeof(vs)));
        return 0;
    }
    if (b->dataset_kind == DS_RANDOM && b->dataset_path)
        return cerr(c, line, col,
                    "'bench.dataset.path' needs 'bench.dataset.kind' jsonl or sharegpt (it is "
                    "random)%s",
                    vsuffix(c, vs, sizeof(vs)));
    if (b->dataset_kind == DS_RANDOM)
        return 0;
    if (!b->dataset_path)
        return cerr(c, line, col,
                    "missing required key 'bench.dataset.path' (needed when "
                    "bench.dataset.kind is %s)%s",
                    ds_kind_name(b->dataset_kind), vsuffix(c, vs, sizeof(vs)));
    if (b->tool != EXP_TOOL_BUILTIN)
        return cerr(c, line, col,
                    "'bench.dataset' only applies when tool is builtin (give a command client "
                    "its file in bench.command)%s",
                    vsuffix(c, vs, sizeof(vs)));
    return 0;
}

/* bench: exactly one grid form; in a full pass, the points themselves. */
static int finish_bench(struct dctx *c, const struct ynode *map, int line, int col)
{
    char vs[96];
    struct exp_bench *b = &c->var->bench;
    /* both forms in one map is an error in any pass; across base and variant
     * the merge already dropped the base's other form */
    if (c->grid && (c->conc || c->prompts || c->rates)) {
        const struct ynode *other = c->conc ? c->conc : c->rates ? c->rates : c->prompts;
        return cerr(c, other->line, other->col,
                    "'bench.grid' and 'bench.%s' are two ways to give the points; use one%s",
                    c->conc    ? "concurrency"
                    : c->rates ? "rates"
                               : "prompts",
                    vsuffix(c, vs, sizeof(vs)));
    }
    if (!c->full_var) /* pass A: a variant may still complete the grid */
        return 0;
    if (check_dataset(c, map, line, col) != 0)
        return -1;
    if (c->conc && !c->prompts)
        return cerr(c, c->conc->line, c->conc->col,
                    "'bench.concurrency' needs 'bench.prompts' (an integer, or an expression in c "
                    "such as \"max(8, 2*c)\")%s",
                    vsuffix(c, vs, sizeof(vs)));
    if (c->rates && !c->prompts)
        return cerr(c, c->rates->line, c->rates->col,
                    "'bench.rates' needs 'bench.prompts' (an integer, or an expression in c, the "
                    "rate, such as \"max(16, 10*c)\")%s",
                    vsuffix(c, vs, sizeof(vs)));
    if (c->prompts && !c->conc && !c->rates)
        return cerr(c, c->prompts->line, c->prompts->col,
                    "'bench.prompts' needs 'bench.concurrency' (the list of concurrencies)%s",
                    vsuffix(c, vs, sizeof(vs)));
    if (!c->grid && !c->conc && !c->rates)
        return cerr(c, map ? map->line : line, map ? map->col : col,
                    "missing the grid: give 'bench.grid' (e.g. [\"1:8\", \"16:48\"]) or "
                    "'bench.concurrency' with 'bench.prompts'%s",
                    vsuffix(c, vs, sizeof(vs)));
    size_t cap = 0;
    free(b->grid);
    b->grid = NULL;
    b->n_grid = 0;
    if (c->grid)
        return check_grid(c, schema_find("bench.grid"), c->grid, b, &cap);
    /* concurrency list: one point per entry, prompts evaluated for each c */
    for (size_t i = 0; c->conc && i < c->conc->n; i++) {
        long conc, prompts;
        parse_count(c->conc->kids[i]->text, c->conc->kids[i]->len, SCHEMA_MAX_CONC, &conc);
        if (eval_prompts(c, c->prompts, conc, &prompts, false) != 0)
            return -1;
        grid_add(b, &cap, conc, prompts, 0);
    }
    /* rate list: the same, with the rate as c */
    for (size_t i = 0; c->rates && i < c->rates->n; i++) {
        double rate = 0;
        long prompts;
        parse_rate(c->rates->kids[i]->text, c->rates->kids[i]->len, &rate);
        if (eval_prompts(c, c->prompts, rate, &prompts, false) != 0)
            return -1;
        grid_add(b, &cap, 0, prompts, rate);
    }
    return 0;
}

/* Is name canonical or defined by a pattern of variant v? */
static bool metric_known(const struct exp_variant *v, const char *name)
{
    if (metric_find(name))
        return true;
    for (size_t i = 0; v && i < v->metrics.n_patterns; i++)
        if (strcmp(v->metrics.patterns[i].name, name) == 0)
            return true;
    return false;
}

/* "unknown metric 'x' (did you mean ...)" over canonical and pattern names. */
static int unknown_metric(struct dctx *c, const struct ynode *n, const char *where,
                          const struct exp_variant *const *vars, size_t n_vars)
{
    char q[80];
    const char *const *canon = metric_names();
    size_t n_canon = 0, n_pat = 0;
    while (canon[n_canon])
        n_canon++;
    for (size_t i = 0; i < n_vars; i++)
        n_pat += vars[i]->metrics.n_patterns;
    const char **cands = xcalloc(n_canon + n_pat + 1, sizeof(*cands));
    size_t k = 0;
    for (size_t i = 0; i < n_canon; i++)
        cands[k++] = canon[i];
    for (size_t i = 0; i < n_vars; i++)
        for (size_t j = 0; j < vars[i]->metrics.n_patterns; j++)
            cands[k++] = vars[i]->metrics.patterns[j].name;
    const char *hint = str_suggest(n->text, cands);
    if (hint)
        cerr(c, n->line, n->col, "unknown metric '%s' in '%s' (did you mean '%s'?)", QUOTE(n, q),
             where, hint);
    else
        cerr(c, n->line, n->col,
             "unknown metric '%s' in '%s' (use a canonical name, see `sweep extract --help`, "
             "or define it in metrics.patterns)",
             QUOTE(n, q), where);
    free(cands);
    return -1;
}

/* metrics: every required name must be known in this variant. */
static int finish_metrics(struct dctx *c, const struct ynode *map, int line, int col)
{
    (void)line;
    (void)col;
    if (!c->full_var)
        return 0;
    const struct ynode *req = ytree_get(map, "require");
    const struct exp_variant *v = c->var;
    for (size_t i = 0; req && i < req->n; i++)
        if (!metric_known(v, req->kids[i]->text))
            return unknown_metric(c, req->kids[i], "metrics.require", &v, 1);
    for (size_t i = 0; i < v->metrics.n_server_map; i++) {
        const struct exp_kv *kv = &v->metrics.server_map[i];
        struct err e;
        err_init(&e);
        if (strncmp(kv->key, "server_", 7) != 0 || !kv->key[7])
            return cerr(c, kv->line, kv->col,
                        "'metrics.server_map' key '%s' must start with 'server_' (it names a "
                        "points.csv column)",
                        kv->key);
        if (scrape_expr_check(kv->value, &e) != 0)
            return cerr(c, kv->line, kv->col, "'metrics.server_map' '%s': %s", kv->key, e.msg);
    }
    return 0;
}

/* executor: options are ssh's or sbatch's, so a local executor has none. */
static int finish_executor(struct dctx *c, const struct ynode *map, int line, int col)
{
    const struct ynode *opts = ytree_get(map, "options");
    if (!c->full_exp || c->exp->executor.kind != EXP_EXEC_LOCAL || !opts ||
        (opts->kind == Y_SEQ && opts->n == 0))
        return 0;
    (void)line;
    (void)col;
    return cerr(c, opts->line, opts->col,
                "'executor.options' only applies when kind is ssh or slurm, but kind is local");
}

/* Pass A: the variants list; each entry's name, and its top-level keys. */
static int decode_variants(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    char q[80];
    static const char *const allowed[] = {"name", "server", "bench", "metrics", NULL};
    if (want_kind(c, k, n, Y_SEQ) != 0)
        return -1;
    if (n->n == 0)
        return cerr(c, n->line, n->col,
                    "'variants' is empty; list at least one variant or remove the key");
    if (n->n > SCHEMA_MAX_VARIANTS)
        return cerr(c, n->line, n->col, "'variants' has %zu entries; the limit is %d", n->n,
                    SCHEMA_MAX_VARIANTS);
    const struct schema_key *kname = schema_find("variants[].name");
    c->variants = xcalloc(n->n, sizeof(*c->variants));
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *v = n->kids[i], *name = NULL;
        if (v->kind != Y_MAP)
            return cerr(c, v->line, v->col, "a variant must be a map with a name, got %s",
                        ytree_kind_name(v));
        for (size_t j = 0; j + 1 < v->n; j += 2) {
            const struct ynode *key = v->kids[j];
            bool ok = false;
            for (size_t a = 0; allowed[a]; a++)
                ok = ok || strcmp(allowed[a], key->text) == 0;
            if (!ok) {
                const char *hint = str_suggest(key->text, allowed);
                return cerr(c, key->line, key->col, "unknown key '%s' in a variant (%s%s%s)",
                            QUOTE(key, q),
                            hint ? "did you mean '"
                                 : "a variant may set name, server, bench, "
                                   "metrics",
                            hint ? hint : "", hint ? "'?" : "");
            }
            if (strcmp(key->text, "name") == 0)
                name = v->kids[j + 1];
        }
        if (!name)
            return cerr(c, v->line, v->col, "missing required key 'name' in variant %zu", i + 1);
        if (want_scalar(c, kname, name, "a string") != 0)
            return -1;
        if (!variant_name_ok(name->text, name->len))
            return cerr(c, name->line, name->col,
                        "variant name '%s' is not a valid name (1 to %d of A-Z a-z 0-9 . _ - = "
                        ", not only dots)",
                        QUOTE(name, q), SCHEMA_MAX_MATRIX_NAME);
        for (size_t j = 0; j < i; j++) {
            const struct ynode *other = ytree_get(c->variants[j], "name");
            if (strcmp(other->text, name->text) == 0)
                return cerr(c, name->line, name->col,
                            "duplicate variant name '%s' (first at %d:%d)", QUOTE(name, q),
                            other->line, other->col);
        }
        c->variants[c->n_variants++] = v;
    }
    return 0;
}

/* ---- merging variants ---- */

/*
 * Put base's pairs, then over's, into shell: maps on both sides merge
 * (recursively), anything else from over replaces. In bench, giving one
 * grid form in the override drops the other form from the base.
 */
static void merge_into(struct ynode *shell, const struct ynode *base, const struct ynode *over,
                       bool is_bench)
{
    bool over_grid = is_bench && ytree_get(over, "grid");
    bool over_list = is_bench && (ytree_get(over, "concurrency") || ytree_get(over, "prompts") ||
                                  ytree_get(over, "rates"));
    for (size_t i = 0; base && i + 1 < base->n; i += 2) {
        const char *k = base->kids[i]->text;
        if ((over_grid && (strcmp(k, "concurrency") == 0 || strcmp(k, "prompts") == 0 ||
                           strcmp(k, "rates") == 0)) ||
            (over_list && strcmp(k, "grid") == 0))
            continue;
        ytree_shell_put(shell, base->kids[i], base->kids[i + 1]);
    }
    for (size_t i = 0; over && i + 1 < over->n; i += 2) {
        struct ynode *key = over->kids[i], *val = over->kids[i + 1];
        struct ynode *old = ytree_get(shell, key->text);
        /* a length distribution is one value: a variant's replaces the base's */
        bool whole = is_bench &&
                     (strcmp(key->text, "input_len") == 0 || strcmp(key->text, "output_len") == 0);
        if (old && old->kind == Y_MAP && val->kind == Y_MAP && !whole) {
            struct ynode *m = ytree_shell(val->line, val->col);
            merge_into(m, old, val, false);
            ytree_shell_put(shell, key, m);
        } else {
            ytree_shell_put(shell, key, val);
        }
    }
}

/* The variant's view: base server/bench/metrics with over's merged in. */
static struct ynode *merged_view(const struct ynode *root, const struct ynode *over)
{
    static const char *const sections[] = {"server", "bench", "metrics"};
    struct ynode *shell = ytree_shell(over ? over->line : root->line, over ? over->col : root->col);
    for (size_t s = 0; s < 3; s++) {
        struct ynode *b = NULL, *o = NULL, *bkey = NULL, *okey = NULL;
        for (size_t i = 0; i + 1 < root->n; i += 2)
            if (strcmp(root->kids[i]->text, sections[s]) == 0) {
                bkey = root->kids[i];
                b = root->kids[i + 1];
            }
        for (size_t i = 0; over && i + 1 < over->n; i += 2)
            if (strcmp(over->kids[i]->text, sections[s]) == 0) {
                okey = over->kids[i];
                o = over->kids[i + 1];
            }
        if (b && o && b->kind == Y_MAP && o->kind == Y_MAP) {
            struct ynode *m = ytree_shell(o->line, o->col);
            merge_into(m, b, o, s == 1);
            ytree_shell_put(shell, okey, m);
        } else if (o) {
            ytree_shell_put(shell, okey, o);
        } else if (b) {
            ytree_shell_put(shell, bkey, b);
        }
    }
    return shell;
}

/* ---- load ---- */

/* Free n key/value pairs and the array. */
static void kv_free(struct exp_kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

/* Free what a variant owns and zero it (safe on a half-decoded variant). */
static void variant_release(struct exp_variant *v)
{
    free(v->name);
    strvec_release(&v->server.command);
    free(v->server.model);
    free(v->server.host);
    kv_free(v->server.flags, v->server.n_flags);
    strvec_release(&v->server.args);
    kv_free(v->server.env, v->server.n_env);
    free(v->server.ready_path);
    strvec_release(&v->bench.command);
    free(v->bench.grid);
    free(v->bench.input_dist);
    free(v->bench.output_dist);
    free(v->bench.dataset_path);
    free(v->metrics.preset);
    for (size_t i = 0; i < v->metrics.n_patterns; i++) {
        free(v->metrics.patterns[i].name);
        free(v->metrics.patterns[i].regex);
    }
    free(v->metrics.patterns);
    strvec_release(&v->metrics.require);
    free(v->metrics.server_path);
    kv_free(v->metrics.server_map, v->metrics.n_server_map);
    memset(v, 0, sizeof(*v));
}

void exp_release(struct experiment *exp)
{
    if (!exp)
        return;
    for (size_t i = 0; i < exp->n_variants; i++)
        variant_release(&exp->variants[i]);
    free(exp->variants);
    free(exp->path);
    free(exp->name);
    free(exp->description);
    free(exp->fit_x);
    free(exp->group_by);
    free(exp->fit_y);
    strvec_release(&exp->plots);
    free(exp->executor.host);
    free(exp->executor.identity);
    free(exp->executor.workdir);
    free(exp->executor.sweep);
    free(exp->executor.engine);
    strvec_release(&exp->executor.options);
    free(exp->executor.partition);
    free(exp->executor.gres);
    free(exp->executor.time);
    free(exp->executor.account);
    memset(exp, 0, sizeof(*exp));
}

/* A server_* column: a known one (client/scrape.h) or a key of some
 * variant's metrics.server_map. */
static bool server_column_known(const struct experiment *exp, const char *name)
{
    size_t n;
    const struct scrape_column *cols = scrape_columns(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(cols[i].name, name) == 0)
            return true;
    for (size_t v = 0; v < exp->n_variants; v++)
        for (size_t i = 0; i < exp->variants[v].metrics.n_server_map; i++)
            if (strcmp(exp->variants[v].metrics.server_map[i].key, name) == 0)
                return true;
    return false;
}

/* fit.x and fit.y must name a metric some variant produces; x may also be
 * a grid column, the requested "concurrency" (the default) or "prompts". */
static int check_fit(struct dctx *c, const struct ynode *root)
{
    const struct ynode *fit = ytree_get(ytree_get(root, "analysis"), "fit");
    const char *names[2] = {c->exp->fit_x, c->exp->fit_y};
    const char *axes[2] = {"x", "y"};
    const struct exp_variant **vars = xcalloc(c->exp->n_variants, sizeof(*vars));
    int rc = 0;
    for (size_t i = 0; i < c->exp->n_variants; i++)
        vars[i] = &c->exp->variants[i];
    for (int a = 0; a < 2 && rc == 0; a++) {
        bool known =
            metric_find(names[a]) != NULL || server_column_known(c->exp, names[a]) ||
            (a == 0 && (strcmp(names[a], "concurrency") == 0 || strcmp(names[a], "prompts") == 0));
        for (size_t i = 0; i < c->exp->n_variants && !known; i++)
            known = metric_known(vars[i], names[a]);
        if (known)
            continue;
        const struct ynode *n = ytree_get(fit, axes[a]);
        char where[32];
        snprintf(where, sizeof(where), "analysis.fit.%s", axes[a]);
        if (n)
            rc = unknown_metric(c, n, where, vars, c->exp->n_variants);
    }
    free(vars);
    return rc;
}

/* analysis.group_by names an axis of the matrix: the "AXIS=" part of
 * some variant's name (matrix names, also after the dump expanded them).
 * The matrix key ("flags.quant") is kept as the names hold it ("quant"). */
static int check_group_by(struct dctx *c, const struct ynode *root)
{
    char *want = c->exp->group_by;
    if (!want)
        return 0;
    const char *dot = strrchr(want, '.');
    const char *axis = dot ? dot + 1 : want;
    size_t alen = strlen(axis);
    for (size_t i = 0; alen && i < c->exp->n_variants; i++)
        for (const char *p = c->exp->variants[i].name; p; p = strchr(p, ','), p = p ? p + 1 : p)
            if (strncmp(p, axis, alen) == 0 && p[alen] == '=') {
                memmove(want, axis, alen + 1);
                return 0;
            }
    const struct ynode *n = ytree_get(ytree_get(root, "analysis"), "group_by");
    return cerr(c, n ? n->line : root->line, n ? n->col : root->col,
                "analysis.group_by '%s' is no axis of the matrix (no variant is named %.*s=...)",
                want, (int)alen, axis);
}

int exp_load_string(const char *display_name, const char *text, size_t len, struct experiment *exp,
                    struct err *err)
{
    struct ynode *root = NULL;
    struct exp_variant scratch;
    struct dctx c = {.file = display_name, .err = err, .exp = exp};
    int rc = -1;

    memset(exp, 0, sizeof(*exp));
    memset(&scratch, 0, sizeof(scratch));
    exp->path = xstrdup(display_name);
    if (len > EXP_MAX_FILE_BYTES) {
        err_set(err, E, "%s: the file is %zu bytes; experiment files are limited to 1 MiB",
                display_name, len);
        goto out;
    }
    if (ytree_parse(display_name, text, len, EXP_MAX_DEPTH, &root, err, E) != 0)
        goto out;
    if (root->kind != Y_MAP) { /* a list or a lone scalar is not an experiment */
        cerr(&c, root->line, root->col,
             "the top level must be a map of keys (name, server, bench, ...), got %s",
             ytree_kind_name(root));
        goto out;
    }

    /* Pass A: the file as written. Variant-level values are decoded into a
     * scratch variant only to check them where they stand; experiment-level
     * ones (name, analysis, plots) are final. */
    c.var = &scratch;
    c.full_exp = true;
    if (decode_section(&c, root, "", root->line, root->col) != 0)
        goto out;
    variant_release(&scratch);

    /* Pass B: each variant, merged over the base (one "default" variant when
     * the file has none), decoded in full into its own struct. */
    size_t n = c.n_variants ? c.n_variants : 1, combos = 1;
    for (size_t i = 0; c.matrix && i + 1 < c.matrix->n; i += 2)
        combos *= c.matrix->kids[i + 1]->n;
    if (n * combos > SCHEMA_MAX_VARIANTS) {
        cerr(&c, c.matrix->line, c.matrix->col,
             "'matrix' x 'variants' makes %zu variants; the limit is %d", n * combos,
             SCHEMA_MAX_VARIANTS);
        goto out;
    }
    exp->variants = xcalloc(n * combos, sizeof(*exp->variants));
    c.full_exp = false;
    c.full_var = true;
    size_t points = 0;
    for (size_t i = 0; i < n * combos; i++) {
        const struct ynode *over = c.n_variants ? c.variants[i / combos] : NULL;
        struct exp_variant *v = &exp->variants[exp->n_variants++];
        struct buf name;
        buf_init(&name, 4096);
        if (over || !c.matrix)
            buf_puts(&name, over ? ytree_get(over, "name")->text : "default");
        /* with a matrix, the variant's override gets the combination's
         * values: the merge then treats both as one override */
        struct ynode *mover = c.matrix ? mx_combo(c.matrix, i % combos, over, &name) : NULL;
        struct ynode *view = merged_view(root, mover ? mover : over); /* borrows the nodes */
        v->name = xstrdup(name.data);
        buf_release(&name);
        if (!variant_name_ok(v->name, strlen(v->name))) {
            cerr(&c, c.matrix->line, c.matrix->col,
                 "the matrix makes the variant name '%.80s', longer than %d bytes", v->name,
                 SCHEMA_MAX_MATRIX_NAME);
            ytree_free(view);
            ytree_free(mover);
            goto out;
        }
        for (size_t j = 0; j + 1 < exp->n_variants; j++)
            if (strcmp(exp->variants[j].name, v->name) == 0) {
                cerr(&c, c.matrix->line, c.matrix->col,
                     "the matrix makes the variant '%s' twice (a variant already has that name)",
                     v->name);
                ytree_free(view);
                ytree_free(mover);
                goto out;
            }
        c.var = v;
        c.vname = over || c.matrix ? v->name : NULL;
        const struct ynode *model = ytree_get(ytree_get(view, "server"), "model");
        c.have_model = model && !ytree_is_null(model);
        int r = decode_section(&c, view, "", view->line, view->col);
        ytree_free(view);
        ytree_free(mover);
        if (r != 0)
            goto out;
        points += v->bench.n_grid * (size_t)v->bench.repeat;
    }
    if (points > SCHEMA_MAX_POINTS) { /* each point is a server run of minutes */
        cerr(&c, root->line, root->col,
             "the experiment has %zu points (variants x grid x repeat); the limit is %d", points,
             SCHEMA_MAX_POINTS);
        goto out;
    }
    if (check_fit(&c, root) != 0 || check_group_by(&c, root) != 0)
        goto out;
    rc = 0;
out:
    variant_release(&scratch);
    free(c.variants);
    ytree_free(root);
    if (rc != 0) {
        exp_release(exp);
        if (!err->code)
            err_set(err, E, "%s: could not load the experiment", display_name);
    }
    return rc;
}

int exp_load_file(const char *path, struct experiment *exp, struct err *err)
{
    struct buf b;
    struct stat st;
    struct err rd; /* file_read_fd's error, reworded below */
    int rc = -1;
    memset(exp, 0, sizeof(*exp));
    buf_init(&b, EXP_MAX_FILE_BYTES);
    err_init(&rd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(err, E, "%s: cannot open the experiment file: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        err_set(err, E, "%s: is a directory, not an experiment file", path);
        goto out;
    }
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size > EXP_MAX_FILE_BYTES) {
        err_set(err, E, "%s: the file is %lld bytes; experiment files are limited to 1 MiB", path,
                (long long)st.st_size);
        goto out;
    }
    /* the size check above is a fast path; the capped read enforces the
     * limit on anything (pipes, /proc files) that does not report its size */
    if (file_read_fd(fd, path, &b, &rd, E) != 0) {
        if (b.toobig)
            err_set(err, E, "%s: the file is over 1 MiB; experiment files are limited to 1 MiB",
                    path);
        else
            err_set(err, E, "%s: read failed: %s", path, strerror(errno));
        goto out;
    }
    rc = exp_load_string(path, b.data ? b.data : "", b.len, exp, err);
out:
    if (fd >= 0)
        close(fd);
    buf_release(&b);
    return rc;
}

const struct exp_variant *exp_find_variant(const struct experiment *exp, const char *name)
{
    for (size_t i = 0; i < exp->n_variants; i++)
        if (strcmp(exp->variants[i].name, name) == 0)
            return &exp->variants[i];
    return NULL;
}
