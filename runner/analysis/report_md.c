/*
 * report_md: REPORT.md. What ran, every point, each fit in words, client
 * and server step time side by side, the roofline, the charts and the
 * failures with their causes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fileio.h"
#include "sweep.h"
#include "version.h"
#include "xalloc.h"

#include "analysis/pareto.h"
#include "analysis/report_int.h"
#include "analysis/roofline.h"

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

/* Energy: each variant's source (or why none), and per point the columns
 * of analysis/power.h where any point has them. */
static void md_energy(struct buf *b, const struct report *r)
{
    static const char *const cols[] = {"mean_power_w", "energy_j", "j_per_token"};
    bool any = false;
    for (size_t i = 0; i < r->t.n && !any; i++)
        any = mset_get(&r->t.rows[i].metrics, "energy_j", NULL);
    buf_puts(b, "## Energy\n\n");
    bool said = false;
    for (size_t i = 0; i < r->rd.n_v; i++)
        if (r->rd.v[i].energy) {
            buf_printf(b, "- %s: ", r->rd.v[i].name);
            md_cell(b, r->rd.v[i].energy);
            buf_putc(b, '\n');
            said = true;
        }
    if (!said)
        buf_puts(b, "- not measured: no power samples beside the logs (runs made by `sweep "
                    "import`, or by a sweep without the sampler)\n");
    buf_putc(b, '\n');
    if (!any)
        return;
    buf_puts(b, "Mean power over the client's run, energy = mean power × `duration_s`, per "
                "output token (docs/benchmarks.md §3.1).\n\n| variant | C | repeat |");
    for (size_t c = 0; c < 3; c++) {
        char *l = sum_label(cols[c]);
        buf_printf(b, " %s |", l);
        free(l);
    }
    buf_puts(b, "\n|---|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < r->t.n; i++) {
        const struct res_point *p = &r->t.rows[i];
        if (!mset_get(&p->metrics, "energy_j", NULL))
            continue;
        buf_puts(b, "| ");
        md_cell(b, p->variant);
        buf_printf(b, " | %ld | %ld |", p->concurrency, p->repeat);
        for (size_t c = 0; c < 3; c++) {
            double v;
            buf_putc(b, ' ');
            if (mset_get(&p->metrics, cols[c], &v) && c == 2)
                buf_printf(b, "%.4g", v); /* J/token: 0.0042 on a CPU */
            else if (mset_get(&p->metrics, cols[c], &v))
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

/* The mixture-of-experts points of variant: ok rows with experts per step,
 * repeats at one concurrency averaged. Returns how many (*pts owned). */
static size_t moe_points(const struct report *r, const char *variant, struct roof_moe_point **pts)
{
    static const char *const cols[] = {"server_batch", "server_step_ms", "server_experts_per_step",
                                       "server_weight_bytes_per_step"};
    struct acc {
        double conc, sum[4];
        int n[4];
    } *a = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < r->t.n; i++) {
        const struct res_point *p = &r->t.rows[i];
        if (!p->variant || strcmp(p->variant, variant) != 0 || strcmp(p->status, RES_OK) != 0 ||
            !mset_get(&p->metrics, "server_experts_per_step", NULL))
            continue;
        size_t k = 0;
        while (k < n && a[k].conc != (double)p->concurrency)
            k++;
        if (k == n) {
            XGROW(a, cap, n + 1);
            memset(&a[n], 0, sizeof(a[n]));
            a[n++].conc = (double)p->concurrency;
        }
        for (size_t c = 0; c < 4; c++) {
            double v;
            if (mset_get(&p->metrics, cols[c], &v) && isfinite(v)) {
                a[k].sum[c] += v;
                a[k].n[c]++;
            }
        }
    }
    *pts = n ? xcalloc(n, sizeof(**pts)) : NULL;
    for (size_t k = 0; k < n; k++) {
        double m[4];
        for (size_t c = 0; c < 4; c++)
            m[c] = a[k].n[c] ? a[k].sum[c] / a[k].n[c] : NAN;
        (*pts)[k] = (struct roof_moe_point){a[k].conc, m[0], m[1], m[2], m[3]};
    }
    free(a);
    return n;
}

/* A mixture of experts: per concurrency what a step read, the local b, and
 * the reading in words (analysis/roofline.h roof_moe). */
static void md_moe(struct buf *b, const struct roof_moe *m, const struct roof_moe_point *pts,
                   double bw)
{
    buf_puts(b, "| C | batch | experts / step | of all | per sequence | weight MB / step | read "
                "ms | step ms | local b ms |\n"
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < m->n; i++) {
        const struct roof_moe_point *p = &pts[i];
        double x = isfinite(p->batch) && p->batch > 0 ? p->batch : p->conc;
        double lb = NAN;
        if (i > 0) {
            const struct roof_moe_point *q = &pts[i - 1];
            double qx = isfinite(q->batch) && q->batch > 0 ? q->batch : q->conc;
            if (x > qx)
                lb = (p->step_ms - q->step_ms) / (x - qx);
        }
        double cells[] = {p->batch,
                          p->experts,
                          m->ref_is_model ? 100 * p->experts / m->ref : NAN,
                          p->experts / x,
                          p->bytes / 1e6,
                          isfinite(bw) && bw > 0 ? p->bytes / (bw * 1e9) * 1e3 : NAN,
                          p->step_ms,
                          lb};
        buf_printf(b, "| %g |", p->conc);
        for (size_t c = 0; c < sizeof(cells) / sizeof(cells[0]); c++) {
            buf_putc(b, ' ');
            md_num(b, cells[c]);
            buf_puts(b, c == 2 && isfinite(cells[c]) ? "% |" : " |");
        }
        buf_putc(b, '\n');
    }
    buf_putc(b, '\n');
    roof_moe_words(b, m, pts);
    buf_puts(b, ".\n\n");
}

/* a and b against the roofline the server reports (analysis/roofline.h):
 * from the server's step law, else from a client step fit. Shown when some
 * variant's server reported any of the three numbers. A mixture of experts
 * reads no constant: a is set against what the smallest concurrency's steps
 * read, and the points show experts per step against C (md_moe). */
static void md_roofline(struct buf *b, const struct report *r)
{
    static const char *const cols[] = {"server_weight_bytes", "server_flops_per_token",
                                       "server_mem_gbs", "server_experts_per_step"};
    bool any = false;
    for (size_t vi = 0; vi < r->variants.n && !any; vi++)
        for (size_t k = 0; k < 4; k++)
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
        struct roof_moe_point *pts = NULL;
        size_t n_moe = moe_points(r, v, &pts);
        struct roof_moe moe;
        roof_moe(pts, n_moe, variant_value(r, v, "server_model_experts"), &moe);
        buf_printf(b, "**%s**: ", v);
        if (n_moe && isfinite(pts[0].bytes)) {
            /* the read the batch's experts make, not the all-experts bound */
            buf_printf(b, "%.4g MB of weights per step measured at C=%g (a mixture of experts",
                       pts[0].bytes / 1e6, pts[0].conc);
            if (isfinite(wb))
                buf_printf(b, "; all experts: %.4g MB", wb / 1e6);
            buf_puts(b, "), ");
            wb = pts[0].bytes;
        } else if (isfinite(wb)) {
            buf_printf(b, "%.4g MB of weights per step, ", wb / 1e6);
        }
        if (isfinite(fl))
            buf_printf(b, "%.4g GFLOP per token, ", fl / 1e9);
        if (isfinite(bw))
            buf_printf(b, "%.1f GB/s measured, ", bw);
        if (!fa) {
            buf_puts(b, "not placed: no step law to place (see the fits above).\n\n");
        } else {
            struct roof_in in = {fa->line.a, fa->line.b, wb, fl, bw, n_moe && moe.shared};
            struct roof_place pl;
            roof_place(&in, &pl);
            if (fa == sv)
                buf_puts(b, "from the server step law, ");
            else
                buf_printf(b, "from the client's %s fit (no server step law), ", r->fit_y);
            roof_words(b, &pl);
            buf_puts(b, ".\n\n");
        }
        if (n_moe)
            md_moe(b, &moe, pts, bw);
        free(pts);
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

/* The Pareto section (analysis/pareto.h), when some variant has a level to place. */
static void md_pareto(struct buf *b, const struct report *r)
{
    if (strvec_find(&r->drawn, "pareto") < 0) {
        bool any = false;
        for (size_t i = 0; i < r->n_charts; i++)
            any = any || strcmp(r->charts[i].name, "pareto") == 0;
        if (!any)
            return;
    }
    pareto_md_head(b);
    for (size_t k = 0; k < r->variants.n; k++)
        pareto_md_row(b, r->variants.v[r->order[k]], &r->t, r->variants.v[r->order[k]]);
    buf_putc(b, '\n');
}

int report_write_md(const struct report *r, struct buf *out, struct err *err)
{
    struct buf b;
    buf_init(&b, REPORT_MAX);
    buf_printf(&b, "# %s\n\n", r->rd.name);
    if (r->rd.description && *r->rd.description)
        buf_printf(&b, "%s\n\n", r->rd.description);
    md_what_ran(&b, r);
    md_points(&b, r);
    md_energy(&b, r);
    md_fits(&b, r);
    md_client_server(&b, r);
    md_roofline(&b, r);
    md_pareto(&b, r);
    md_charts(&b, r);
    md_failures(&b, r);
    buf_printf(&b,
               "---\nWritten by sweep %s from points.csv; `sweep plot %s` re-extracts the "
               "points from the saved logs and rewrites this report.\n",
               BUILD_VERSION, r->dir);
    char *path = path_join(r->dir, "REPORT.md");
    int rc = file_write_atomic(path, b.data, b.len, err, RN_ERR_ENV);
    free(path);
    if (out) {
        buf_release(out);
        *out = b; /* the text goes on to REPORT.html */
    } else {
        buf_release(&b);
    }
    return rc;
}
