/*
 * matrix: the top-level `matrix:` of an experiment file, a map of dotted
 * keys to value lists, turned into one override per combination that the
 * loader (experiment.c) merges like a variant's own. Owned copies of the
 * YAML nodes are made, so the values keep their place in the file for
 * error messages and the merge frees nothing twice.
 */
#include "config/matrix.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* The full path a matrix key stands for ("flags.x" -> "server.flags.x"), in
 * out; NULL when it names no variant-level setting. A path below a map of
 * flags, env or patterns names one entry of it. */
const struct schema_key *mx_target(const char *key, char *out, size_t size)
{
    bool short_form = strncmp(key, "flags.", 6) == 0 || strncmp(key, "env.", 4) == 0;
    snprintf(out, size, "%s%s", short_form ? "server." : "", key);
    const struct schema_key *k = schema_find(out);
    if (k) /* a setting itself: a leaf that variants may set */
        return (k->flags & KF_VAR) && k->type != K_SECTION && k->type != K_VARIANTS &&
                       k->type != K_FLAGS && k->type != K_ENV && k->type != K_PATTERNS
                   ? k
                   : NULL;
    char parent[128];
    const char *dot = strrchr(out, '.');
    if (!dot || !dot[1])
        return NULL;
    snprintf(parent, sizeof(parent), "%.*s", (int)(dot - out), out);
    k = schema_find(parent);
    return k && (k->type == K_FLAGS || k->type == K_ENV || k->type == K_PATTERNS) ? k : NULL;
}

/* The index (among m's keys, 0-based) of an earlier key of matrix m that
 * names the same setting as key i ("flags.x" and "server.flags.x"), or -1.
 * Two such axes would set one value twice, the last one winning, and label
 * variants with values that never ran. */
int mx_same_target(const struct ynode *m, size_t i)
{
    char want[160], got[160];
    mx_target(m->kids[2 * i]->text, want, sizeof(want));
    for (size_t j = 0; j < i; j++) {
        mx_target(m->kids[2 * j]->text, got, sizeof(got));
        if (strcmp(want, got) == 0)
            return (int)j;
    }
    return -1;
}

/* Matrix values name folders: they must be short plain scalars. */
bool mx_value_ok(const struct ynode *v)
{
    if (v->kind != Y_SCALAR || ytree_is_null(v) || v->len == 0 || v->len > 32)
        return false;
    for (size_t i = 0; i < v->len; i++) {
        unsigned char ch = (unsigned char)v->text[i];
        if (!isalnum(ch) && ch != '.' && ch != '_' && ch != '-')
            return false;
    }
    return true;
}

/* An owned copy of n (NULL: an empty map at line, col); ytree_free frees it. */
static struct ynode *node_copy(const struct ynode *n, int line, int col)
{
    struct ynode *c = xcalloc(1, sizeof(*c));
    c->kind = n ? n->kind : Y_MAP;
    c->line = n ? n->line : line;
    c->col = n ? n->col : col;
    c->plain = n && n->plain;
    if (n && n->text) {
        c->text = xstrndup(n->text, n->len);
        c->len = n->len;
    }
    for (size_t i = 0; n && i < n->n; i++) {
        XGROW(c->kids, c->cap, c->n + 1);
        c->kids[c->n++] = node_copy(n->kids[i], 0, 0);
    }
    return c;
}

/* A plain scalar key at (line, col), owned. */
static struct ynode *key_node(const char *text, size_t len, int line, int col)
{
    struct ynode *k = xcalloc(1, sizeof(*k));
    k->kind = Y_SCALAR;
    k->line = line;
    k->col = col;
    k->plain = true;
    k->text = xstrndup(text, len);
    k->len = len;
    return k;
}

/*
 * The override of one variant under combination `combo` of matrix m: an
 * owned copy of over (NULL: none) with each matrix key's value for this
 * combination set at its path (maps made as needed, a value replaced), and
 * the combination's name ("max-batch=8,quant=mxfp4") appended to name.
 * The values keep their place in the file, so errors point at them.
 */
struct ynode *mx_combo(const struct ynode *m, size_t combo, const struct ynode *over,
                       struct buf *name)
{
    struct ynode *root = node_copy(over, m->line, m->col);
    size_t pick[SCHEMA_MAX_MATRIX_KEYS]; /* per key, its value; the last key varies fastest */
    for (size_t i = m->n / 2; i-- > 0;) {
        pick[i] = combo % m->kids[2 * i + 1]->n;
        combo /= m->kids[2 * i + 1]->n;
    }
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        const struct ynode *key = m->kids[i], *vals = m->kids[i + 1];
        const struct ynode *val = vals->kids[pick[i / 2]];
        char full[160];
        mx_target(key->text, full, sizeof(full));
        struct ynode *at = root;
        for (const char *p = full; *p;) {
            size_t len = strcspn(p, ".");
            bool leaf = p[len] == '\0';
            size_t k = 0;
            while (k + 1 < at->n &&
                   !(at->kids[k]->len == len && strncmp(at->kids[k]->text, p, len) == 0))
                k += 2;
            if (k + 1 >= at->n) { /* a new key */
                XGROW(at->kids, at->cap, at->n + 2);
                at->kids[at->n++] = key_node(p, len, key->line, key->col);
                at->kids[at->n++] = NULL;
            }
            struct ynode **slot = &at->kids[k + 1];
            if (leaf || !*slot || (*slot)->kind != Y_MAP) {
                ytree_free(*slot);
                *slot = leaf ? node_copy(val, 0, 0) : node_copy(NULL, val->line, val->col);
            }
            at = *slot;
            p += len + !leaf;
        }
        buf_printf(name, "%s%s=%s", name->len ? "," : "", schema_leaf(full), val->text);
    }
    return root;
}
