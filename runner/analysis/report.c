/*
 * report: from points.csv to fit.json, plots/ and REPORT.md. This file
 * computes: it loads the run folder, fits every variant (summary.c,
 * fit.c), the throughput law and the other step fit, then has the writers
 * put them down: report_json.c (fit.json, fit.csv), report_charts.c
 * (plots/), report_md.c (REPORT.md), report_html.c (REPORT.html);
 * report_int.h is what they share.
 */
#include "analysis/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "log.h"
#include "strvec.h"
#include "sweep.h"
#include "xalloc.h"

#include "analysis/report_int.h"

/* bench.output_len of variant as run, -1 when not known. */
static long variant_output_len(const struct rundir *rd, const char *variant)
{
    for (size_t i = 0; i < rd->n_v; i++)
        if (strcmp(rd->v[i].name, variant) == 0)
            return rd->v[i].output_len;
    return -1;
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
    printf("wrote %s/fit.json, %s/fit.csv, %s/REPORT.md, %s/REPORT.html and %zu chart(s) in "
           "%s/plots/\n",
           r->dir, r->dir, r->dir, r->dir, r->drawn.n, r->dir);
}

int report_build(const char *run_dir, const struct report_opts *opts, struct err *err)
{
    static const struct report_opts defaults = {NULL, NULL, false, false};
    struct report r;
    struct buf md = {0}; /* REPORT.md's text, for REPORT.html */
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
    if (report_write_fit_json(&r, err) != 0 || report_write_fit_csv(&r, err) != 0)
        goto out;
    r.group_by = o->group_by ? o->group_by : r.rd.group_by;
    if (r.group_by && strrchr(r.group_by, '.')) /* the matrix key: names hold its last part */
        r.group_by = strrchr(r.group_by, '.') + 1;
    report_group_variants(&r);
    report_build_charts(&r);
    report_draw_charts(&r);
    buf_init(&md, REPORT_MAX);
    if (report_write_md(&r, &md, err) != 0 || report_write_html(&r, md.data, err) != 0) {
        if (r.chart_error && !r.no_gnuplot) /* both said: the charts first */
            err_prefix(err, "%s", r.chart_error);
        goto out;
    }
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
    buf_release(&md);
    res_table_release(&r.t);
    return rc;
}
