/*
 * report: from points.csv to fit.json, plots/ and REPORT.md. The fit is
 * per variant (summary.c, fit.c); charts overlay the variants (plot.c);
 * the report says what ran, shows every point, states each fit in words,
 * embeds the charts and lists the failures with their causes.
 */
#include "analysis/report.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "sweep.h"
#include "fileio.h"
#include "log.h"
#include "analysis/compare.h"
#include "analysis/metric.h"
#include "analysis/plot.h"
#include "analysis/roofline.h"
#include "store/results.h"
#include "store/rundir.h"
#include "analysis/summary.h"
#include "timeutil.h"
#include "version.h"
#include "xalloc.h"

#define REPORT_MAX ((size_t)64 << 20)

/* Columns of the points table in REPORT.md (shown when any row has them). */
static const char *const table_metrics[] = {
    "output_throughput",
    "median_tpot_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_itl_ms",
    "median_e2e_ms",
    "achieved_concurrency",
    "failed_requests",
    "slo_attainment",
    "goodput_req_s",
    /* prefix caching: TTFT of resent histories and how much was reused */
    "median_ttft_later_turns_ms",
    "cached_token_frac",
    "server_prefix_hit_rate",
};
#define N_TABLE (sizeof(table_metrics) / sizeof(table_metrics[0]))

/* Everything report_build works with, released in one place. */
struct report {
    const char *dir;
    struct rundir rd;
    struct res_table t;
    const char *fit_x, *fit_y;
    struct strvec variants;    /* in display order */
    struct fit_analysis *fits; /* one per variant */
    struct sum_thr *thr;       /* one per variant: the throughput law, TTFT included */
    struct fit_analysis *alt;  /* one per variant: the other of client/server step fits */
    const char *alt_x, *alt_y; /* its axes; NULL when there is no other fit to show */
    struct plot_chart *charts; /* charts written */
    size_t n_charts;
    struct strvec drawn;  /* names of the charts gnuplot rendered */
    char *chart_error;    /* owned; why charts are missing, or NULL */
    bool no_gnuplot;      /* chart_error is "gnuplot not found" (nothing else failed) */
    const char *group_by; /* the matrix axis the charts group by, or NULL */
    size_t *order;        /* owned; variant indices in chart order (grouped by its value) */
    int *color, *mark;    /* owned; per variant: its group's colour, its marker */
};

/* bench.output_len of variant as run, -1 when not known. */
static long variant_output_len(const struct rundir *rd, const char *variant)
{
    for (size_t i = 0; i < rd->n_v; i++)
        if (strcmp(rd->v[i].name, variant) == 0)
            return rd->v[i].output_len;
    return -1;
}

static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *jci(const struct fit_ci *ci)
{
    if (!ci->ok)
        return json_null();
    json_t *a = json_array();
    json_array_append_new(a, jnum(ci->lo));
    json_array_append_new(a, jnum(ci->hi));
    return a;
}

/* The spread of every metric at every concurrency with repeats, or NULL. */
static json_t *spread_json(const struct res_table *t, const char *variant)
{
    json_t *out = json_object();
    bool any = false;
    struct strvec names = STRVEC_INIT;
    for (size_t r = 0; r < t->n; r++)
        for (size_t k = 0; k < t->rows[r].metrics.n; k++)
            if (strvec_find(&names, t->rows[r].metrics.m[k].name) < 0)
                strvec_push(&names, t->rows[r].metrics.m[k].name);
    for (size_t i = 0; i < names.n; i++) {
        struct sum_series s;
        sum_metric(t, variant, names.v[i], &s);
        json_t *levels = json_array();
        for (size_t l = 0; l < s.n; l++) {
            const struct sum_level *lv = &s.lv[l];
            if (lv->s.n < 2)
                continue;
            json_t *o = json_object();
            json_object_set_new(o, "concurrency", json_integer(lv->concurrency));
            json_object_set_new(o, "n", json_integer((json_int_t)lv->s.n));
            json_object_set_new(o, "mean", jnum(lv->s.mean));
            json_object_set_new(o, "sd", jnum(lv->s.sd));
            json_object_set_new(o, "min", jnum(lv->s.min));
            json_object_set_new(o, "max", jnum(lv->s.max));
            json_object_set_new(o, "mean_ci95", jci(&lv->s.mean_ci));
            json_array_append_new(levels, o);
        }
        if (json_array_size(levels)) {
            json_object_set_new(out, names.v[i], levels);
            any = true;
        } else {
            json_decref(levels);
        }
        sum_series_release(&s);
    }
    strvec_release(&names);
    if (!any) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *variant_json(const struct report *r, size_t vi)
{
    const struct fit_analysis *fa = &r->fits[vi];
    const char *variant = r->variants.v[vi];
    json_t *o = json_object();
    json_object_set_new(o, "ok", json_boolean(fa->ok));
    json_object_set_new(o, "points_ok", json_integer((json_int_t)sum_count(&r->t, variant, true)));
    json_object_set_new(o, "points_failed",
                        json_integer((json_int_t)sum_count(&r->t, variant, false)));
    json_object_set_new(o, "n_points", json_integer((json_int_t)fa->line.n));
    json_object_set_new(o, "n_levels", json_integer((json_int_t)fa->n_x));
    if (fa->reason[0])
        json_object_set_new(o, "note", json_string(fa->reason));
    if (fa->unfit)
        json_object_set_new(o, "unfit", json_string(fa->unfit_why));
    const struct sum_thr *th = &r->thr[vi];
    if (th->ok)
        json_object_set_new(o, "throughput_law",
                            json_pack("{s:s, s:o, s:o, s:o, s:o, s:s}", "model",
                                      "N*out*1000/(e2e_a + e2e_b*N)", "e2e_a_ms", jnum(th->e2e.a),
                                      "e2e_b_ms", jnum(th->e2e.b), "out_tokens",
                                      jnum(th->out_tokens), "max_rel_error", jnum(th->max_rel),
                                      "e2e_source", th->source));
    if (r->alt_y && r->alt[vi].ok)
        json_object_set_new(
            o, strcmp(r->alt_y, "server_step_ms") == 0 ? "server_fit" : "client_fit",
            json_pack("{s:s, s:s, s:o, s:o, s:o, s:b}", "x", r->alt_x, "y", r->alt_y, "a",
                      jnum(r->alt[vi].line.a), "b", jnum(r->alt[vi].line.b), "r2",
                      jnum(r->alt[vi].line.r2), "unfit", r->alt[vi].unfit));
    if (fa->ok) {
        json_object_set_new(o, "a", jnum(fa->line.a));
        json_object_set_new(o, "b", jnum(fa->line.b));
        json_object_set_new(o, "r2", jnum(fa->line.r2));
        json_object_set_new(o, "ceiling_tok_s", jnum(fa->ceiling));
        json_object_set_new(o, "c90", jnum(fa->c90));
        json_object_set_new(o, "a_ci95", jci(&fa->a_ci));
        json_object_set_new(o, "b_ci95", jci(&fa->b_ci));
        json_object_set_new(o, "ceiling_ci95", jci(&fa->ceiling_ci));
        json_t *res = json_array(), *regime = json_array();
        for (size_t i = 0; i < fa->n_res; i++) {
            const struct fit_residual *x = &fa->res[i];
            json_t *e = json_object();
            json_object_set_new(e, r->fit_x, jnum(x->x));
            json_object_set_new(e, "repeat", json_integer(x->repeat));
            json_object_set_new(e, r->fit_y, jnum(x->y));
            json_object_set_new(e, "fitted", jnum(x->fitted));
            json_object_set_new(e, "residual", jnum(x->residual));
            json_object_set_new(e, "relative", jnum(x->relative));
            json_object_set_new(e, "regime_change", json_boolean(x->regime_change));
            json_array_append_new(res, e);
            if (x->regime_change)
                json_array_append_new(regime, jnum(x->x));
        }
        json_object_set_new(o, "residuals", res);
        json_object_set_new(o, "regime_changes", regime);
        json_t *pred = json_array();
        for (size_t i = 0; i < fa->n_pred; i++) {
            json_t *e = json_object();
            json_object_set_new(e, r->fit_x, jnum(fa->pred[i].x));
            json_object_set_new(e, r->fit_y, jnum(fa->pred[i].y));
            if (isfinite(fa->pred[i].throughput))
                json_object_set_new(e, "output_throughput", jnum(fa->pred[i].throughput));
            json_array_append_new(pred, e);
        }
        json_object_set_new(o, "predictions", pred);
    }
    json_t *spread = spread_json(&r->t, variant);
    if (spread)
        json_object_set_new(o, "spread", spread);
    return o;
}

static json_t *flat_row(const struct report *r, size_t vi);

static int write_fit_json(const struct report *r, struct err *err)
{
    json_t *root = json_object();
    char stamp[32];
    time_iso8601(stamp, sizeof(stamp));
    json_object_set_new(root, "sweep_version", json_string(BUILD_VERSION));
    json_object_set_new(root, "written", json_string(stamp));
    json_object_set_new(root, "run", json_string(r->rd.name));
    json_object_set_new(root, "model", json_string("y = a + b*x (least squares)"));
    json_object_set_new(root, "x", json_string(r->fit_x));
    json_object_set_new(root, "y", json_string(r->fit_y));
    json_object_set_new(root, "regime_threshold", json_real(FIT_REGIME_REL));
    json_object_set_new(root, "bootstrap",
                        json_pack("{s:i, s:i, s:s}", "replicates", FIT_BOOTSTRAP_N, "seed",
                                  (int)FIT_SEED_DEFAULT, "level", "95% percentile"));
    json_t *vs = json_object();
    for (size_t i = 0; i < r->variants.n; i++)
        json_object_set_new(vs, r->variants.v[i], variant_json(r, i));
    json_object_set_new(root, "variants", vs);
    /* the same as flat rows (fit.csv): pandas.json_normalize(fit["table"]) */
    json_t *table = json_array();
    for (size_t i = 0; i < r->variants.n; i++)
        json_array_append_new(table, flat_row(r, i));
    json_object_set_new(root, "table", table);
    char *path = path_join(r->dir, "fit.json");
    int rc = rundir_write_json(path, root, JSON_REAL_PRECISION(10), err);
    json_decref(root);
    free(path);
    return rc;
}

/* One variant's fit as a flat object (keys in column order): a row of
 * fit.csv and of fit.json's "table". null = not known. */
static json_t *flat_row(const struct report *r, size_t vi)
{
    const struct fit_analysis *fa = &r->fits[vi], *alt = r->alt_y ? &r->alt[vi] : NULL;
    const struct sum_thr *th = &r->thr[vi];
    bool ok = fa->ok;
    json_t *o = json_object();
    json_object_set_new(o, "variant", json_string(r->variants.v[vi]));
    json_object_set_new(o, "x", json_string(r->fit_x));
    json_object_set_new(o, "y", json_string(r->fit_y));
    json_object_set_new(o, "ok", json_boolean(fa->ok && !fa->unfit));
    json_object_set_new(o, "points", json_integer((json_int_t)fa->line.n));
    json_object_set_new(o, "levels", json_integer((json_int_t)fa->n_x));
    json_object_set_new(o, "a", jnum(ok ? fa->line.a : NAN));
    json_object_set_new(o, "b", jnum(ok ? fa->line.b : NAN));
    json_object_set_new(o, "r2", jnum(ok ? fa->line.r2 : NAN));
    json_object_set_new(o, "ceiling_tok_s", jnum(fa->ceiling));
    json_object_set_new(o, "c90", jnum(fa->c90));
    const struct fit_ci *cis[] = {&fa->a_ci, &fa->b_ci, &fa->ceiling_ci};
    static const char *const ci_names[][2] = {{"a_ci95_lo", "a_ci95_hi"},
                                              {"b_ci95_lo", "b_ci95_hi"},
                                              {"ceiling_ci95_lo", "ceiling_ci95_hi"}};
    for (size_t k = 0; k < 3; k++) {
        json_object_set_new(o, ci_names[k][0], jnum(cis[k]->ok ? cis[k]->lo : NAN));
        json_object_set_new(o, ci_names[k][1], jnum(cis[k]->ok ? cis[k]->hi : NAN));
    }
    json_object_set_new(o, "e2e_a_ms", jnum(th->ok ? th->e2e.a : NAN));
    json_object_set_new(o, "e2e_b_ms", jnum(th->ok ? th->e2e.b : NAN));
    json_object_set_new(o, "out_tokens", jnum(th->ok ? th->out_tokens : NAN));
    json_object_set_new(o, "throughput_max_rel_error", jnum(th->ok ? th->max_rel : NAN));
    json_object_set_new(o, "alt_x", json_string(alt ? r->alt_x : ""));
    json_object_set_new(o, "alt_y", json_string(alt ? r->alt_y : ""));
    json_object_set_new(o, "alt_a", jnum(alt && alt->ok ? alt->line.a : NAN));
    json_object_set_new(o, "alt_b", jnum(alt && alt->ok ? alt->line.b : NAN));
    json_object_set_new(o, "alt_r2", jnum(alt && alt->ok ? alt->line.r2 : NAN));
    json_object_set_new(o, "note", json_string(fa->unfit ? fa->unfit_why : fa->reason));
    return o;
}

/* fit.csv: the flat rows of fit.json's "table", for pandas.read_csv and
 * spreadsheets. Empty cell = not known. */
static int write_fit_csv(const struct report *r, struct err *err)
{
    struct buf b;
    buf_init(&b, REPORT_MAX);
    for (size_t vi = 0; vi < r->variants.n; vi++) {
        json_t *row = flat_row(r, vi), *v;
        const char *key;
        bool first = true;
        if (vi == 0) { /* the header: the same keys */
            json_object_foreach(row, key, v)
            {
                buf_puts(&b, first ? "" : ",");
                res_csv_cell(&b, key);
                first = false;
            }
            buf_putc(&b, '\n');
            first = true;
        }
        json_object_foreach(row, key, v)
        {
            buf_puts(&b, first ? "" : ",");
            first = false;
            if (json_is_string(v))
                res_csv_cell(&b, json_string_value(v));
            else if (json_is_integer(v))
                buf_printf(&b, "%lld", (long long)json_integer_value(v));
            else if (json_is_real(v))
                buf_json_num(&b, json_real_value(v));
            else if (json_is_boolean(v))
                buf_puts(&b, json_is_true(v) ? "true" : "false");
        }
        buf_putc(&b, '\n');
        json_decref(row);
    }
    char *path = path_join(r->dir, "fit.csv");
    int rc = file_write_atomic(path, b.data ? b.data : "", b.len, err, RN_ERR_ENV);
    free(path);
    buf_release(&b);
    return rc;
}

/* ---- charts ---- */

/*
 * analysis.group_by (or sweep plot --by): order the variants by the value
 * of the axis (first-seen order), give each value a colour and each
 * combination of the other axes a marker. A variant without the axis comes
 * last with a colour of its own. Without grouping, the run's order.
 */
static void group_variants(struct report *r)
{
    size_t n = r->variants.n;
    r->order = xcalloc(n + 1, sizeof(*r->order));
    r->color = xcalloc(n + 1, sizeof(*r->color));
    r->mark = xcalloc(n + 1, sizeof(*r->mark));
    for (size_t i = 0; i < n; i++)
        r->order[i] = i;
    if (!r->group_by)
        return;
    struct strvec values = STRVEC_INIT, others = STRVEC_INIT;
    struct buf v, o;
    buf_init(&v, 4096);
    buf_init(&o, 4096);
    size_t *rank = xcalloc(n + 1, sizeof(*rank));
    for (size_t i = 0; i < n; i++) {
        bool has = cmp_split_axis(r->variants.v[i], r->group_by, &v, &o);
        const char *val = has && v.data ? v.data : "";
        ptrdiff_t vi = strvec_find(&values, val);
        if (vi < 0 && has)
            strvec_push(&values, val), vi = (ptrdiff_t)values.n - 1;
        ptrdiff_t oi = strvec_find(&others, o.data ? o.data : "");
        if (oi < 0)
            strvec_push(&others, o.data ? o.data : ""), oi = (ptrdiff_t)others.n - 1;
        rank[i] = has ? (size_t)vi : n; /* without the axis: after every group */
        r->mark[i] = (int)oi + 1;
    }
    for (size_t i = 0; i < n; i++)
        r->color[i] = rank[i] < n ? (int)rank[i] + 1 : (int)values.n + 1;
    for (size_t i = 1; i < n; i++) /* stable insertion sort by group */
        for (size_t j = i; j > 0 && rank[r->order[j - 1]] > rank[r->order[j]]; j--) {
            size_t t = r->order[j];
            r->order[j] = r->order[j - 1];
            r->order[j - 1] = t;
        }
    free(rank);
    buf_release(&v);
    buf_release(&o);
    strvec_release(&values);
    strvec_release(&others);
}

/* The series of variant vi on chart c: titled "quant=mxfp4 (max-batch=8)"
 * and styled by its group when grouping, else titled by its name. */
static struct plot_series *variant_series(const struct report *r, struct plot_chart *c, size_t vi)
{
    const char *name = r->variants.v[vi];
    if (!r->group_by)
        return plot_chart_series(c, name);
    struct buf v, o;
    buf_init(&v, 4096);
    buf_init(&o, 4096);
    char *title = cmp_split_axis(name, r->group_by, &v, &o)
                      ? strcmp(o.data, "all") == 0
                            ? xasprintf("%s=%s", r->group_by, v.data ? v.data : "")
                            : xasprintf("%s=%s (%s)", r->group_by, v.data ? v.data : "", o.data)
                      : xstrdup(name);
    struct plot_series *ps = plot_chart_series(c, title);
    ps->color = r->color[vi];
    ps->mark = r->mark[vi];
    free(title);
    buf_release(&v);
    buf_release(&o);
    return ps;
}

/* A chart's title: "NAME: what vs x", ", by AXIS" when grouping. */
static char *chart_title(const struct report *r, const char *label, const char *vs)
{
    const char *unit = strstr(label, " (");
    return xasprintf("%s: %.*s vs %s%s%s", r->rd.name,
                     (int)(unit ? (size_t)(unit - label) : strlen(label)), label, vs,
                     r->group_by ? ", by " : "", r->group_by ? r->group_by : "");
}

/* A chart of metric per variant against concurrency. */
static void metric_chart(struct report *r, const char *name, const char *tmpl, const char *metric,
                         enum plot_fit fit)
{
    char *label = sum_label(metric);
    char *title = chart_title(r, label, "concurrency");
    r->charts = xrealloc(r->charts, (r->n_charts + 1) * sizeof(*r->charts));
    struct plot_chart *c = &r->charts[r->n_charts];
    plot_chart_init(c, name, tmpl, title, label, fit);
    for (size_t k = 0; k < r->variants.n; k++) {
        size_t vi = r->order[k];
        struct sum_series s;
        sum_metric(&r->t, r->variants.v[vi], metric, &s);
        struct plot_series *ps = variant_series(r, c, vi);
        for (size_t l = 0; l < s.n; l++)
            plot_series_add(ps, (double)s.lv[l].concurrency, s.lv[l].s.mean, s.lv[l].s.min,
                            s.lv[l].s.max);
        const struct fit_analysis *fa = &r->fits[vi];
        const struct sum_thr *th = &r->thr[vi];
        if (fit == PLOT_FIT_THROUGHPUT && th->ok) {
            /* N·out·1000/E2E(N) written as N·1000/(E2E(N)/out) */
            ps->fit = true;
            ps->a = th->e2e.a / th->out_tokens;
            ps->b = th->e2e.b / th->out_tokens;
            ps->r2 = th->e2e.r2;
            ps->out_tokens = th->out_tokens;
            ps->ceiling = fa->ok && sum_is_step_metric(r->fit_y) ? fa->ceiling : NAN;
        } else if (fit == PLOT_FIT_LINE && fa->ok && strcmp(r->fit_x, "concurrency") == 0) {
            ps->fit = true;
            ps->a = fa->line.a;
            ps->b = fa->line.b;
            ps->r2 = fa->line.r2;
        }
        sum_series_release(&s);
    }
    if (plot_chart_points(c) == 0) {
        /* nothing measured for this metric: drop what an earlier build drew */
        static const char *const ext[] = {"dat", "gp", "png", "svg"};
        for (size_t i = 0; i < 4; i++) {
            char *old = xasprintf("%s/plots/%s.%s", r->dir, name, ext[i]);
            unlink(old);
            free(old);
        }
        plot_chart_release(c);
    } else {
        r->n_charts++;
    }
    free(label);
    free(title);
}

/* metric against the offered rate of the rate points (open loop), one
 * series per variant: the mean over the ok rows at each rate. */
static void rate_chart(struct report *r, const char *name, const char *tmpl, const char *metric)
{
    char *label = sum_label(metric);
    char *title = chart_title(r, label, "offered rate");
    r->charts = xrealloc(r->charts, (r->n_charts + 1) * sizeof(*r->charts));
    struct plot_chart *c = &r->charts[r->n_charts];
    plot_chart_init(c, name, tmpl, title, label, PLOT_FIT_NONE);
    free(c->xlabel);
    c->xlabel = xstrdup("offered rate (req/s, log2 scale)");
    double *xs = xcalloc(r->t.n + 1, sizeof(double)), *ys = xcalloc(r->t.n + 1, sizeof(double));
    for (size_t k = 0; k < r->variants.n; k++) {
        size_t vi = r->order[k];
        struct plot_series *ps = variant_series(r, c, vi);
        size_t n = 0;
        for (size_t i = 0; i < r->t.n; i++) {
            const struct res_point *p = &r->t.rows[i];
            double x, y;
            if (p->variant && strcmp(p->variant, r->variants.v[vi]) == 0 && p->status &&
                strcmp(p->status, RES_OK) == 0 && sum_is_rate_point(p) &&
                mset_get(&p->metrics, "offered_rate", &x) && mset_get(&p->metrics, metric, &y) &&
                isfinite(y))
                xs[n] = x, ys[n++] = y;
        }
        /* ascending rate; repeats at one rate become one point (mean, min, max) */
        for (size_t i = 0; i < n; i++) {
            size_t lo = i;
            for (size_t j = i + 1; j < n; j++)
                lo = xs[j] < xs[lo] ? j : lo;
            double tx = xs[i], ty = ys[i];
            xs[i] = xs[lo], ys[i] = ys[lo], xs[lo] = tx, ys[lo] = ty;
        }
        for (size_t i = 0; i < n;) {
            size_t j = i;
            double sum = 0, mn = ys[i], mx = ys[i];
            for (; j < n && xs[j] == xs[i]; j++)
                sum += ys[j], mn = fmin(mn, ys[j]), mx = fmax(mx, ys[j]);
            plot_series_add(ps, xs[i], sum / (double)(j - i), mn, mx);
            i = j;
        }
    }
    free(xs);
    free(ys);
    if (plot_chart_points(c) == 0)
        plot_chart_release(c);
    else
        r->n_charts++;
    free(label);
    free(title);
}

/* Per-user tok/s (1000 / median TPOT) against total output tok/s, one line
 * per variant, a point per concurrency level (means over repeats). */
static void interactivity_chart(struct report *r)
{
    char *title = xasprintf("%s: tokens per second per user vs total%s%s", r->rd.name,
                            r->group_by ? ", by " : "", r->group_by ? r->group_by : "");
    r->charts = xrealloc(r->charts, (r->n_charts + 1) * sizeof(*r->charts));
    struct plot_chart *c = &r->charts[r->n_charts];
    plot_chart_init(c, "interactivity", "interactivity", title,
                    "per-user output tok/s (1000 / median TPOT)", PLOT_FIT_NONE);
    free(c->xlabel);
    c->xlabel = xstrdup("total output throughput (tok/s)");
    for (size_t k = 0; k < r->variants.n; k++) {
        size_t vi = r->order[k];
        struct sum_series thr, tpot;
        sum_metric(&r->t, r->variants.v[vi], "output_throughput", &thr);
        sum_metric(&r->t, r->variants.v[vi], "median_tpot_ms", &tpot);
        struct plot_series *ps = variant_series(r, c, vi);
        for (size_t l = 0; l < thr.n; l++) {
            const struct sum_level *t = sum_find(&tpot, thr.lv[l].concurrency);
            if (t && t->s.mean > 0) {
                double u = 1000.0 / t->s.mean;
                plot_series_add(ps, thr.lv[l].s.mean, u, u, u);
            }
        }
        sum_series_release(&thr);
        sum_series_release(&tpot);
    }
    if (plot_chart_points(c) == 0)
        plot_chart_release(c);
    else
        r->n_charts++;
    free(title);
}

/* The charts experiment.yaml asks for (throughput, tpot, ttft by default;
 * a canonical metric name draws that metric); the fitted metric always
 * gets a chart with its line. */
static void build_charts(struct report *r)
{
    bool fit_drawn = false;
    const char *tpot = strstr(r->fit_y, "_tpot_ms") ? r->fit_y : "median_tpot_ms";
    for (size_t i = 0; i < r->rd.plots.n; i++) {
        const char *p = r->rd.plots.v[i];
        if (strcmp(p, "throughput") == 0) {
            metric_chart(r, "throughput", "throughput", "output_throughput", PLOT_FIT_THROUGHPUT);
        } else if (strcmp(p, "tpot") == 0) {
            bool fitted = strcmp(tpot, r->fit_y) == 0;
            metric_chart(r, "tpot", "tpot", tpot, fitted ? PLOT_FIT_LINE : PLOT_FIT_NONE);
            fit_drawn = fit_drawn || fitted;
        } else if (strcmp(p, "ttft") == 0) {
            metric_chart(r, "ttft", "ttft", "median_ttft_ms", PLOT_FIT_NONE);
        } else if (metric_find(p)) {
            bool fitted = strcmp(p, r->fit_y) == 0;
            metric_chart(r, p, fitted ? "tpot" : "ttft", p, fitted ? PLOT_FIT_LINE : PLOT_FIT_NONE);
            fit_drawn = fit_drawn || fitted;
        } else {
            log_warn("unknown chart '%s' skipped (known: throughput, tpot, ttft, or a metric name)",
                     p);
        }
    }
    if (!fit_drawn)
        metric_chart(r, "fit", "tpot", r->fit_y, PLOT_FIT_LINE);
    /* goodput against load whenever analysis.slo sets a target */
    if (gp_slo_any(&r->rd.slo))
        metric_chart(r, "goodput", "throughput", "goodput_tok_s", PLOT_FIT_NONE);
    /* rate points: the same against the offered rate */
    rate_chart(r, "throughput-vs-rate", "throughput", "output_throughput");
    rate_chart(r, "ttft-vs-rate", "ttft", "median_ttft_ms");
    rate_chart(r, "tpot-vs-rate", "tpot", "median_tpot_ms");
    if (gp_slo_any(&r->rd.slo))
        rate_chart(r, "goodput-vs-rate", "throughput", "goodput_tok_s");
    interactivity_chart(r);
}

static void draw_charts(struct report *r)
{
    char *pdir = path_join(r->dir, "plots");
    struct err e;
    err_init(&e);
    if (mkdir_p(pdir, 0755, &e, RN_ERR_ENV) != 0) {
        r->chart_error = xstrdup(e.msg);
        goto out;
    }
    for (size_t i = 0; i < r->n_charts; i++) {
        err_init(&e);
        if (plot_write(&r->charts[i], pdir, &e) != 0 ||
            plot_render(pdir, r->charts[i].name, &e) != 0) {
            if (!r->chart_error)
                r->chart_error = xstrdup(e.msg);
            if (strstr(e.msg, "gnuplot not found")) {
                r->no_gnuplot = i == 0; /* the first chart, so none failed before */
                break;                  /* the same for every chart */
            }
            continue;
        }
        strvec_push(&r->drawn, r->charts[i].name);
    }
out:
    free(pdir);
}

/* ---- REPORT.md ---- */

/* Markdown table cell: '|' escaped, line breaks flattened. */
static void md_cell(struct buf *b, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|')
            buf_puts(b, "\\|");
        else if (*s == '\n' || *s == '\r')
            buf_putc(b, ' ');
        else
            buf_putc(b, *s);
    }
}

static void md_num(struct buf *b, double v)
{
    if (isnan(v))
        buf_puts(b, "");
    else if (isinf(v))
        buf_puts(b, v > 0 ? "inf" : "-inf");
    else if (v == floor(v) && fabs(v) < 1e12)
        buf_printf(b, "%.0f", v);
    else
        buf_printf(b, "%.2f", v);
}

/* An argv as one shell-readable line (nothing is ever run through a shell). */
static void md_argv(struct buf *b, const struct strvec *argv)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    strvec_print_quoted(f, argv);
    fclose(f);
    while (len && text[len - 1] == '\n')
        len--;
    buf_putc(b, '`');
    buf_append(b, text, len);
    buf_putc(b, '`');
    free(text); /* from open_memstream */
}

static void md_what_ran(struct buf *b, const struct report *r)
{
    buf_puts(b, "## What ran\n\n");
    buf_printf(b, "- run folder: `%s`\n", r->dir);
    if (r->rd.command.n) {
        buf_puts(b, "- command: ");
        md_argv(b, &r->rd.command);
        buf_putc(b, '\n');
    }
    if (r->rd.sweep_version)
        buf_printf(b, "- sweep %s\n", r->rd.sweep_version);
    if (r->rd.host)
        buf_printf(b, "- host: %s\n", r->rd.host);
    if (r->rd.start)
        buf_printf(b, "- started %s, ended %s\n", r->rd.start,
                   r->rd.end ? r->rd.end : "(not recorded)");
    if (r->rd.interrupted)
        buf_printf(b,
                   "- **interrupted**: the last session was stopped before every point ran; "
                   "points missing below or marked `interrupted` were not measured (`sweep run "
                   "EXPERIMENT --resume %s` runs every point without an ok row)\n",
                   r->dir);
    for (size_t i = 0; i < r->rd.n_v; i++) {
        const struct rundir_variant *v = &r->rd.v[i];
        buf_printf(b, "- variant **%s**", v->name);
        if (v->model)
            buf_printf(b, ": model `%s`", v->model);
        if (v->server_argv.n) {
            buf_puts(b, "; server ");
            md_argv(b, &v->server_argv);
        }
        const struct rundir_extract *x = &v->ext;
        buf_printf(b, "; metrics preset `%s`", x->preset ? x->preset : "none");
        for (size_t k = 0; k < x->n_patterns; k++)
            buf_printf(b, ", pattern `%s` = `%s`", x->patterns[k].name, x->patterns[k].regex);
        buf_putc(b, '\n');
    }
    if (r->rd.imported) {
        buf_printf(b, "- imported from %zu log(s) made outside sweep:\n", r->rd.sources.n);
        for (size_t i = 0; i < r->rd.sources.n; i++)
            buf_printf(b, "  - `%s`\n", r->rd.sources.v[i]);
    }
    if (!r->rd.has_manifest && !r->rd.has_experiment)
        buf_puts(b, "- (no manifest.json or experiment.yaml in the folder: only the points are "
                    "known)\n");
    buf_putc(b, '\n');
}

static void md_points(struct buf *b, const struct report *r)
{
    bool show[N_TABLE] = {false};
    for (size_t c = 0; c < N_TABLE; c++)
        for (size_t i = 0; i < r->t.n && !show[c]; i++)
            show[c] = mset_get(&r->t.rows[i].metrics, table_metrics[c], NULL);
    buf_puts(b, "## Points\n\n| variant | C | prompts | repeat | status |");
    for (size_t c = 0; c < N_TABLE; c++)
        if (show[c]) {
            char *l = sum_label(table_metrics[c]);
            buf_printf(b, " %s |", l);
            free(l);
        }
    buf_puts(b, "\n|---|---:|---:|---:|---|");
    for (size_t c = 0; c < N_TABLE; c++)
        if (show[c])
            buf_puts(b, "---:|");
    buf_putc(b, '\n');
    for (size_t i = 0; i < r->t.n; i++) {
        const struct res_point *p = &r->t.rows[i];
        buf_puts(b, "| ");
        md_cell(b, p->variant);
        buf_printf(b, " | %ld | %ld | %ld | ", p->concurrency, p->prompts, p->repeat);
        md_cell(b, p->status);
        buf_puts(b, " |");
        for (size_t c = 0; c < N_TABLE; c++) {
            double v;
            if (!show[c])
                continue;
            buf_putc(b, ' ');
            if (mset_get(&p->metrics, table_metrics[c], &v))
                md_num(b, v);
            buf_puts(b, " |");
        }
        buf_putc(b, '\n');
    }
    buf_putc(b, '\n');
}

/* One variant's fit in words: the sentence the run exists for. */
static void fit_words(struct buf *b, const struct report *r, const struct fit_analysis *fa)
{
    char *ylabel = sum_label(r->fit_y);
    const struct metric_def *d = metric_find(r->fit_y);
    const char *unit = d && d->unit[0] ? d->unit : "";
    bool step = sum_is_step_metric(r->fit_y);
    char fml[128];
    buf_printf(b, "%s = %s%s%s (%zu points at %zu concurrency levels). ", r->fit_y,
               fit_formula(fa->line.a, fa->line.b, 1, 2, "N", fml, sizeof(fml)), unit[0] ? " " : "",
               unit, fa->line.n, fa->n_x);
    if (fa->unfit) {
        buf_printf(b, "R² %.3f. **%s**", fa->line.r2, fa->unfit_why);
        buf_puts(b, ". Nothing is predicted from this line: no ceiling, no throughput.\n");
        free(ylabel);
        return;
    }
    if (step && fa->line.b > 0) {
        buf_printf(b,
                   "Each added request adds %.1f ms per decode step; decode-only ceiling %.1f "
                   "tok/s (1000/b: leaves time to first token out); R² %.3f",
                   fa->line.b, fa->ceiling, fa->line.r2);
        if (isfinite(fa->c90))
            buf_printf(b, "; 90%% of the ceiling is reached at about %.0f concurrent requests",
                       fa->c90);
        buf_puts(b, ".");
        /* how much of a one-request step (a + b) one more request costs: the
         * rest, a, is what the batch shares (weight reads, fixed overhead) */
        double one = fa->line.a + fa->line.b;
        double share = one > 0 ? fmin(fa->line.b / one, 1.0) : 1.0;
        if (share >= 0.8)
            buf_printf(b,
                       " An added request costs %.0f%% of a one-request step (a + b = %.1f ms): "
                       "almost nothing is shared, requests are processed one after another.",
                       100 * share, one);
        else if (share >= 0.2)
            buf_printf(b,
                       " An added request costs %.0f%% of a one-request step (a + b = %.1f ms): "
                       "the batch shares the other %.0f%% (weight reads, fixed overhead); the "
                       "rest is each request's own work (per-request kernels, attention, or "
                       "matmuls that are compute-bound at this batch size).",
                       100 * share, one, 100 * (1 - share));
        else
            buf_printf(b,
                       " An added request costs %.1f%% of a one-request step (a + b = %.1f ms): "
                       "batching amortizes the work well.",
                       100 * share, one);
    } else if (step) {
        buf_printf(b,
                   "No measurable per-request cost (b = %.2f ms): the step time does not grow "
                   "with concurrency in the tested range, so no ceiling can be read from it.",
                   fa->line.b);
    } else {
        buf_printf(b, "Each added unit of %s adds %.3g%s%s to %s; R² %.3f.", r->fit_x, fa->line.b,
                   unit[0] ? " " : "", unit, ylabel, fa->line.r2);
    }
    if (fa->a_ci.ok)
        buf_printf(b, " 95%% bootstrap intervals over repeats: a [%.1f, %.1f], b [%.2f, %.2f]",
                   fa->a_ci.lo, fa->a_ci.hi, fa->b_ci.lo, fa->b_ci.hi);
    if (fa->a_ci.ok && fa->ceiling_ci.ok)
        buf_printf(b, ", ceiling [%.1f, %.1f] tok/s", fa->ceiling_ci.lo, fa->ceiling_ci.hi);
    if (fa->a_ci.ok)
        buf_puts(b, ".");
    buf_putc(b, '\n');
    free(ylabel);
}

/* The throughput law (TTFT included) in words, when it could be fitted. */
static void thr_words(struct buf *b, const struct sum_thr *th)
{
    if (!th->ok)
        return;
    char fml[128];
    buf_printf(b,
               "\nThroughput with time to first token included: E2E = %s ms per request (from "
               "%s, R² %.3f), so output throughput = N·%.0f·1000/E2E(N) tok/s",
               fit_formula(th->e2e.a, th->e2e.b, 1, 2, "N", fml, sizeof(fml)), th->source,
               th->e2e.r2, th->out_tokens);
    if (isfinite(th->max_rel))
        buf_printf(b, "; it is within %.1f%% of every measured point", 100 * th->max_rel);
    buf_puts(b, ". The throughput chart draws this curve; predicted throughputs below come "
                "from it.\n");
}

/* Every ok row of variant with a server step time counted decode-only steps. */
static bool decode_only(const struct report *r, const char *variant)
{
    bool any = false;
    for (size_t i = 0; i < r->t.n; i++) {
        const struct res_point *p = &r->t.rows[i];
        if (!p->variant || strcmp(p->variant, variant) != 0 || strcmp(p->status, RES_OK) != 0 ||
            !mset_get(&p->metrics, "server_step_ms", NULL))
            continue;
        if (!mset_get(&p->metrics, "server_decode_steps", NULL))
            return false;
        any = true;
    }
    return any;
}

/* The client's TPOT fit beside the server's own step law, and why they differ. */
static void md_client_server(struct buf *b, const struct report *r)
{
    if (!r->alt_y)
        return;
    bool main_server = strcmp(r->fit_y, "server_step_ms") == 0;
    buf_puts(b, "## Client and server step time\n\n"
                "The client sees TPOT against the concurrency it asked for; the server's "
                "/metrics give its mean decode step time against the batch it really ran "
                "(points.csv columns server_step_ms, server_batch).\n\n"
                "| variant | client: TPOT vs C | R² | server: step vs batch | R² |\n"
                "|---|---|---:|---|---:|\n");
    for (size_t vi = 0; vi < r->variants.n; vi++) {
        const struct fit_analysis *cl = main_server ? &r->alt[vi] : &r->fits[vi];
        const struct fit_analysis *sv = main_server ? &r->fits[vi] : &r->alt[vi];
        char f1[128] = "(no fit)", f2[128] = "(no fit)";
        if (cl->ok)
            fit_formula(cl->line.a, cl->line.b, 1, 2, "C", f1, sizeof(f1));
        if (sv->ok)
            fit_formula(sv->line.a, sv->line.b, 1, 2, "B", f2, sizeof(f2));
        buf_printf(b, "| %s | %s%s |", r->variants.v[vi], f1, cl->unfit ? " (not a law)" : "");
        if (cl->ok)
            buf_printf(b, " %.3f", cl->line.r2);
        buf_printf(b, " | %s%s |", f2, sv->unfit ? " (not a law)" : "");
        if (sv->ok)
            buf_printf(b, " %.3f", sv->line.r2);
        buf_puts(b, " |\n");
    }
    buf_putc(b, '\n');
    for (size_t vi = 0; vi < r->variants.n; vi++) {
        const struct fit_analysis *cl = main_server ? &r->alt[vi] : &r->fits[vi];
        const struct fit_analysis *sv = main_server ? &r->fits[vi] : &r->alt[vi];
        if (!cl->ok || !sv->ok)
            continue;
        double da = sv->line.a != 0 ? (cl->line.a - sv->line.a) / fabs(sv->line.a) : NAN;
        double db = sv->line.b != 0 ? (cl->line.b - sv->line.b) / fabs(sv->line.b) : NAN;
        buf_printf(b, "**%s**: ", r->variants.v[vi]);
        if (fabs(da) <= 0.1 && fabs(db) <= 0.1) {
            buf_puts(b, "the two agree within 10%: the client's TPOT is the server's decode "
                        "step.\n\n");
            continue;
        }
        buf_printf(b,
                   "they differ (a %+.0f%%, b %+.0f%% against the server's). The client's TPOT "
                   "also counts the steps that ran other requests' prompts (prefill inside the "
                   "decode steps) and waits in the server's queue, and it is set against the "
                   "concurrency asked for, not the batch that ran; ",
                   100 * da, 100 * db);
        if (decode_only(r, r->variants.v[vi]))
            buf_puts(b, "the server's step law, over steps that ran no prompt, is the one to read "
                        "a and b from.\n\n");
        else
            buf_puts(b, "the server's step time is a mean over every step, those that ran "
                        "prompt tokens included (it does not count decode-only steps apart), so "
                        "its a and b carry some prefill too.\n\n");
    }
}

/* The first value of column name over variant's ok rows; NAN when none. */
static double variant_value(const struct report *r, const char *variant, const char *name)
{
    for (size_t i = 0; i < r->t.n; i++) {
        const struct res_point *p = &r->t.rows[i];
        double v;
        if (p->variant && strcmp(p->variant, variant) == 0 && strcmp(p->status, RES_OK) == 0 &&
            mset_get(&p->metrics, name, &v))
            return v;
    }
    return NAN;
}

/* a and b against the roofline the server reports (analysis/roofline.h):
 * from the server's step law, else from a client step fit. Shown when some
 * variant's server reported any of the three numbers. */
static void md_roofline(struct buf *b, const struct report *r)
{
    static const char *const cols[] = {"server_weight_bytes", "server_flops_per_token",
                                       "server_mem_gbs"};
    bool any = false;
    for (size_t vi = 0; vi < r->variants.n && !any; vi++)
        for (size_t k = 0; k < 3; k++)
            any = any || isfinite(variant_value(r, r->variants.v[vi], cols[k]));
    if (!any)
        return;
    bool main_server = strcmp(r->fit_y, "server_step_ms") == 0;
    buf_printf(b,
               "## Roofline\n\n"
               "Each step law's a is set against the time to read the weights once (weight bytes "
               "per step / measured bandwidth): bandwidth-bound from %.1fx to %.1fx that time. b "
               "is set against a token's FLOPs at the rate one request achieves, which is the "
               "one-request step a + b: one request after another when b is %.0f%% of a + b or "
               "more, else compute-bound (the weight read is shared, each added token pays for "
               "its own arithmetic). The numbers are the server's (points.csv columns "
               "server_weight_bytes, server_flops_per_token, server_mem_gbs); one that is missing "
               "is named and its placement skipped.\n\n",
               ROOF_A_LOW, ROOF_A_HIGH, 100 * ROOF_B_SERIAL);
    for (size_t vi = 0; vi < r->variants.n; vi++) {
        const char *v = r->variants.v[vi];
        const struct fit_analysis *sv = main_server ? &r->fits[vi]
                                        : r->alt_y && strcmp(r->alt_y, "server_step_ms") == 0
                                            ? &r->alt[vi]
                                            : NULL;
        const struct fit_analysis *fa = NULL;
        if (sv && sv->ok && !sv->unfit)
            fa = sv;
        else if (!main_server && sum_is_step_metric(r->fit_y) && r->fits[vi].ok &&
                 !r->fits[vi].unfit)
            fa = &r->fits[vi];
        double wb = variant_value(r, v, "server_weight_bytes"),
               fl = variant_value(r, v, "server_flops_per_token"),
               bw = variant_value(r, v, "server_mem_gbs");
        buf_printf(b, "**%s**: ", v);
        if (isfinite(wb))
            buf_printf(b, "%.4g MB of weights per step, ", wb / 1e6);
        if (isfinite(fl))
            buf_printf(b, "%.4g GFLOP per token, ", fl / 1e9);
        if (isfinite(bw))
            buf_printf(b, "%.1f GB/s measured, ", bw);
        if (!fa) {
            buf_puts(b, "not placed: no step law to place (see the fits above).\n\n");
            continue;
        }
        struct roof_in in = {fa->line.a, fa->line.b, wb, fl, bw};
        struct roof_place pl;
        roof_place(&in, &pl);
        if (fa == sv)
            buf_puts(b, "from the server step law, ");
        else
            buf_printf(b, "from the client's %s fit (no server step law), ", r->fit_y);
        roof_words(b, &pl);
        buf_puts(b, ".\n\n");
    }
}

static void md_fits(struct buf *b, const struct report *r)
{
    buf_printf(b, "## Scaling fit: %s = a + b·%s\n\n", r->fit_y, r->fit_x);
    for (size_t vi = 0; vi < r->variants.n; vi++) {
        const struct fit_analysis *fa = &r->fits[vi];
        buf_printf(b, "**%s**: ", r->variants.v[vi]);
        if (!fa->ok) {
            buf_printf(b, "no fit (%s).\n\n", fa->reason);
            continue;
        }
        fit_words(b, r, fa);
        thr_words(b, &r->thr[vi]);
        if (fa->n_regime) {
            buf_printf(b,
                       "\nPoints more than %.0f%% off the line (a regime change: bandwidth "
                       "saturation, scheduler overhead, or queueing):\n",
                       100 * FIT_REGIME_REL);
            for (size_t i = 0; i < fa->n_res; i++) {
                const struct fit_residual *x = &fa->res[i];
                if (x->regime_change)
                    buf_printf(b, "- %s %g (repeat %ld): measured %.2f, line %.2f (%+.0f%%)\n",
                               r->fit_x, x->x, x->repeat, x->y, x->fitted, 100 * x->relative);
            }
        }
        buf_printf(b, "\n| %s | measured | fitted | residual |\n|---:|---:|---:|---:|\n", r->fit_x);
        for (size_t i = 0; i < fa->n_res; i++)
            buf_printf(b, "| %g | %.2f | %.2f | %+.1f%%%s |\n", fa->res[i].x, fa->res[i].y,
                       fa->res[i].fitted, 100 * fa->res[i].relative,
                       fa->res[i].regime_change ? " (regime change)" : "");
        if (fa->n_pred) {
            bool thr = isfinite(fa->pred[0].throughput);
            buf_printf(b, "\nPredicted at untested %s:\n\n| %s | %s |%s\n|---:|---:|%s\n", r->fit_x,
                       r->fit_x, r->fit_y, thr ? " output throughput (tok/s) |" : "",
                       thr ? "---:|" : "");
            for (size_t i = 0; i < fa->n_pred; i++) {
                buf_printf(b, "| %g | %.1f |", fa->pred[i].x, fa->pred[i].y);
                if (thr)
                    buf_printf(b, " %.1f |", fa->pred[i].throughput);
                buf_putc(b, '\n');
            }
        }
        buf_putc(b, '\n');
    }
}

static void md_charts(struct buf *b, const struct report *r)
{
    buf_puts(b, "## Charts\n\n");
    if (r->group_by)
        buf_printf(b,
                   "The variants are grouped by `%s`: one colour per value of it, one marker per "
                   "combination of the other axes.\n\n",
                   r->group_by);
    for (size_t i = 0; i < r->n_charts; i++) {
        const struct plot_chart *c = &r->charts[i];
        if (strvec_find(&r->drawn, c->name) < 0)
            continue;
        buf_printf(b, "![%s](plots/%s.png)\n\n", c->title, c->name);
        buf_printf(b,
                   "[svg](plots/%s.svg) · data [%s.dat](plots/%s.dat) · script "
                   "[%s.gp](plots/%s.gp)\n\n",
                   c->name, c->name, c->name, c->name, c->name);
    }
    if (r->chart_error)
        buf_printf(b, "Charts missing: %s\n\n", r->chart_error);
    else if (!r->drawn.n)
        buf_puts(b, "No chart: no point has a value to draw.\n\n");
}

static void md_failures(struct buf *b, const struct report *r)
{
    buf_puts(b, "## Failures\n\n");
    size_t n = 0;
    for (size_t i = 0; i < r->t.n; i++) {
        const struct res_point *p = &r->t.rows[i];
        if (p->status && strcmp(p->status, RES_OK) == 0)
            continue;
        buf_printf(b, "- %s C=%ld n=%ld repeat %ld: **%s**", p->variant ? p->variant : "",
                   p->concurrency, p->prompts, p->repeat, p->status ? p->status : "?");
        if (p->cause && *p->cause) {
            buf_puts(b, ": ");
            md_cell(b, p->cause);
        }
        if (p->log && *p->log)
            buf_printf(b, " (log `%s`)", p->log);
        buf_putc(b, '\n');
        n++;
    }
    buf_puts(b, n ? "\n" : "None: every point succeeded.\n\n");
}

static int write_report_md(const struct report *r, struct err *err)
{
    struct buf b;
    buf_init(&b, REPORT_MAX);
    buf_printf(&b, "# %s\n\n", r->rd.name);
    if (r->rd.description && *r->rd.description)
        buf_printf(&b, "%s\n\n", r->rd.description);
    md_what_ran(&b, r);
    md_points(&b, r);
    md_fits(&b, r);
    md_client_server(&b, r);
    md_roofline(&b, r);
    md_charts(&b, r);
    md_failures(&b, r);
    buf_printf(&b,
               "---\nWritten by sweep %s from points.csv; `sweep plot %s` re-extracts the "
               "points from the saved logs and rewrites this report.\n",
               BUILD_VERSION, r->dir);
    char *path = path_join(r->dir, "REPORT.md");
    int rc = file_write_atomic(path, b.data, b.len, err, RN_ERR_ENV);
    free(path);
    buf_release(&b);
    return rc;
}

/* ---- the entry point ---- */

static void summary_lines(const struct report *r)
{
    for (size_t vi = 0; vi < r->variants.n; vi++) {
        const struct fit_analysis *fa = &r->fits[vi];
        if (!fa->ok) {
            printf("fit %s: none (%s)\n", r->variants.v[vi], fa->reason);
            continue;
        }
        char fml[128];
        printf("fit %s: %s = %s (R² %.3f)", r->variants.v[vi], r->fit_y,
               fit_formula(fa->line.a, fa->line.b, 1, 2, "N", fml, sizeof(fml)), fa->line.r2);
        if (fa->unfit)
            printf("; %s", fa->unfit_why);
        if (isfinite(fa->ceiling))
            printf("; decode-only ceiling %.1f tok/s", fa->ceiling);
        if (fa->n_regime)
            printf("; %zu point(s) off the line by more than %.0f%%", fa->n_regime,
                   100 * FIT_REGIME_REL);
        printf("\n");
    }
    printf("wrote %s/fit.json, %s/fit.csv, %s/REPORT.md and %zu chart(s) in %s/plots/\n", r->dir,
           r->dir, r->dir, r->drawn.n, r->dir);
}

int report_build(const char *run_dir, const struct report_opts *opts, struct err *err)
{
    static const struct report_opts defaults = {NULL, NULL, false, false};
    struct report r;
    int rc = -1;
    const struct report_opts *o = opts ? opts : &defaults;
    memset(&r, 0, sizeof(r));
    res_table_init(&r.t);
    r.dir = run_dir;
    if (rundir_open(run_dir, &r.rd, err) != 0)
        goto out_nord;
    char *csv = path_join(run_dir, "points.csv");
    if (!path_exists(csv)) {
        err_set(err, RN_ERR_USAGE,
                "%s: no points.csv (run 'sweep plot %s' to rebuild it from the saved logs)",
                run_dir, run_dir);
        free(csv);
        goto out;
    }
    int lrc = res_table_load(csv, &r.t, err);
    free(csv);
    if (lrc != 0)
        goto out;
    r.fit_x = o->fit_x ? o->fit_x : r.rd.fit_x;
    r.fit_y = o->fit_y ? o->fit_y : r.rd.fit_y;
    struct strvec order = STRVEC_INIT;
    for (size_t i = 0; i < r.rd.n_v; i++)
        strvec_push(&order, r.rd.v[i].name);
    sum_variants(&r.t, &order, &r.variants);
    strvec_release(&order);
    r.fits = xcalloc(r.variants.n + 1, sizeof(*r.fits));
    for (size_t i = 0; i < r.variants.n; i++)
        sum_fit(&r.t, r.variants.v[i], r.fit_x, r.fit_y, &r.fits[i]);
    r.thr = xcalloc(r.variants.n + 1, sizeof(*r.thr));
    r.alt = xcalloc(r.variants.n + 1, sizeof(*r.alt));
    /* the other step fit: the server's when the main one is the client's, and back */
    if (strcmp(r.fit_y, "server_step_ms") == 0) {
        r.alt_x = "concurrency";
        r.alt_y = "median_tpot_ms";
    } else if (sum_is_step_metric(r.fit_y)) {
        r.alt_x = "server_batch";
        r.alt_y = "server_step_ms";
    }
    bool step = sum_is_step_metric(r.fit_y);
    for (size_t i = 0; i < r.variants.n; i++) {
        sum_throughput(&r.t, r.variants.v[i], variant_output_len(&r.rd, r.variants.v[i]),
                       &r.thr[i]);
        if (r.alt_y)
            sum_fit(&r.t, r.variants.v[i], r.alt_x, r.alt_y, &r.alt[i]);
        /* predicted throughput comes from the law with TTFT, never 1000·N/step */
        struct fit_analysis *fa = &r.fits[i];
        for (size_t k = 0; k < fa->n_pred; k++)
            fa->pred[k].throughput = step && strcmp(r.fit_x, "concurrency") == 0
                                         ? sum_thr_at(&r.thr[i], fa->pred[k].x)
                                         : NAN;
    }
    if (r.alt_y) { /* no server column anywhere: nothing to set beside the main fit */
        bool any = false;
        for (size_t i = 0; i < r.variants.n; i++)
            any = any || r.alt[i].ok;
        if (!any)
            r.alt_x = r.alt_y = NULL;
    }
    if (write_fit_json(&r, err) != 0 || write_fit_csv(&r, err) != 0)
        goto out;
    r.group_by = o->group_by ? o->group_by : r.rd.group_by;
    if (r.group_by && strrchr(r.group_by, '.')) /* the matrix key: names hold its last part */
        r.group_by = strrchr(r.group_by, '.') + 1;
    group_variants(&r);
    build_charts(&r);
    draw_charts(&r);
    if (write_report_md(&r, err) != 0)
        goto out;
    if (!o->quiet)
        summary_lines(&r);
    if (o->preview && r.drawn.n) {
        /* the main chart: throughput when drawn */
        const char *main_chart =
            strvec_find(&r.drawn, "throughput") >= 0 ? "throughput" : r.drawn.v[0];
        char *pdir = path_join(run_dir, "plots");
        struct err pe;
        err_init(&pe);
        fflush(stdout);
        if (plot_preview(pdir, main_chart, stdout, &pe) != 0)
            log_warn("%s", pe.msg);
        free(pdir);
    }
    if (r.chart_error && r.no_gnuplot && o->charts_optional) {
        log_warn("%s", r.chart_error);
    } else if (r.chart_error) {
        err_set(err, RN_ERR_ENV, "%s", r.chart_error);
        goto out;
    }
    rc = 0;
out:
    rundir_release(&r.rd);
out_nord:
    for (size_t i = 0; r.fits && i < r.variants.n; i++)
        fit_analysis_release(&r.fits[i]);
    for (size_t i = 0; r.alt && i < r.variants.n; i++)
        fit_analysis_release(&r.alt[i]);
    free(r.fits);
    free(r.alt);
    free(r.order);
    free(r.color);
    free(r.mark);
    free(r.thr);
    for (size_t i = 0; i < r.n_charts; i++)
        plot_chart_release(&r.charts[i]);
    free(r.charts);
    strvec_release(&r.variants);
    strvec_release(&r.drawn);
    free(r.chart_error);
    res_table_release(&r.t);
    return rc;
}
