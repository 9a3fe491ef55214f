/*
 * roofline: the placement rule of a and b (see roofline.h).
 */
#include "analysis/roofline.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
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
        out->b_ratio <= ROOF_A_HIGH)
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
