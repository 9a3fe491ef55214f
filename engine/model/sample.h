/*
 * sample: next-token choice from a logits row: greedy (argmax, lowest id
 * on ties), or temperature with min-p, top-k and top-p (nucleus) filtering
 * drawn from a seeded RNG, so a (seed, logits) pair always gives the same
 * token. Repetition, frequency and presence penalties (vLLM's definitions)
 * are applied to a copy of the row first; log-probabilities and the top
 * alternatives of a row are computed on the raw row. Buffers are allocated
 * at init; sampling never allocates.
 */
#ifndef ENGINE_SAMPLE_H
#define ENGINE_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

struct sample_params {
    float temperature;        /* 0 = greedy; else logits / temperature */
    int top_k;                /* keep the k most likely tokens; 0 = all */
    float top_p;              /* then the smallest set with probability >= top_p of what top_k
                                 kept (renormalised); 1 = all */
    uint64_t seed;            /* RNG seed */
    float min_p;              /* drop tokens whose probability (after temperature) is below
                                 min_p times the most likely one's; 0 = off; in [0, 1] */
    float repetition_penalty; /* over prompt and output tokens: a positive logit is divided
                                 by it, a negative one multiplied; 1 (or 0) = off; > 0 */
    float frequency_penalty;  /* subtracted times a token's count in the output; 0 = off */
    float presence_penalty;   /* subtracted once from every token in the output; 0 = off */
};

struct sampler {
    struct sample_params p;
    uint64_t rng; /* xorshift64* state, never 0 */
    int n_vocab;
    float *prob;    /* (n_vocab) candidates' probabilities, owned */
    int32_t *idx;   /* (n_vocab) candidates' ids, owned */
    float *work;    /* (n_vocab) the penalised row, owned; NULL when no penalty is set */
    int32_t *count; /* (n_vocab) occurrences in the output (frequency/presence), owned; NULL
                       when no penalty is set; all zero between calls */
    uint8_t *seen;  /* (n_vocab) marks for the repetition penalty, owned; NULL likewise */
};

/* Prepare a sampler for n_vocab logits. Out-of-range parameters are
 * clamped (temperature < 0, or so small that 1/temperature overflows, -> 0, top_p outside (0, 1] ->
 * 1, top_k < 0 -> 0). */
void sampler_init(struct sampler *s, int n_vocab, const struct sample_params *p);
void sampler_release(struct sampler *s);
/* Pick a token from logits[0..n_vocab). */
int32_t sampler_sample(struct sampler *s, const float *logits);

/* The row to sample from once the penalties are applied, as vLLM applies
 * them: the repetition penalty once per distinct token of tokens[0..n)
 * (prompt and output), then frequency_penalty x count and presence_penalty
 * for each distinct token of the output tokens[n_prompt..n). Returns
 * logits itself when no penalty is set, else s->work (valid until the next
 * call). */
const float *sampler_penalize(struct sampler *s, const float *logits, const int32_t *tokens,
                              int n_prompt, int n);

/* log of sum(exp(x[i] - mx)) + mx over x[0..n), in double; when keep is
 * not NULL, keep[i] = exp(x[i] - mx). mx should be the maximum of x. */
double sample_log_sum_exp(const float *x, int n, float mx, double *keep);

/*
 * Log-probabilities of the row logits[0..n) (log-softmax, in double as
 * `fp4serve eval` computes them): returns that of token tok, and writes the
 * k most likely tokens, best first (lowest id among equals), to
 * top_ids[0..k) and their log-probabilities to top_lp[0..k). k <= n, and
 * k <= SAMPLE_MAX_TOP; k = 0 writes nothing.
 */
#define SAMPLE_MAX_TOP 20
float sample_logprobs(const float *logits, int n, int32_t tok, int k, int32_t *top_ids,
                      float *top_lp);

/* Index of the largest logit (the lowest index among equals). */
int32_t sample_argmax(const float *logits, int n);

#endif
