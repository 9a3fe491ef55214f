/*
 * roofline: the placement rule of a and b (see roofline.h).
 */
#include "analysis/roofline.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool known(double v)
{
    return isfinite(v) && v > 0;
}

/* Append "what" to the list in dst (", "-separated). */
static void add_missing(char *dst, size_t cap, const char *what)
{
    size_t n = strlen(dst);
    snprintf(dst + n, cap - n, "%s%s", n ? ", " : "", what);
}

void roof_place(const struct roof_in *in, struct roof_place *out)
{
    memset(out, 0, sizeof(*out));
    out->floor_ms = out->a_ratio = out->b_ratio = NAN;
    out->b_share = out->b_gflops = out->one_gflops = NAN;
    bool a_ok = known(in->a_ms), b_ok = known(in->b_ms);
    if (!a_ok)
        add_missing(out->a_missing, sizeof(out->a_missing), "a positive intercept a");
    if (!known(in->weight_bytes))
        add_missing(out->a_missing, sizeof(out->a_missing), "the weight bytes per step");
    if (!known(in->mem_gbs))
        add_missing(out->a_missing, sizeof(out->a_missing),
                    "a measured memory bandwidth (fp4serve serve --probe-bandwidth)");
    if (known(in->weight_bytes) && known(in->mem_gbs))
        out->floor_ms = in->weight_bytes / (in->mem_gbs * 1e9) * 1e3;
    if (!out->a_missing[0]) {
        out->a_ratio = in->a_ms / out->floor_ms;
        out->a = out->a_ratio < ROOF_A_LOW     ? ROOF_BELOW_FLOOR
                 : out->a_ratio <= ROOF_A_HIGH ? ROOF_BANDWIDTH
                                               : ROOF_OVERHEAD;
    }
    if (!b_ok)
        add_missing(out->b_missing, sizeof(out->b_missing), "a positive slope b");
    if (!known(in->flops_per_token))
        add_missing(out->b_missing, sizeof(out->b_missing), "the FLOPs per token");
    if (!out->b_missing[0] && !(in->a_ms + in->b_ms > 0))
        add_missing(out->b_missing, sizeof(out->b_missing), "a positive one-request step a + b");
    if (!out->b_missing[0]) {
        double one_ms = in->a_ms + in->b_ms;
        out->b_share = in->b_ms / one_ms;
        out->b_gflops = in->flops_per_token / (in->b_ms * 1e-3) / 1e9;
        out->one_gflops = in->flops_per_token / (one_ms * 1e-3) / 1e9;
        out->b = out->b_share >= ROOF_B_SERIAL ? ROOF_SERIAL : ROOF_COMPUTE;
    }
    /* per-request decode: a step reads the weights once per sequence, so
     * the read is in b, not in a */
    if (b_ok && isfinite(out->floor_ms))
        out->b_ratio = in->b_ms / out->floor_ms;
    if (out->a == ROOF_BELOW_FLOOR && out->b == ROOF_SERIAL && out->b_ratio >= ROOF_A_LOW &&
        out->b_ratio <= ROOF_A_HIGH && !in->shared)
        out->a = ROOF_PER_REQUEST;
}

void roof_words(struct buf *b, const struct roof_place *p)
{
    switch (p->a) {
    case ROOF_BANDWIDTH:
        buf_printf(b, "a is %.2fx the time to read the weights once (%.3g ms): bandwidth-bound",
                   p->a_ratio, p->floor_ms);
        break;
    case ROOF_OVERHEAD:
        buf_printf(b,
                   "a is %.2fx the time to read the weights once (%.3g ms): not bandwidth-bound, "
                   "most of the shared step is something else (threads, scheduling, launches)",
                   p->a_ratio, p->floor_ms);
        break;
    case ROOF_BELOW_FLOOR:
        buf_printf(b,
                   "a is %.2fx the time to read the weights once (%.3g ms): below the bandwidth "
                   "floor (the weights stay in cache, or the probe measured low)",
                   p->a_ratio, p->floor_ms);
        break;
    case ROOF_PER_REQUEST:
        buf_printf(b,
                   "a is %.2fx the time to read the weights once (%.3g ms) and b is %.2fx it: "
                   "each request reads the weights itself (bandwidth-bound per request)",
                   p->a_ratio, p->floor_ms, p->b_ratio);
        break;
    default:
        buf_printf(b, "a not placed (missing: %s)", p->a_missing);
        break;
    }
    buf_puts(b, "; ");
    switch (p->b) {
    case ROOF_SERIAL:
        buf_printf(b,
                   "b is %.0f%% of the one-request step a + b (a token's FLOPs at the rate one "
                   "request achieves, %.4g GFLOP/s): one request after another",
                   100 * p->b_share, p->one_gflops);
        break;
    case ROOF_COMPUTE:
        buf_printf(b,
                   "b is %.0f%% of the one-request step a + b: an added token runs its FLOPs at "
                   "%.4g GFLOP/s, %.1fx what one request achieves (%.4g): compute-bound",
                   100 * p->b_share, p->b_gflops, p->b_gflops / p->one_gflops, p->one_gflops);
        break;
    default:
        buf_printf(b, "b not placed (missing: %s)", p->b_missing);
        break;
    }
}

/* ---- a mixture of experts: experts per step against C ---- */

static int cmp_conc(const void *pa, const void *pb)
{
    const struct roof_moe_point *a = pa, *b = pb;
    return (a->conc > b->conc) - (a->conc < b->conc);
}

/* The batch a point ran (the server's mean), else the concurrency asked. */
static double point_x(const struct roof_moe_point *p)
{
    return known(p->batch) ? p->batch : p->conc;
}

void roof_moe(struct roof_moe_point *pts, size_t n, double model_experts, struct roof_moe *out)
{
    memset(out, 0, sizeof(*out));
    out->n = n;
    out->per_seq_first = out->per_seq_last = out->b_below = out->b_from = NAN;
    out->b_first = out->b_last = NAN;
    if (n == 0)
        return;
    qsort(pts, n, sizeof(*pts), cmp_conc);
    double most = 0;
    for (size_t i = 0; i < n; i++)
        if (pts[i].experts > most)
            most = pts[i].experts;
    out->ref_is_model = known(model_experts);
    out->ref = out->ref_is_model ? model_experts : most;
    out->per_seq_first = pts[0].experts / point_x(&pts[0]);
    out->per_seq_last = pts[n - 1].experts / point_x(&pts[n - 1]);
    /* batched decode reads a touched expert once for the whole step, so
     * per sequence the reads fall as the batch grows; per-request decode
     * reads a sequence's experts for it alone, the same for any batch */
    out->shared = n >= 2 && point_x(&pts[n - 1]) > point_x(&pts[0]) &&
                  out->per_seq_last < ROOF_SHARED * out->per_seq_first;
    /* the knee: every expert of the model read per step; else a plateau,
     * where experts per step stop growing below the model's count (the
     * router sends the batch's tokens to those only) or without it. The
     * most seen reached only at the last point is no plateau: still
     * growing. */
    size_t first_most = 0;
    while (first_most < n && !(pts[first_most].experts >= ROOF_KNEE_FRAC * most))
        first_most++;
    if (out->shared && out->ref_is_model && most >= ROOF_KNEE_FRAC * out->ref) {
        while (!(pts[out->knee].experts >= ROOF_KNEE_FRAC * out->ref))
            out->knee++;
        out->knee_ok = out->all_touched = true;
    } else if (out->shared && most > 0 && first_most + 1 < n) {
        out->knee = first_most;
        out->knee_ok = true;
    }
    double below = 0, from = 0;
    size_t n_below = 0, n_from = 0;
    for (size_t i = 1; i < n; i++) {
        double dx = point_x(&pts[i]) - point_x(&pts[i - 1]);
        if (!(dx > 0) || !isfinite(pts[i].step_ms) || !isfinite(pts[i - 1].step_ms))
            continue;
        double slope = (pts[i].step_ms - pts[i - 1].step_ms) / dx;
        if (isnan(out->b_first))
            out->b_first = slope;
        out->b_last = slope;
        if (!out->knee_ok || i <= out->knee) {
            below += slope;
            n_below++;
        } else {
            from += slope;
            n_from++;
        }
    }
    if (n_below)
        out->b_below = below / (double)n_below;
    if (n_from)
        out->b_from = from / (double)n_from;
}

void roof_moe_words(struct buf *b, const struct roof_moe *m, const struct roof_moe_point *pts)
{
    if (m->n < 2) {
        buf_puts(b, "one point: experts per step cannot be read against the concurrency");
        return;
    }
    const struct roof_moe_point *first = &pts[0], *last = &pts[m->n - 1];
    buf_printf(b, "experts per step grow from %.4g at C=%g to %.4g at C=%g", first->experts,
               first->conc, last->experts, last->conc);
    if (m->ref_is_model)
        buf_printf(b, ", of the model's %.0f (layer, expert) pairs", m->ref);
    else
        buf_puts(b, " (the server does not report the model's expert count)");
    if (!m->shared) {
        buf_printf(b,
                   "; per sequence they stay at %.3g (%.3g at the first point): each sequence "
                   "reads its own experts (per-request decode), nothing is shared, so there is "
                   "no knee and b keeps every sequence's read",
                   m->per_seq_last, m->per_seq_first);
    } else {
        buf_printf(b,
                   "; per sequence they fall from %.3g to %.3g: the batch shares experts, so an "
                   "added sequence brings fewer weights nobody read yet, and the weight-read "
                   "part of b, the cost of an added sequence, falls as the batch grows",
                   m->per_seq_first, m->per_seq_last);
        const struct roof_moe_point *k = &pts[m->knee];
        if (m->all_touched)
            buf_printf(b,
                       ". Every expert is touched from C=%g (%.4g per step, %.0f%% of them or "
                       "more): the knee",
                       k->conc, k->experts, 100 * ROOF_KNEE_FRAC);
        else if (m->knee_ok && m->ref_is_model)
            buf_printf(b,
                       ". Experts per step level off from C=%g at %.4g (%.0f%% of the model's "
                       "pairs): the knee, where every expert the batch's tokens route to is "
                       "touched (the others stay unread here: a router that never picks them, or "
                       "smaller batches among the point's steps, such as a lone warmup "
                       "request's)",
                       k->conc, k->experts, 100 * k->experts / m->ref);
        else if (m->knee_ok)
            buf_printf(b,
                       ". Experts per step level off from C=%g at %.4g (%.0f%% of the most seen "
                       "or more): the knee, where every expert the batch routes to is touched",
                       k->conc, k->experts, 100 * ROOF_KNEE_FRAC);
        else
            buf_printf(b,
                       ". Experts per step still grow at the last point (%.0f%% of %s at C=%g): "
                       "the knee, where every expert is touched, lies beyond the grid",
                       known(m->ref) ? 100 * last->experts / m->ref : 0.0,
                       m->ref_is_model ? "the model's pairs" : "the most seen", last->conc);
        if (m->knee_ok)
            buf_puts(b, ". From there a step reads the same weights whatever the batch, and b "
                        "keeps only what an added token computes");
    }
    if (isfinite(m->b_below) && isfinite(m->b_from)) {
        buf_printf(b,
                   ". Local b (step ms per added sequence between neighbouring points): %.3g ms "
                   "below the knee, %.3g ms from it",
                   m->b_below, m->b_from);
        if (m->b_from < m->b_below)
            buf_puts(b, ": b fell as the batch shared experts and stays low past the knee");
        else
            buf_puts(b, ": b did not fall here, so this step is not bound by reading the "
                        "experts on this machine (its arithmetic grows with the tokens either "
                        "way)");
    } else if (isfinite(m->b_first) && m->n >= 3) {
        buf_printf(b,
                   ". Local b (step ms per added sequence between neighbouring points): %.3g ms "
                   "between the first two points, %.3g ms between the last two",
                   m->b_first, m->b_last);
        if (m->shared)
            buf_puts(b, m->b_last < m->b_first
                            ? ": b fell as the batch shared experts"
                            : ": b did not fall here, so this step is not bound by reading the "
                              "experts on this machine");
    } else if (isfinite(m->b_first)) {
        buf_printf(b, ". Local b (step ms per added sequence between the two points): %.3g ms",
                   m->b_first);
    }
}
