/*
 * estimate: point durations from the wave model, the model from a run's
 * results, and the run-time ETA. See estimate.h for the model.
 */
#include "analysis/estimate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "sweep.h"
#include "xalloc.h"

#include "analysis/fit.h"

static double ttft_ms(const struct est_model *m, long active)
{
    double t = m->ttft_a_ms + m->ttft_b_ms * (double)active;
    return t > 0 ? t : 0;
}

double est_point_s(const struct est_model *m, const struct est_point *p)
{
    long c = p->concurrency < 1 ? 1 : p->concurrency;
    double ms = 0;
    for (long left = p->prompts; left > 0;) {
        long active = left < c ? left : c;
        double step = m->a_ms + m->b_ms * (double)active;
        if (!(step > 0)) /* a falling line crossed zero: no prediction here */
            return NAN;
        ms += (double)p->output_len * step + ttft_ms(m, active);
        left -= active;
    }
    return ms / 1000.0;
}

/* Fit metric against concurrency over the ok rows of variant: returns the
 * number of rows used; *a, *b set (b = 0 and a = mean with one level). */
static size_t fit_metric(const struct res_table *t, const char *variant, const char *metric,
                         double *a, double *b)
{
    double *x = xcalloc(t->n + 1, sizeof(double)), *y = xcalloc(t->n + 1, sizeof(double));
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct res_point *p = &t->rows[i];
        double v;
        if (strcmp(p->status ? p->status : "", RES_OK) != 0 ||
            (variant && strcmp(p->variant ? p->variant : "", variant) != 0) ||
            !mset_get(&p->metrics, metric, &v) || !isfinite(v))
            continue;
        x[n] = (double)p->concurrency;
        y[n++] = v;
    }
    struct fit_line l;
    if (n > 0 && fit_linear(x, y, n, &l) == 0) {
        *a = l.a;
        *b = l.b;
    } else if (n > 0) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += y[i];
        *a = s / (double)n;
        *b = 0;
    }
    free(x);
    free(y);
    return n;
}

int est_model_from_table(const struct res_table *t, const char *variant, struct est_model *m,
                         struct err *err)
{
    memset(m, 0, sizeof(*m));
    if (fit_metric(t, variant, "median_tpot_ms", &m->a_ms, &m->b_ms) == 0)
        return err_set(err, RN_ERR_USAGE, "no ok point%s%s%s has a median TPOT to estimate from",
                       variant ? " of variant '" : "", variant ? variant : "", variant ? "'" : ""),
               -1;
    fit_metric(t, variant, "median_ttft_ms", &m->ttft_a_ms, &m->ttft_b_ms);
    return 0;
}

double est_eta_s(const struct est_model *m, const struct est_point *todo, size_t n,
                 double done_pred_s, double done_actual_s)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += est_point_s(m, &todo[i]);
    if (done_pred_s > 0 && done_actual_s > 0)
        s *= done_actual_s / done_pred_s;
    return s;
}

void est_format(double seconds, char *out, size_t size)
{
    if (!isfinite(seconds) || seconds < 0) {
        snprintf(out, size, "?");
        return;
    }
    long s = lround(seconds);
    if (s < 60)
        snprintf(out, size, "%lds", s);
    else if (s < 3600)
        snprintf(out, size, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(out, size, "%ldh%02ldm", s / 3600, s % 3600 / 60);
}

/* How many rows of t are ok, for the message when none can be used. */
static size_t count_ok(const struct res_table *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += strcmp(t->rows[i].status ? t->rows[i].status : "", RES_OK) == 0;
    return n;
}

int est_print_plan(FILE *f, const struct plan *plan, const char *run_dir, struct err *err)
{
    struct res_table t;
    struct est_model *models = xcalloc(plan->n_variants + 1, sizeof(*models));
    bool *own = xcalloc(plan->n_variants + 1, sizeof(*own));
    char *csv = path_join(run_dir, "points.csv");
    int rc = -1;
    res_table_init(&t);
    if (!path_exists(csv)) {
        err_set(err, RN_ERR_ENV,
                "--from %s: no points.csv there (a run folder, or 'sweep plot %s' to rebuild it)",
                run_dir, run_dir);
        goto out;
    }
    if (res_table_load(csv, &t, err) != 0)
        goto out;
    /* every model first, so a run with nothing to fit prints no half estimate */
    for (size_t v = 0; v < plan->n_variants; v++) {
        struct err e;
        err_init(&e);
        own[v] = est_model_from_table(&t, plan->variants[v].v->name, &models[v], &e) == 0;
        if (!own[v] && est_model_from_table(&t, NULL, &models[v], &e) != 0) {
            size_t ok = count_ok(&t);
            if (ok)
                err_set(err, RN_ERR_ENV,
                        "--from %s: none of the %zu ok points in points.csv has a median TPOT, "
                        "so there is no time estimate",
                        run_dir, ok);
            else
                err_set(err, RN_ERR_ENV,
                        "--from %s: no ok point in points.csv (%zu rows), so there is no time "
                        "estimate",
                        run_dir, t.n);
            goto out;
        }
    }
    fprintf(f,
            "\ntime estimate from %s (decode waves of min(C, remaining) requests; server "
            "start and warmup not included):\n",
            run_dir);
    for (size_t v = 0; v < plan->n_variants; v++) {
        const struct est_model *m = &models[v];
        char step[128], ttft[128];
        fprintf(f, "  %s: step = %s ms, TTFT = %s ms (from %s)\n", plan->variants[v].v->name,
                fit_formula(m->a_ms, m->b_ms, 1, 2, "N", step, sizeof(step)),
                fit_formula(m->ttft_a_ms, m->ttft_b_ms, 1, 2, "N", ttft, sizeof(ttft)),
                own[v] ? "the run's points of this variant" : "all of the run's points");
        if (m->b_ms < 0)
            fprintf(f,
                    "  %s: the step time falls as concurrency rises (slope %.2f ms per request): "
                    "the fit does not describe the server; estimates far from the measured "
                    "concurrencies are not reliable\n",
                    plan->variants[v].v->name, m->b_ms);
    }
    /* columns as wide as the longest variant and log name (variant names
     * may be 64 characters; both are ASCII, so bytes are columns) */
    int wv = 12, wl = 18;
    for (size_t i = 0; i < plan->n_points; i++) {
        int nv = (int)strlen(plan->variants[plan->points[i].variant].v->name);
        int nl = (int)strlen(plan->points[i].log_name);
        wv = nv > wv ? nv : wv;
        wl = nl > wl ? nl : wl;
    }
    double total = 0;
    size_t unknown = 0;
    for (size_t i = 0; i < plan->n_points; i++) {
        const struct plan_point *pp = &plan->points[i];
        const struct plan_variant *pv = &plan->variants[pp->variant];
        struct est_point ep = {pp->concurrency, pp->prompts, pv->v->bench.output_len};
        double s = est_point_s(&models[pp->variant], &ep);
        char dur[16];
        if (isnan(s)) {
            fprintf(f, "  %-*s %-*s %10s    (the fit predicts a step time <= 0 at C=%ld)\n", wv,
                    pv->v->name, wl, pp->log_name, "?", pp->concurrency);
            unknown++;
            continue;
        }
        est_format(s, dur, sizeof(dur));
        fprintf(f, "  %-*s %-*s %10.1f s  (%s)\n", wv, pv->v->name, wl, pp->log_name, s, dur);
        total += s;
    }
    char dur[16];
    est_format(total, dur, sizeof(dur));
    if (unknown)
        fprintf(f, "  %-*s >= %10.1f s  (%s; %zu point(s) not estimated)\n", wv + wl - 2, "total",
                total, dur, unknown);
    else
        fprintf(f, "  %-*s %10.1f s  (%s)\n", wv + wl + 1, "total", total, dur);
    rc = 0;
out:
    res_table_release(&t);
    free(models);
    free(own);
    free(csv);
    return rc;
}

/* Distinct concurrency levels of the ok rows with a median TPOT (variant
 * NULL: every row): a step law needs two. */
static size_t tpot_levels(const struct res_table *t, const char *variant)
{
    long seen[64];
    size_t n = 0;
    for (size_t r = 0; r < t->n; r++) {
        const struct res_point *p = &t->rows[r];
        bool dup = false;
        if ((variant && strcmp(p->variant, variant) != 0) || strcmp(p->status, RES_OK) != 0 ||
            !mset_get(&p->metrics, "median_tpot_ms", NULL))
            continue;
        for (size_t i = 0; i < n && !dup; i++)
            dup = seen[i] == p->concurrency;
        if (!dup && n < 64)
            seen[n++] = p->concurrency;
    }
    return n;
}

double est_plan_eta(const struct plan *plan, const struct res_table *t,
                    const struct res_table *from, const bool *attempted, const double *took_s,
                    bool *lower_bound)
{
    struct err err;
    err_init(&err);
    struct est_model all, from_all;
    bool have_all = est_model_from_table(t, NULL, &all, &err) == 0;
    bool have_from = from->n && est_model_from_table(from, NULL, &from_all, &err) == 0;
    if (!have_all && !have_from)
        return -1;
    size_t all_levels = have_all ? tpot_levels(t, NULL) : 0;
    bool lower = false;
    struct est_point *todo = xcalloc(plan->n_points + 1, sizeof(*todo));
    double total = 0;
    for (size_t vi = 0; vi < plan->n_variants; vi++) {
        const struct exp_variant *v = plan->variants[vi].v;
        struct est_model m = all;
        err_init(&err);
        size_t levels = all_levels;
        if (est_model_from_table(t, v->name, &m, &err) == 0)
            levels = tpot_levels(t, v->name);
        else if (!have_all)
            levels = 0;
        bool weak = levels < 2; /* b unknown: perfect batching assumed */
        if (weak && have_from) {
            err_init(&err);
            if (est_model_from_table(from, v->name, &m, &err) != 0)
                m = from_all;
            weak = false;
        }
        size_t n = 0;
        double pred_done = 0, actual_done = 0;
        for (size_t pi = 0; pi < plan->n_points; pi++) {
            const struct plan_point *pp = &plan->points[pi];
            if (pp->variant != vi)
                continue;
            struct est_point ep = {pp->concurrency, pp->prompts, v->bench.output_len};
            if (!attempted[pi] && !plan_point_done(plan, t, pi)) {
                todo[n++] = ep;
            } else if (took_s[pi] >= 0) {
                pred_done += est_point_s(&m, &ep);
                actual_done += took_s[pi];
            }
        }
        total += est_eta_s(&m, todo, n, pred_done, actual_done);
        lower = lower || (weak && n > 0);
    }
    free(todo);
    *lower_bound = lower;
    return total;
}
