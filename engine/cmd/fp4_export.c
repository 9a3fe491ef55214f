/*
 * fp4_export: `fp4serve export-tokenizer MODEL.gguf --out DIR` writes the
 * GGUF's tokenizer as Hugging Face files (tokenizer.json,
 * tokenizer_config.json, special_tokens_map.json), so that Python clients
 * that need a tokenizer (vLLM's and SGLang's benchmarks, AIPerf, GuideLLM,
 * lm-evaluation-harness) can count tokens of a GGUF-only model the way the
 * server does. The tokenizer.json describes exactly what text/tokenizer.c
 * does:
 *   - added tokens: every control, user-defined and unknown token, split
 *     out of the raw text before anything else (not normalized);
 *   - pre-tokenizer: one Split (Isolated) per PCRE2 pattern of the
 *     tokenizer.ggml.pre chain, then ByteLevel without its own regex, then
 *     a Split (Removed) of the bytes that have no token, which our BPE
 *     drops (llama.cpp does too) and which also stop merges across them;
 *   - model: BPE with the vocabulary and the merges in rank order (merges
 *     whose parts or result are not tokens cannot be stated in a
 *     tokenizer.json and are left out, with a warning);
 *   - post-processor: BOS prepended when the GGUF asks for it;
 *   - decoder: ByteLevel.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "fp4.h"
#include "log.h"
#include "opts.h"
#include "xalloc.h"

#include "format/gguf.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

/* GPT-2's bytes_to_unicode: the code point byte b is written as. */
static uint32_t byte_cp(int b)
{
    int next = 256;
    for (int x = 0; x < 256; x++) {
        bool printable = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
        if (x == b)
            return printable ? (uint32_t)x : (uint32_t)next;
        if (!printable)
            next++;
    }
    return 0;
}

/* A token's vocabulary text, or NULL when empty (such a token is never
 * produced by encoding and has no place in a tokenizer.json). */
static const char *text_of(const tok_vocab *v, int32_t id)
{
    const char *t = tok_text(v, id);
    return t && *t ? t : NULL;
}

/* {"id", "content", ...} as Hugging Face writes an added token. */
static json_t *added_token(const tok_vocab *v, int32_t id, bool special, bool with_id)
{
    json_t *o = json_object();
    if (with_id)
        json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "content", json_string(text_of(v, id)));
    json_object_set_new(o, "single_word", json_false());
    json_object_set_new(o, "lstrip", json_false());
    json_object_set_new(o, "rstrip", json_false());
    json_object_set_new(o, "normalized", json_false());
    json_object_set_new(o, "special", json_boolean(special));
    return o;
}

static bool is_added(const tok_vocab *v, int32_t id)
{
    enum tok_type t = tok_type_of(v, id);
    return text_of(v, id) && (t == TOK_CONTROL || t == TOK_USER_DEFINED || t == TOK_UNKNOWN);
}

/* The vocabulary object; -1 with err set when a text is not valid UTF-8
 * (JSON cannot hold it). */
static int build_vocab(const tok_vocab *v, json_t *vocab, struct err *err)
{
    for (size_t id = 0; id < tok_n_vocab(v); id++) {
        const char *t = text_of(v, (int32_t)id);
        if (!t)
            continue;
        /* a text given twice: the later id wins, in our tokenizer and in
         * a JSON object read by serde alike */
        if (json_object_set_new(vocab, t, json_integer((json_int_t)id)) != 0)
            return err_set(err, FP_ERR_UNSUPPORTED,
                           "token %zu's text is not valid UTF-8: a tokenizer.json cannot hold it",
                           id),
                   -1;
    }
    return 0;
}

/* The merges in rank order, split as tokenizer.c splits them (at the first
 * space after the first byte), the first of duplicates kept, those whose
 * parts or result are not tokens counted in *dropped and left out. */
static int build_merges(const struct gguf_file *f, const json_t *vocab, json_t **merges,
                        size_t *dropped, struct err *err)
{
    const struct gguf_kv *kv = gguf_find_kv(f, "tokenizer.ggml.merges");
    *dropped = 0;
    *merges = json_array();
    if (!kv || kv->type != GGUF_T_ARR || kv->arr_type != GGUF_T_STR)
        return err_set(err, FP_ERR_FORMAT, "tokenizer: 'tokenizer.ggml.merges' is missing"), -1;
    struct gguf_str *m = xmalloc((kv->arr_n ? kv->arr_n : 1) * sizeof(*m));
    if (gguf_arr_strs(kv, m) < 0) {
        free(m);
        return err_set(err, FP_ERR_FORMAT, "tokenizer: 'tokenizer.ggml.merges' cannot be read"), -1;
    }
    json_t *seen = json_object();
    json_t *pairs = json_array();
    bool space_in_part = false;
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        const char *sp = m[i].len > 1 ? memchr(m[i].p + 1, ' ', m[i].len - 1) : NULL;
        if (!sp || sp + 1 == m[i].p + m[i].len)
            continue; /* tokenizer.c skips these too */
        size_t nl = (size_t)(sp - m[i].p), nr = m[i].len - nl - 1;
        char *l = xstrndup(m[i].p, nl), *r = xstrndup(sp + 1, nr);
        char *cat = xasprintf("%s%s", l, r), *key = xasprintf("%s\x01%s", l, r);
        bool ok = strlen(l) == nl && strlen(r) == nr && json_object_get(vocab, l) &&
                  json_object_get(vocab, r) && json_object_get(vocab, cat);
        if (!ok) {
            (*dropped)++;
        } else if (!json_object_get(seen, key)) {
            json_object_set_new(seen, key, json_true());
            json_array_append_new(pairs, json_pack("[ss]", l, r));
            space_in_part |= strchr(l, ' ') || strchr(r, ' ');
        }
        free(l);
        free(r);
        free(cat);
        free(key);
    }
    /* "a b" strings, the form every tokenizers version reads; pairs when a
     * part holds a space, which only the pair form can say */
    size_t k;
    json_t *p;
    json_array_foreach(pairs, k, p)
    {
        if (space_in_part) {
            json_array_append(*merges, p);
        } else {
            char *s = xasprintf("%s %s", json_string_value(json_array_get(p, 0)),
                                json_string_value(json_array_get(p, 1)));
            json_array_append_new(*merges, json_string(s));
            free(s);
        }
    }
    json_decref(pairs);
    json_decref(seen);
    free(m);
    return 0;
}

static json_t *split(const char *regex, const char *behavior)
{
    return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", regex,
                     "behavior", behavior, "invert", 0);
}

/* The pre-tokenizer chain (see the top of the file). */
static json_t *build_pre(const tok_vocab *v, const json_t *vocab)
{
    json_t *seq = json_array();
    for (size_t i = 0; tok_pre_regex(v, i); i++)
        json_array_append_new(seq, split(tok_pre_regex(v, i), "Isolated"));
    json_array_append_new(seq, json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel",
                                         "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 0));
    char cls[256 * 12 + 4];
    size_t w = 0;
    for (int b = 0; b < 256; b++) {
        char u[8];
        size_t n = utf8_encode(byte_cp(b), u);
        u[n] = '\0';
        if (!json_object_get(vocab, u))
            w += (size_t)snprintf(cls + w, sizeof(cls) - w, "%s\\x{%X}", w ? "" : "[", byte_cp(b));
    }
    if (w) {
        snprintf(cls + w, sizeof(cls) - w, "]");
        json_array_append_new(seq, split(cls, "Removed"));
    }
    return json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", seq);
}

/* BOS first when the model asks for it; nothing otherwise. */
static json_t *build_post(const tok_vocab *v)
{
    int32_t bos = tok_bos(v);
    if (!tok_add_bos(v) || bos < 0 || !text_of(v, bos))
        return json_null();
    const char *t = text_of(v, bos);
    return json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}, "
                     "{s:{s:s, s:i}}], s:{s:{s:s, s:[i], s:[s]}}}",
                     "type", "TemplateProcessing", "single", "SpecialToken", "id", t, "type_id", 0,
                     "Sequence", "id", "A", "type_id", 0, "pair", "SpecialToken", "id", t,
                     "type_id", 0, "Sequence", "id", "A", "type_id", 0, "Sequence", "id", "B",
                     "type_id", 1, "special_tokens", t, "id", t, "ids", bos, "tokens", t);
}

static json_t *build_tokenizer(const tok_vocab *v, json_t *vocab, json_t *merges)
{
    json_t *added = json_array();
    for (size_t id = 0; id < tok_n_vocab(v); id++)
        if (is_added(v, (int32_t)id))
            json_array_append_new(
                added,
                added_token(v, (int32_t)id, tok_type_of(v, (int32_t)id) != TOK_USER_DEFINED, true));
    json_t *model =
        json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:O, s:O}", "type", "BPE", "dropout",
                  "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                  "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", merges);
    return json_pack("{s:s, s:n, s:n, s:o, s:n, s:o, s:o, s:{s:s, s:b, s:b, s:b}, s:o}", "version",
                     "1.0", "truncation", "padding", "added_tokens", added, "normalizer",
                     "pre_tokenizer", build_pre(v, vocab), "post_processor", build_post(v),
                     "decoder", "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1,
                     "use_regex", 1, "model", model);
}

/* The text of the token a GGUF key names, or NULL. */
static const char *special_text(const struct gguf_file *f, const tok_vocab *v, const char *key)
{
    uint64_t id;
    if (gguf_get_u64(f, key, &id) != 0 || id >= tok_n_vocab(v))
        return NULL;
    return text_of(v, (int32_t)id);
}

/* tokenizer_config.json and special_tokens_map.json, as transformers'
 * AutoTokenizer reads them (PreTrainedTokenizerFast over tokenizer.json). */
static void build_config(const struct gguf_file *f, const tok_vocab *v, json_t **config,
                         json_t **map)
{
    static const struct {
        const char *name, *key;
    } roles[] = {
        {"bos_token", "tokenizer.ggml.bos_token_id"},
        {"eos_token", "tokenizer.ggml.eos_token_id"},
        {"unk_token", "tokenizer.ggml.unknown_token_id"},
        {"pad_token", "tokenizer.ggml.padding_token_id"},
    };
    json_t *c = json_object(), *m = json_object(), *dec = json_object();
    json_object_set_new(c, "add_bos_token", json_boolean(tok_add_bos(v)));
    json_object_set_new(c, "add_eos_token", json_false());
    for (size_t id = 0; id < tok_n_vocab(v); id++)
        if (is_added(v, (int32_t)id)) {
            char k[24];
            snprintf(k, sizeof(k), "%zu", id);
            json_object_set_new(dec, k,
                                added_token(v, (int32_t)id,
                                            tok_type_of(v, (int32_t)id) != TOK_USER_DEFINED,
                                            false));
        }
    json_object_set_new(c, "added_tokens_decoder", dec);
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
        const char *t = special_text(f, v, roles[i].key);
        json_object_set_new(c, roles[i].name, t ? json_string(t) : json_null());
        if (t)
            json_object_set_new(m, roles[i].name, json_string(t));
    }
    const char *tmpl = tok_chat_template(v);
    if (tmpl && json_object_set_new(c, "chat_template", json_string(tmpl)) != 0)
        log_warn("export-tokenizer: the chat template is not valid UTF-8; left out");
    json_object_set_new(c, "clean_up_tokenization_spaces", json_false());
    struct gguf_str arch;
    uint64_t ctx = 0;
    if (gguf_get_str(f, "general.architecture", &arch) == 0) {
        char *key = xasprintf("%.*s.context_length", (int)arch.len, arch.p);
        if (gguf_get_u64(f, key, &ctx) == 0)
            json_object_set_new(c, "model_max_length", json_integer((json_int_t)ctx));
        free(key);
    }
    json_object_set_new(c, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    *config = c;
    *map = m;
}

/* Write j as DIR/name (atomically). */
static int write_json(const char *dir, const char *name, const json_t *j, struct err *err)
{
    char *text = json_dumps(j, JSON_INDENT(2));
    char *path = xasprintf("%s/%s", dir, name);
    int rc = -1;
    if (!text)
        err_set(err, FP_ERR_RESOURCE, "%s: cannot format the JSON", path);
    else if (file_write_atomic(path, text, strlen(text), err, FP_ERR_IO) == 0)
        rc = 0;
    free(text);
    free(path);
    return rc;
}

static const struct opt_cmd usage = {
    "fp4serve", "export-tokenizer", "MODEL.gguf --out DIR",
    "Write the GGUF's tokenizer as Hugging Face tokenizer files (the ids match "
    "fp4serve's).",
    FP_ERR_USAGE};

/* Exit status: 0, FP_ERR_USAGE for bad arguments, FP_ERR_IO when DIR
 * cannot be written, or the reader's code (FP_ERR_FORMAT,
 * FP_ERR_UNSUPPORTED) with its one-line error. */
int fp4_export(int argc, char **argv)
{
    const char *out = NULL;
    const struct opt opts[] = {
        {"out", 'o', OPT_STR, &out, "DIR",
         "folder for tokenizer.json, tokenizer_config.json and special_tokens_map.json "
         "(created if missing; the files are replaced)"},
    };
    struct strvec pos = STRVEC_INIT;
    struct err err;
    struct gguf_file f;
    bool opened = false;
    tok_vocab *v = NULL;
    json_t *vocab = json_object(), *merges = NULL, *tj = NULL, *config = NULL, *map = NULL;
    int p = opt_cmd_parse(&usage, opts, OPT_N(opts), argc, argv, &pos, &err);
    if (p == 1) {
        goto out;
    }
    if (p == 0 && pos.n != 1)
        err_set(&err, FP_ERR_USAGE, "export-tokenizer takes one GGUF path (see --help)");
    if (p == 0 && !out)
        err_set(&err, FP_ERR_USAGE, "export-tokenizer: --out DIR is required");
    if (err.code)
        goto out;
    if (gguf_open(pos.v[0], &f, &err) != 0)
        goto out;
    opened = true;
    if (tok_load(&f, &v, &err) != 0) {
        err_prefix(&err, "%s", pos.v[0]);
        goto out;
    }
    size_t dropped;
    if (build_vocab(v, vocab, &err) != 0 || build_merges(&f, vocab, &merges, &dropped, &err) != 0) {
        err_prefix(&err, "%s", pos.v[0]);
        goto out;
    }
    if (dropped)
        log_warn("export-tokenizer: %zu merge%s name%s texts that are not tokens, left out (a "
                 "tokenizer.json cannot state them); some words may split differently",
                 dropped, dropped == 1 ? "" : "s", dropped == 1 ? "s" : "");
    tj = build_tokenizer(v, vocab, merges);
    build_config(&f, v, &config, &map);
    if (mkdir_p(out, 0755, &err, FP_ERR_IO) != 0 || write_json(out, "tokenizer.json", tj, &err) ||
        write_json(out, "tokenizer_config.json", config, &err) ||
        write_json(out, "special_tokens_map.json", map, &err))
        goto out;
    log_info("wrote %s/tokenizer.json (%zu tokens, %zu merges), tokenizer_config.json, "
             "special_tokens_map.json",
             out, json_object_size(vocab), json_array_size(merges));
out:
    if (err.code)
        log_error("%s", err.msg);
    json_decref(tj);
    json_decref(vocab);
    json_decref(merges);
    json_decref(config);
    json_decref(map);
    tok_free(v);
    if (opened)
        gguf_close(&f);
    strvec_release(&pos);
    return err.code;
}
