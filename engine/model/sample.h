/*
 * sample: next-token choice from a logits row: greedy (argmax, lowest id
 * on ties), or temperature with top-k and top-p (nucleus) filtering drawn
 * from a seeded RNG, so a (seed, logits) pair always gives the same token.
 * Buffers are allocated at init; sampling never allocates.
 */
#ifndef ENGINE_SAMPLE_H
#define ENGINE_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

struct sample_params {
    float temperature; /* 0 = greedy; else logits / temperature */
    int top_k;         /* keep the k most likely tokens; 0 = all */
    float top_p;       /* then the smallest set with probability >= top_p of what top_k
                          kept (renormalised); 1 = all */
    uint64_t seed;     /* RNG seed */
};

struct sampler {
    struct sample_params p;
    uint64_t rng; /* xorshift64* state, never 0 */
    int n_vocab;
    float *prob;  /* (n_vocab) candidates' probabilities, owned */
    int32_t *idx; /* (n_vocab) candidates' ids, owned */
};

/* Prepare a sampler for n_vocab logits. Out-of-range parameters are
 * clamped (temperature < 0, or so small that 1/temperature overflows, -> 0, top_p outside (0, 1] ->
 * 1, top_k < 0 -> 0). */
void sampler_init(struct sampler *s, int n_vocab, const struct sample_params *p);
void sampler_release(struct sampler *s);
/* Pick a token from logits[0..n_vocab). */
int32_t sampler_sample(struct sampler *s, const float *logits);

/* Index of the largest logit (the lowest index among equals). */
int32_t sample_argmax(const float *logits, int n);

#endif
