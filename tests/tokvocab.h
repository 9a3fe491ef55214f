/*
 * tokvocab.h: a small GPT-2 byte-level vocabulary built in memory for the
 * tests and fuzz targets that need a tokenizer but no model file: the 256
 * byte tokens (id = byte; bytes 0x04 and 0x06 left without one, as in
 * SmolLM2), "Ġt", "he", "the", "Ġthe", then <|endoftext|> (256 + 4, EOS),
 * <|im_start|> (BOS), <|im_end|> (control) and <u> (user-defined).
 */
#ifndef TESTS_TOKVOCAB_H
#define TESTS_TOKVOCAB_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/utf8.h"

#define TV_EOT   260
#define TV_START 261
#define TV_END   262
#define TV_USER  263

/* The vocabulary's arrays (static storage, valid until the next call);
 * add_bos: tokenizer.ggml.add_bos_token. */
static struct tok_spec test_vocab_spec(bool add_bos)
{
    static char text[256][8];
    static struct gguf_str toks[264];
    static int32_t types[264];
    static struct gguf_str ms[4];
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        size_t n = utf8_encode(printable ? (uint32_t)b : (uint32_t)next++, text[b]);
        /* no token for bytes 4 and 6: their text is one no merge can make */
        toks[b] = (b == 4 || b == 6) ? (struct gguf_str){"\xe2\x80\xbd", 3}
                                     : (struct gguf_str){text[b], n};
        types[b] = (b == 4 || b == 6) ? TOK_UNUSED : TOK_NORMAL;
    }
    static const struct {
        const char *t;
        int32_t type;
    } extra[] = {
        {"\xc4\xa0t", TOK_NORMAL},
        {"he", TOK_NORMAL},
        {"the", TOK_NORMAL},
        {"\xc4\xa0the", TOK_NORMAL},
        {"<|endoftext|>", TOK_CONTROL},
        {"<|im_start|>", TOK_CONTROL},
        {"<|im_end|>", TOK_CONTROL},
        {"<u>", TOK_USER_DEFINED},
    };
    for (int i = 0; i < 8; i++) {
        toks[256 + i] = (struct gguf_str){extra[i].t, strlen(extra[i].t)};
        types[256 + i] = extra[i].type;
    }
    static const char *merges[] = {"\xc4\xa0 t", "h e", "t he", "\xc4\xa0t he"};
    for (int i = 0; i < 4; i++)
        ms[i] = (struct gguf_str){merges[i], strlen(merges[i])};
    return (struct tok_spec){.model = {"gpt2", 4},
                             .pre = {"smollm", 6},
                             .tokens = toks,
                             .types = types,
                             .n_tokens = 264,
                             .merges = ms,
                             .n_merges = 4,
                             .bos = TV_START,
                             .eos = TV_EOT,
                             .eot = -1,
                             .eom = -1,
                             .fim_pad = -1,
                             .fim_rep = -1,
                             .fim_sep = -1,
                             .add_bos = add_bos};
}

/* The vocabulary; add_bos: tokenizer.ggml.add_bos_token. Aborts on error. */
static tok_vocab *test_vocab(bool add_bos)
{
    struct tok_spec spec = test_vocab_spec(add_bos);
    tok_vocab *v = NULL;
    struct err err;
    err_init(&err);
    if (tok_new(&spec, &v, &err) != 0) {
        fprintf(stderr, "test_vocab: %s\n", err.msg);
        abort();
    }
    return v;
}

#endif
