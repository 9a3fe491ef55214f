/*
 * expr: a recursive-descent evaluator for prompts expressions. The grammar
 *   expr  := term (('+' | '-') term)*
 *   term  := unary (('*' | '/') unary)*
 *   unary := ('+' | '-') unary | atom
 *   atom  := NUMBER | 'c' | '(' expr ')' | NAME '(' expr (',' expr)* ')'
 * is evaluated while it is parsed; recursion is capped at EXPR_MAX_DEPTH so
 * hostile input ("((((...") cannot exhaust the stack.
 */
#include "config/expr.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strutil.h"

struct ex {
    const char *s; /* the whole expression */
    size_t i;      /* read position (bytes) */
    int depth;     /* current recursion depth */
    double c;      /* value of the variable c */
    struct err *err;
    int code;
    enum expr_status status; /* first failure, or EXPR_OK */
};

/* expr is recursive through atom's parentheses and calls. */
static double expr(struct ex *x);

/* Record the first failure as "WHAT 'x' at character N" (or "WHAT end of
 * expression"); returns 0 so callers can return it directly. */
static double fail(struct ex *x, enum expr_status st, const char *what)
{
    if (x->status == EXPR_OK) {
        x->status = st;
        unsigned char ch = (unsigned char)x->s[x->i];
        if (ch > 0x20 && ch < 0x7f)
            err_set(x->err, x->code, "%s '%c' at character %zu", what, ch, x->i + 1);
        else if (ch)
            err_set(x->err, x->code, "%s byte 0x%02x at character %zu", what, ch, x->i + 1);
        else
            err_set(x->err, x->code, "%s end of expression", what);
    }
    return 0;
}

/* Blanks may appear between any two tokens. */
static void skip_space(struct ex *x)
{
    while (x->s[x->i] == ' ' || x->s[x->i] == '\t')
        x->i++;
}

/* Consume ch (after blanks) if it is next. */
static int eat(struct ex *x, char ch)
{
    skip_space(x);
    if (x->s[x->i] != ch)
        return 0;
    x->i++;
    return 1;
}

/* A decimal number: digits, an optional fraction and an optional exponent
 * (no sign: unary minus is an operator; no hex, inf or nan). */
static double number(struct ex *x)
{
    size_t start = x->i;
    while (isdigit((unsigned char)x->s[x->i]))
        x->i++;
    if (x->s[x->i] == '.') {
        x->i++;
        while (isdigit((unsigned char)x->s[x->i]))
            x->i++;
    }
    if ((x->s[x->i] == 'e' || x->s[x->i] == 'E') &&
        (isdigit((unsigned char)x->s[x->i + 1]) ||
         ((x->s[x->i + 1] == '+' || x->s[x->i + 1] == '-') &&
          isdigit((unsigned char)x->s[x->i + 2])))) {
        x->i += 2;
        while (isdigit((unsigned char)x->s[x->i]))
            x->i++;
    }
    char tmp[64];
    size_t n = x->i - start;
    double v;
    if (n == 0 || n >= sizeof(tmp)) {
        x->i = start;
        return fail(x, EXPR_SYNTAX, "bad number at");
    }
    memcpy(tmp, x->s + start, n);
    tmp[n] = '\0';
    if (str_to_double(tmp, &v) != 0) {
        x->i = start;
        return fail(x, EXPR_SYNTAX, "bad number at");
    }
    return v;
}

/* NAME '(' args ')' for min, max, ceil and floor. */
static double call(struct ex *x, const char *name, size_t name_at)
{
    int is_min = strcmp(name, "min") == 0, is_max = strcmp(name, "max") == 0;
    int is_ceil = strcmp(name, "ceil") == 0, is_floor = strcmp(name, "floor") == 0;
    if (!is_min && !is_max && !is_ceil && !is_floor) {
        if (x->status == EXPR_OK) {
            x->status = EXPR_SYNTAX;
            err_set(x->err, x->code,
                    "unknown name '%s' at character %zu (use c, min, max, ceil, floor)", name,
                    name_at + 1);
        }
        return 0;
    }
    if (!eat(x, '('))
        return fail(x, EXPR_SYNTAX, "expected '(' after the function name, got");
    double v = expr(x);
    int nargs = 1;
    while (x->status == EXPR_OK && eat(x, ',')) {
        double w = expr(x);
        v = is_min ? fmin(v, w) : is_max ? fmax(v, w) : v;
        nargs++;
    }
    if (x->status != EXPR_OK)
        return 0;
    if (!eat(x, ')'))
        return fail(x, EXPR_SYNTAX, "expected ',' or ')', got");
    if ((is_ceil || is_floor) && nargs != 1) {
        x->status = EXPR_SYNTAX;
        err_set(x->err, x->code, "%s() takes one argument, got %d", name, nargs);
        return 0;
    }
    return is_ceil ? ceil(v) : is_floor ? floor(v) : v;
}

/* A number, c, a parenthesised expression or a function call. */
static double atom(struct ex *x)
{
    skip_space(x);
    char ch = x->s[x->i];
    if (isdigit((unsigned char)ch) || ch == '.')
        return number(x);
    if (ch == '(') {
        x->i++;
        double v = expr(x);
        if (x->status == EXPR_OK && !eat(x, ')'))
            return fail(x, EXPR_SYNTAX, "expected ')', got");
        return v;
    }
    if (isalpha((unsigned char)ch)) {
        char name[16];
        size_t at = x->i, n = 0;
        while (isalnum((unsigned char)x->s[x->i]) || x->s[x->i] == '_') {
            if (n + 1 < sizeof(name))
                name[n++] = x->s[x->i];
            x->i++;
        }
        name[n] = '\0';
        if (strcmp(name, "c") == 0)
            return x->c;
        return call(x, name, at);
    }
    return fail(x, EXPR_SYNTAX, "expected a number, c, a function or '(', got");
}

/* Signs: "-c", "+4", "--c" (each level counts towards the depth cap). */
static double unary(struct ex *x)
{
    if (++x->depth > EXPR_MAX_DEPTH) {
        x->depth--;
        return fail(x, EXPR_SYNTAX, "nesting too deep at");
    }
    double v;
    if (eat(x, '-'))
        v = -unary(x);
    else if (eat(x, '+'))
        v = unary(x);
    else
        v = atom(x);
    x->depth--;
    return v;
}

/* Products and quotients, left to right; x/0 is a value error, not inf. */
static double term(struct ex *x)
{
    double v = unary(x);
    while (x->status == EXPR_OK) {
        if (eat(x, '*')) {
            v *= unary(x);
        } else if (eat(x, '/')) {
            size_t at = x->i;
            double d = unary(x);
            if (x->status == EXPR_OK && d == 0) {
                x->status = EXPR_VALUE;
                err_set(x->err, x->code, "division by zero at character %zu", at);
                return 0;
            }
            v /= d;
        } else {
            break;
        }
    }
    return v;
}

/* Sums and differences, left to right. */
static double expr(struct ex *x)
{
    if (++x->depth > EXPR_MAX_DEPTH) {
        x->depth--;
        return fail(x, EXPR_SYNTAX, "nesting too deep at");
    }
    double v = term(x);
    while (x->status == EXPR_OK) {
        if (eat(x, '+'))
            v += term(x);
        else if (eat(x, '-'))
            v -= term(x);
        else
            break;
    }
    x->depth--;
    return v;
}

enum expr_status expr_eval(const char *text, double c, double *out, struct err *err, int code)
{
    struct ex x = {text, 0, 0, c, err, code, EXPR_OK};
    double v = expr(&x);
    skip_space(&x);
    if (x.status == EXPR_OK && x.s[x.i])
        fail(&x, EXPR_SYNTAX, "unexpected");
    if (x.status == EXPR_OK && !isfinite(v)) {
        x.status = EXPR_VALUE;
        err_set(err, code, "the value is not a finite number");
    }
    if (x.status == EXPR_OK)
        *out = v;
    return x.status;
}
