/*
 * tmpl: scanning, checking and expanding ${variable} templates. The scanner
 * is shared by the load-time check (experiment.c, with file positions) and
 * the plan-time expansion (plan.c), so both agree on what a template means.
 */
#include "config/tmpl.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "strutil.h"
#include "xalloc.h"

#include "config/ytree.h"

static const char *const var_names[TMPL_N_VARS + 1] = {
    [TMPL_MODEL] = "model",
    [TMPL_PORT] = "port",
    [TMPL_HOST] = "host",
    [TMPL_URL] = "url",
    [TMPL_NAME] = "name",
    [TMPL_VARIANT] = "variant",
    [TMPL_RUN_DIR] = "run_dir",
    [TMPL_CONCURRENCY] = "concurrency",
    [TMPL_PROMPTS] = "prompts",
    [TMPL_INPUT_LEN] = "input_len",
    [TMPL_OUTPUT_LEN] = "output_len",
    [TMPL_POINT] = "point",
    [TMPL_N_VARS] = NULL,
};

const char *tmpl_var_name(enum tmpl_var v)
{
    return v < TMPL_N_VARS ? var_names[v] : "?";
}

/* NAME in ${env:NAME}: letters, digits and '_', not starting with a digit. */
static bool env_name_ok(const char *s, size_t n)
{
    if (n == 0 || isdigit((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_')
            return false;
    return true;
}

/* The '}' that closes a "${" whose body starts at body, or NULL. Openings
 * are "${" and the literal "$${" (its '}' is written too); other braces are
 * plain text. */
static const char *closing_brace(const char *body)
{
    int depth = 1;
    for (const char *p = body; *p; p++) {
        if (p[0] == '$' && p[1] == '$') {
            p++;
            if (p[1] == '{') {
                depth++;
                p++;
            }
        } else if (p[0] == '$' && p[1] == '{') {
            depth++;
            p++;
        } else if (p[0] == '}' && --depth == 0) {
            return p;
        }
    }
    return NULL;
}

int tmpl_next(const char **pos, struct tmpl_piece *pc, struct err *err, int code)
{
    const char *start = *pos, *p = start;
    memset(pc, 0, sizeof(*pc));
    if (!*p)
        return 0;
    if (p[0] == '$' && p[1] == '$') { /* "$$" -> "$" */
        pc->kind = TMPL_TEXT;
        pc->text = p;
        pc->len = 1;
        *pos = p + 2;
        return 1;
    }
    /* a '$' not followed by '{' or '$' is literal, so "$(id)" and "$5" stay
     * as written: nothing here knows shell syntax, on purpose */
    if (p[0] != '$' || p[1] != '{') { /* literal run up to the next "${" or "$$" */
        p++;
        while (*p && !(p[0] == '$' && (p[1] == '{' || p[1] == '$')))
            p++;
        pc->kind = TMPL_TEXT;
        pc->text = start;
        pc->len = (size_t)(p - start);
        *pos = p;
        return 1;
    }
    /* "${" ... "}": a default may hold templates of its own, so the '}'
     * that closes is the one that balances the "${" (and "$${") inside */
    const char *body = p + 2, *close = closing_brace(body);
    char q[80];
    if (!close) {
        ytree_quote(p, strlen(p), q, sizeof(q));
        return err_set(err, code, "unterminated '${' in '%s' (write '$$' for a literal '$')", q),
               -1;
    }
    size_t n = (size_t)(close - body);
    *pos = close + 1;
    if (n >= 4 && strncmp(body, "env:", 4) == 0) { /* ${env:NAME} or ${env:NAME:-default} */
        const char *name = body + 4, *dash = strstr(name, ":-");
        size_t name_len = dash && dash < close ? (size_t)(dash - name) : (size_t)(close - name);
        if (!env_name_ok(name, name_len)) {
            ytree_quote(p, n + 3, q, sizeof(q));
            return err_set(err, code,
                           "bad environment variable name in '%s' (want ${env:NAME} with NAME "
                           "made of letters, digits and '_')",
                           q),
                   -1;
        }
        pc->kind = TMPL_ENV;
        pc->text = name;
        pc->len = name_len;
        if (dash && dash < close) {
            pc->has_def = true;
            pc->def = dash + 2;
            pc->def_len = (size_t)(close - pc->def);
        }
        return 1;
    }
    /* one of the named variables, else an error with the closest name */
    for (int v = 0; v < TMPL_N_VARS; v++)
        if (strlen(var_names[v]) == n && strncmp(var_names[v], body, n) == 0) {
            pc->kind = TMPL_VAR;
            pc->var = (enum tmpl_var)v;
            return 1;
        }
    char *word = xstrndup(body, n);
    const char *hint = str_suggest(word, var_names);
    ytree_quote(body, n, q, sizeof(q));
    if (hint)
        err_set(err, code, "unknown variable '${%s}' (did you mean '${%s}'?)", q, hint);
    else
        err_set(err, code,
                "unknown variable '${%s}' (known: model, port, host, url, name, variant, "
                "run_dir, concurrency, prompts, input_len, output_len, point, env:NAME)",
                q);
    free(word);
    return -1;
}

/* A default nested deeper than TMPL_MAX_NEST: refused, the whole template (top) quoted. */
static int too_deep(const char *tmpl, struct err *err, int code)
{
    char q[80];
    ytree_quote(tmpl, strlen(tmpl), q, sizeof(q));
    return err_set(err, code, "defaults nested deeper than %d levels in '%s'", TMPL_MAX_NEST, q),
           -1;
}

/* tmpl_check of the len bytes at tmpl, a part of top; depth counts the
 * defaults around it. */
static int check_at(const char *top, const char *tmpl, size_t len, unsigned allowed,
                    const char *where, int depth, struct err *err, int code)
{
    char *own = xstrndup(tmpl, len); /* a default is not NUL-terminated */
    const char *pos = own;
    struct tmpl_piece pc;
    int r = depth > TMPL_MAX_NEST ? too_deep(top, err, code) : 0;
    while (r == 0 && (r = tmpl_next(&pos, &pc, err, code)) > 0) {
        r = 0;
        if (pc.kind == TMPL_ENV && pc.has_def) {
            r = check_at(top, pc.def, pc.def_len, allowed, where, depth + 1, err, code);
        } else if (pc.kind == TMPL_VAR && !(allowed & (1u << pc.var))) {
            if (pc.var >= TMPL_CONCURRENCY)
                err_set(err, code,
                        "'${%s}' cannot be used in %s: it changes per point, so only "
                        "bench.command may use it",
                        var_names[pc.var], where);
            else
                err_set(err, code, "'${%s}' cannot be used in %s", var_names[pc.var], where);
            r = -1;
        }
    }
    free(own);
    return r;
}

int tmpl_check(const char *tmpl, unsigned allowed, const char *where, struct err *err, int code)
{
    return check_at(tmpl, tmpl, strlen(tmpl), allowed, where, 0, err, code);
}

/* Append n bytes to out, or fail when that passes its cap. */
static int put(struct buf *out, const char *p, size_t n, struct err *err, int code)
{
    if (buf_append(out, p, n) != 0)
        return err_set(err, code, "expanded value is longer than %zu bytes", out->max), -1;
    return 0;
}

/* tmpl_expand of the len bytes at tmpl, a part of top; depth counts the
 * defaults around it. */
static int expand_at(const char *top, const char *tmpl, size_t len,
                     const char *const vals[TMPL_N_VARS], struct buf *out, int depth,
                     struct err *err, int code)
{
    char *own = xstrndup(tmpl, len); /* a default is not NUL-terminated */
    const char *pos = own;
    struct tmpl_piece pc;
    int r = depth > TMPL_MAX_NEST ? too_deep(top, err, code) : 0;
    while (r == 0 && (r = tmpl_next(&pos, &pc, err, code)) > 0) {
        r = 0;
        if (pc.kind == TMPL_TEXT) {
            r = put(out, pc.text, pc.len, err, code);
        } else if (pc.kind == TMPL_VAR) {
            if (vals[pc.var]) {
                r = put(out, vals[pc.var], strlen(vals[pc.var]), err, code);
            } else {
                err_set(err, code, "'${%s}' has no value here", var_names[pc.var]);
                r = -1;
            }
        } else {
            char *name = xstrndup(pc.text, pc.len);
            const char *v = getenv(name);
            /* like the shell's ${NAME:-default}: unset or empty takes the
             * default, itself a template (expanded only when taken) */
            if (v && (*v || !pc.has_def)) {
                r = put(out, v, strlen(v), err, code);
            } else if (pc.has_def) {
                r = expand_at(top, pc.def, pc.def_len, vals, out, depth + 1, err, code);
            } else {
                err_set(err, code,
                        "environment variable '%s' is not set (set it, or write "
                        "'${env:%s:-DEFAULT}')",
                        name, name);
                r = -1;
            }
            free(name);
        }
    }
    free(own);
    return r;
}

int tmpl_expand(const char *tmpl, const char *const vals[TMPL_N_VARS], struct buf *out,
                struct err *err, int code)
{
    return expand_at(tmpl, tmpl, strlen(tmpl), vals, out, 0, err, code);
}
