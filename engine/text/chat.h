/*
 * chat: turns chat messages into prompt tokens with the ChatML layout
 * (<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n).
 * The GGUF's Jinja template is not executed: it is recognised as ChatML
 * (and its default system prompt, as SmolLM2 has, is lifted out of it),
 * and any other template falls back to the built-in ChatML, with a note.
 */
#ifndef ENGINE_CHAT_H
#define ENGINE_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

#include "text/tokenizer.h"

/* One chat message, as a request (serve/api.c) carries it; strings are
 * owned by whoever filled it and NUL-terminated. */
struct api_message {
    char *role;    /* system | user | assistant | developer | tool */
    char *content; /* text (parts of an array joined); "" when null */
    size_t content_len;
};

struct chat_template {
    bool from_gguf;       /* the GGUF's template is ChatML and is the one in use */
    char *default_system; /* owned; inserted when the first message is not a system
                             message (NULL = none) */
    char note[160];       /* one line for the startup log: which template and why */
};

/* Decide the template from the GGUF's tokenizer.chat_template text (NULL
 * or "" when the file has none). Never fails. */
void chat_template_init(struct chat_template *t, const char *gguf_template);
void chat_template_release(struct chat_template *t);

/* One piece of a rendered conversation: control-token text such as
 * "<|im_start|>" (special) or literal text (never parsed for specials, so a
 * user cannot inject control tokens). */
struct chat_seg {
    const char *p; /* points into the messages or into static text */
    size_t n;
    bool special;
};

/*
 * Render msgs[0..n) plus the assistant generation prompt as segments into
 * *segs (grown with xrealloc; *n_segs and *cap track it). Pure: no
 * tokenizer. The segments point into msgs and t, which must outlive them.
 */
void chat_render(const struct chat_template *t, const struct api_message *msgs, size_t n,
                 struct chat_seg **segs, size_t *n_segs, size_t *cap);

/* Append the segments' text to b as one string (for logs and tests). */
void chat_flatten(const struct chat_seg *segs, size_t n, struct buf *b);

/*
 * Tokenize a rendered conversation: literal runs between control tokens
 * are encoded as plain text, control-token texts with special parsing.
 * BOS is prepended when the model asks for it and the first token is not
 * BOS already. Appends to *ids (xrealloc'd; *n_ids, *cap track it).
 * Returns 0, or -1 with err set (FP_ERR_USAGE) as tok_encode does.
 */
int chat_tokenize(const tok_vocab *v, const struct chat_seg *segs, size_t n_segs, int32_t **ids,
                  size_t *n_ids, size_t *cap, struct err *err);

#endif
