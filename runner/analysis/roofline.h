/*
 * roofline: where a decode step law `step = a + b·N` sits against the
 * model's roofline, from what the server reports (fp4serve: weight bytes
 * read per step, matmul FLOPs per token, and with --probe-bandwidth the
 * measured memory bandwidth). The rule (docs/benchmarks.md):
 *
 *   a against the time to read the weights once, weight_bytes / bandwidth:
 *   from ROOF_A_LOW to ROOF_A_HIGH times it, "bandwidth-bound"; above, the
 *   shared part of a step is mostly something else (overhead); below, the
 *   step reads its weights faster than the probe measured (caches), unless
 *   b is that read instead (each request reads the weights itself).
 *
 *   b against flops_per_token at the rate a single request achieves,
 *   flops_per_token / (a + b) = the one-request step: b at ROOF_B_SERIAL of
 *   it or more, "one request after another" (an added request shares
 *   nothing); less, "compute-bound" (the weight read is shared, each added
 *   token pays for its own arithmetic).
 *
 * A number that is missing is named and its placement skipped; nothing is
 * ever assumed in its place.
 */
#ifndef RUNNER_ROOFLINE_H
#define RUNNER_ROOFLINE_H

#include "buf.h"

#define ROOF_A_LOW    0.8 /* a / floor below this: faster than the measured bandwidth */
#define ROOF_A_HIGH   2.0 /* a / floor above this: not bandwidth-bound */
#define ROOF_B_SERIAL 0.8 /* b / (a + b) from this up: one request after another */

enum roof_verdict {
    ROOF_MISSING = 0, /* a number is missing: not placed (missing says which) */
    ROOF_BANDWIDTH,   /* a: within [LOW, HIGH] x the weight read */
    ROOF_OVERHEAD,    /* a: above HIGH x the weight read */
    ROOF_BELOW_FLOOR, /* a: under LOW x the weight read */
    ROOF_PER_REQUEST, /* a: under LOW x, b: serial and LOW..HIGH x the weight read */
    ROOF_COMPUTE,     /* b: an added token costs its own arithmetic, the read is shared */
    ROOF_SERIAL,      /* b: an added request costs about a one-request step */
};

/* What is known; NAN (or <= 0) = not reported. */
struct roof_in {
    double a_ms, b_ms;      /* the step law's intercept and slope */
    double weight_bytes;    /* weights read per batched step */
    double flops_per_token; /* matmul FLOPs per token */
    double mem_gbs;         /* measured memory read bandwidth, GB/s */
};

struct roof_place {
    enum roof_verdict a, b;
    double floor_ms;   /* weight_bytes / bandwidth, ms (NAN when not known) */
    double a_ratio;    /* a / floor_ms */
    double b_ratio;    /* b / floor_ms */
    double b_share;    /* b / (a + b) */
    double b_gflops;   /* flops_per_token / b: the rate an added token runs at */
    double one_gflops; /* flops_per_token / (a + b): what a single request achieves */
    char a_missing[160], b_missing[160]; /* what is missing, "" when placed */
};

/* Apply the rule to in. */
void roof_place(const struct roof_in *in, struct roof_place *out);
/* The placement in words: "a: ...; b: ..." on one line, no newline. */
void roof_words(struct buf *b, const struct roof_place *p);

#endif
