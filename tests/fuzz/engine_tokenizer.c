/*
 * Fuzz target for engine/text/tokenizer: arbitrary bytes are encoded with two
 * small byte-level vocabularies built here (smollm and gpt-2
 * pre-tokenizers, a few merges, control and user-defined tokens). Valid
 * UTF-8 must encode and decode back to itself, by pieces and by stream;
 * invalid UTF-8 must be refused; the ids, fed to the streaming
 * detokenizer at random, must give valid UTF-8. Any violation aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The source, not the header: the target reaches its static byte_map_init. */
#include "text/tokenizer.c"

#define N_EXTRA 16

static tok_vocab *vocab[2];

static void die(const char *what)
{
    fprintf(stderr, "engine_tokenizer fuzz: %s\n", what);
    abort();
}

/* 256 byte tokens (id = byte), then merged and special tokens. */
static tok_vocab *build(const char *pre)
{
    static char text[256 + N_EXTRA][16];
    struct gguf_str toks[256 + N_EXTRA];
    int32_t types[256 + N_EXTRA];
    uint16_t byte_cp[256];
    int16_t cp_byte[BYTE_CP_LIMIT];
    byte_map_init(byte_cp, cp_byte);
    size_t n = 0;
    for (int b = 0; b < 256; b++, n++) {
        size_t k = utf8_encode(byte_cp[b], text[n]);
        toks[n] = (struct gguf_str){text[n], k};
        types[n] = TOK_NORMAL;
    }
    static const struct {
        const char *t;
        int32_t type;
    } extra[] = {
        {"\xc4\xa0t", TOK_NORMAL}, /* " t" */
        {"he", TOK_NORMAL},
        {"the", TOK_NORMAL},
        {"\xc4\xa0the", TOK_NORMAL},      /* " the" */
        {"\xc4\xa0\xc4\xa0", TOK_NORMAL}, /* two spaces */
        {"\xc3\x83\xc2\xa9", TOK_NORMAL}, /* "é" as bytes C3 A9 */
        {"\xc4\x8a\xc4\x8a", TOK_NORMAL}, /* "\n\n" */
        {"12", TOK_NORMAL},               /* never produced: digits split */
        {"<|im_start|>", TOK_CONTROL},
        {"<|im_end|>", TOK_CONTROL},
        {"<|endoftext|>", TOK_CONTROL},
        {"<u>", TOK_USER_DEFINED},
        {"<u><u>", TOK_USER_DEFINED},
        {"<unk>", TOK_UNKNOWN},
        {"unused", TOK_UNUSED},
        {"\xc4\xa0", TOK_NORMAL}, /* duplicate text */
    };
    for (size_t i = 0; i < N_EXTRA; i++, n++) {
        toks[n] = (struct gguf_str){extra[i].t, strlen(extra[i].t)};
        types[n] = extra[i].type;
    }
    static const char *merges[] = {
        "\xc4\xa0 t",
        "h e",
        "t he",
        "\xc4\xa0 the",
        "\xc4\xa0t he",
        "\xc4\xa0 \xc4\xa0",
        "\xc3\x83 \xc2\xa9",
        "\xc4\x8a \xc4\x8a",
        "1 2",
        "e e",
        "x y",
        "nospace",
        " x",
    };
    struct gguf_str ms[sizeof(merges) / sizeof(merges[0])];
    for (size_t i = 0; i < sizeof(merges) / sizeof(merges[0]); i++)
        ms[i] = (struct gguf_str){merges[i], strlen(merges[i])};
    struct tok_spec spec = {.model = {"gpt2", 4},
                            .pre = {pre, strlen(pre)},
                            .tokens = toks,
                            .types = types,
                            .n_tokens = n,
                            .merges = ms,
                            .n_merges = sizeof(ms) / sizeof(ms[0]),
                            .bos = 256 + 8,
                            .eos = 256 + 9,
                            .eot = -1,
                            .eom = -1,
                            .fim_pad = -1,
                            .fim_rep = -1,
                            .fim_sep = -1,
                            .add_bos = -1};
    tok_vocab *v = NULL;
    struct err err;
    err_init(&err);
    if (tok_new(&spec, &v, &err) < 0)
        die(err.msg);
    return v;
}

static void check_stream(const tok_vocab *v, const int32_t *ids, size_t n, const uint8_t *want,
                         size_t want_len)
{
    size_t step = TOK_STREAM_CAP(tok_max_piece(v)), w = 0;
    char *out = xmalloc(step * (n + 1));
    struct tok_stream s;
    tok_stream_init(&s);
    for (size_t i = 0; i < n; i++)
        w += tok_stream_push(v, &s, ids[i], out + w, step);
    w += tok_stream_flush(&s, out + w, step);
    if (utf8_invalid_at((const uint8_t *)out, w) != w)
        die("stream output is not valid UTF-8");
    if (want && (w != want_len || memcmp(out, want, w) != 0))
        die("stream decode differs from the text");
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vocab[0]) {
        vocab[0] = build("smollm");
        vocab[1] = build("gpt-2");
    }
    const char *text = (const char *)data;
    bool valid = utf8_invalid_at(data, size) == size;
    for (int k = 0; k < 2; k++) {
        const tok_vocab *v = vocab[k];
        for (int special = 0; special <= 1; special++) {
            int32_t *ids = NULL;
            size_t n = 0, cap = 0;
            struct err err;
            err_init(&err);
            int rc = tok_encode(v, text, size, special, special, &ids, &n, &cap, &err);
            if (!valid) {
                if (rc != -1 || err.code != FP_ERR_USAGE || n != 0)
                    die("invalid UTF-8 was not refused");
                free(ids);
                continue;
            }
            if (rc != 0)
                die(err.msg);
            /* decode(encode(s)) == s, after the BOS we asked for */
            size_t first = special ? 1 : 0;
            if (special && (n == 0 || ids[0] != tok_bos(v)))
                die("BOS missing");
            char *back = xmalloc(size + 1);
            size_t w = 0;
            for (size_t i = first; i < n; i++) {
                size_t pl = tok_piece(v, ids[i], back + w, size - w);
                if (pl > size - w)
                    die("decode is longer than the text");
                w += pl;
            }
            if (w != size || memcmp(back, text, size) != 0)
                die("decode(encode(s)) != s");
            free(back);
            if (n > first)
                check_stream(v, ids + first, n - first, data, size);
            free(ids);
        }
        /* arbitrary ids, two bytes each: the stream must stay valid UTF-8 */
        size_t n = size / 2;
        int32_t *ids = xmalloc((n + 1) * sizeof(*ids));
        for (size_t i = 0; i < n; i++)
            ids[i] = (int32_t)(data[2 * i] | data[2 * i + 1] << 8) % 300 - 8;
        check_stream(v, ids, n, NULL, 0);
        free(ids);
    }
    return 0;
}
