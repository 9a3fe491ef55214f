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
 *
 * A mixture of experts reads no constant: a step reads the experts its
 * batch touches (fp4serve_decode_only_weight_bytes_read_total and
 * fp4serve_decode_only_expert_activations_total per decode-only step, else
 * the all-steps series per step; points.csv server_weight_bytes_per_step
 * and server_experts_per_step). roof_moe reads
 * the points of one variant: whether the batch shares experts (experts per
 * sequence fall as the batch grows: batched decode) or not (per-request
 * decode), the knee (the smallest C whose experts per step reach
 * ROOF_KNEE_FRAC of the model's (layer, expert) pairs when the server
 * reports them; else, or when they level off below that because the
 * router never picks some experts (or the point's steps mix in smaller
 * batches), ROOF_KNEE_FRAC of the most seen, before
 * the last point), and the local slope b between neighbouring points below
 * and from the knee.
 */
#ifndef RUNNER_ROOFLINE_H
#define RUNNER_ROOFLINE_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#define ROOF_A_LOW     0.8  /* a / floor below this: faster than the measured bandwidth */
#define ROOF_A_HIGH    2.0  /* a / floor above this: not bandwidth-bound */
#define ROOF_B_SERIAL  0.8  /* b / (a + b) from this up: one request after another */
#define ROOF_KNEE_FRAC 0.95 /* experts per step / every expert from this up: all touched */
#define ROOF_SHARED    0.8  /* experts per sequence, last / first point, below this: shared */

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
    bool shared;            /* measured: the batch shares its weight reads (a mixture of experts'
                               batched decode, roof_moe), so "each request reads the weights
                               itself" is never the verdict */
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

/* One point of a mixture-of-experts variant, as its server measured it. */
struct roof_moe_point {
    double conc;    /* requested concurrency C */
    double batch;   /* mean running batch (server_batch); NAN: not known */
    double step_ms; /* mean decode step (server_step_ms); NAN: not known */
    double experts; /* (layer, expert) pairs read per step (server_experts_per_step) */
    double bytes;   /* weight bytes read per step (server_weight_bytes_per_step); NAN: not known */
};

struct roof_moe {
    size_t n;          /* points (sorted by conc by roof_moe) */
    double ref;        /* every expert: the model's pairs, else the most experts per step seen */
    bool ref_is_model; /* ref is the model's count (else the most seen) */
    double per_seq_first, per_seq_last; /* experts per step / batch at the first and last point
                                           (NAN without a batch) */
    bool shared;      /* the batch shares experts: per_seq_last < ROOF_SHARED x per_seq_first */
    bool knee_ok;     /* a knee (a shared batch): all_touched, or a plateau: experts per step
                         reach ROOF_KNEE_FRAC x the most seen before the last point */
    bool all_touched; /* the knee reaches ROOF_KNEE_FRAC x the model's pairs */
    size_t knee;      /* index of the knee's point when knee_ok */
    double b_below;   /* mean local slope (ms per added sequence) of the segments ending at or
                         before the knee (all segments without one); NAN: none */
    double b_from;    /* the same over the segments past the knee; NAN: none */
    double b_first, b_last; /* the local slope of the first and the last segment; NAN: none */
};

/*
 * Read the n points of one variant (sorted in place by conc);
 * model_experts is the model's (layer, expert) pairs, or NAN / <= 0 when
 * not reported. Local slopes need step_ms and a batch that grew.
 */
void roof_moe(struct roof_moe_point *pts, size_t n, double model_experts, struct roof_moe *out);
/* The reading in words (one paragraph, no newline): experts per step against
 * C, sharing, the knee, and b below and from it. */
void roof_moe_words(struct buf *b, const struct roof_moe *m, const struct roof_moe_point *pts);

/* Apply the rule to in. */
void roof_place(const struct roof_in *in, struct roof_place *out);
/* The placement in words: "a: ...; b: ..." on one line, no newline. */
void roof_words(struct buf *b, const struct roof_place *p);

#endif
