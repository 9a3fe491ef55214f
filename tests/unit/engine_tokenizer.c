/*
 * Unit tests for engine/text/tokenizer: SmolLM2's ids against llama.cpp's for
 * every string in the JSON Lines files of tests/fixtures/tokenizer (made by
 * tests/tools/make_tokenizer_fixtures.py), round trips, refusals, and the
 * algorithm's corners on small hand-built vocabularies.
 */
#include <jansson.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

/* The source, not the header: the tests reach its statics (spec_from_gguf, byte_map_init). */
#include "fileio.h"

#include "format/synth.h"
#include "text/tokenizer.c"

#define MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static const char *top(void)
{
    const char *t = getenv("TOPDIR");
    return t && *t ? t : ".";
}

/* ---- helpers ---- */

/* Decode ids with tok_piece into a fresh string (*len bytes). */
static char *decode_all(const tok_vocab *v, const int32_t *ids, size_t n, size_t *len)
{
    size_t cap = 16, w = 0;
    char *s = xmalloc(cap);
    for (size_t i = 0; i < n; i++) {
        size_t k = tok_piece(v, ids[i], NULL, 0);
        XGROW(s, cap, w + k + 1);
        tok_piece(v, ids[i], s + w, k);
        w += k;
    }
    s[w] = '\0';
    *len = w;
    return s;
}

/* Decode ids through the streaming detokenizer. */
static char *decode_stream(const tok_vocab *v, const int32_t *ids, size_t n, size_t *len)
{
    size_t step = TOK_STREAM_CAP(tok_max_piece(v)), cap = step * (n + 1) + 1, w = 0;
    char *s = xmalloc(cap);
    struct tok_stream st;
    tok_stream_init(&st);
    for (size_t i = 0; i < n; i++)
        w += tok_stream_push(v, &st, ids[i], s + w, step);
    w += tok_stream_flush(&st, s + w, step);
    s[w] = '\0';
    *len = w;
    return s;
}

static bool ids_equal(const int32_t *a, size_t na, json_t *want)
{
    if (na != json_array_size(want))
        return false;
    for (size_t i = 0; i < na; i++)
        if (a[i] != json_integer_value(json_array_get(want, i)))
            return false;
    return true;
}

static void print_ids(const char *what, const int32_t *a, size_t n)
{
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", a[i]);
    fputc('\n', stderr);
}

/* Load the model's vocabulary, optionally with another pre-tokenizer name.
 * NULL (and a "skipped" line) when the model is not there. */
static tok_vocab *load_model_at(const char *model, const char *pre)
{
    char path[4096];
    if (model[0] == '/')
        snprintf(path, sizeof(path), "%s", model);
    else
        snprintf(path, sizeof(path), "%s/%s", top(), model);
    struct gguf_file f;
    struct err err;
    err_init(&err);
    if (gguf_open(path, &f, &err) < 0) {
        printf("skipped: %s (run `make models`)\n", err.msg);
        return NULL;
    }
    struct tok_spec spec;
    struct spec_bufs b;
    tok_vocab *v = NULL;
    if (spec_from_gguf(&f, &spec, &b, &err) == 0) {
        if (pre)
            spec.pre = (struct gguf_str){pre, strlen(pre)};
        tok_new(&spec, &v, &err);
    }
    spec_bufs_release(&b);
    gguf_close(&f);
    CHECK_MSG(v, "%s", err.msg);
    return v;
}

static tok_vocab *load_model(const char *pre)
{
    return load_model_at(MODEL, pre);
}

/* Every case of a fixture file: ids with and without special parsing,
 * decode(encode(s)) == s by pieces and by stream. Returns cases checked. */
static int check_fixture(const tok_vocab *v, const char *file)
{
    char path[4096];
    if (file[0] == '/')
        snprintf(path, sizeof(path), "%s", file);
    else
        snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer/%s", top(), file);
    FILE *fp = fopen(path, "r");
    CHECK_MSG(fp, "cannot open %s", path);
    if (!fp)
        return 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t ll;
    int n_cases = 0;
    while ((ll = getline(&line, &lcap, fp)) > 0) {
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)ll, JSON_ALLOW_NUL, &je);
        CHECK_MSG(o, "%s:%d: %s", path, je.line, je.text);
        if (!o)
            continue;
        if (json_object_get(o, "meta")) {
            CHECK(json_is_false(json_object_get(json_object_get(o, "meta"), "adds_bos")));
            json_decref(o);
            continue;
        }
        const char *name = json_string_value(json_object_get(o, "name"));
        json_t *jt = json_object_get(o, "text");
        const char *text = json_string_value(jt);
        size_t len = json_string_length(jt);
        for (int special = 1; special >= 0; special--) {
            int32_t *ids = NULL;
            size_t n = 0, cap = 0;
            struct err err;
            err_init(&err);
            int rc = tok_encode(v, text, len, special, false, &ids, &n, &cap, &err);
            CHECK_MSG(rc == 0, "%s: %s", name, err.msg);
            json_t *want = json_object_get(o, special ? "ids" : "ids_nospecial");
            if (!ids_equal(ids, n, want)) {
                CHECK_MSG(0, "%s (parse_special=%d): ids differ from llama.cpp's", name, special);
                print_ids("ours", ids, n);
                char *w = json_dumps(want, JSON_COMPACT);
                fprintf(stderr, "  want: %s\n", w);
                free(w);
            }
            size_t dl, sl;
            char *d = decode_all(v, ids, n, &dl);
            char *s = decode_stream(v, ids, n, &sl);
            /* llama.cpp cannot give back text with a byte that has no
             * token (it is dropped); then neither can we */
            bool rt = json_is_true(json_object_get(o, "ref_roundtrip"));
            CHECK_MSG((dl == len && memcmp(d, text, len) == 0) == rt, "%s: decode(encode(s)) %s s",
                      name, rt ? "!=" : "==");
            CHECK_MSG((sl == len && memcmp(s, text, len) == 0) == rt, "%s: stream decode %s s",
                      name, rt ? "!=" : "==");
            free(d);
            free(s);
            free(ids);
        }
        n_cases++;
        json_decref(o);
    }
    free(line);
    fclose(fp);
    return n_cases;
}

/* ---- SmolLM2 against llama.cpp ---- */

TEST(smollm2_matches_llama_cpp)
{
    tok_vocab *v = load_model(NULL);
    if (!v)
        return;
    int n = check_fixture(v, "smollm2.jsonl");
    CHECK_MSG(n >= 60, "only %d cases", n);
    printf("smollm2.jsonl: %d cases\n", n);
    tok_free(v);
}

/* The synthetic model's tokenizer (512 tokens, pre smollm) against
 * llama.cpp: needs no download, so it always runs. */
TEST(synth_tiny_matches_llama_cpp)
{
    char path[] = "/tmp/tok-synth-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    struct synth_opts o = {.preset = synth_preset_find("tiny"), .type = 1 /* f16 */, .seed = 1};
    struct err err;
    err_init(&err);
    CHECK_MSG(o.preset && synth_write(&o, path, &err) == 0, "%s", err.msg);
    tok_vocab *v = load_model_at(path, NULL);
    if (v) {
        int n = check_fixture(v, "synth-tiny.jsonl");
        CHECK_MSG(n >= 60, "only %d cases", n);
        CHECK_INT(tok_n_vocab(v), 512);
        tok_free(v);
    }
    unlink(path);
}

TEST(gpt2_pre_matches_llama_cpp)
{
    tok_vocab *v = load_model("gpt-2");
    if (!v)
        return;
    CHECK_STR(tok_pre_name(v), "gpt-2");
    int n = check_fixture(v, "smollm2-gpt2pre.jsonl");
    CHECK_MSG(n >= 60, "only %d cases", n);
    tok_free(v);
}

/* A differential run on a file named by TOK_EXTRA_FIXTURE (made with
 * make_tokenizer_fixtures.py --random N [--pre NAME] [MODEL], NAME then also
 * in TOK_EXTRA_PRE, MODEL in TOK_EXTRA_MODEL); nothing to do when unset. */
TEST(extra_fixture)
{
    const char *path = getenv("TOK_EXTRA_FIXTURE");
    const char *pre = getenv("TOK_EXTRA_PRE");
    if (!path || !*path)
        return;
    const char *model = getenv("TOK_EXTRA_MODEL");
    tok_vocab *v = load_model_at(model && *model ? model : MODEL, pre && *pre ? pre : NULL);
    if (!v)
        return;
    printf("%s: %d cases\n", path, check_fixture(v, path));
    tok_free(v);
}

TEST(smollm2_metadata)
{
    tok_vocab *v = load_model(NULL);
    if (!v)
        return;
    CHECK_INT(tok_n_vocab(v), 49152);
    CHECK_INT(tok_bos(v), 1);
    CHECK_INT(tok_eos(v), 2);
    CHECK(!tok_add_bos(v));
    CHECK_STR(tok_pre_name(v), "smollm");
    CHECK_STR(tok_text(v, 1), "<|im_start|>");
    CHECK_STR(tok_text(v, 216), "\xc4\xa0"); /* the lone byte-mapped space */
    CHECK(tok_text(v, 49152) == NULL);
    CHECK(tok_text(v, -1) == NULL);
    CHECK_INT(tok_type_of(v, 2), TOK_CONTROL);
    CHECK_INT(tok_type_of(v, 100), TOK_NORMAL);
    const char *tmpl = tok_chat_template(v);
    CHECK(tmpl && strstr(tmpl, "<|im_start|>") != NULL);
    /* EOG: <|endoftext|> 0, <|im_end|> 2 (EOS), <reponame> 4 (FIM repo) */
    size_t n;
    const int32_t *eog = tok_eog_ids(v, &n);
    CHECK_INT(n, 3);
    if (n == 3) {
        CHECK_INT(eog[0], 0);
        CHECK_INT(eog[1], 2);
        CHECK_INT(eog[2], 4);
    }
    CHECK(tok_is_eog(v, 2) && tok_is_eog(v, 0) && tok_is_eog(v, 4));
    CHECK(!tok_is_eog(v, 1) && !tok_is_eog(v, 3) && !tok_is_eog(v, -1) && !tok_is_eog(v, 49152));
    char buf[64];
    CHECK_INT(tok_piece(v, 198, buf, sizeof(buf)), 1); /* Ċ is "\n" */
    CHECK(buf[0] == '\n');
    CHECK_INT(tok_piece(v, 1, buf, sizeof(buf)), 12);
    CHECK(memcmp(buf, "<|im_start|>", 12) == 0);
    CHECK_INT(tok_piece(v, 1, buf, 3), 12); /* truncated copy, full length */
    CHECK_INT(tok_piece(v, 99999, buf, sizeof(buf)), 0);
    tok_free(v);
}

/* The golden fixture's prompts (tests/tools/make_golden.py) tokenize to the
 * ids llama.cpp evaluated, BOS handling included, and its greedy ids
 * detokenize to llama.cpp's text. */
TEST(smollm2_golden_prompts)
{
    tok_vocab *v = load_model(NULL);
    if (!v)
        return;
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/fixtures/golden/smollm2-135m-q4_1/golden.json", top());
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    CHECK_MSG(doc, "%s:%d: %s", path, je.line, je.text);
    json_t *prompts = json_object_get(doc, "prompts");
    CHECK(json_array_size(prompts) >= 5);
    CHECK(json_is_false(json_object_get(json_object_get(doc, "meta"), "bos_added")));
    for (size_t i = 0; i < json_array_size(prompts); i++) {
        json_t *p = json_array_get(prompts, i);
        const char *name = json_string_value(json_object_get(p, "name"));
        json_t *jt = json_object_get(p, "text");
        int32_t *ids = NULL;
        size_t n = 0, cap = 0;
        struct err err;
        err_init(&err);
        CHECK_INT(tok_encode(v, json_string_value(jt), json_string_length(jt), true, tok_add_bos(v),
                             &ids, &n, &cap, &err),
                  0);
        CHECK_MSG(ids_equal(ids, n, json_object_get(p, "prompt_ids")), "%s: prompt ids differ",
                  name);
        json_t *g = json_object_get(p, "greedy_ids");
        size_t ng = json_array_size(g), dl;
        int32_t *gi = xmalloc((ng + 1) * sizeof(*gi));
        for (size_t k = 0; k < ng; k++)
            gi[k] = (int32_t)json_integer_value(json_array_get(g, k));
        char *d = decode_stream(v, gi, ng, &dl);
        json_t *gt = json_object_get(p, "greedy_text");
        CHECK_MSG(dl == json_string_length(gt) && memcmp(d, json_string_value(gt), dl) == 0,
                  "%s: greedy text differs: '%s'", name, d);
        free(d);
        free(gi);
        free(ids);
    }
    json_decref(doc);
    tok_free(v);
}

/* The third-party vector from docs/formats.md §2.5, which llama.cpp
 * confirms (it is also the first fixture case). */
TEST(smollm2_known_vector)
{
    tok_vocab *v = load_model(NULL);
    if (!v)
        return;
    static const int32_t want[] = {19556, 905, 17, 216, 33, 34, 35};
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    struct err err;
    err_init(&err);
    CHECK_INT(tok_encode(v, "Hello world! 123", 16, true, false, &ids, &n, &cap, &err), 0);
    CHECK_INT(n, 7);
    for (size_t i = 0; i < n && i < 7; i++)
        CHECK_INT(ids[i], want[i]);
    /* appends; add_bos puts BOS first */
    CHECK_INT(tok_encode(v, "Hi", 2, true, true, &ids, &n, &cap, &err), 0);
    CHECK_INT(n, 7 + 1 + 1);
    CHECK_INT(ids[7], 1);
    free(ids);
    tok_free(v);
}

TEST(smollm2_invalid_utf8_is_an_error)
{
    tok_vocab *v = load_model(NULL);
    if (!v)
        return;
    static const struct {
        const char *s;
        size_t at;
    } bad[] = {
        {"ok \xff", 3},           {"\x80", 0},         {"ab\xc3", 2},
        {"\xc0\xaf", 0},          {"\xe0\x80\xaf", 0}, {"\xed\xa0\x80", 0},
        {"x\xf4\x90\x80\x80", 1}, {"\xf5", 0},         {"\xe2\x82", 0},
        {"caf\xc3\x28", 3},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int32_t *ids = NULL;
        size_t n = 5, cap = 0; /* n is kept on failure */
        struct err err;
        err_init(&err);
        int rc = tok_encode(v, bad[i].s, strlen(bad[i].s), true, false, &ids, &n, &cap, &err);
        CHECK_MSG(rc == -1, "case %zu accepted", i);
        CHECK_INT(err.code, FP_ERR_USAGE);
        CHECK_INT(n, 5);
        char want[64];
        snprintf(want, sizeof(want), "at byte %zu", bad[i].at);
        CHECK_MSG(strstr(err.msg, want), "case %zu: '%s' lacks '%s'", i, err.msg, want);
        free(ids);
    }
    tok_free(v);
}

/* 32 KiB of mixed prose: correct against a piecewise encoding and fast. */
TEST(smollm2_long_text)
{
    tok_vocab *v = load_model(NULL);
    if (!v)
        return;
    /* each part ends in punctuation and the next starts with a letter or
     * a special token, so the parts are also pre-token boundaries */
    static const char *parts[] = {
        "The quick brown fox jumps over the lazy dog 1234 times.",
        "Le café coûte 3,50 €; 東京の人口は約1400万人です。",
        "def f(x):\n    return x ** 2  # 😀",
        "<|im_start|>user\nHello!\n\n  Bye!<|im_end|>",
    };
    size_t np = sizeof(parts) / sizeof(parts[0]);
    struct buf text;
    buf_init(&text, 1 << 20);
    for (size_t i = 0; text.len < 32768; i++)
        buf_puts(&text, parts[i % np]);
    struct err err;
    err_init(&err);
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int reps = 5;
    for (int r = 0; r < reps; r++) {
        n = 0;
        CHECK_INT(tok_encode(v, text.data, text.len, true, false, &ids, &n, &cap, &err), 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("encode %zu bytes -> %zu tokens: %.2f ms each, %.2f MB/s\n", text.len, n, s * 1e3 / reps,
           (double)text.len * reps / s / 1e6);
    /* generous: only an accidental quadratic could come near it */
    CHECK_MSG(s / reps < 2.0, "32 KiB took %.2f s", s / reps);
    /* encoding the parts one by one gives the same ids */
    int32_t *ids2 = NULL;
    size_t n2 = 0, cap2 = 0, off = 0;
    for (size_t i = 0; off < text.len; i++) {
        size_t pl = strlen(parts[i % np]);
        CHECK_INT(tok_encode(v, text.data + off, pl, true, false, &ids2, &n2, &cap2, &err), 0);
        off += pl;
    }
    CHECK_INT(n2, n);
    CHECK(n2 == n && memcmp(ids, ids2, n * sizeof(*ids)) == 0);
    size_t dl;
    char *d = decode_all(v, ids, n, &dl);
    CHECK(dl == text.len && memcmp(d, text.data, dl) == 0);
    free(d);
    free(ids);
    free(ids2);
    buf_release(&text);
    tok_free(v);
}

/* ---- refusals ---- */

static struct gguf_str gs(const char *s)
{
    return (struct gguf_str){s, strlen(s)};
}

TEST(refuses_other_models_and_pre_tokenizers)
{
    struct gguf_str toks[] = {gs("a"), gs("b")};
    struct tok_spec spec = {.model = gs("llama"),
                            .pre = gs("smollm"),
                            .tokens = toks,
                            .n_tokens = 2,
                            .bos = -1,
                            .eos = -1,
                            .eot = -1,
                            .eom = -1,
                            .fim_pad = -1,
                            .fim_rep = -1,
                            .fim_sep = -1,
                            .add_bos = -1};
    tok_vocab *v = (tok_vocab *)1;
    struct err err;
    err_init(&err);
    CHECK_INT(tok_new(&spec, &v, &err), -1);
    CHECK(v == NULL);
    CHECK_INT(err.code, FP_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "tokenizer model 'llama'"), "%s", err.msg);

    spec.model = gs("gpt2");
    spec.pre = gs("qwen2");
    err_init(&err);
    CHECK_INT(tok_new(&spec, &v, &err), -1);
    CHECK_INT(err.code, FP_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "pre-tokenizer 'qwen2'"), "%s", err.msg);

    spec.pre = gs("smollm");
    spec.n_tokens = 0;
    err_init(&err);
    CHECK_INT(tok_new(&spec, &v, &err), -1);
    CHECK_INT(err.code, FP_ERR_FORMAT);
}

/* A GGUF without tokenizer.ggml.pre is refused by name; one without the
 * model key is a format error. Built with the gguf writer. */
TEST(refuses_gguf_without_pre)
{
    char path[] = "/tmp/tok-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    const char *toks[] = {"a", "b", "ab"};
    const char *merges[] = {"a b"};
    for (int with_model = 0; with_model <= 1; with_model++) {
        gguf_writer *w = gguf_writer_new(32);
        if (with_model)
            gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
        gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 1);
        struct err err;
        err_init(&err);
        CHECK_INT(gguf_writer_save(w, path, &err), 0);
        gguf_writer_free(w);
        struct gguf_file f;
        CHECK_INT(gguf_open(path, &f, &err), 0);
        tok_vocab *v = NULL;
        CHECK_INT(tok_load(&f, &v, &err), -1);
        CHECK(v == NULL);
        CHECK_INT(err.code, with_model ? FP_ERR_UNSUPPORTED : FP_ERR_FORMAT);
        CHECK_MSG(strstr(err.msg, with_model ? "tokenizer.ggml.pre" : "tokenizer.ggml.model"), "%s",
                  err.msg);
        gguf_close(&f);
    }
    unlink(path);
}

/* ---- the algorithm on hand-built vocabularies ---- */

/* A byte-level vocabulary: the 256 byte characters (ids 0..255 in byte
 * order), then extra tokens, merges and types as given. */
struct mini {
    struct gguf_str tokens[512];
    int32_t types[512];
    char text[512][32];
    size_t n;
};

static void mini_init(struct mini *m)
{
    uint16_t byte_cp[256];
    int16_t cp_byte[BYTE_CP_LIMIT];
    byte_map_init(byte_cp, cp_byte);
    m->n = 0;
    for (int b = 0; b < 256; b++) {
        size_t k = utf8_encode(byte_cp[b], m->text[m->n]);
        m->text[m->n][k] = '\0';
        m->tokens[m->n] = gs(m->text[m->n]);
        m->types[m->n++] = TOK_NORMAL;
    }
}

static int32_t mini_add(struct mini *m, const char *text, int32_t type)
{
    snprintf(m->text[m->n], sizeof(m->text[0]), "%s", text);
    m->tokens[m->n] = gs(m->text[m->n]);
    m->types[m->n] = type;
    return (int32_t)m->n++;
}

static tok_vocab *mini_vocab(struct mini *m, const char *const *merges, size_t n_merges)
{
    struct gguf_str ms[64];
    for (size_t i = 0; i < n_merges; i++)
        ms[i] = gs(merges[i]);
    struct tok_spec spec = {.model = gs("gpt2"),
                            .pre = gs("gpt-2"),
                            .tokens = m->tokens,
                            .types = m->types,
                            .n_tokens = m->n,
                            .merges = ms,
                            .n_merges = n_merges,
                            .bos = -1,
                            .eos = -1,
                            .eot = -1,
                            .eom = -1,
                            .fim_pad = -1,
                            .fim_rep = -1,
                            .fim_sep = -1,
                            .add_bos = -1};
    tok_vocab *v = NULL;
    struct err err;
    err_init(&err);
    CHECK_MSG(tok_new(&spec, &v, &err) == 0, "%s", err.msg);
    return v;
}

static size_t enc(const tok_vocab *v, const char *s, bool special, int32_t *out, size_t max)
{
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    struct err err;
    err_init(&err);
    CHECK_MSG(tok_encode(v, s, strlen(s), special, false, &ids, &n, &cap, &err) == 0, "%s",
              err.msg);
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = ids[i];
    free(ids);
    return n;
}

/* Lower rank merges first; with equal rank the leftmost pair goes first. */
TEST(merges_by_rank_then_leftmost)
{
    struct mini m;
    mini_init(&m);
    int32_t bc = mini_add(&m, "bc", TOK_NORMAL);
    int32_t ab = mini_add(&m, "ab", TOK_NORMAL);
    int32_t abc = mini_add(&m, "abc", TOK_NORMAL);
    int32_t aa = mini_add(&m, "aa", TOK_NORMAL);
    /* rank 0: b c, rank 1: a b, rank 2: a bc */
    const char *merges[] = {"b c", "a b", "a bc", "a a"};
    tok_vocab *v = mini_vocab(&m, merges, 4);
    int32_t ids[16];
    /* "abc": (b,c) has the lower rank, then (a,bc) */
    CHECK_INT(enc(v, "abc", true, ids, 16), 1);
    CHECK_INT(ids[0], abc);
    /* "abd": only (a,b) applies */
    CHECK_INT(enc(v, "abd", true, ids, 16), 2);
    CHECK_INT(ids[0], ab);
    CHECK_INT(ids[1], 'd');
    /* "aaa": (a,a) at 0 and at 1 tie; the leftmost wins: aa + a */
    CHECK_INT(enc(v, "aaa", true, ids, 16), 2);
    CHECK_INT(ids[0], aa);
    CHECK_INT(ids[1], 'a');
    (void)bc;
    tok_free(v);
}

/* A merge whose result is not a token falls back to one token per byte. */
TEST(merge_result_outside_vocab_gives_bytes)
{
    struct mini m;
    mini_init(&m);
    const char *merges[] = {"x y"};
    tok_vocab *v = mini_vocab(&m, merges, 1);
    int32_t ids[8];
    CHECK_INT(enc(v, "xy", true, ids, 8), 2);
    CHECK_INT(ids[0], 'x');
    CHECK_INT(ids[1], 'y');
    tok_free(v);
}

/* Control tokens split out only with parse_special; user-defined always;
 * the longest special text is matched first. */
TEST(special_partition)
{
    struct mini m;
    mini_init(&m);
    int32_t ctl = mini_add(&m, "<c>", TOK_CONTROL);
    int32_t user = mini_add(&m, "<u>", TOK_USER_DEFINED);
    int32_t longer = mini_add(&m, "<c><u>", TOK_CONTROL);
    int32_t eot = mini_add(&m, "<|im_end|>", TOK_NORMAL); /* promoted to control, EOG */
    tok_vocab *v = mini_vocab(&m, NULL, 0);
    int32_t ids[32];
    CHECK_INT(enc(v, "a<c>b", true, ids, 32), 3);
    CHECK_INT(ids[1], ctl);
    CHECK_INT(enc(v, "a<c>b", false, ids, 32), 5); /* '<' 'c' '>' as text */
    CHECK_INT(enc(v, "<u><u>", false, ids, 32), 2);
    CHECK(ids[0] == user && ids[1] == user);
    CHECK_INT(enc(v, "<c><u><c>", true, ids, 32), 2);
    CHECK(ids[0] == longer && ids[1] == ctl);
    CHECK_INT(enc(v, "<c><u><c>", false, ids, 32), 7);
    CHECK_INT(ids[3], user);
    CHECK(tok_is_eog(v, eot));
    CHECK_INT(tok_type_of(v, eot), TOK_CONTROL);
    CHECK_INT(enc(v, "x<|im_end|>", true, ids, 32), 2);
    CHECK_INT(ids[1], eot);
    tok_free(v);
}

/* A byte without a token of its own is dropped, as llama.cpp does (the
 * SmolLM2 vocabulary lacks a few, e.g. 0x04 and 0xF1); asking for BOS when
 * the model has none is an error. */
TEST(missing_byte_token)
{
    struct gguf_str toks[] = {gs("a"), gs("<unk>"), gs("c")};
    int32_t types[] = {TOK_NORMAL, TOK_UNKNOWN, TOK_NORMAL};
    struct tok_spec spec = {.model = gs("gpt2"),
                            .pre = gs("gpt-2"),
                            .tokens = toks,
                            .types = types,
                            .n_tokens = 3,
                            .bos = -1,
                            .eos = -1,
                            .eot = -1,
                            .eom = -1,
                            .fim_pad = -1,
                            .fim_rep = -1,
                            .fim_sep = -1,
                            .add_bos = -1};
    tok_vocab *v = NULL;
    struct err err;
    err_init(&err);
    CHECK_INT(tok_new(&spec, &v, &err), 0);
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    CHECK_INT(tok_encode(v, "abc", 3, false, false, &ids, &n, &cap, &err), 0);
    CHECK_INT(n, 2);
    CHECK(n == 2 && ids[0] == 0 && ids[1] == 2);
    CHECK_INT(tok_encode(v, "", 0, false, true, &ids, &n, &cap, &err), -1);
    CHECK_INT(err.code, FP_ERR_USAGE);
    CHECK_INT(n, 2);
    free(ids);
    tok_free(v);
}

/* SmolLM2 itself: the same drop, matching the reference. */
TEST(smollm2_bytes_without_tokens)
{
    tok_vocab *v = load_model(NULL);
    if (!v)
        return;
    int32_t ids[8];
    /* U+79355 is F1 B9 8D 95; 0xF1 has no token */
    CHECK_INT(enc(v, "\xf1\xb9\x8d\x95", true, ids, 8), 3);
    CHECK_INT(enc(v, "a\x04b", true, ids, 8), 2);
    tok_free(v);
}

/* The streaming detokenizer holds back a split character and replaces
 * bytes that can never become UTF-8. */
TEST(stream_holds_incomplete_utf8)
{
    struct mini m;
    mini_init(&m);
    tok_vocab *v = mini_vocab(&m, NULL, 0);
    char out[256];
    struct tok_stream s;
    tok_stream_init(&s);
    /* "é" = C3 A9 as two byte tokens (byte b is token b) */
    CHECK_INT(tok_stream_push(v, &s, 0xC3, out, sizeof(out)), 0);
    CHECK_INT(s.n_pending, 1);
    CHECK_INT(tok_stream_push(v, &s, 0xA9, out, sizeof(out)), 2);
    CHECK(memcmp(out, "\xc3\xa9", 2) == 0);
    /* "😀" = F0 9F 98 80 in four steps */
    CHECK_INT(tok_stream_push(v, &s, 0xF0, out, sizeof(out)), 0);
    CHECK_INT(tok_stream_push(v, &s, 0x9F, out, sizeof(out)), 0);
    CHECK_INT(tok_stream_push(v, &s, 0x98, out, sizeof(out)), 0);
    CHECK_INT(tok_stream_push(v, &s, 0x80, out, sizeof(out)), 4);
    CHECK(memcmp(out, "\xf0\x9f\x98\x80", 4) == 0);
    /* a lone continuation byte is replaced at once */
    CHECK_INT(tok_stream_push(v, &s, 0xA9, out, sizeof(out)), 3);
    CHECK(memcmp(out, "\xef\xbf\xbd", 3) == 0);
    /* a lead byte followed by ASCII: U+FFFD then the ASCII */
    CHECK_INT(tok_stream_push(v, &s, 0xE2, out, sizeof(out)), 0);
    CHECK_INT(tok_stream_push(v, &s, 'x', out, sizeof(out)), 4);
    CHECK(memcmp(out, "\xef\xbf\xbdx", 4) == 0);
    /* the end of a sequence flushes what is pending as U+FFFD */
    CHECK_INT(tok_stream_push(v, &s, 0xE2, out, sizeof(out)), 0);
    CHECK_INT(tok_stream_push(v, &s, 0x82, out, sizeof(out)), 0);
    CHECK_INT(tok_stream_flush(&s, out, sizeof(out)), 3);
    CHECK(memcmp(out, "\xef\xbf\xbd", 3) == 0);
    CHECK_INT(s.n_pending, 0);
    CHECK_INT(tok_stream_flush(&s, out, sizeof(out)), 0);
    /* out-of-range ids add nothing */
    CHECK_INT(tok_stream_push(v, &s, -5, out, sizeof(out)), 0);
    tok_free(v);
}

/* A pending tail that a multi-byte token completes, and a token that both
 * completes one character and leaves the start of another. */
TEST(stream_pending_across_tokens)
{
    struct mini m;
    mini_init(&m);
    /* token text for bytes A9 'b' E2 82, byte-map encoded */
    uint16_t byte_cp[256];
    int16_t cp_byte[BYTE_CP_LIMIT];
    byte_map_init(byte_cp, cp_byte);
    char t[32];
    size_t k = 0;
    const uint8_t raw[] = {0xA9, 'b', 0xE2, 0x82};
    for (size_t i = 0; i < sizeof(raw); i++)
        k += utf8_encode(byte_cp[raw[i]], t + k);
    t[k] = '\0';
    int32_t mixed = mini_add(&m, t, TOK_NORMAL);
    tok_vocab *v = mini_vocab(&m, NULL, 0);
    char out[256];
    struct tok_stream s;
    tok_stream_init(&s);
    CHECK_INT(tok_stream_push(v, &s, 0xC3, out, sizeof(out)), 0);
    CHECK_INT(tok_stream_push(v, &s, mixed, out, sizeof(out)), 3); /* é b */
    CHECK(memcmp(out,
                 "\xc3\xa9"
                 "b",
                 3) == 0);
    CHECK_INT(s.n_pending, 2);
    CHECK_INT(tok_stream_push(v, &s, 0xAC, out, sizeof(out)), 3); /* € */
    CHECK(memcmp(out, "\xe2\x82\xac", 3) == 0);
    tok_free(v);
}

/* The byte map is a bijection with the documented fixed points. */
TEST(byte_map)
{
    uint16_t byte_cp[256];
    int16_t cp_byte[BYTE_CP_LIMIT];
    byte_map_init(byte_cp, cp_byte);
    CHECK_INT(byte_cp[' '], 0x120);  /* Ġ */
    CHECK_INT(byte_cp['\n'], 0x10A); /* Ċ */
    CHECK_INT(byte_cp['A'], 'A');
    CHECK_INT(byte_cp[0xAD], 0x143); /* soft hyphen is the last remapped */
    CHECK_INT(byte_cp[0xE9], 0xE9);
    for (int b = 0; b < 256; b++)
        CHECK_INT(cp_byte[byte_cp[b]], b);
}

TEST_MAIN()
