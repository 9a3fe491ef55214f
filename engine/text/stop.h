/*
 * stop: the stop-string filter between the detokenizer and the client.
 * Generated text goes in piece by piece; what comes out is the text that
 * can no longer be part of a stop string. A suffix that could still grow
 * into one is held back. Generation ends with the first piece in which a
 * stop string is complete, and the text ends just before the earliest stop
 * string found then (the stop string is not sent, as OpenAI does; a stop
 * string that would have started earlier but completed later is never
 * generated, as with vLLM's per-token check). Input must be complete UTF-8
 * (tok_stream_push output), so held-back boundaries fall between
 * characters.
 */
#ifndef ENGINE_STOP_H
#define ENGINE_STOP_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

struct stop_filter {
    char *const *stops; /* (n_stops) views, owned by the caller */
    const size_t *lens; /* (n_stops) their byte lengths, each >= 1 */
    size_t n_stops;
    size_t max_len; /* longest stop string in bytes */
    char *held;     /* owned: text not yet released, at most max_len - 1 bytes
                       between calls */
    size_t n_held;
    size_t cap;   /* bytes allocated at held */
    bool matched; /* a stop string was found; later input is dropped */
};

/* Prepare a filter over stops[0..n) (views: they must outlive f). Allocates
 * room for max_piece bytes of input per call, so stop_push never
 * allocates. */
void stop_init(struct stop_filter *f, char *const *stops, const size_t *lens, size_t n,
               size_t max_piece);
void stop_release(struct stop_filter *f);

/*
 * Add text[0..n) (n <= max_piece). Writes the releasable text to out
 * (cap bytes of room, >= max_len + max_piece) and returns its length.
 * *hit becomes true when a stop string completed: out then ends just
 * before it and the filter drops everything after.
 */
size_t stop_push(struct stop_filter *f, const char *text, size_t n, char *out, size_t cap,
                 bool *hit);

/* At the end of generation (no stop): release the held text to out. */
size_t stop_flush(struct stop_filter *f, char *out, size_t cap);

#endif
