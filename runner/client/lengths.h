/*
 * lengths: request lengths (prompt tokens, max_tokens) as a fixed number or
 * a seeded distribution. One text form serves the command line and the
 * experiment file's resolved value: "256", "uniform:MIN:MAX" or
 * "normal:MEAN:SD[:MIN[:MAX]]". Draws come from the caller's rng state, so
 * a request's length depends only on the seed and the request's index.
 */
#ifndef RUNNER_LENGTHS_H
#define RUNNER_LENGTHS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define LEN_MAX (1L << 20) /* the largest length any form may give, tokens */

enum len_kind {
    LEN_FIXED,   /* always `min` */
    LEN_UNIFORM, /* integers in [min, max], equally likely */
    LEN_NORMAL,  /* round(N(mean, sd)), clamped to [min, max] */
};

struct len_dist {
    enum len_kind kind;
    long min, max;   /* tokens; both equal the length for LEN_FIXED */
    double mean, sd; /* tokens; LEN_NORMAL only */
};

/*
 * Parse text into d. what names the flag or key for messages ("--input-len").
 * Returns 0, or -1 with err set (code `code`) saying which part is wrong.
 */
int len_parse(const char *text, const char *what, struct len_dist *d, struct err *err, int code);

/* The text form of d (parses back to the same d) into out. */
void len_format(const struct len_dist *d, char *out, size_t size);

/* One length drawn with *state (LEN_FIXED draws nothing). */
long len_sample(const struct len_dist *d, uint64_t *state);

/* The expected length, rounded (for estimates and ${input_len}). */
long len_mean(const struct len_dist *d);

#endif
