/*
 * tokenizer: GPT-2 byte-level BPE from GGUF metadata (docs/formats.md
 * §2.5): special tokens split first, PCRE2
 * pre-tokenizer chosen by tokenizer.ggml.pre, merges by rank, and a
 * streaming detokenizer that never emits half a UTF-8 character.
 * The ids match llama.cpp's for the same file (tests/fixtures/tokenizer).
 */
#ifndef ENGINE_TOKENIZER_H
#define ENGINE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#include "format/gguf.h"

typedef struct tok_vocab tok_vocab;

/* tokenizer.ggml.token_type values (gguf-py TokenType). */
enum tok_type {
    TOK_UNDEFINED = 0,
    TOK_NORMAL = 1,
    TOK_UNKNOWN = 2,
    TOK_CONTROL = 3,      /* <|im_start|>: split out only when parse_special */
    TOK_USER_DEFINED = 4, /* always split out before BPE */
    TOK_UNUSED = 5,
    TOK_BYTE = 6,
};

/*
 * A vocabulary as plain arrays: what tok_load reads from the GGUF, and what
 * tests and fuzz targets build by hand. Strings are views (copied by
 * tok_new). Special token ids are -1 when absent.
 */
struct tok_spec {
    struct gguf_str model;         /* tokenizer.ggml.model: must be "gpt2" */
    struct gguf_str pre;           /* tokenizer.ggml.pre, e.g. "smollm" */
    const struct gguf_str *tokens; /* [n_tokens] byte-level encoded texts */
    const int32_t *types;          /* [n_tokens] enum tok_type, or NULL = all normal */
    size_t n_tokens;
    const struct gguf_str *merges; /* [n_merges] "left right"; rank = index */
    size_t n_merges;
    int64_t bos, eos, eot, eom;        /* token ids or -1 */
    int64_t fim_pad, fim_rep, fim_sep; /* token ids or -1 (end generation too) */
    int add_bos;                       /* 1, 0, or -1 = the pre-tokenizer's default */
    struct gguf_str chat_template;     /* len 0 = none */
};

/* Build the vocabulary from f's tokenizer.* metadata (copied: f may be
 * closed afterwards). Models other than "gpt2" and unknown pre-tokenizer
 * names are refused with a clear message (FP_ERR_UNSUPPORTED); missing or
 * mistyped keys are FP_ERR_FORMAT. Returns 0, or -1 with err set. */
int tok_load(const struct gguf_file *f, tok_vocab **out, struct err *err);
/* The same from plain arrays (see struct tok_spec). Returns 0 or -1. */
int tok_new(const struct tok_spec *spec, tok_vocab **out, struct err *err);
void tok_free(tok_vocab *v); /* NULL is a no-op */

size_t tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v);  /* -1 if none */
int32_t tok_eos(const tok_vocab *v);  /* -1 if none */
bool tok_add_bos(const tok_vocab *v); /* tokenizer.ggml.add_bos_token, default false for smollm */
/* true for every end-of-generation token: EOS, EOT, EOM, the FIM pad/repo/
 * file-separator tokens, and tokens whose text is on llama.cpp's EOG list
 * (<|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>, ...). For SmolLM2
 * that is {0, 2, 4}. Out-of-range ids are false. */
bool tok_is_eog(const tok_vocab *v, int32_t id);
/* The ids for which tok_is_eog is true, ascending; *n receives the count. */
const int32_t *tok_eog_ids(const tok_vocab *v, size_t *n);
/* The token's type after load (EOG-looking texts are promoted to control,
 * as llama.cpp does); TOK_UNDEFINED for out-of-range ids. */
enum tok_type tok_type_of(const tok_vocab *v, int32_t id);
/* The chat template text from the GGUF, or NULL. */
const char *tok_chat_template(const tok_vocab *v);
/* The pre-tokenizer name as stored (e.g. "smollm"). */
const char *tok_pre_name(const tok_vocab *v);
/* The pre-tokenizer's i-th PCRE2 pattern (each splits the previous one's
 * pieces; matches and the text between them both become pieces), or NULL
 * past the last. For tokenizer export (fp4_export.c). */
const char *tok_pre_regex(const tok_vocab *v, size_t i);
/* The token's text as stored in the vocabulary (byte-level encoded), or
 * NULL for an out-of-range id. */
const char *tok_text(const tok_vocab *v, int32_t id);

/*
 * Encode text[0..len) and append the ids to *ids (grown with xrealloc; *n
 * and *cap track it). parse_special: split control/user-defined token texts
 * such as "<|im_start|>" out first (user-defined ones are split out either
 * way). add_bos: prepend BOS (pass tok_add_bos(v) to do what the model
 * asks; llama.cpp's add_special does the same). A byte whose one-character
 * text is not in the vocabulary is dropped, as llama.cpp drops it (SmolLM2
 * has no token for 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xF1, 0xF2, ...).
 * Returns 0, or -1 with err set (FP_ERR_USAGE) if the text is not valid
 * UTF-8 or BOS is asked for but the model has none; *n is then as it was.
 * Allocates only its scratch and *ids; safe to call from several threads
 * on one vocabulary.
 */
int tok_encode(const tok_vocab *v, const char *text, size_t len, bool parse_special, bool add_bos,
               int32_t **ids, size_t *n, size_t *cap, struct err *err);

/* The raw bytes of one token written to out: the inverse byte map applied
 * to normal tokens; control, unknown and user-defined tokens as their text;
 * unused tokens and out-of-range ids give nothing. Returns the byte count,
 * which may exceed cap (then out holds the first cap bytes). */
size_t tok_piece(const tok_vocab *v, int32_t id, char *out, size_t cap);
/* The longest tok_piece in bytes. */
size_t tok_max_piece(const tok_vocab *v);

/* Streaming detokenizer: holds back an incomplete UTF-8 tail between tokens. */
struct tok_stream {
    char pending[8];  /* bytes of an incomplete character (at most 3 in use) */
    size_t n_pending; /* bytes in pending */
};

/* The smallest out buffer tok_stream_push and tok_stream_flush accept for
 * v: every byte may turn into a 3-byte U+FFFD. */
#define TOK_STREAM_CAP(max_piece) (3 * ((max_piece) + 8))

void tok_stream_init(struct tok_stream *s);
/* Append token id's bytes (tok_piece); write the longest complete UTF-8
 * prefix of pending+piece to out and return its length. Bytes that can
 * never become valid UTF-8 are written as U+FFFD (one per maximal invalid
 * subpart) rather than held. cap must be at least
 * TOK_STREAM_CAP(tok_max_piece(v)); output past cap is cut. */
size_t tok_stream_push(const tok_vocab *v, struct tok_stream *s, int32_t id, char *out, size_t cap);
/* At the end of a sequence: whatever is pending, as U+FFFD (pending bytes
 * are always an incomplete character). Resets s. cap >= 8. */
size_t tok_stream_flush(struct tok_stream *s, char *out, size_t cap);

#endif
