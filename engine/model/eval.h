/*
 * eval: how much a quantization costs on real text (`fp4serve eval`).
 * The token stream is cut into non-overlapping windows of ctx tokens;
 * each window starts from an empty KV cache and every position after its
 * first is scored (the logits of token i predict token i+1, all rows of a
 * step at once with MODEL_LOGITS_ALL). Against a reference model (the same
 * file at native precision) it also measures, on the same positions, the
 * mean KL divergence KL(ref || model) of the next-token distributions and
 * how often the two argmaxes agree.
 *
 * All sums are in double and made in position order, so the result does
 * not depend on the thread count or on how windows are split into steps.
 */
#ifndef ENGINE_EVAL_H
#define ENGINE_EVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct model;
struct model_opts;

struct ev_opts {
    int ctx;     /* window length in tokens, BOS included when bos >= 0 (>= 2) */
    int chunk;   /* tokens per model step; 0 = min(ctx, EV_DEFAULT_CHUNK) */
    int32_t bos; /* token put at the start of every window, or -1 for none */
};

#define EV_DEFAULT_CHUNK 128

struct ev_result {
    int64_t n_tokens; /* tokens of the text evaluated (BOS not counted) */
    int64_t n_scored; /* predictions scored */
    int n_windows;    /* windows (the last may be shorter than ctx) */
    double nll;       /* mean negative log-likelihood of the model, nats per token */
    double ppl;       /* exp(nll) */
    bool has_ref;     /* the fields below are set */
    double ref_nll;   /* the reference's mean NLL */
    double ref_ppl;   /* exp(ref_nll) */
    double kl;        /* mean KL(ref || model) over the scored positions, nats */
    double kl_max;    /* largest KL at one position, nats */
    double top1;      /* fraction of scored positions whose argmaxes agree, in [0, 1] */
};

/* Set the fields of mo that eval needs (one slot of ctx positions, steps
 * of up to `chunk` rows, all with logits); the caller sets the rest. */
void ev_model_opts(struct model_opts *mo, const struct ev_opts *o);

/*
 * Evaluate m (and ref, which may be NULL) on tokens[0..n). Both models
 * must have the same vocabulary and have been loaded with ev_model_opts'
 * settings (checked). Windows are tokens [k*w, (k+1)*w) with w = ctx (or
 * ctx - 1 after a BOS); a last window is kept when it has at least two
 * tokens (BOS counted). Uses the models' slot 0 and their thread pools.
 * Returns 0, or -1 with err set: FP_ERR_USAGE (fewer than two tokens,
 * mismatched models, options outside the models' sizes) or what
 * model_step reports.
 */
int ev_run(struct model *m, struct model *ref, const int32_t *tokens, int64_t n,
           const struct ev_opts *o, struct ev_result *r, struct err *err);

#endif
