/*
 * report_charts: the run folder's charts. Variants are ordered and styled by
 * a matrix axis when asked (colour per value, marker per combination of the
 * others); each metric chart overlays the variants against concurrency (or
 * the offered rate), with the fitted lines; gnuplot draws each (plot.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "log.h"
#include "sweep.h"
#include "xalloc.h"

#include "analysis/compare.h"
#include "analysis/pareto.h"
#include "analysis/report_int.h"

/* ---- charts ---- */

/*
 * analysis.group_by (or sweep plot --by): order the variants by the value
 * of the axis (first-seen order), give each value a colour and each
 * combination of the other axes a marker. A variant without the axis comes
 * last with a colour of its own. Without grouping, the run's order.
 */
void report_group_variants(struct report *r)
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

/*
 * The Pareto chart: per-user tok/s (1000 / median TPOT) against total
 * output tok/s, a point per concurrency level (means over repeats). Per
 * variant the frontier is one line, its dominated points are grey and its
 * knee is ringed (pareto.h defines both); each point's note names its
 * concurrency for the HTML report's tooltip. It replaced the interactivity
 * chart (same axes, no frontier), whose files an older build left are
 * removed.
 */
static void pareto_chart(struct report *r)
{
    static const char *const ext[] = {"dat", "gp", "png", "svg"};
    for (size_t i = 0; i < 4; i++) {
        char *old = xasprintf("%s/plots/interactivity.%s", r->dir, ext[i]);
        unlink(old);
        free(old);
    }
    char *title = xasprintf("%s: Pareto frontier, per-user vs total tok/s%s%s", r->rd.name,
                            r->group_by ? ", by " : "", r->group_by ? r->group_by : "");
    r->charts = xrealloc(r->charts, (r->n_charts + 1) * sizeof(*r->charts));
    struct plot_chart *c = &r->charts[r->n_charts];
    plot_chart_init(c, "pareto", "pareto", title, "per-user output tok/s (1000 / median TPOT)",
                    PLOT_FIT_NONE);
    free(c->xlabel);
    c->xlabel = xstrdup("total output throughput (tok/s)");
    for (size_t k = 0; k < r->variants.n; k++) {
        size_t vi = r->order[k];
        struct pareto_pt *p;
        ptrdiff_t knee;
        size_t n = pareto_points(&r->t, r->variants.v[vi], &p, &knee);
        pareto_series(c, variant_series(r, c, vi), p, n, knee);
        free(p);
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
void report_build_charts(struct report *r)
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
    pareto_chart(r);
}

void report_draw_charts(struct report *r)
{
    char *pdir = path_join(r->dir, "plots");
    struct err e;
    err_init(&e);
    if (mkdir_p(pdir, 0755, &e, RN_ERR_ENV) != 0) {
        r->chart_error = xstrdup(e.msg);
        goto out;
    }
    struct buf failed, why; /* every chart that failed, and the reasons */
    buf_init(&failed, BUF_MAX_DEFAULT);
    buf_init(&why, BUF_MAX_DEFAULT);
    size_t n_failed = 0;
    for (size_t i = 0; i < r->n_charts; i++) {
        err_init(&e);
        if (plot_write(&r->charts[i], pdir, &e) != 0 ||
            plot_render(pdir, r->charts[i].name, &e) != 0) {
            if (strstr(e.msg, "gnuplot not found")) {
                if (!n_failed && !r->chart_error)
                    r->chart_error = xstrdup(e.msg);
                r->no_gnuplot = i == 0; /* the first chart, so none failed before */
                break;                  /* the same for every chart */
            }
            plot_note_failure(&failed, &why, r->charts[i].name, e.msg);
            n_failed++;
            continue;
        }
        strvec_push(&r->drawn, r->charts[i].name);
    }
    if (n_failed && !r->chart_error)
        r->chart_error = xasprintf("%zu of %zu charts not drawn (%s): %s", n_failed, r->n_charts,
                                   failed.data, why.data);
    buf_release(&failed);
    buf_release(&why);
out:
    free(pdir);
}
