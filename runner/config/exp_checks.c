/*
 * exp_checks: the cross-key rules of a full pass, run once a section's keys
 * and defaults are in (bench's grid and dataset, metrics' names, the
 * executor), and the file-level ones (analysis.fit, analysis.group_by).
 */
#include <stdlib.h>
#include <string.h>

#include "strutil.h"
#include "xalloc.h"

#include "config/exp_int.h"

#include "client/dataset.h"
#include "client/scrape.h"

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
int finish_bench(struct dctx *c, const struct ynode *map, int line, int col)
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
int finish_metrics(struct dctx *c, const struct ynode *map, int line, int col)
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
int finish_executor(struct dctx *c, const struct ynode *map, int line, int col)
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
int check_fit(struct dctx *c, const struct ynode *root)
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
int check_group_by(struct dctx *c, const struct ynode *root)
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
