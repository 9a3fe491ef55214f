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
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "strutil.h"
#include "sweep.h"
#include "xalloc.h"

#include "config/exp_int.h"
#include "config/matrix.h"
#include "config/tmpl.h"

#include "client/extract.h"
#include "client/lengths.h"
#include "store/results.h"

/* Cross-key checks run after a section is decoded (and its defaults set). */
static const struct {
    const char *path;
    int (*fn)(struct dctx *c, const struct ynode *map, int line, int col);
} finishers[] = {
    {"bench", finish_bench},
    {"metrics", finish_metrics},
    {"executor", finish_executor},
};

/* ---- small helpers ---- */

/* Record "file:line:col: message" as the error (the first one wins); returns -1. */
int cerr(struct dctx *c, int line, int col, const char *fmt, ...)
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
const char *vsuffix(const struct dctx *c, char *buf, size_t size)
{
    if (!c->vname)
        return "";
    snprintf(buf, size, " (variant '%s')", c->vname);
    return buf;
}

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
bool variant_name_ok(const char *s, size_t n)
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
int want_scalar(struct dctx *c, const struct schema_key *k, const struct ynode *n, const char *what)
{
    if (n->kind == Y_SCALAR && !ytree_is_null(n))
        return 0;
    return cerr(c, n->line, n->col, "'%s' wants %s, got %s", k->path, what, ytree_kind_name(n));
}

/* Strings are capped so that 64 variants of a 1 MiB file stay small in memory. */
int check_length(struct dctx *c, const struct schema_key *k, const struct ynode *n, size_t max)
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
    if ((k->flags & KF_REQ) && n->len == 0) /* "" would fail only later (ssh, exec) */
        return cerr(c, n->line, n->col, "'%s' is empty; it needs a value", k->path);
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
    if ((k->flags & KF_RATE) && d != 0 && d < SCHEMA_MIN_RATE) /* the client refuses it */
        return cerr(c, n->line, n->col, "'%s' must be 0 or at least %g req/s, got %s", k->path,
                    SCHEMA_MIN_RATE, n->text);
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
int want_kind(struct dctx *c, const struct schema_key *k, const struct ynode *n, enum ykind kind)
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
