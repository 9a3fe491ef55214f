/*
 * fit: least squares, residuals, predictions and the seeded bootstrap.
 * Sums are taken about the means (two-pass), which keeps R² accurate when
 * step times are large and nearly equal.
 */
#include "analysis/fit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "xalloc.h"

int fit_linear(const double *x, const double *y, size_t n, struct fit_line *out)
{
    double sx = 0, sy = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            sx += x[i];
            sy += y[i];
            m++;
        }
    if (m < 2)
        return -1;
    double mx = sx / m, my = sy / m, sxx = 0, sxy = 0, syy = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            double dx = x[i] - mx, dy = y[i] - my;
            sxx += dx * dx;
            sxy += dx * dy;
            syy += dy * dy;
        }
    if (!(sxx > 0))
        return -1;
    out->b = sxy / sxx;
    out->a = my - out->b * mx;
    out->n = m;
    double ss_res = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            double r = y[i] - (out->a + out->b * x[i]);
            ss_res += r * r;
        }
    out->r2 = syy > 0 ? 1.0 - ss_res / syy : 1.0;
    return 0;
}

double fit_throughput(const struct fit_line *l, double x)
{
    double step = l->a + l->b * x;
    return step > 0 ? x * 1000.0 / step : NAN;
}

/* ---- resampling: common/rng.h's seeded generator, same numbers on every machine ---- */

static size_t pick(uint64_t *s, size_t n)
{
    return (size_t)(rng_next(s) % n);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Percentile q in [0,1] of sorted v[0..n), linear interpolation. */
static double percentile(const double *v, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n)
        return v[n - 1];
    return v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

/* 95% interval of the finite samples in v[0..n) (sorted in place). */
static struct fit_ci interval(double *v, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            v[m++] = v[i];
    struct fit_ci ci = {false, NAN, NAN};
    if (m < n / 2 + 1)
        return ci; /* too many replicates without a value to say anything */
    qsort(v, m, sizeof(*v), cmp_double);
    ci.ok = true;
    ci.lo = percentile(v, m, 0.025);
    ci.hi = percentile(v, m, 0.975);
    return ci;
}

/* ---- analysis ---- */

static void derive(struct fit_analysis *fa, const struct fit_opts *o)
{
    const struct fit_line *l = &fa->line;
    fa->ceiling = NAN;
    fa->c90 = NAN;
    if (o->step && l->b > 0) {
        fa->ceiling = 1000.0 / l->b;
        if (l->a > 0)
            fa->c90 = 9.0 * l->a / l->b;
    }
}

/* One tolerance for every unphysical sign of a step fit: a negative
 * intercept, or a step falling over the x range, is noise while it is at
 * most FIT_FALL_REL of the fitted step at the smallest x (issue 23 N21: a
 * = -0.04 ms was refused while a 5% fall passed). */
static bool beyond_noise(double departure, double step_at_lo)
{
    return departure > FIT_FALL_REL * fabs(step_at_lo);
}

/* Whether the line is a law at all (fit.h: unfit), with the likely reason. */
static void judge_line(struct fit_analysis *fa, const struct fit_opts *o, const double *x,
                       const double *y, size_t n)
{
    const struct fit_line *l = &fa->line;
    double lo = x[0], hi = x[0], worst = 0; /* largest |residual| / |fitted| */
    for (size_t i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        double f = l->a + l->b * x[i];
        double rel = f != 0 ? fabs(y[i] - f) / fabs(f) : INFINITY;
        worst = rel > worst ? rel : worst;
    }
    double one = l->a + l->b * lo; /* the step at the smallest x */
    const char *what = NULL, *why = NULL;
    char buf[96];
    if (o->step && l->a < 0 && beyond_noise(-l->a, one)) {
        snprintf(buf, sizeof(buf), "negative intercept (a = %.1f)", l->a);
        what = buf;
        why = "prefill of arriving requests inside the decode steps (the client's TPOT carries "
              "it), or queueing at the higher concurrencies";
    } else if (o->step && l->b < 0 && beyond_noise(-l->b * (hi - lo), one)) {
        snprintf(buf, sizeof(buf), "negative slope (b = %.2f)", l->b);
        what = buf;
        why = "warm-up in the first points, or a regime change (a different kernel or batch "
              "schedule at higher concurrency)";
    } else if (fa->n_x >= 3 && l->r2 < FIT_R2_MIN && worst > FIT_FALL_REL) {
        /* a flat but precise line has a low R² too: only points well off it count */
        snprintf(buf, sizeof(buf), "R² %.3f below %.2f", l->r2, FIT_R2_MIN);
        what = buf;
        why = "a regime change (bandwidth saturation, queueing, prefill in the steps) or noisy "
              "points";
    }
    if (!what)
        return;
    fa->unfit = true;
    snprintf(fa->unfit_why, sizeof(fa->unfit_why), "%s: %s; likely %s", FIT_UNFIT, what, why);
}

/* Group observation indices by x: order[] sorted by x, start[g] the first
 * index of group g in order[], start[n_groups] == n. */
struct groups {
    size_t *order, *start;
    size_t n_groups;
};

static int cmp_obs(const void *a, const void *b, void *base)
{
    const struct fit_obs *obs = base;
    double x = obs[*(const size_t *)a].x, y = obs[*(const size_t *)b].x;
    return x < y ? -1 : x > y;
}

static void group_by_x(const struct fit_obs *obs, size_t n, struct groups *g)
{
    g->order = xcalloc(n + 1, sizeof(size_t));
    g->start = xcalloc(n + 2, sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        g->order[i] = i;
    qsort_r(g->order, n, sizeof(size_t), cmp_obs, (void *)obs);
    g->n_groups = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || obs[g->order[i]].x != obs[g->order[i - 1]].x)
            g->start[g->n_groups++] = i;
    g->start[g->n_groups] = n;
}

static void bootstrap(const struct fit_obs *obs, size_t n, const struct groups *g,
                      const struct fit_opts *o, struct fit_analysis *fa)
{
    uint64_t seed = o->seed ? o->seed : FIT_SEED_DEFAULT;
    double *x = xcalloc(n, sizeof(double)), *y = xcalloc(n, sizeof(double));
    double *as = xcalloc(FIT_BOOTSTRAP_N, sizeof(double));
    double *bs = xcalloc(FIT_BOOTSTRAP_N, sizeof(double));
    double *cs = xcalloc(FIT_BOOTSTRAP_N, sizeof(double));
    for (size_t r = 0; r < FIT_BOOTSTRAP_N; r++) {
        size_t k = 0;
        for (size_t gi = 0; gi < g->n_groups; gi++) {
            size_t lo = g->start[gi], cnt = g->start[gi + 1] - lo;
            for (size_t j = 0; j < cnt; j++) {
                const struct fit_obs *ob = &obs[g->order[lo + pick(&seed, cnt)]];
                x[k] = ob->x;
                y[k++] = ob->y;
            }
        }
        struct fit_line l;
        if (fit_linear(x, y, k, &l) == 0) {
            as[r] = l.a;
            bs[r] = l.b;
            cs[r] = o->step && l.b > 0 ? 1000.0 / l.b : NAN;
        } else {
            as[r] = bs[r] = cs[r] = NAN;
        }
    }
    fa->a_ci = interval(as, FIT_BOOTSTRAP_N);
    fa->b_ci = interval(bs, FIT_BOOTSTRAP_N);
    if (o->step)
        fa->ceiling_ci = interval(cs, FIT_BOOTSTRAP_N);
    free(x);
    free(y);
    free(as);
    free(bs);
    free(cs);
}

/* Powers of two up to 4x the largest tested x that were not tested. */
static void predict(const struct fit_obs *obs, size_t n, const struct fit_opts *o,
                    struct fit_analysis *fa)
{
    double max_x = 0;
    for (size_t i = 0; i < n; i++)
        if (obs[i].x > max_x)
            max_x = obs[i].x;
    fa->pred = xcalloc(FIT_MAX_PRED, sizeof(*fa->pred));
    for (double x = 1; x <= 4 * max_x && fa->n_pred < FIT_MAX_PRED; x *= 2) {
        bool tested = false;
        for (size_t i = 0; i < n && !tested; i++)
            tested = obs[i].x == x;
        if (tested)
            continue;
        struct fit_prediction *p = &fa->pred[fa->n_pred++];
        p->x = x;
        p->y = fa->line.a + fa->line.b * x;
        p->throughput = o->step ? fit_throughput(&fa->line, x) : NAN;
    }
}

void fit_analyse(const struct fit_obs *obs_in, size_t n_in, const struct fit_opts *opts,
                 struct fit_analysis *fa)
{
    static const struct fit_opts defaults = {false, 0};
    const struct fit_opts *o = opts ? opts : &defaults;
    memset(fa, 0, sizeof(*fa));
    fa->ceiling = fa->c90 = NAN;
    fa->a_ci.lo = fa->a_ci.hi = fa->b_ci.lo = fa->b_ci.hi = NAN;
    fa->ceiling_ci = fa->a_ci;

    /* finite observations only */
    struct fit_obs *obs = xcalloc(n_in + 1, sizeof(*obs));
    size_t n = 0;
    for (size_t i = 0; i < n_in; i++)
        if (isfinite(obs_in[i].x) && isfinite(obs_in[i].y))
            obs[n++] = obs_in[i];
    struct groups g;
    group_by_x(obs, n, &g);
    fa->n_x = g.n_groups;

    double *x = xcalloc(n + 1, sizeof(double)), *y = xcalloc(n + 1, sizeof(double));
    for (size_t i = 0; i < n; i++) {
        x[i] = obs[i].x;
        y[i] = obs[i].y;
    }
    if (g.n_groups < 2 || fit_linear(x, y, n, &fa->line) != 0) {
        snprintf(fa->reason, sizeof(fa->reason),
                 "%zu point(s) at %zu concurrency level(s): a line needs two levels", n,
                 g.n_groups);
        goto out;
    }
    fa->ok = true;
    judge_line(fa, o, x, y, n);
    if (!fa->unfit)
        derive(fa, o);
    fa->res = xcalloc(n + 1, sizeof(*fa->res));
    fa->n_res = n;
    for (size_t i = 0; i < n; i++) {
        struct fit_residual *r = &fa->res[i];
        r->x = obs[i].x;
        r->y = obs[i].y;
        r->repeat = obs[i].repeat;
        r->fitted = fa->line.a + fa->line.b * r->x;
        r->residual = r->y - r->fitted;
        r->relative = r->fitted != 0 ? r->residual / fabs(r->fitted) : NAN;
        r->regime_change = r->fitted <= 0 || fabs(r->relative) > FIT_REGIME_REL;
        fa->n_regime += r->regime_change;
    }
    if (!fa->unfit)
        predict(obs, n, o, fa);
    if (g.n_groups < n) /* some x was repeated */
        bootstrap(obs, n, &g, o, fa);
    if (fa->unfit) /* an interval of a ceiling that means nothing */
        fa->ceiling_ci = (struct fit_ci){false, NAN, NAN};
    if (g.n_groups == 2 && n == 2)
        snprintf(fa->reason, sizeof(fa->reason), "two points: the line passes through both");
out:
    free(x);
    free(y);
    free(g.order);
    free(g.start);
    free(obs);
}

void fit_analysis_release(struct fit_analysis *fa)
{
    free(fa->res);
    free(fa->pred);
    memset(fa, 0, sizeof(*fa));
}

void fit_spread(const double *v, size_t n, uint64_t seed, struct fit_spread *out)
{
    memset(out, 0, sizeof(*out));
    out->mean = out->sd = out->min = out->max = NAN;
    out->mean_ci.lo = out->mean_ci.hi = NAN;
    double *f = xcalloc(n + 1, sizeof(double));
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            f[m++] = v[i];
    out->n = m;
    if (m == 0)
        goto out;
    double sum = 0;
    out->min = out->max = f[0];
    for (size_t i = 0; i < m; i++) {
        sum += f[i];
        out->min = f[i] < out->min ? f[i] : out->min;
        out->max = f[i] > out->max ? f[i] : out->max;
    }
    out->mean = sum / m;
    double ss = 0;
    for (size_t i = 0; i < m; i++)
        ss += (f[i] - out->mean) * (f[i] - out->mean);
    out->sd = m > 1 ? sqrt(ss / (m - 1)) : 0;
    if (m >= 2) {
        uint64_t s = seed ? seed : FIT_SEED_DEFAULT;
        double *means = xcalloc(FIT_BOOTSTRAP_N, sizeof(double));
        for (size_t r = 0; r < FIT_BOOTSTRAP_N; r++) {
            double t = 0;
            for (size_t j = 0; j < m; j++)
                t += f[pick(&s, m)];
            means[r] = t / m;
        }
        out->mean_ci = interval(means, FIT_BOOTSTRAP_N);
        free(means);
    }
out:
    free(f);
}

/* v to dec decimals, without the sign of a value that rounds to zero. */
static void unsigned_zero(double v, int dec, char *out, size_t size)
{
    snprintf(out, size, "%.*f", dec, v);
    if (out[0] == '-' && strspn(out + 1, "0.") == strlen(out + 1))
        memmove(out, out + 1, strlen(out));
}

const char *fit_formula(double a, double b, int a_dec, int b_dec, const char *x_name, char *out,
                        size_t size)
{
    char as[48], bs[48];
    unsigned_zero(a, a_dec, as, sizeof(as));
    unsigned_zero(fabs(b), b_dec, bs, sizeof(bs));
    bool minus = b < 0 && strspn(bs, "0.") != strlen(bs);
    snprintf(out, size, "%s %s %s·%s", as, minus ? "-" : "+", bs, x_name);
    return out;
}
