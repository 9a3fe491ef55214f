/*
 * engine_export: `fp4serve export-tokenizer` (cmd/fp4_export.c) on
 * vocabulary-only GGUF files written here from tests/tokvocab.h: the
 * tokenizer.json's structure for each pre-tokenizer (one Split per regex
 * of the chain, ByteLevel, the bytes without a token removed), BOS in the
 * post-processor only when the file asks for it, added tokens with their
 * special flags, merges in rank order (those naming non-tokens left out),
 * tokenizer_config.json's special tokens and context, and the refusals.
 * That tokenizers gives the server's ids is checked by
 * tests/integration/tokenizer_export.sh.
 */
#include <jansson.h>

#include "fp4.h"
#include "test.h"
#include "testtmp.h"
#include "tokvocab.h"

#include "format/gguf.h"

/* Write a vocabulary-only GGUF of tokvocab.h's vocabulary; extra_merge
 * (or NULL) is appended to the merges, bad_utf8 spoils token 97's text. */
static char *write_gguf(const char *name, const char *pre, bool add_bos, const char *extra_merge,
                        bool bad_utf8)
{
    struct tok_spec sp = test_vocab_spec(add_bos);
    const char *toks[264], *merges[5];
    char *own[264];
    for (size_t i = 0; i < sp.n_tokens; i++)
        toks[i] = own[i] = xstrndup(sp.tokens[i].p, sp.tokens[i].len);
    if (bad_utf8)
        toks[97] = "a\xff";
    size_t nm = 0;
    for (; nm < sp.n_merges; nm++)
        merges[nm] = sp.merges[nm].p;
    if (extra_merge)
        merges[nm++] = extra_merge;
    gguf_writer *w = gguf_writer_new(0);
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_u32(w, "llama.context_length", 128);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", pre);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, sp.n_tokens);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", sp.types, sp.n_tokens);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, nm);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", TV_START);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", TV_EOT);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    gguf_w_str(w, "tokenizer.chat_template", "{{ '<|im_start|>' }}");
    char *path = test_tmp_path(name);
    struct err err;
    err_init(&err);
    CHECK_MSG(gguf_writer_save(w, path, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
    for (size_t i = 0; i < sp.n_tokens; i++)
        free(own[i]);
    return path;
}

/* Run the command on model into the scratch folder; its exit status. */
static int export(const char *model)
{
    char *dir = test_tmp_path("");
    char *argv[] = {(char *)model, "--out", dir, NULL};
    int rc = fp4_export(3, argv);
    free(dir);
    return rc;
}

static json_t *load(const char *name)
{
    char *p = test_tmp_path(name);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    CHECK_MSG(j != NULL, "%s: %s", p, je.text);
    free(p);
    return j;
}

/* The type of each pre-tokenizer in the chain, "Split(Isolated)" style,
 * joined with ", ". */
static void chain(const json_t *tj, char *out, size_t cap)
{
    const json_t *seq = json_object_get(json_object_get(tj, "pre_tokenizer"), "pretokenizers");
    size_t w = 0, i;
    const json_t *p;
    out[0] = '\0';
    json_array_foreach(seq, i, p)
    {
        const char *b = json_string_value(json_object_get(p, "behavior"));
        w += (size_t)snprintf(out + w, cap - w, "%s%s%s%s%s", i ? ", " : "",
                              json_string_value(json_object_get(p, "type")), b ? "(" : "",
                              b ? b : "", b ? ")" : "");
    }
}

TEST(smollm_chain_vocab_merges_and_added_tokens)
{
    char *m = write_gguf("smollm.gguf", "smollm", false, NULL, false);
    CHECK_INT(export(m), 0);
    json_t *tj = load("tokenizer.json");
    char c[256];
    chain(tj, c, sizeof(c));
    CHECK_STR(c, "Split(Isolated), Split(Isolated), ByteLevel, Split(Removed)");
    const json_t *seq = json_object_get(json_object_get(tj, "pre_tokenizer"), "pretokenizers");
    /* the regexes are the tokenizer's own, in its order */
    tok_vocab *v = test_vocab(false);
    for (size_t i = 0; i < 2; i++)
        CHECK_STR(json_string_value(
                      json_object_get(json_object_get(json_array_get(seq, i), "pattern"), "Regex")),
                  tok_pre_regex(v, i));
    tok_free(v);
    /* bytes 4 and 6 (written as U+0104 and U+0106) have no token */
    CHECK_STR(json_string_value(
                  json_object_get(json_object_get(json_array_get(seq, 3), "pattern"), "Regex")),
              "[\\x{104}\\x{106}]");
    const json_t *model = json_object_get(tj, "model");
    CHECK_STR(json_string_value(json_object_get(model, "type")), "BPE");
    CHECK(json_is_false(json_object_get(model, "ignore_merges")));
    CHECK(json_is_false(json_object_get(model, "byte_fallback")));
    const json_t *vocab = json_object_get(model, "vocab");
    CHECK_INT(json_object_size(vocab), 263); /* bytes 4 and 6 share one text */
    CHECK_INT(json_integer_value(json_object_get(vocab, "\xe2\x80\xbd")), 6); /* the later id */
    CHECK_INT(json_integer_value(json_object_get(vocab, "\xc4\xa0the")), 259);
    char *merges = json_dumps(json_object_get(model, "merges"), JSON_COMPACT);
    CHECK_STR(merges, "[\"\xc4\xa0 t\",\"h e\",\"t he\",\"\xc4\xa0t he\"]");
    free(merges);
    const json_t *added = json_object_get(tj, "added_tokens");
    CHECK_INT(json_array_size(added), 4);
    CHECK_INT(json_integer_value(json_object_get(json_array_get(added, 0), "id")), TV_EOT);
    CHECK(json_is_true(json_object_get(json_array_get(added, 0), "special")));
    CHECK_STR(json_string_value(json_object_get(json_array_get(added, 3), "content")), "<u>");
    CHECK(json_is_false(json_object_get(json_array_get(added, 3), "special")));
    CHECK(json_is_false(json_object_get(json_array_get(added, 3), "normalized")));
    CHECK(json_is_null(json_object_get(tj, "post_processor")));
    CHECK_STR(json_string_value(json_object_get(json_object_get(tj, "decoder"), "type")),
              "ByteLevel");
    json_decref(tj);
    json_t *cfg = load("tokenizer_config.json");
    CHECK(json_is_false(json_object_get(cfg, "add_bos_token")));
    CHECK_STR(json_string_value(json_object_get(cfg, "bos_token")), "<|im_start|>");
    CHECK_STR(json_string_value(json_object_get(cfg, "eos_token")), "<|endoftext|>");
    CHECK_INT(json_integer_value(json_object_get(cfg, "model_max_length")), 128);
    CHECK_STR(json_string_value(json_object_get(cfg, "chat_template")), "{{ '<|im_start|>' }}");
    CHECK_STR(json_string_value(json_object_get(cfg, "tokenizer_class")),
              "PreTrainedTokenizerFast");
    CHECK(json_is_true(json_object_get(
        json_object_get(json_object_get(cfg, "added_tokens_decoder"), "261"), "special")));
    json_decref(cfg);
    json_t *map = load("special_tokens_map.json");
    CHECK_STR(json_string_value(json_object_get(map, "eos_token")), "<|endoftext|>");
    json_decref(map);
    free(m);
}

TEST(gpt2_chain_and_bos)
{
    char *m = write_gguf("gpt2.gguf", "gpt-2", true, NULL, false);
    CHECK_INT(export(m), 0);
    json_t *tj = load("tokenizer.json");
    char c[256];
    chain(tj, c, sizeof(c));
    CHECK_STR(c, "Split(Isolated), ByteLevel, Split(Removed)");
    const json_t *post = json_object_get(tj, "post_processor");
    CHECK_STR(json_string_value(json_object_get(post, "type")), "TemplateProcessing");
    char *single = json_dumps(json_object_get(post, "single"), JSON_COMPACT);
    CHECK_STR(single, "[{\"SpecialToken\":{\"id\":\"<|im_start|>\",\"type_id\":0}},"
                      "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}]");
    free(single);
    CHECK_INT(
        json_integer_value(json_array_get(
            json_object_get(
                json_object_get(json_object_get(post, "special_tokens"), "<|im_start|>"), "ids"),
            0)),
        TV_START);
    json_decref(tj);
    json_t *cfg = load("tokenizer_config.json");
    CHECK(json_is_true(json_object_get(cfg, "add_bos_token")));
    json_decref(cfg);
    free(m);
}

TEST(merges_naming_non_tokens_are_left_out)
{
    /* "t h" makes "th", which is no token: a tokenizer.json cannot say it */
    char *m = write_gguf("extra.gguf", "smollm", false, "t h", false);
    CHECK_INT(export(m), 0);
    json_t *tj = load("tokenizer.json");
    CHECK_INT(json_array_size(json_object_get(json_object_get(tj, "model"), "merges")), 4);
    json_decref(tj);
    free(m);
}

TEST(refusals)
{
    char *m = write_gguf("bad.gguf", "smollm", false, NULL, true);
    CHECK_INT(export(m), FP_ERR_UNSUPPORTED); /* a token text that is not UTF-8 */
    free(m);
    m = write_gguf("unknown-pre.gguf", "no-such-pre", false, NULL, false);
    CHECK_INT(export(m), FP_ERR_UNSUPPORTED);
    free(m);
    char *argv[] = {"x.gguf", NULL};
    CHECK_INT(fp4_export(1, argv), FP_ERR_USAGE); /* no --out */
}

TEST_MAIN()
