/*
 * compare: loading the series, the cells of the side-by-side tables (a
 * value, or missing/failed/n/a), the terminal table, compare.md and the
 * overlay and ratio charts.
 */
#include "analysis/compare.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "fileio.h"
#include "strutil.h"
#include "sweep.h"
#include "version.h"
#include "xalloc.h"

#include "analysis/html_compare.h"
#include "analysis/plot.h"
#include "analysis/rundir.h"
#include "analysis/summary.h"

#include "store/metric.h"

/* Metrics compared by default, in table order (those no series has are left out). */
static const char *const default_metrics[] = {
    "output_throughput", "median_tpot_ms", "median_ttft_ms", "p99_ttft_ms",
    "median_itl_ms",     "median_e2e_ms",  "j_per_token", /* where power was sampled
                                                             (analysis/power.h) */
};

enum cell_kind {
    CELL_VALUE,   /* ok rows with the metric: mean (sd over repeats) */
    CELL_MISSING, /* the series has no row at this concurrency */
    CELL_FAILED,  /* rows, none ok */
    CELL_NA,      /* ok rows without this metric */
};

struct cell {
    enum cell_kind kind;
    struct fit_spread v; /* CELL_VALUE: n, mean, sd */
};

static const char *cell_word(enum cell_kind k)
{
    return k == CELL_MISSING ? "missing" : k == CELL_FAILED ? "failed" : "n/a";
}

static struct cell get_cell(const struct cmp_set *c, size_t si, long conc, const char *metric)
{
    const struct cmp_series *s = &c->s[si];
    const struct res_table *t = &c->runs[s->run].t;
    struct cell out = {CELL_MISSING, {0}};
    size_t rows = 0, ok = 0;
    for (size_t r = 0; r < t->n; r++) {
        const struct res_point *p = &t->rows[r];
        if (p->concurrency != conc || strcmp(p->variant ? p->variant : "", s->variant) != 0)
            continue;
        rows++;
        ok += p->status && strcmp(p->status, RES_OK) == 0;
    }
    if (!rows)
        return out;
    out.kind = ok ? CELL_NA : CELL_FAILED;
    if (!ok)
        return out;
    struct sum_series ss;
    sum_metric(t, s->variant, metric, &ss);
    const struct sum_level *lv = sum_find(&ss, conc);
    if (lv) {
        out.kind = CELL_VALUE;
        out.v = lv->s;
    }
    sum_series_release(&ss);
    return out;
}

/* ---- loading ---- */

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void add_series(struct cmp_set *c, size_t run, const char *variant, bool with_variant)
{
    c->s = xrealloc(c->s, (c->n_s + 1) * sizeof(*c->s));
    struct cmp_series *s = &c->s[c->n_s++];
    memset(s, 0, sizeof(*s));
    char *base = path_dir_name(c->runs[run].dir);
    s->label = with_variant ? xasprintf("%s:%s", base, variant) : xstrdup(base);
    s->run = run;
    s->variant = xstrdup(variant);
    free(base);
}

/* Load one "RUN_DIR[:VARIANT]" into c. */
static int load_spec(struct cmp_set *c, const char *spec, struct rundir *first, struct err *err)
{
    char *dir = xstrdup(spec), *variant = NULL;
    int rc = -1;
    struct rundir rd;
    char *colon = strrchr(dir, ':');
    if (!is_dir(dir) && colon) { /* RUN_DIR:VARIANT (a folder may itself contain ':') */
        *colon = '\0';
        variant = colon + 1;
    }
    if (rundir_open(dir, &rd, err) != 0)
        goto out;
    c->runs = xrealloc(c->runs, (c->n_runs + 1) * sizeof(*c->runs));
    struct cmp_run *run = &c->runs[c->n_runs];
    run->dir = xstrdup(dir);
    res_table_init(&run->t);
    c->n_runs++;
    char *csv = path_join(dir, "points.csv");
    if (!path_exists(csv)) {
        err_set(err, RN_ERR_ENV, "%s: no points.csv (run 'sweep plot %s' to rebuild it)", dir, dir);
        free(csv);
        rundir_release(&rd);
        goto out;
    }
    int lrc = res_table_load(csv, &run->t, err);
    free(csv);
    if (lrc != 0) {
        rundir_release(&rd);
        goto out;
    }
    struct strvec order = STRVEC_INIT, vars = STRVEC_INIT;
    for (size_t i = 0; i < rd.n_v; i++)
        strvec_push(&order, rd.v[i].name);
    sum_variants(&run->t, &order, &vars);
    if (variant) {
        if (strvec_find(&vars, variant) < 0) {
            struct buf names;
            buf_init(&names, 4096);
            for (size_t i = 0; i < vars.n; i++)
                buf_printf(&names, "%s'%s'", i ? ", " : "", vars.v[i]);
            err_set(err, RN_ERR_USAGE, "%s: no variant '%s' in points.csv (it has %s)", spec,
                    variant, names.data ? names.data : "none");
            buf_release(&names);
        } else {
            add_series(c, c->n_runs - 1, variant, true);
            rc = 0;
        }
    } else {
        for (size_t i = 0; i < vars.n; i++)
            add_series(c, c->n_runs - 1, vars.v[i], vars.n > 1);
        rc = vars.n ? 0 : (err_set(err, RN_ERR_USAGE, "%s: points.csv has no points", dir), -1);
    }
    strvec_release(&order);
    strvec_release(&vars);
    if (!first->dir && rc == 0)
        *first = rd; /* the baseline's settings name the fit */
    else
        rundir_release(&rd);
out:
    free(dir);
    return rc;
}

void cmp_metric_names(const struct cmp_set *c, struct strvec *have)
{
    for (size_t r = 0; r < c->n_runs; r++)
        for (size_t k = 0; k < c->runs[r].t.n; k++) {
            const struct metric_set *ms = &c->runs[r].t.rows[k].metrics;
            for (size_t j = 0; j < ms->n; j++)
                if (strvec_find(have, ms->m[j].name) < 0)
                    strvec_push(have, ms->m[j].name);
        }
}

/* Every --metric must be a column of some run: one no run has would make a
 * table of "n/a" and exit 0. The message offers the closest column. */
static int check_metrics(const struct cmp_set *c, const struct strvec *metrics, struct err *err)
{
    struct strvec have = STRVEC_INIT;
    int rc = 0;
    cmp_metric_names(c, &have);
    for (size_t i = 0; i < metrics->n && rc == 0; i++) {
        if (strvec_find(&have, metrics->v[i]) >= 0)
            continue;
        /* a strvec ends with NULL, as str_suggest wants */
        const char *hint = have.n ? str_suggest(metrics->v[i], (const char *const *)have.v) : NULL;
        if (hint)
            err_set(err, RN_ERR_USAGE, "--metric '%s': no run has it (did you mean '%s'?)",
                    metrics->v[i], hint);
        else
            err_set(err, RN_ERR_USAGE,
                    "--metric '%s': no run has it (the columns of points.csv after wall_s are "
                    "the metrics)",
                    metrics->v[i]);
        rc = -1;
    }
    strvec_release(&have);
    return rc;
}

int cmp_load(const char *const *specs, size_t n, const struct strvec *metrics, struct cmp_set *c,
             struct err *err)
{
    struct rundir first;
    memset(c, 0, sizeof(*c));
    memset(&first, 0, sizeof(first));
    for (size_t i = 0; i < n; i++)
        if (load_spec(c, specs[i], &first, err) != 0)
            goto fail;
    if (c->n_s < 2) {
        err_set(err, RN_ERR_USAGE,
                "compare needs two series or more (got %zu): name two runs, or "
                "a run with two variants",
                c->n_s);
        goto fail;
    }
    /* labels must tell series apart: fall back to the paths as given */
    for (size_t i = 0; i < c->n_s; i++)
        for (size_t j = i + 1; j < c->n_s; j++)
            if (strcmp(c->s[i].label, c->s[j].label) == 0)
                for (size_t k = 0; k < c->n_s; k++) {
                    free(c->s[k].label);
                    c->s[k].label = xasprintf("%s:%s", c->runs[c->s[k].run].dir, c->s[k].variant);
                }
    c->fit_x = xstrdup(first.fit_x ? first.fit_x : "concurrency");
    c->fit_y = xstrdup(first.fit_y ? first.fit_y : "median_tpot_ms");
    rundir_release(&first);
    for (size_t i = 0; i < c->n_s; i++)
        sum_fit(&c->runs[c->s[i].run].t, c->s[i].variant, c->fit_x, c->fit_y, &c->s[i].fit);
    /* metrics: as asked (each one some run has), else the defaults some series has */
    if (metrics && metrics->n) {
        if (check_metrics(c, metrics, err) != 0)
            goto fail;
        strvec_copy(&c->metrics, metrics);
    } else {
        for (size_t m = 0; m < sizeof(default_metrics) / sizeof(default_metrics[0]); m++)
            for (size_t r = 0; r < c->n_runs; r++) {
                bool has = false;
                for (size_t k = 0; k < c->runs[r].t.n && !has; k++)
                    has = mset_get(&c->runs[r].t.rows[k].metrics, default_metrics[m], NULL);
                if (has) {
                    strvec_push(&c->metrics, default_metrics[m]);
                    break;
                }
            }
    }
    /* the union of concurrencies over every series */
    size_t cap = 0;
    for (size_t r = 0; r < c->n_runs; r++)
        cap += c->runs[r].t.n;
    c->conc = xcalloc(cap + 1, sizeof(long));
    for (size_t i = 0; i < c->n_s; i++) {
        const struct res_table *t = &c->runs[c->s[i].run].t;
        for (size_t k = 0; k < t->n; k++) {
            if (strcmp(t->rows[k].variant ? t->rows[k].variant : "", c->s[i].variant) != 0)
                continue;
            bool seen = false;
            for (size_t q = 0; q < c->n_conc && !seen; q++)
                seen = c->conc[q] == t->rows[k].concurrency;
            if (!seen)
                c->conc[c->n_conc++] = t->rows[k].concurrency;
        }
    }
    qsort(c->conc, c->n_conc, sizeof(long), cmp_long);
    return 0;
fail:
    rundir_release(&first);
    cmp_release(c);
    return -1;
}

void cmp_release(struct cmp_set *c)
{
    for (size_t i = 0; i < c->n_runs; i++) {
        free(c->runs[i].dir);
        res_table_release(&c->runs[i].t);
    }
    free(c->runs);
    for (size_t i = 0; i < c->n_s; i++) {
        free(c->s[i].label);
        free(c->s[i].variant);
        fit_analysis_release(&c->s[i].fit);
    }
    free(c->s);
    free(c->fit_x);
    free(c->fit_y);
    strvec_release(&c->metrics);
    free(c->conc);
    memset(c, 0, sizeof(*c));
}

/* ---- text ---- */

/* A cell as text: "28.05", "28.05±0.40", or the word for a missing value. */
static void cell_text(const struct cell *x, char *out, size_t size)
{
    if (x->kind != CELL_VALUE)
        snprintf(out, size, "%s", cell_word(x->kind));
    else if (x->v.n > 1)
        snprintf(out, size, "%.2f±%.2f", x->v.mean, x->v.sd);
    else
        snprintf(out, size, "%.2f", x->v.mean);
}

/* B/A as text, or "-" where either side has no value. */
static bool ratio(const struct cell *a, const struct cell *b, double *r)
{
    if (a->kind != CELL_VALUE || b->kind != CELL_VALUE || a->v.mean == 0 || !isfinite(a->v.mean) ||
        !isfinite(b->v.mean))
        return false;
    *r = b->v.mean / a->v.mean;
    return true;
}

/* The width of the value columns, in terminal columns: the widest label
 * + 2 or cell + 1 (with the blank before each column, two blanks at least
 * between right-aligned values), at least 12. Display width, not bytes: "±" is two bytes
 * and one column, and printf's %*s counts bytes. */
static size_t col_width(const struct cmp_set *c)
{
    size_t w = 12;
    for (size_t i = 0; i < c->n_s; i++)
        if (str_display_width(c->s[i].label) + 2 > w)
            w = str_display_width(c->s[i].label) + 2;
    for (size_t m = 0; m < c->metrics.n; m++)
        for (size_t k = 0; k < c->n_conc; k++)
            for (size_t i = 0; i < c->n_s; i++) {
                struct cell x = get_cell(c, i, c->conc[k], c->metrics.v[m]);
                char txt[64];
                cell_text(&x, txt, sizeof(txt));
                if (str_display_width(txt) + 1 > w)
                    w = str_display_width(txt) + 1;
            }
    return w;
}

/* s padded to w terminal columns: on the left (right-aligned) or right. */
static void put_padded(FILE *f, const char *s, size_t w, bool right_align)
{
    size_t dw = str_display_width(s);
    if (!right_align)
        fputs(s, f);
    for (; dw < w; dw++)
        fputc(' ', f);
    if (right_align)
        fputs(s, f);
}

void cmp_print(FILE *f, const struct cmp_set *c)
{
    int w = (int)col_width(c);
    fprintf(f, "baseline A = %s; ratios are B/A\n", c->s[0].label);
    for (size_t m = 0; m < c->metrics.n; m++) {
        char *label = sum_label(c->metrics.v[m]);
        fprintf(f, "\n%s\n%8s", label, "C");
        free(label);
        for (size_t i = 0; i < c->n_s; i++) {
            fputc(' ', f);
            put_padded(f, c->s[i].label, (size_t)w, true);
            if (i)
                fprintf(f, " %*s", 8, "B/A");
        }
        fputc('\n', f);
        for (size_t k = 0; k < c->n_conc; k++) {
            struct cell a = get_cell(c, 0, c->conc[k], c->metrics.v[m]);
            fprintf(f, "%8ld", c->conc[k]);
            for (size_t i = 0; i < c->n_s; i++) {
                struct cell b = i ? get_cell(c, i, c->conc[k], c->metrics.v[m]) : a;
                char txt[64];
                cell_text(&b, txt, sizeof(txt));
                fputc(' ', f);
                put_padded(f, txt, (size_t)w, true);
                if (i) {
                    double r;
                    if (ratio(&a, &b, &r))
                        fprintf(f, " %8.3f", r);
                    else
                        fprintf(f, " %8s", "-");
                }
            }
            fputc('\n', f);
        }
    }
    /* "R²" is 3 bytes wide in UTF-8 but one column on screen: pad by hand */
    fprintf(f, "\nfit %s = a + b·%s\n%-*s %10s %10s %12s      R² %8s %10s\n", c->fit_y, c->fit_x, w,
            "series", "a", "b", "ceiling", "b B/A", "ceil B/A");
    const struct fit_analysis *fa0 = &c->s[0].fit;
    for (size_t i = 0; i < c->n_s; i++) {
        const struct fit_analysis *fa = &c->s[i].fit;
        put_padded(f, c->s[i].label, (size_t)w, false);
        if (!fa->ok) {
            fprintf(f, " %s\n", fa->reason);
            continue;
        }
        fprintf(f, " %10.2f %10.2f", fa->line.a, fa->line.b);
        if (isfinite(fa->ceiling)) /* none from a line that is not a law (fit.h: unfit) */
            fprintf(f, " %12.1f %7.3f", fa->ceiling, fa->line.r2);
        else
            fprintf(f, " %12s %7.3f", "-", fa->line.r2);
        if (i && fa0->ok && fa0->line.b != 0)
            fprintf(f, " %8.3f", fa->line.b / fa0->line.b);
        else
            fprintf(f, " %8s", "-");
        if (i && fa0->ok && isfinite(fa->ceiling) && isfinite(fa0->ceiling))
            fprintf(f, " %10.3f", fa->ceiling / fa0->ceiling);
        else
            fprintf(f, " %10s", "-");
        fputc('\n', f);
    }
}

/* ---- compare.md and charts ---- */

static void md_tables(struct buf *b, const struct cmp_set *c)
{
    for (size_t m = 0; m < c->metrics.n; m++) {
        char *label = sum_label(c->metrics.v[m]);
        buf_printf(b, "## %s\n\n| C |", label);
        free(label);
        for (size_t i = 0; i < c->n_s; i++)
            buf_printf(b, " %s |%s", c->s[i].label, i ? " B/A |" : "");
        buf_puts(b, "\n|---:|");
        for (size_t i = 0; i < c->n_s; i++)
            buf_puts(b, i ? "---:|---:|" : "---:|");
        buf_putc(b, '\n');
        for (size_t k = 0; k < c->n_conc; k++) {
            struct cell a = get_cell(c, 0, c->conc[k], c->metrics.v[m]);
            buf_printf(b, "| %ld |", c->conc[k]);
            for (size_t i = 0; i < c->n_s; i++) {
                struct cell x = i ? get_cell(c, i, c->conc[k], c->metrics.v[m]) : a;
                char txt[64];
                double r;
                cell_text(&x, txt, sizeof(txt));
                buf_printf(b, " %s |", txt);
                if (i && ratio(&a, &x, &r))
                    buf_printf(b, " %.3f |", r);
                else if (i)
                    buf_puts(b, " - |");
            }
            buf_putc(b, '\n');
        }
        buf_putc(b, '\n');
    }
}

static void md_fits(struct buf *b, const struct cmp_set *c)
{
    const struct fit_analysis *fa0 = &c->s[0].fit;
    buf_printf(b,
               "## Fits: %s = a + b·%s\n\n| series | a | b | ceiling (tok/s) | R² | points | "
               "b B/A | ceiling B/A |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
               c->fit_y, c->fit_x);
    for (size_t i = 0; i < c->n_s; i++) {
        const struct fit_analysis *fa = &c->s[i].fit;
        if (!fa->ok) {
            buf_printf(b, "| %s | no fit: %s | | | | | | |\n", c->s[i].label, fa->reason);
            continue;
        }
        char ceil[32] = "-"; /* none from a line that is not a law (fit.h: unfit) */
        if (isfinite(fa->ceiling))
            snprintf(ceil, sizeof(ceil), "%.1f", fa->ceiling);
        buf_printf(b, "| %s | %.2f | %.2f | %s | %.3f | %zu |", c->s[i].label, fa->line.a,
                   fa->line.b, ceil, fa->line.r2, fa->line.n);
        if (i && fa0->ok && fa0->line.b != 0)
            buf_printf(b, " %.3f |", fa->line.b / fa0->line.b);
        else
            buf_puts(b, " - |");
        if (i && fa0->ok && isfinite(fa->ceiling) && isfinite(fa0->ceiling))
            buf_printf(b, " %.3f |\n", fa->ceiling / fa0->ceiling);
        else
            buf_puts(b, " - |\n");
    }
    buf_putc(b, '\n');
}

/* The comparison in sentences: per common point and per fit. */
static void md_words(struct buf *b, const struct cmp_set *c)
{
    buf_puts(b, "## In words\n\n");
    for (size_t i = 1; i < c->n_s; i++) {
        for (size_t k = 0; k < c->n_conc; k++)
            for (size_t m = 0; m < c->metrics.n && m < 2; m++) {
                struct cell a = get_cell(c, 0, c->conc[k], c->metrics.v[m]);
                struct cell x = get_cell(c, i, c->conc[k], c->metrics.v[m]);
                double r;
                char *label = sum_label(c->metrics.v[m]);
                char *unit = strstr(label, " (");
                if (unit)
                    *unit = '\0';
                if (ratio(&a, &x, &r))
                    buf_printf(b, "- at concurrency %ld, %s's %s is %.2f× %s's (%+.0f%%)\n",
                               c->conc[k], c->s[i].label, label, r, c->s[0].label, 100 * (r - 1));
                else if (m == 0)
                    buf_printf(b, "- at concurrency %ld: %s %s, %s %s (no ratio)\n", c->conc[k],
                               c->s[0].label, a.kind == CELL_VALUE ? "measured" : cell_word(a.kind),
                               c->s[i].label,
                               x.kind == CELL_VALUE ? "measured" : cell_word(x.kind));
                free(label);
            }
        const struct fit_analysis *fa = &c->s[i].fit, *fa0 = &c->s[0].fit;
        if (fa->ok && fa0->ok && !fa->unfit && !fa0->unfit && fa0->line.b > 0 && fa->line.b > 0 &&
            sum_is_step_metric(c->fit_y))
            buf_printf(b,
                       "- each added request costs %s %.1f ms per decode step against %.1f ms "
                       "for %s (%.2f×); ceiling %.1f against %.1f tok/s\n",
                       c->s[i].label, fa->line.b, fa0->line.b, c->s[0].label,
                       fa->line.b / fa0->line.b, fa->ceiling, fa0->ceiling);
    }
    buf_putc(b, '\n');
}

/* An overlay chart of metric for every series, with its fit where asked. */
static void overlay(const struct cmp_set *c, struct plot_chart *ch, const char *name,
                    const char *tmpl, const char *metric, enum plot_fit fit)
{
    char *label = sum_label(metric);
    const char *unit = strstr(label, " (");
    struct buf names;
    buf_init(&names, 4096);
    for (size_t i = 0; i < c->n_s; i++)
        buf_printf(&names, "%s%s", i ? " vs " : "", c->s[i].label);
    char *title =
        xasprintf("%.*s vs concurrency: %s", (int)(unit ? (size_t)(unit - label) : strlen(label)),
                  label, names.data);
    buf_release(&names);
    plot_chart_init(ch, name, tmpl, title, label, fit);
    for (size_t i = 0; i < c->n_s; i++) {
        struct sum_series ss;
        sum_metric(&c->runs[c->s[i].run].t, c->s[i].variant, metric, &ss);
        struct plot_series *ps = plot_chart_series(ch, c->s[i].label);
        for (size_t l = 0; l < ss.n; l++)
            plot_series_add(ps, (double)ss.lv[l].concurrency, ss.lv[l].s.mean, ss.lv[l].s.min,
                            ss.lv[l].s.max);
        const struct fit_analysis *fa = &c->s[i].fit;
        if (fit != PLOT_FIT_NONE && fa->ok && strcmp(c->fit_x, "concurrency") == 0) {
            ps->fit = true;
            ps->a = fa->line.a;
            ps->b = fa->line.b;
            ps->r2 = fa->line.r2;
        }
        sum_series_release(&ss);
    }
    free(label);
    free(title);
}

/* B/A of output throughput and of the fitted metric, per common concurrency. */
static void ratio_chart(const struct cmp_set *c, struct plot_chart *ch)
{
    char *title = xasprintf("ratio B/A vs concurrency (A = %s)", c->s[0].label);
    plot_chart_init(ch, "ratio", "ratio", title, "ratio B/A (1 = equal)", PLOT_FIT_NONE);
    free(title);
    const char *ms[] = {"output_throughput", c->fit_y};
    for (size_t i = 1; i < c->n_s; i++)
        for (size_t m = 0; m < 2; m++) {
            char *label = sum_label(ms[m]);
            const char *unit = strstr(label, " (");
            char *t = xasprintf("%s/%s %.*s", c->s[i].label, c->s[0].label,
                                (int)(unit ? (size_t)(unit - label) : strlen(label)), label);
            struct plot_series *ps = plot_chart_series(ch, t);
            for (size_t k = 0; k < c->n_conc; k++) {
                struct cell a = get_cell(c, 0, c->conc[k], ms[m]);
                struct cell x = get_cell(c, i, c->conc[k], ms[m]);
                double r;
                if (ratio(&a, &x, &r))
                    plot_series_add(ps, (double)c->conc[k], r, r, r);
            }
            free(t);
            free(label);
        }
}

int cmp_write(const struct cmp_set *c, const char *out_dir, struct err *err)
{
    char *pdir = path_join(out_dir, "plots");
    struct plot_chart charts[5];
    size_t n_charts = 0;
    struct strvec drawn = STRVEC_INIT;
    char *chart_error = NULL;
    struct buf b;
    int rc = -1;
    buf_init(&b, (size_t)16 << 20);
    if (mkdir_p(pdir, 0755, err, RN_ERR_ENV) != 0)
        goto out;
    bool step = sum_is_step_metric(c->fit_y);
    const char *tpot = strstr(c->fit_y, "_tpot_ms") ? c->fit_y : "median_tpot_ms";
    overlay(c, &charts[n_charts++], "throughput", "throughput", "output_throughput",
            step ? PLOT_FIT_THROUGHPUT : PLOT_FIT_NONE);
    overlay(c, &charts[n_charts++], "tpot", "tpot", tpot,
            strcmp(tpot, c->fit_y) == 0 ? PLOT_FIT_LINE : PLOT_FIT_NONE);
    overlay(c, &charts[n_charts++], "ttft", "ttft", "median_ttft_ms", PLOT_FIT_NONE);
    ratio_chart(c, &charts[n_charts++]);
    html_compare_pareto_chart(c, &charts[n_charts++]);
    struct buf failed, why; /* every chart that failed, and the reasons */
    buf_init(&failed, BUF_MAX_DEFAULT);
    buf_init(&why, BUF_MAX_DEFAULT);
    size_t n_failed = 0, n_tried = 0;
    for (size_t i = 0; i < n_charts; i++) {
        struct err e;
        err_init(&e);
        if (plot_chart_points(&charts[i]) == 0)
            continue;
        n_tried++;
        if (plot_write(&charts[i], pdir, &e) != 0 || plot_render(pdir, charts[i].name, &e) != 0) {
            if (strstr(e.msg, "gnuplot not found")) {
                if (!n_failed)
                    chart_error = xstrdup(e.msg);
                break;
            }
            plot_note_failure(&failed, &why, charts[i].name, e.msg);
            n_failed++;
            continue;
        }
        strvec_push(&drawn, charts[i].name);
    }
    if (n_failed && !chart_error)
        chart_error = xasprintf("%zu of %zu charts not drawn (%s): %s", n_failed, n_tried,
                                failed.data, why.data);
    buf_release(&failed);
    buf_release(&why);

    buf_printf(&b, "# Comparison: %s", c->s[0].label);
    for (size_t i = 1; i < c->n_s; i++)
        buf_printf(&b, " vs %s", c->s[i].label);
    buf_puts(&b, "\n\n");
    for (size_t i = 0; i < c->n_s; i++)
        buf_printf(&b, "- %s **%s**: variant `%s` of `%s`\n",
                   i ? "B =" : "A (baseline) =", c->s[i].label, c->s[i].variant,
                   c->runs[c->s[i].run].dir);
    buf_puts(&b, "\nValues are means over the ok repeats of a point (± the standard deviation "
                 "when repeated); `missing`: the run has no such point; `failed`: it has, but "
                 "none succeeded.\n\n");
    md_words(&b, c);
    md_tables(&b, c);
    md_fits(&b, c);
    html_compare_pareto_md(&b, c);
    if (c->gates) { /* what held and what broke, in the CI artifact too */
        const char *g = c->gates;
        while (*g == '\n')
            g++;
        buf_printf(&b, "## Gates\n\n```\n%s```\n\n", g);
    }
    buf_puts(&b, "## Charts\n\n");
    for (size_t i = 0; i < n_charts; i++)
        if (strvec_find(&drawn, charts[i].name) >= 0)
            buf_printf(&b, "![%s](plots/%s.png)\n\n[svg](plots/%s.svg) · [%s.gp](plots/%s.gp)\n\n",
                       charts[i].title, charts[i].name, charts[i].name, charts[i].name,
                       charts[i].name);
    if (chart_error)
        buf_printf(&b, "Charts missing: %s\n\n", chart_error);
    buf_printf(&b, "---\nWritten by sweep %s (`sweep compare`).\n", BUILD_VERSION);
    char *md = path_join(out_dir, "compare.md");
    rc = file_write_atomic(md, b.data, b.len, err, RN_ERR_ENV);
    free(md);
    if (rc == 0) /* the same text as one page, charts inline */
        rc = html_compare_write(c, charts, n_charts, &drawn, b.data, out_dir, err);
    if (rc == 0 && chart_error) {
        err_set(err, RN_ERR_ENV, "%s", chart_error);
        rc = -1;
    }
out:
    for (size_t i = 0; i < n_charts; i++)
        plot_chart_release(&charts[i]);
    strvec_release(&drawn);
    free(chart_error);
    buf_release(&b);
    free(pdir);
    return rc;
}

enum cmp_cell cmp_cell(const struct cmp_set *c, size_t si, long conc, const char *metric,
                       struct fit_spread *v)
{
    static const enum cmp_cell kinds[] = {CMP_VALUE, CMP_MISSING, CMP_FAILED, CMP_NA};
    struct cell x = get_cell(c, si, conc, metric);
    *v = x.v;
    return kinds[x.kind];
}

const char *cmp_cell_word(enum cmp_cell k)
{
    return k == CMP_VALUE     ? "measured"
           : k == CMP_MISSING ? "missing"
           : k == CMP_FAILED  ? "failed"
                              : "n/a";
}

bool cmp_split_axis(const char *name, const char *axis, struct buf *value, struct buf *others)
{
    bool found = false;
    const char *dot = strrchr(axis, '.'); /* names hold the key's last part */
    if (dot)
        axis = dot + 1;
    size_t alen = strlen(axis);
    if (value)
        buf_reset(value);
    if (others)
        buf_reset(others);
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, ",");
        if (!found && alen && len > alen && strncmp(p, axis, alen) == 0 && p[alen] == '=') {
            found = true;
            if (value)
                buf_printf(value, "%.*s", (int)(len - alen - 1), p + alen + 1);
        } else if (others) {
            buf_printf(others, "%s%.*s", others->len ? "," : "", (int)len, p);
        }
        p += len + (p[len] == ',');
    }
    if (found && others && !others->len)
        buf_puts(others, "all");
    if (!found && others) {
        buf_reset(others);
        buf_puts(others, name);
    }
    return found;
}
