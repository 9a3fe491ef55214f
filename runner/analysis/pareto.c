/*
 * pareto: frontier and knee of the per-user against total throughput
 * trade (the rule is in pareto.h and docs/benchmarks.md).
 */
#include "analysis/pareto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "xalloc.h"

#include "analysis/summary.h"

/* a dominates b: at least as good on both axes, better on one. */
static bool dominates(const struct pareto_pt *a, const struct pareto_pt *b)
{
    return a->total >= b->total && a->user >= b->user && (a->total > b->total || a->user > b->user);
}

ptrdiff_t pareto_mark(struct pareto_pt *p, size_t n)
{
    size_t n_front = 0;
    double t_lo = INFINITY, t_hi = -INFINITY, u_lo = INFINITY, u_hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        p[i].front = true;
        for (size_t j = 0; j < n && p[i].front; j++)
            if (j != i && dominates(&p[j], &p[i]))
                p[i].front = false;
        if (!p[i].front)
            continue;
        n_front++;
        t_lo = fmin(t_lo, p[i].total), t_hi = fmax(t_hi, p[i].total);
        u_lo = fmin(u_lo, p[i].user), u_hi = fmax(u_hi, p[i].user);
    }
    /* two points (or equal ones) lie on their own chord: no knee */
    if (n_front < 3 || !(t_hi > t_lo) || !(u_hi > u_lo))
        return -1;
    ptrdiff_t knee = -1;
    double best = 1e-9; /* above the chord by more than rounding */
    for (size_t i = 0; i < n; i++) {
        if (!p[i].front)
            continue;
        double d = (p[i].total - t_lo) / (t_hi - t_lo) + (p[i].user - u_lo) / (u_hi - u_lo) - 1;
        if (d > best + 1e-12 ||
            (knee >= 0 && fabs(d - best) <= 1e-12 && p[i].conc < p[knee].conc)) {
            best = d;
            knee = (ptrdiff_t)i;
        }
    }
    return knee;
}

size_t pareto_points(const struct res_table *t, const char *variant, struct pareto_pt **out,
                     ptrdiff_t *knee)
{
    struct sum_series thr, tpot;
    sum_metric(t, variant, "output_throughput", &thr);
    sum_metric(t, variant, "median_tpot_ms", &tpot);
    struct pareto_pt *p = xcalloc(thr.n + 1, sizeof(*p));
    size_t n = 0;
    for (size_t l = 0; l < thr.n; l++) {
        const struct sum_level *tp = sum_find(&tpot, thr.lv[l].concurrency);
        if (tp && tp->s.mean > 0 && thr.lv[l].s.mean > 0)
            p[n++] = (struct pareto_pt){thr.lv[l].s.mean, 1000.0 / tp->s.mean,
                                        thr.lv[l].concurrency, false};
    }
    sum_series_release(&thr);
    sum_series_release(&tpot);
    *knee = pareto_mark(p, n);
    *out = p;
    return n;
}

void pareto_series(struct plot_chart *c, struct plot_series *front, const struct pareto_pt *p,
                   size_t n, ptrdiff_t knee)
{
    char note[64];
    char *title = xstrdup(front->title);
    for (size_t i = 0; i < n; i++)
        if (p[i].front && plot_series_add(front, p[i].total, p[i].user, p[i].user, p[i].user)) {
            snprintf(note, sizeof(note), "C=%ld%s", p[i].conc,
                     (ptrdiff_t)i == knee ? ", knee" : "");
            plot_series_note(front, note);
        }
    struct plot_series *dom = plot_chart_series(c, "");
    dom->role = PLOT_ROLE_DOMINATED;
    for (size_t i = 0; i < n; i++)
        if (!p[i].front && plot_series_add(dom, p[i].total, p[i].user, p[i].user, p[i].user)) {
            snprintf(note, sizeof(note), "C=%ld, dominated", p[i].conc);
            plot_series_note(dom, note);
        }
    if (knee >= 0) {
        char *kt = xasprintf("%s knee (C=%ld)", title, p[knee].conc);
        struct plot_series *ks = plot_chart_series(c, kt);
        ks->role = PLOT_ROLE_KNEE;
        if (plot_series_add(ks, p[knee].total, p[knee].user, p[knee].user, p[knee].user)) {
            snprintf(note, sizeof(note), "C=%ld, knee", p[knee].conc);
            plot_series_note(ks, note);
        }
        free(kt);
    }
    free(title);
}

void pareto_md_head(struct buf *b)
{
    buf_puts(b, "## Pareto frontier\n\n"
                "Per-user output tok/s (1000 / median TPOT) against total output tok/s, one "
                "point per concurrency level (means over the ok repeats). A level is on its "
                "series' frontier when no other level of that series is at least as fast on both "
                "and faster on one; the others are dominated (grey on the chart). The knee is the "
                "frontier level farthest above the straight line between the frontier's two ends "
                "once both axes are scaled to the frontier's range (none with fewer than three "
                "frontier levels): past it, each gain in total throughput costs each user more "
                "speed than before.\n\n"
                "| series | frontier (C) | dominated (C) | knee C | knee total tok/s | knee "
                "per-user tok/s |\n|---|---|---|---:|---:|---:|\n");
}

void pareto_md_row(struct buf *b, const char *label, const struct res_table *t, const char *variant)
{
    struct pareto_pt *p;
    ptrdiff_t knee;
    size_t n = pareto_points(t, variant, &p, &knee);
    buf_puts(b, "| ");
    for (const char *q = label; *q; q++) { /* a table cell: '|' escaped */
        if (*q == '|')
            buf_putc(b, '\\');
        buf_putc(b, *q);
    }
    buf_puts(b, " |");
    for (int front = 1; front >= 0; front--) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (p[i].front == (front == 1))
                buf_printf(b, "%s%ld", k++ ? ", " : " ", p[i].conc);
        buf_puts(b, k ? " |" : " - |");
    }
    if (knee >= 0)
        buf_printf(b, " %ld | %.1f | %.1f |\n", p[knee].conc, p[knee].total, p[knee].user);
    else
        buf_puts(b, n ? " none | | |\n" : " no level with both metrics | | |\n");
    free(p);
}
