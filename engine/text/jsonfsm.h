/*
 * jsonfsm: a byte-at-a-time recognizer of one JSON object (RFC 8259), the
 * grammar behind `response_format: {"type": "json_object"}`. The state is
 * a small plain struct, so a caller tries a token's bytes on a copy and
 * keeps the copy only if every byte was accepted: that is the token mask
 * of constrained decoding (serve/jsonmask.c). No I/O, no allocation.
 *
 * Accepted: an object at the top (what OpenAI's JSON mode promises), any
 * values inside, nesting up to JFSM_MAX_DEPTH, whitespace between tokens
 * in runs of at most JFSM_MAX_WS bytes (a model cannot spin on blanks),
 * strings of any bytes but control characters, '"' and '\' unescaped
 * (bytes >= 0x80 pass: UTF-8 is checked when the text is streamed).
 */
#ifndef ENGINE_JSONFSM_H
#define ENGINE_JSONFSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JFSM_MAX_DEPTH 32 /* objects and arrays open at once */
#define JFSM_MAX_WS    4  /* whitespace bytes in a row between tokens */

struct jfsm {
    uint8_t st;                    /* where in the grammar (jsonfsm.c enum state) */
    uint8_t sub;                   /* inside a literal, number or \u escape: how far */
    uint8_t ws;                    /* whitespace bytes in the current run */
    uint8_t depth;                 /* containers open */
    uint8_t stack[JFSM_MAX_DEPTH]; /* '{' or '[' per open container */
};

/* Ready for the first byte of a top-level object. */
void jfsm_init(struct jfsm *f);
/* Feed bytes p[0..n); false at the first byte the grammar refuses (f is
 * then in an unspecified state: feed a copy when trying). */
bool jfsm_feed(struct jfsm *f, const char *p, size_t n);
/* The top-level object is complete (only whitespace may follow). */
bool jfsm_done(const struct jfsm *f);

#endif
