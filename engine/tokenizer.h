/*
 * tokenizer: GPT-2 byte-level BPE from GGUF metadata (reference/
 * engine-formats.md section 2.5): special tokens split first, PCRE2
 * pre-tokenizer chosen by tokenizer.ggml.pre, merges by rank, and a
 * streaming detokenizer that never emits half a UTF-8 character.
 */
#ifndef ENGINE_TOKENIZER_H
#define ENGINE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "gguf.h"

typedef struct tok_vocab tok_vocab;

/* Build the vocabulary from f's tokenizer.* metadata (copied: f may be
 * closed afterwards). Models other than "gpt2" and unknown pre-tokenizer
 * names are refused with a clear message (FP_ERR_UNSUPPORTED). */
int tok_load(const struct gguf_file *f, tok_vocab **out, struct err *err);
void tok_free(tok_vocab *v);

size_t tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v); /* -1 if none */
int32_t tok_eos(const tok_vocab *v);
bool tok_add_bos(const tok_vocab *v); /* tokenizer.ggml.add_bos_token, default false */
/* true for every end-of-generation token (EOS, <|im_end|>, <|endoftext|>, ...). */
bool tok_is_eog(const tok_vocab *v, int32_t id);
/* The chat template text from the GGUF, or NULL. */
const char *tok_chat_template(const tok_vocab *v);
/* The token's text as stored in the vocabulary (byte-level encoded). */
const char *tok_text(const tok_vocab *v, int32_t id);

/*
 * Encode text[0..len) and append the ids to *ids (grown with xrealloc; *n
 * and *cap track it). parse_special: split control/user-defined token texts
 * such as "<|im_start|>" out first. add_bos: prepend BOS. Returns 0, or -1
 * with err set if the text is not valid UTF-8.
 */
int tok_encode(const tok_vocab *v, const char *text, size_t len, bool parse_special, bool add_bos,
               int32_t **ids, size_t *n, size_t *cap, struct err *err);

/* The raw bytes of one token (inverse byte map applied) written to out;
 * returns the byte count, which may exceed cap (then out holds cap bytes). */
size_t tok_piece(const tok_vocab *v, int32_t id, char *out, size_t cap);

/* Streaming detokenizer: holds back an incomplete UTF-8 tail between tokens. */
struct tok_stream {
    char pending[8];  /* bytes of an incomplete character */
    size_t n_pending;
};

void tok_stream_init(struct tok_stream *s);
/* Append token id's bytes; write the longest complete UTF-8 prefix of
 * pending+piece to out (cap >= 64 + longest token) and return its length. */
size_t tok_stream_push(const tok_vocab *v, struct tok_stream *s, int32_t id, char *out, size_t cap);
/* At the end of a sequence: whatever is pending, invalid bytes replaced by U+FFFD. */
size_t tok_stream_flush(struct tok_stream *s, char *out, size_t cap);

#endif
