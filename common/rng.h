/*
 * rng: the one seeded generator of both programs, splitmix64 (Steele, Lea
 * and Flood). The whole state is one uint64_t the caller owns, so a stream
 * can be derived from a seed and an index, and the numbers are the same on
 * every machine: synthetic models, sampled tokens, prompts, request times
 * and fit resampling all depend on that. Inline because the model
 * synthesizer draws once per weight.
 */
#ifndef COMMON_RNG_H
#define COMMON_RNG_H

#include <stdint.h>

/* Advance *state and return its next 64-bit value. */
static inline uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform double in [0, 1) from the top 53 bits of one draw. */
static inline double rng_unit(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * 0x1.0p-53;
}

#endif
