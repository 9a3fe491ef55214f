/*
 * jsonfsm: the JSON object recognizer (see jsonfsm.h). One switch over
 * the state per byte; containers on a byte stack. A number has no end
 * byte of its own, so the byte after it is handed on to the state that
 * follows a value (a number only occurs inside a container here, where
 * ',', '}', ']' or whitespace always follows).
 */
#include "text/jsonfsm.h"

#include <string.h>

enum state {
    TOP,       /* before the top-level '{' */
    OBJ_FIRST, /* after '{': a key or '}' */
    OBJ_KEY,   /* after ',' in an object: a key */
    KEY,       /* inside a key string */
    KEY_ESC,   /* after '\' in a key */
    KEY_HEX,   /* inside \uXXXX of a key (sub: digits read) */
    COLON,     /* after a key: ':' */
    VALUE,     /* a value */
    ARR_FIRST, /* after '[': a value or ']' */
    STR,       /* inside a string value */
    STR_ESC,   /* after '\' in a string value */
    STR_HEX,   /* inside \uXXXX of a string value */
    LIT,       /* inside true, false or null (sub: literal << 4 | bytes read) */
    NUM,       /* inside a number (sub: enum num) */
    AFTER,     /* after a value: ',' or the container's close */
    DONE,      /* the top-level object closed */
};

/* Where a number is: which bytes may follow, and whether it may end. */
enum num {
    N_MINUS, /* '-': a digit */
    N_ZERO,  /* a leading 0: '.', 'e' or the end */
    N_INT,   /* digits */
    N_DOT,   /* '.': a digit */
    N_FRAC,  /* fraction digits */
    N_E,     /* 'e': a sign or a digit */
    N_ESIGN, /* the exponent's sign: a digit */
    N_EXP,   /* exponent digits */
};

static const char *const literals[] = {"true", "false", "null"};

static bool is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

void jfsm_init(struct jfsm *f)
{
    memset(f, 0, sizeof(*f));
    f->st = TOP;
}

bool jfsm_done(const struct jfsm *f)
{
    return f->st == DONE;
}

/* A value ended: back to the container, or done at the top. */
static void value_end(struct jfsm *f)
{
    f->st = f->depth ? AFTER : DONE;
}

static bool open_container(struct jfsm *f, char c)
{
    if (f->depth == JFSM_MAX_DEPTH)
        return false;
    f->stack[f->depth++] = (uint8_t)c;
    f->st = c == '{' ? OBJ_FIRST : ARR_FIRST;
    return true;
}

static bool close_container(struct jfsm *f, char c)
{
    if (!f->depth || f->stack[f->depth - 1] != (c == '}' ? '{' : '['))
        return false;
    f->depth--;
    value_end(f);
    return true;
}

/* The first byte of a value. */
static bool value_start(struct jfsm *f, char c)
{
    if (c == '{' || c == '[')
        return open_container(f, c);
    if (c == '"') {
        f->st = STR;
        return true;
    }
    if (c == '-' || is_digit(c)) {
        f->st = NUM;
        f->sub = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
        return true;
    }
    for (uint8_t i = 0; i < 3; i++)
        if (c == literals[i][0]) {
            f->st = LIT;
            f->sub = (uint8_t)(i << 4 | 1);
            return true;
        }
    return false;
}

/* One byte inside a number; *ended when c is past it (c is then the
 * caller's to feed to the state after the value). */
static bool num_byte(struct jfsm *f, char c, bool *ended)
{
    *ended = false;
    switch (f->sub) {
    case N_MINUS:
        f->sub = c == '0' ? N_ZERO : N_INT;
        return is_digit(c);
    case N_DOT:
        f->sub = N_FRAC;
        return is_digit(c);
    case N_ESIGN:
        f->sub = N_EXP;
        return is_digit(c);
    case N_E:
        f->sub = is_digit(c) ? N_EXP : N_ESIGN;
        return is_digit(c) || c == '+' || c == '-';
    case N_INT:
    case N_FRAC:
    case N_EXP:
        if (is_digit(c))
            return true;
        /* fall through */ /* what may follow the digits */
    case N_ZERO:
        if (c == '.' && (f->sub == N_ZERO || f->sub == N_INT)) {
            f->sub = N_DOT;
            return true;
        }
        if ((c == 'e' || c == 'E') && f->sub != N_EXP) {
            f->sub = N_E;
            return true;
        }
        *ended = true;
        return true;
    }
    return false;
}

/* Whitespace between tokens: allowed in runs of at most JFSM_MAX_WS. */
static bool blank(struct jfsm *f)
{
    return ++f->ws <= JFSM_MAX_WS;
}

static bool byte(struct jfsm *f, char c)
{
    bool gap = f->st != KEY && f->st != KEY_ESC && f->st != KEY_HEX && f->st != STR &&
               f->st != STR_ESC && f->st != STR_HEX && f->st != LIT && f->st != NUM;
    if (gap && is_ws(c))
        return blank(f);
    f->ws = 0;
    switch (f->st) {
    case TOP:
        return c == '{' && open_container(f, c);
    case OBJ_FIRST:
        if (c == '}')
            return close_container(f, c);
        /* fall through */
    case OBJ_KEY:
        f->st = KEY;
        return c == '"';
    case KEY:
    case STR:
        if (c == '"') {
            if (f->st == KEY)
                f->st = COLON;
            else
                value_end(f);
            return true;
        }
        if (c == '\\') {
            f->st = f->st == KEY ? KEY_ESC : STR_ESC;
            return true;
        }
        return (unsigned char)c >= 0x20;
    case KEY_ESC:
    case STR_ESC:
        if (c == 'u') {
            f->st = f->st == KEY_ESC ? KEY_HEX : STR_HEX;
            f->sub = 0;
            return true;
        }
        f->st = f->st == KEY_ESC ? KEY : STR;
        return strchr("\"\\/bfnrt", c) != NULL && c;
    case KEY_HEX:
    case STR_HEX:
        if (!is_hex(c))
            return false;
        if (++f->sub == 4)
            f->st = f->st == KEY_HEX ? KEY : STR;
        return true;
    case COLON:
        f->st = VALUE;
        return c == ':';
    case ARR_FIRST:
        if (c == ']')
            return close_container(f, c);
        /* fall through */
    case VALUE:
        return value_start(f, c);
    case LIT: {
        const char *lit = literals[f->sub >> 4];
        uint8_t at = f->sub & 15;
        if (c != lit[at])
            return false;
        f->sub++;
        if (!lit[at + 1])
            value_end(f);
        return true;
    }
    case NUM: {
        bool ended;
        if (!num_byte(f, c, &ended))
            return false;
        if (!ended)
            return true;
        f->st = AFTER; /* a number is never at the top: depth >= 1 */
        return byte(f, c);
    }
    case AFTER:
        if (c == '}' || c == ']')
            return close_container(f, c);
        if (c != ',')
            return false;
        f->st = f->stack[f->depth - 1] == '{' ? OBJ_KEY : VALUE;
        return true;
    default: /* DONE: only whitespace, handled above */
        return false;
    }
}

bool jfsm_feed(struct jfsm *f, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!byte(f, p[i]))
            return false;
    return true;
}
