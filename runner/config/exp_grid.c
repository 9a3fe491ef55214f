/*
 * exp_grid: the load grid of bench. `grid` entries ("1:8", "16:48", "r2:64",
 * {concurrency, prompts}), the list form (concurrency with prompts as a
 * number or an expression of concurrency), and open-loop `rates`; each
 * value checked where it stands, the points built in a full pass.
 */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "strutil.h"
#include "sweep.h"
#include "xalloc.h"

#include "config/exp_int.h"
#include "config/expr.h"

/* Digits only (no sign, no blanks), within [1, max]. */
int parse_count(const char *s, size_t n, long max, long *out)
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
void grid_add(struct exp_bench *b, size_t *cap, long conc, long prompts, double rate)
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

/* A rate: from SCHEMA_MIN_RATE to SCHEMA_MAX_RATE req/s. */
int parse_rate(const char *s, size_t n, double *out)
{
    double v;
    if (str_to_double_n(s, n, &v) != 0 || !(v >= SCHEMA_MIN_RATE) || v > SCHEMA_MAX_RATE)
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
int check_grid(struct dctx *c, const struct schema_key *k, const struct ynode *n,
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
                            "bad grid entry '%s': want 'rRATE:PROMPTS' with RATE from %g to %g "
                            "req/s, e.g. 'r2:64'",
                            QUOTE(it, q), SCHEMA_MIN_RATE, SCHEMA_MAX_RATE);
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
int check_conc_list(struct dctx *c, const struct schema_key *k, const struct ynode *n)
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
int check_rate_list(struct dctx *c, const struct schema_key *k, const struct ynode *n)
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
                        "'%s' entries must be numbers from %g to %g (req/s), got '%s'", k->path,
                        SCHEMA_MIN_RATE, SCHEMA_MAX_RATE,
                        it->kind == Y_SCALAR ? QUOTE(it, q) : ytree_kind_name(it));
    }
    return 0;
}

/* prompts for concurrency conc: a constant or the expression, rounded up. */
int eval_prompts(struct dctx *c, const struct ynode *n, double conc, long *out, bool syntax_only)
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
int check_prompts(struct dctx *c, const struct schema_key *k, const struct ynode *n)
{
    long dummy;
    if (want_scalar(c, k, n, "an integer or an expression in c") != 0 ||
        check_length(c, k, n, 256) != 0)
        return -1;
    return eval_prompts(c, n, 1, &dummy, true);
}
