/*
 * summary: grouping a results table by variant and concurrency. Tables
 * are small (one row per point), so everything is a linear scan.
 */
#include "analysis/summary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fileio.h"
#include "xalloc.h"

#include "store/metric.h"

static bool is_ok(const struct res_point *p)
{
    return p->status && strcmp(p->status, RES_OK) == 0;
}

static bool of_variant(const struct res_point *p, const char *variant)
{
    return !variant || strcmp(p->variant ? p->variant : "", variant) == 0;
}

void sum_variants(const struct res_table *t, const struct strvec *order, struct strvec *out)
{
    for (size_t i = 0; order && i < order->n; i++)
        for (size_t r = 0; r < t->n; r++)
            if (of_variant(&t->rows[r], order->v[i]) && strvec_find(out, order->v[i]) < 0) {
                strvec_push(out, order->v[i]);
                break;
            }
    for (size_t r = 0; r < t->n; r++) {
        const char *v = t->rows[r].variant ? t->rows[r].variant : "";
        if (strvec_find(out, v) < 0)
            strvec_push(out, v);
    }
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

bool sum_is_rate_point(const struct res_point *p)
{
    return p->log && strncmp(path_base(p->log), "rate", 4) == 0;
}

void sum_metric(const struct res_table *t, const char *variant, const char *metric,
                struct sum_series *out)
{
    long *cs = xcalloc(t->n + 1, sizeof(long));
    double *vals = xcalloc(t->n + 1, sizeof(double));
    size_t nc = 0;
    out->lv = xcalloc(t->n + 1, sizeof(*out->lv));
    out->n = 0;
    for (size_t r = 0; r < t->n; r++)
        if (of_variant(&t->rows[r], variant) && !sum_is_rate_point(&t->rows[r]))
            cs[nc++] = t->rows[r].concurrency;
    qsort(cs, nc, sizeof(long), cmp_long);
    for (size_t i = 0; i < nc; i++) {
        if (i && cs[i] == cs[i - 1])
            continue;
        size_t n = 0;
        for (size_t r = 0; r < t->n; r++) {
            const struct res_point *p = &t->rows[r];
            double v;
            if (p->concurrency == cs[i] && of_variant(p, variant) && is_ok(p) &&
                !sum_is_rate_point(p) && mset_get(&p->metrics, metric, &v) && isfinite(v))
                vals[n++] = v;
        }
        if (!n)
            continue;
        struct sum_level *lv = &out->lv[out->n++];
        lv->concurrency = cs[i];
        fit_spread(vals, n, 0, &lv->s);
    }
    free(cs);
    free(vals);
}

void sum_series_release(struct sum_series *s)
{
    free(s->lv);
    s->lv = NULL;
    s->n = 0;
}

const struct sum_level *sum_find(const struct sum_series *s, long c)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->lv[i].concurrency == c)
            return &s->lv[i];
    return NULL;
}

bool sum_is_step_metric(const char *name)
{
    size_t n = strlen(name);
    return (n > 8 && strcmp(name + n - 8, "_tpot_ms") == 0) ||
           (n > 7 && strcmp(name + n - 7, "_itl_ms") == 0) || strcmp(name, "server_step_ms") == 0;
}

/* A row's end-to-end time by source k (see sum_thr), NAN when missing. */
static double row_e2e(const struct res_point *p, int k, double out)
{
    double v, t;
    if (k == 0 && mset_get(&p->metrics, "mean_e2e_ms", &v))
        return v;
    if (k == 1 && mset_get(&p->metrics, "median_e2e_ms", &v))
        return v;
    if (k == 2 && mset_get(&p->metrics, "median_ttft_ms", &t) &&
        mset_get(&p->metrics, "median_tpot_ms", &v) && out >= 1)
        return t + (out - 1) * v;
    return NAN;
}

void sum_throughput(const struct res_table *t, const char *variant, long output_len,
                    struct sum_thr *out)
{
    static const char *const sources[] = {"mean_e2e_ms", "median_e2e_ms",
                                          "median_ttft_ms + (out-1)·median_tpot_ms"};
    memset(out, 0, sizeof(*out));
    out->max_rel = NAN;
    double sum = 0;
    size_t n_out = 0, n_ok = 0;
    for (size_t r = 0; r < t->n; r++) {
        const struct res_point *p = &t->rows[r];
        double tok, req;
        if (!of_variant(p, variant) || !is_ok(p))
            continue;
        n_ok++;
        if (mset_get(&p->metrics, "total_output_tokens", &tok) &&
            mset_get(&p->metrics, "successful_requests", &req) && req > 0 && tok > 0) {
            sum += tok / req;
            n_out++;
        }
    }
    out->out_tokens = n_out ? sum / (double)n_out : output_len >= 1 ? (double)output_len : NAN;
    if (!n_ok || !isfinite(out->out_tokens))
        return;
    double *x = xcalloc(t->n + 1, sizeof(double)), *y = xcalloc(t->n + 1, sizeof(double));
    for (int k = 0; k < 3 && !out->ok; k++) {
        size_t n = 0;
        for (size_t r = 0; r < t->n; r++) {
            const struct res_point *p = &t->rows[r];
            if (!of_variant(p, variant) || !is_ok(p))
                continue;
            x[n] = (double)p->concurrency;
            y[n] = row_e2e(p, k, out->out_tokens);
            if (!isfinite(y[n]))
                break;
            n++;
        }
        if (n == n_ok && fit_linear(x, y, n, &out->e2e) == 0) {
            out->ok = true;
            out->source = sources[k];
        }
    }
    free(x);
    free(y);
    if (!out->ok)
        return;
    struct sum_series s;
    sum_metric(t, variant, "output_throughput", &s);
    for (size_t l = 0; l < s.n; l++) {
        double pred = sum_thr_at(out, (double)s.lv[l].concurrency), m = s.lv[l].s.mean;
        double rel = m > 0 && isfinite(pred) ? fabs(pred - m) / m : INFINITY;
        if (isnan(out->max_rel) || rel > out->max_rel)
            out->max_rel = rel;
    }
    sum_series_release(&s);
}

double sum_thr_at(const struct sum_thr *m, double n)
{
    if (!m->ok)
        return NAN;
    double e2e = m->e2e.a + m->e2e.b * n;
    return e2e > 0 ? n * m->out_tokens * 1000.0 / e2e : NAN;
}

void sum_fit(const struct res_table *t, const char *variant, const char *x, const char *y,
             struct fit_analysis *fa)
{
    struct fit_obs *obs = xcalloc(t->n + 1, sizeof(*obs));
    size_t n = 0;
    for (size_t r = 0; r < t->n; r++) {
        const struct res_point *p = &t->rows[r];
        double xv, yv;
        if (!of_variant(p, variant) || !is_ok(p) || !mset_get(&p->metrics, y, &yv))
            continue;
        bool requested = strcmp(x, "concurrency") == 0 || strcmp(x, "prompts") == 0;
        if (requested && sum_is_rate_point(p))
            continue;
        if (strcmp(x, "concurrency") == 0)
            xv = (double)p->concurrency;
        else if (strcmp(x, "prompts") == 0)
            xv = (double)p->prompts;
        else if (!mset_get(&p->metrics, x, &xv))
            continue;
        obs[n++] = (struct fit_obs){xv, yv, p->repeat};
    }
    struct fit_opts o = {sum_is_step_metric(y), 0};
    fit_analyse(obs, n, &o, fa);
    free(obs);
}

char *sum_label(const char *metric)
{
    static const struct {
        const char *name, *label;
    } fixed[] = {
        {"output_throughput", "output throughput"},
        {"input_throughput", "input throughput"},
        {"total_throughput", "total throughput"},
        {"request_throughput", "request throughput"},
        {"successful_requests", "successful requests"},
        {"failed_requests", "failed requests"},
        {"duration_s", "duration"},
        {"total_input_tokens", "input tokens"},
        {"total_output_tokens", "output tokens"},
        {"achieved_concurrency", "achieved concurrency"},
        {"max_itl_ms", "max ITL"},
        {"cached_token_frac", "cached prompt fraction"},
        {"median_ttft_later_turns_ms", "median TTFT later turns"},
        {"mean_power_w", "mean power"},
        {"energy_j", "energy"},
        {"j_per_token", "energy per output token"},
    };
    static const struct {
        const char *name, *label;
    } server[] = {
        {"server_step_ms", "server decode step (ms)"},
        {"server_batch", "server running batch"},
        {"server_queue_ms", "server queue time (ms)"},
        {"server_prefix_hit_rate", "server prefix hit rate"},
    };
    for (size_t i = 0; i < sizeof(server) / sizeof(server[0]); i++)
        if (strcmp(server[i].name, metric) == 0)
            return xstrdup(server[i].label);
    const struct metric_def *d = metric_find(metric);
    const char *unit = d && d->unit[0] ? d->unit : NULL;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (strcmp(fixed[i].name, metric) == 0)
            return unit ? xasprintf("%s (%s)", fixed[i].label, unit) : xstrdup(fixed[i].label);
    /* STAT_WHAT_ms -> "STAT WHAT (ms)" */
    static const char *const whats[] = {"ttft", "tpot", "itl", "e2e"};
    const char *us = strchr(metric, '_');
    for (size_t i = 0; us && d && i < 4; i++) {
        size_t wl = strlen(whats[i]);
        if (strncmp(us + 1, whats[i], wl) == 0 && strcmp(us + 1 + wl, "_ms") == 0) {
            char up[8];
            for (size_t k = 0; k <= wl; k++)
                up[k] = (char)(whats[i][k] >= 'a' ? whats[i][k] - 32 : whats[i][k]);
            return xasprintf("%.*s %s (ms)", (int)(us - metric), metric, up);
        }
    }
    return unit ? xasprintf("%s (%s)", metric, unit) : xstrdup(metric);
}

size_t sum_count(const struct res_table *t, const char *variant, bool ok)
{
    size_t n = 0;
    for (size_t r = 0; r < t->n; r++)
        if (of_variant(&t->rows[r], variant) && is_ok(&t->rows[r]) == ok)
            n++;
    return n;
}
