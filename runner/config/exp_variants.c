/*
 * exp_variants: `variants` (names, top-level keys), `matrix` (one variant
 * per combination of its axes) and the merged view of a variant: the base
 * server/bench/metrics with the variant's overrides on top.
 */
#include <string.h>

#include "strutil.h"
#include "xalloc.h"

#include "config/exp_int.h"
#include "config/matrix.h"

int check_matrix(struct dctx *c, const struct schema_key *k, const struct ynode *n)
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
        int twin = mx_same_target(n, i / 2);
        if (twin >= 0) {
            const struct ynode *first = n->kids[2 * twin];
            char q2[80];
            return cerr(c, key->line, key->col,
                        "'matrix' key '%s' sets '%s', as '%s' at %d:%d does; give each "
                        "setting one axis",
                        QUOTE(key, q), full, QUOTE(first, q2), first->line, first->col);
        }
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

/* Pass A: the variants list; each entry's name, and its top-level keys. */
int decode_variants(struct dctx *c, const struct schema_key *k, const struct ynode *n)
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
struct ynode *merged_view(const struct ynode *root, const struct ynode *over)
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
