/*
 * gate: parsing `--gate` arguments and checking them over a comparison.
 * Each check is one (gate, candidate series, concurrency); its interval is
 * the 95% bootstrap interval of the mean over the ok repeats (fit.h
 * fit_spread), or the single value when the point ran once.
 */
#include "analysis/gate.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strutil.h"
#include "strvec.h"
#include "sweep.h"
#include "xalloc.h"

#include "store/metric.h"

/* A metric name as points.csv writes it: letters, digits, '_', '.', '-'. */
static bool metric_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '-';
}

int gate_parse(const char *arg, struct gate *g, struct err *err)
{
    memset(g, 0, sizeof(*g));
    const char *op = strstr(arg, "<=");
    const char *ge = strstr(arg, ">=");
    if (!op || (ge && ge < op))
        op = ge;
    if (!op)
        return err_set(err, RN_ERR_USAGE,
                       "--gate '%s': no '<=' or '>=' (write METRIC<=+5%% or METRIC>=-3%%)", arg),
               -1;
    const char *m0 = arg, *m1 = op;
    while (*m0 == ' ')
        m0++;
    while (m1 > m0 && m1[-1] == ' ')
        m1--;
    if (m1 == m0)
        return err_set(err, RN_ERR_USAGE, "--gate '%s': no metric before '%.2s'", arg, op), -1;
    for (const char *p = m0; p < m1; p++)
        if (!metric_char(*p))
            return err_set(err, RN_ERR_USAGE,
                           "--gate '%s': '%.*s' is not a metric name (letters, digits, '_')", arg,
                           (int)(m1 - m0), m0),
                   -1;
    const char *v0 = op + 2;
    while (*v0 == ' ')
        v0++;
    size_t vlen = strlen(v0);
    while (vlen && v0[vlen - 1] == ' ')
        vlen--;
    double pct;
    if (vlen < 2 || v0[vlen - 1] != '%' || str_to_double_n(v0, vlen - 1, &pct) != 0 ||
        !isfinite(pct))
        return err_set(err, RN_ERR_USAGE,
                       "--gate '%s': '%.*s' is not a percentage of the baseline (write +5%% or "
                       "-3%%)",
                       arg, (int)vlen, v0),
               -1;
    if (pct <= -100)
        return err_set(err, RN_ERR_USAGE,
                       "--gate '%s': %g%% leaves nothing of the baseline (above -100%% only)", arg,
                       pct),
               -1;
    g->arg = xstrdup(arg);
    g->metric = xstrndup(m0, (size_t)(m1 - m0));
    g->upper = op[0] == '<';
    g->pct = pct;
    return 0;
}

void gate_release(struct gate *g)
{
    free(g->arg);
    free(g->metric);
    memset(g, 0, sizeof(*g));
}

int gate_check_metrics(const struct gate *g, size_t n, const struct cmp_set *c, struct err *err)
{
    struct strvec have = STRVEC_INIT;
    int rc = 0;
    cmp_metric_names(c, &have);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (strvec_find(&have, g[i].metric) >= 0)
            continue;
        const char *hint = have.n ? str_suggest(g[i].metric, (const char *const *)have.v) : NULL;
        err_set(err, RN_ERR_USAGE, "--gate '%s': no run has the metric '%s'%s%s%s", g[i].arg,
                g[i].metric, hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
        rc = -1;
    }
    strvec_release(&have);
    return rc;
}

/* The interval a check compares: the bootstrap interval of the mean over
 * repeats, or the value itself. */
static void interval(const struct fit_spread *v, double *lo, double *hi)
{
    if (v->n >= 2 && v->mean_ci.ok) {
        *lo = v->mean_ci.lo;
        *hi = v->mean_ci.hi;
    } else {
        *lo = *hi = v->mean;
    }
}

/* "280.00" or "280.00 [278.10, 281.90]" (the interval compared). */
static void value_text(const struct fit_spread *v, char *out, size_t size)
{
    double lo, hi;
    interval(v, &lo, &hi);
    if (lo != hi)
        snprintf(out, size, "%.2f [%.2f, %.2f]", v->mean, lo, hi);
    else
        snprintf(out, size, "%.2f", v->mean);
}

size_t gate_run(const struct gate *g, size_t n, const struct cmp_set *c, FILE *f,
                struct buf *broken)
{
    size_t n_broken = 0, n_held = 0, n_skipped = 0;
    fprintf(f, "\ngates (B against baseline A = %s; with repeats, intervals of the mean)\n",
            c->s[0].label);
    for (size_t gi = 0; gi < n; gi++)
        for (size_t si = 1; si < c->n_s; si++)
            for (size_t k = 0; k < c->n_conc; k++) {
                long conc = c->conc[k];
                struct fit_spread a, b;
                enum cmp_cell ka = cmp_cell(c, 0, conc, g[gi].metric, &a);
                enum cmp_cell kb = cmp_cell(c, si, conc, g[gi].metric, &b);
                if (ka != CMP_VALUE || (kb != CMP_VALUE && kb != CMP_FAILED) || !isfinite(a.mean) ||
                    (kb == CMP_VALUE && !isfinite(b.mean))) {
                    if (ka != CMP_MISSING || kb != CMP_MISSING)
                        n_skipped++;
                    continue;
                }
                double alo, ahi, blo, bhi, ratio = NAN;
                interval(&a, &alo, &ahi);
                char at[96], bt[96];
                value_text(&a, at, sizeof(at));
                bool bad;
                if (kb == CMP_FAILED) {
                    bad = true;
                    snprintf(bt, sizeof(bt), "failed");
                } else {
                    interval(&b, &blo, &bhi);
                    value_text(&b, bt, sizeof(bt));
                    double scale = 1 + g[gi].pct / 100;
                    /* B's whole interval past A's interval moved by the allowance */
                    bad = g[gi].upper ? blo > ahi * scale : bhi < alo * scale;
                    if (a.mean != 0)
                        ratio = b.mean / a.mean;
                }
                if (!bad) {
                    n_held++;
                    continue;
                }
                n_broken++;
                char rt[48] = "no ratio";
                if (isfinite(ratio))
                    snprintf(rt, sizeof(rt), "ratio %.3f (%+.1f%%)", ratio, 100 * (ratio - 1));
                fprintf(f, "  BROKEN %s at concurrency %ld: %s %s against %s %s, %s\n", g[gi].arg,
                        conc, c->s[si].label, bt, c->s[0].label, at, rt);
                if (broken) {
                    buf_printf(broken, "%s%s at C=%ld for %s: ", broken->len ? "; " : "", g[gi].arg,
                               conc, c->s[si].label);
                    if (isfinite(ratio))
                        buf_printf(broken, "%.3f", ratio);
                    else
                        buf_puts(broken, "failed");
                }
            }
    fprintf(f, "  %zu check%s broken, %zu held", n_broken, n_broken == 1 ? "" : "s", n_held);
    if (n_skipped)
        fprintf(f, ", %zu not compared (a side missing or without the metric)", n_skipped);
    fputc('\n', f);
    return n_broken;
}
