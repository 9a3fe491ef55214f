/*
 * jsonmask: `response_format: {"type": "json_object"}` as a token mask.
 * Each step, every token whose bytes (tok_piece) the sequence's JSON
 * recognizer (text/jsonfsm.h) would refuse gets -inf before sampling, so
 * the text is always a prefix of one JSON object; control and
 * end-of-generation tokens are never allowed, and the sequence ends
 * ("stop") with the token that closes the object. The token texts are
 * gathered once, at the first JSON request, on the scheduler thread.
 */
#ifndef ENGINE_JSONMASK_H
#define ENGINE_JSONMASK_H

#include <stdbool.h>
#include <stdint.h>

#include "model/sample.h"
#include "text/jsonfsm.h"
#include "text/tokenizer.h"

struct jmask;

/* The row to sample from: logits[0..n_vocab) with every token that cannot
 * continue f set to -inf, in a buffer of *jm's (valid until the next call);
 * *jm is made on the first call (freed by jmask_free). *n_allowed receives
 * how many tokens remain. */
const float *jmask_row(struct jmask **jm, const tok_vocab *v, const struct jfsm *f,
                       const float *logits, int n_vocab, int *n_allowed);
/* sampler_sample over jmask_row's row: a token that continues f, or -1
 * when none can (the caller ends the sequence). */
int32_t jmask_sample(struct jmask **jm, const tok_vocab *v, const struct jfsm *f,
                     struct sampler *smp, const float *logits, int n_vocab);
/* Feed the sampled token to f; true once the object is complete. */
bool jmask_push(const struct jmask *jm, struct jfsm *f, int32_t tok);
void jmask_free(struct jmask *jm); /* NULL is a no-op */

#endif
