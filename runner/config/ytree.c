/*
 * ytree: libyaml events -> a positioned node tree, with the policy checks an
 * untrusted config reader needs (no aliases, depth limit, unique keys).
 * The event loop keeps an explicit stack of open containers, so hostile
 * nesting costs memory proportional to the limit, never the C stack.
 */
#include "config/ytree.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "xalloc.h"

/* Every key of every map goes into one open-addressing set keyed by (map,
 * key text), so duplicate detection is O(1) per key even for huge maps. */
struct dupent {
    const struct ynode *map;
    const struct ynode *key;
};

struct dupset {
    struct dupent *e; /* cap slots; map == NULL marks a free slot */
    size_t cap, n;
};

/* FNV-1a over the key text, seeded with the map's address. */
static uint64_t dup_hash(const struct ynode *map, const struct ynode *key)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)map;
    for (size_t i = 0; i < key->len; i++)
        h = (h ^ (unsigned char)key->text[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* Insert (map, key); returns the earlier equal key if there is one. */
static const struct ynode *dup_insert(struct dupset *s, const struct ynode *map,
                                      const struct ynode *key)
{
    if (2 * (s->n + 1) > s->cap) {
        struct dupset bigger = {xcalloc(s->cap ? 2 * s->cap : 64, sizeof(struct dupent)),
                                s->cap ? 2 * s->cap : 64, 0};
        for (size_t i = 0; i < s->cap; i++)
            if (s->e[i].map)
                dup_insert(&bigger, s->e[i].map, s->e[i].key);
        free(s->e);
        *s = bigger;
    }
    size_t mask = s->cap - 1;
    for (size_t i = dup_hash(map, key) & mask;; i = (i + 1) & mask) {
        struct dupent *d = &s->e[i];
        if (!d->map) {
            d->map = map;
            d->key = key;
            s->n++;
            return NULL;
        }
        if (d->map == map && d->key->len == key->len &&
            memcmp(d->key->text, key->text, key->len) == 0)
            return d->key;
    }
}

const char *ytree_quote(const char *s, size_t len, char *out, size_t out_size)
{
    size_t o = 0, limit = out_size - 8; /* room for an escape, "..." and NUL */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (o >= limit) {
            memcpy(out + o, "...", 4);
            return out;
        }
        if (c == '\n' || c == '\t' || c == '\r' || c == '\\') {
            out[o++] = '\\';
            out[o++] = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : '\\';
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(out + o, out_size - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return out;
}

/* A node at libyaml's 0-based mark, stored 1-based as editors show it. */
static struct ynode *node_new(enum ykind kind, yaml_mark_t mark)
{
    struct ynode *n = xcalloc(1, sizeof(*n));
    n->kind = kind;
    n->line = (int)mark.line + 1;
    n->col = (int)mark.column + 1;
    return n;
}

/* Append a child (a sequence item, or a map's next key or value). */
static void kids_push(struct ynode *parent, struct ynode *kid)
{
    XGROW(parent->kids, parent->cap, parent->n + 1);
    parent->kids[parent->n++] = kid;
}

void ytree_free(struct ynode *n)
{
    if (!n)
        return;
    /* Depth is bounded by the parse limit (64), so recursion is safe here. */
    for (size_t i = 0; i < n->n; i++)
        if (!n->shell || n->kids[i]->shell)
            ytree_free(n->kids[i]);
    free(n->kids);
    free(n->text);
    free(n);
}

struct ynode *ytree_shell(int line, int col)
{
    struct ynode *n = xcalloc(1, sizeof(*n));
    n->kind = Y_MAP;
    n->line = line;
    n->col = col;
    n->shell = true;
    return n;
}

void ytree_shell_put(struct ynode *shell, struct ynode *key, struct ynode *value)
{
    for (size_t i = 0; i + 1 < shell->n; i += 2)
        if (strcmp(shell->kids[i]->text, key->text) == 0) {
            if (shell->kids[i + 1]->shell && shell->kids[i + 1] != value)
                ytree_free(shell->kids[i + 1]);
            shell->kids[i] = key;
            shell->kids[i + 1] = value;
            return;
        }
    kids_push(shell, key);
    kids_push(shell, value);
}

bool ytree_is_null(const struct ynode *n)
{
    if (!n || n->kind != Y_SCALAR || !n->plain)
        return false;
    return n->len == 0 || strcmp(n->text, "~") == 0 || strcmp(n->text, "null") == 0 ||
           strcmp(n->text, "Null") == 0 || strcmp(n->text, "NULL") == 0;
}

struct ynode *ytree_get(const struct ynode *map, const char *key)
{
    if (!map || map->kind != Y_MAP)
        return NULL;
    for (size_t i = 0; i + 1 < map->n; i += 2)
        if (strcmp(map->kids[i]->text, key) == 0)
            return map->kids[i + 1];
    return NULL;
}

const char *ytree_kind_name(const struct ynode *n)
{
    if (!n)
        return "nothing";
    if (n->kind == Y_MAP)
        return "a map";
    if (n->kind == Y_SEQ)
        return "a list";
    return ytree_is_null(n) ? "nothing (null)" : "a string";
}

/* Line and column (1-based, in characters) of byte offset off in text. */
static void offset_pos(const char *text, size_t len, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n') {
            (*line)++;
            *col = 1;
        } else if ((c & 0xc0) != 0x80) {
            (*col)++;
        }
    }
}

/*
 * Whether a syntax error at (line, col) (1-based) sits in indentation that
 * holds a tab: libyaml's own words ("found character that cannot start any
 * token") do not say so. On true, *tab_col is the first tab's column.
 */
static bool tab_indent(const char *text, size_t len, int line, int col, int *tab_col)
{
    size_t i = 0;
    for (int l = 1; l < line && i < len; i++)
        if (text[i] == '\n')
            l++;
    int c = 1, first = 0;
    for (; i < len && (text[i] == ' ' || text[i] == '\t'); i++, c++)
        if (text[i] == '\t' && !first)
            first = c;
    if (!first || col > c) /* no tab, or the error lies past the indentation */
        return false;
    *tab_col = first;
    return true;
}

/*
 * libyaml's error as one line. Reader errors (bad UTF-8, control bytes)
 * carry a byte offset, turned into line:col here; scanner and parser errors
 * carry a mark, and maybe a context ("while parsing a flow sequence at").
 */
static void parser_error(const yaml_parser_t *p, const char *name, const char *text, size_t len,
                         struct err *err, int code)
{
    const char *problem = p->problem ? p->problem : "unknown error";
    int tab_col;
    if (p->error == YAML_READER_ERROR) {
        int line, col;
        offset_pos(text, len, p->problem_offset, &line, &col);
        if (p->problem_value >= 0)
            err_set(err, code, "%s:%d:%d: not valid UTF-8 YAML text: %s (byte 0x%02x)", name, line,
                    col, problem, (unsigned)p->problem_value & 0xffu);
        else
            err_set(err, code, "%s:%d:%d: not valid UTF-8 YAML text: %s", name, line, col, problem);
    } else if (p->error == YAML_MEMORY_ERROR) {
        err_set(err, code, "%s: out of memory while parsing YAML", name);
    } else if (tab_indent(text, len, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
                          &tab_col)) {
        err_set(err, code, "%s:%d:%d: tab character used for indentation; YAML indents with spaces",
                name, (int)p->problem_mark.line + 1, tab_col);
    } else if (p->context) {
        err_set(err, code, "%s:%d:%d: YAML syntax error: %s (%s at %d:%d)", name,
                (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1, problem, p->context,
                (int)p->context_mark.line + 1, (int)p->context_mark.column + 1);
    } else {
        err_set(err, code, "%s:%d:%d: YAML syntax error: %s", name, (int)p->problem_mark.line + 1,
                (int)p->problem_mark.column + 1, problem);
    }
}

/* Tags: none, the non-specific "!", or one of YAML's core types (!!str ...).
 * Anything else (!!python/object, !custom) asks for a loader we do not have. */
static bool tag_ok(const yaml_char_t *tag)
{
    static const char *const core[] = {"str", "int", "float", "bool", "null", "map", "seq", NULL};
    const char *t = (const char *)tag;
    if (!t || strcmp(t, "!") == 0)
        return true;
    if (strncmp(t, "tag:yaml.org,2002:", 18) != 0)
        return false;
    for (size_t i = 0; core[i]; i++)
        if (strcmp(t + 18, core[i]) == 0)
            return true;
    return false;
}

int ytree_parse(const char *name, const char *text, size_t len, int max_depth, struct ynode **out,
                struct err *err, int code)
{
    yaml_parser_t p;
    struct ynode *root = NULL;
    struct ynode **stack = xcalloc((size_t)max_depth + 1, sizeof(*stack));
    struct dupset dups = {NULL, 0, 0};
    int depth = 0, rc = -1;
    bool doc_seen = false, done = false;

    *out = NULL;
    yaml_parser_initialize(&p);
    /* a UTF-8 byte order mark opens the stream (editors on Windows write
     * one); libyaml only skips it when it detects the encoding itself, and
     * lets later ones through as if they were not there. One anywhere else
     * is refused: it is invisible. Editors do not show the first, so
     * positions count from after it. */
    if (len >= 2 && (memcmp(text, "\xff\xfe", 2) == 0 || memcmp(text, "\xfe\xff", 2) == 0)) {
        err_set(err, code,
                "%s:1:1: the file is UTF-16 (it starts with a UTF-16 byte order mark); save it "
                "as UTF-8",
                name);
        goto out;
    }
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
        text += 3;
        len -= 3;
    }
    for (size_t i = 0; i + 2 < len; i++)
        if (memcmp(text + i, "\xef\xbb\xbf", 3) == 0) {
            int line, col;
            offset_pos(text, len, i, &line, &col);
            err_set(err, code,
                    "%s:%d:%d: byte order mark (U+FEFF) inside the file; only the very start may "
                    "hold one",
                    name, line, col);
            goto out;
        }
    yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    while (!done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            parser_error(&p, name, text, len, err, code);
            goto out;
        }
        int line = (int)ev.start_mark.line + 1, col = (int)ev.start_mark.column + 1;
        const yaml_char_t *anchor = NULL, *tag = NULL;
        struct ynode *node = NULL;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (doc_seen) {
                err_set(err, code, "%s:%d:%d: only one YAML document is allowed per file", name,
                        line, col);
                goto fail_event;
            }
            doc_seen = true;
            break;
        case YAML_ALIAS_EVENT: {
            char q[64];
            ytree_quote((const char *)ev.data.alias.anchor, strlen((char *)ev.data.alias.anchor), q,
                        sizeof(q));
            err_set(err, code, "%s:%d:%d: anchors and aliases are not allowed (alias '*%s')", name,
                    line, col, q);
            goto fail_event;
        }
        case YAML_SCALAR_EVENT:
            anchor = ev.data.scalar.anchor;
            tag = ev.data.scalar.tag;
            node = node_new(Y_SCALAR, ev.start_mark);
            node->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                          !(tag && strcmp((const char *)tag, "tag:yaml.org,2002:str") == 0);
            node->len = ev.data.scalar.length;
            node->text = xstrndup((const char *)ev.data.scalar.value, node->len);
            break;
        case YAML_SEQUENCE_START_EVENT:
            anchor = ev.data.sequence_start.anchor;
            tag = ev.data.sequence_start.tag;
            node = node_new(Y_SEQ, ev.start_mark);
            break;
        case YAML_MAPPING_START_EVENT:
            anchor = ev.data.mapping_start.anchor;
            tag = ev.data.mapping_start.tag;
            node = node_new(Y_MAP, ev.start_mark);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        default:
            break;
        }
        /* a new node: attach it first (so the tree owns it whatever fails),
         * then apply the policy: no anchors, core tags only, no NUL, string
         * keys, unique keys, bounded depth */
        if (node) {
            struct ynode *parent = depth ? stack[depth - 1] : NULL;
            char q[64];
            if (parent)
                kids_push(parent, node);
            else if (!root)
                root = node;
            if (anchor) {
                ytree_quote((const char *)anchor, strlen((const char *)anchor), q, sizeof(q));
                err_set(err, code, "%s:%d:%d: anchors and aliases are not allowed (anchor '&%s')",
                        name, line, col, q);
                goto fail_node;
            }
            if (!tag_ok(tag)) {
                const char *t = (const char *)tag;
                bool std = strncmp(t, "tag:yaml.org,2002:", 18) == 0;
                ytree_quote(std ? t + 18 : t, strlen(std ? t + 18 : t), q, sizeof(q));
                err_set(err, code,
                        "%s:%d:%d: YAML tag '%s%s' is not allowed (only core tags such as !!str)",
                        name, line, col, std ? "!!" : "", q);
                goto fail_node;
            }
            if (node->kind == Y_SCALAR && strlen(node->text) != node->len) {
                err_set(err, code, "%s:%d:%d: NUL character in a string", name, line, col);
                goto fail_node;
            }
            if (parent && parent->kind == Y_MAP && parent->n % 2 == 1) { /* node is a key */
                if (node->kind != Y_SCALAR) {
                    err_set(err, code, "%s:%d:%d: map keys must be strings, not %s", name, line,
                            col, ytree_kind_name(node));
                    goto fail_node;
                }
                const struct ynode *first = dup_insert(&dups, parent, node);
                if (first) {
                    ytree_quote(node->text, node->len, q, sizeof(q));
                    err_set(err, code, "%s:%d:%d: duplicate key '%s' (first at %d:%d)", name, line,
                            col, q, first->line, first->col);
                    goto fail_node;
                }
            }
            if (node->kind != Y_SCALAR) {
                if (depth >= max_depth) {
                    err_set(err, code, "%s:%d:%d: nesting deeper than %d levels", name, line, col,
                            max_depth);
                    goto fail_node;
                }
                stack[depth++] = node;
            }
        }
        yaml_event_delete(&ev);
        continue;
    fail_node: /* node is already in the tree (one document has one root) */
    fail_event:
        yaml_event_delete(&ev);
        goto out;
    }
    if (!root) {
        err_set(err, code, "%s:1:1: the file is empty (no YAML content, only blanks or comments)",
                name);
        goto out;
    }
    *out = root;
    root = NULL;
    rc = 0;
out:
    ytree_free(root);
    yaml_parser_delete(&p);
    free(dups.e);
    free(stack);
    return rc;
}
