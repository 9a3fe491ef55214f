/*
 * Unit tests for engine/format/synth: the vocabulary is a consistent byte-level
 * BPE (unique tokens, every merge's parts and result in it), the tensor
 * plan has each preset's shapes, values have the stated distribution, and
 * the same options give byte-identical files.
 */
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

/* The source, not the header: the tests reach its statics (build_vocab, plan, gen_values). */
#include "fileio.h"

#include "format/synth.c"

static char *tmp_path(const char *tag)
{
    return xasprintf("%s/synth-test-%ld-%s.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                     (long)getpid(), tag);
}

static bool read_all(const char *path, struct buf *b)
{
    struct err e;
    err_init(&e);
    buf_init(b, (size_t)1 << 30);
    return file_read_all(path, b, &e, FP_ERR_IO) == 0;
}

TEST(vocab_is_a_consistent_byte_level_bpe)
{
    const size_t sizes[] = {512, 32000};
    for (size_t k = 0; k < 2; k++) {
        struct vocab v;
        build_vocab(&v, sizes[k]);
        CHECK_INT(v.n, sizes[k]);
        CHECK_INT(v.n_merges, sizes[k] - 259); /* every merge made a new token */
        CHECK_STR(v.tok[0], "<|endoftext|>");
        CHECK_STR(v.tok[2], "<|im_end|>");
        CHECK(v.type[1] == TT_CONTROL && v.type[3] == TT_NORMAL);
        CHECK_STR(v.tok[BYTE_TOKEN + ' '], "\xc4\xa0"); /* U+0120 */
        CHECK_STR(v.tok[BYTE_TOKEN + '\n'], "\xc4\x8a");
        CHECK_STR(v.tok[BYTE_TOKEN + 'a'], "a");
        CHECK_STR(v.tok[BYTE_TOKEN + 0xad], "\xc5\x83"); /* soft hyphen: U+0143 */
        bool unique = true, parts = true;
        for (size_t i = 0; i < v.n; i++)
            unique &= v.slots[vocab_slot(&v, v.tok[i])] == i + 1;
        for (size_t m = 0; m < v.n_merges; m++) {
            char *sp = strchr(v.merges[m], ' ');
            parts &= sp && sp != v.merges[m] && !strchr(sp + 1, ' ');
            if (!sp)
                continue;
            char *a = xstrndup(v.merges[m], (size_t)(sp - v.merges[m]));
            char *joined = xasprintf("%s%s", a, sp + 1);
            parts &= vocab_has(&v, a) && vocab_has(&v, sp + 1) && vocab_has(&v, joined);
            free(a);
            free(joined);
        }
        CHECK(unique);
        CHECK(parts);
        /* The corpus gives GPT-2-like first merges. */
        CHECK_STR(v.merges[0], "\xc4\xa0 t");
        vocab_release(&v);
    }
}

TEST(plan_has_each_preset_shape)
{
    struct synth_opts o = {synth_preset_find("smollm2-135m"), 3, 1};
    struct spec *s;
    size_t n = plan(&o, &s);
    CHECK_INT(n, 2 + 30 * 9);
    CHECK_STR(s[0].name, "token_embd.weight");
    CHECK(s[0].type == 8 && s[0].ne[0] == 576 && s[0].ne[1] == 49152); /* Q8_0 embedding */
    const struct spec *k = NULL, *down = NULL;
    uint64_t params = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s[i].name, "blk.29.attn_k.weight") == 0)
            k = &s[i];
        if (strcmp(s[i].name, "blk.0.ffn_down.weight") == 0)
            down = &s[i];
        CHECK(strcmp(s[i].name, "output.weight") != 0); /* tied */
        params += s[i].ne[0] * s[i].ne[1];
    }
    CHECK(k && k->ne[0] == 576 && k->ne[1] == 192 && k->type == 3);
    CHECK(down && down->ne[0] == 1536 && down->ne[1] == 576);
    CHECK_INT(params, 134515008); /* the real file's element count */
    CHECK_STR(s[n - 1].name, "output_norm.weight");
    CHECK(s[n - 1].type == 0 && s[n - 1].kind == K_NORM);
    free(s);

    o.preset = synth_preset_find("llama-1b");
    o.type = 40;
    n = plan(&o, &s);
    CHECK_INT(n, 2 + 16 * (9 + 7)); /* an NVFP4 scale after each of the 7 matrices */
    CHECK_STR(s[3].name, "blk.0.attn_q.scale");
    CHECK(s[3].kind == K_SCALE && s[3].weight == &s[2] && s[3].ne[0] == 1);
    free(s);
    CHECK(synth_preset_find("tiny") && synth_preset_find("huge") == NULL);
}

TEST(values_follow_the_stated_distribution)
{
    struct spec s = {.kind = K_WEIGHT, .ne = {4096, 16}, .seed = 7};
    uint64_t rng = s.seed, n = s.ne[0] * s.ne[1];
    float *x = xmalloc(n * sizeof(float));
    gen_values(&s, &rng, x, n);
    double sum = 0, sq = 0, amax = 0;
    for (uint64_t i = 0; i < n; i++) {
        sum += x[i];
        sq += (double)x[i] * x[i];
        amax = fabs(x[i]) > amax ? fabs(x[i]) : amax;
    }
    double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
    CHECK_NEAR(mean, 0.0, 0.0005);
    CHECK_NEAR(sd, 0.02, 0.0005);
    CHECK(amax <= 0.02 * 3.47 && amax > 0.02 * 2.5);
    s.kind = K_NORM;
    rng = s.seed;
    gen_values(&s, &rng, x, 1000);
    CHECK_NEAR(x[0], 1.0, 0.07);
    free(x);
}

TEST(same_options_give_identical_files_and_the_reader_agrees)
{
    char *a = tmp_path("a"), *b = tmp_path("b"), *c = tmp_path("c");
    struct synth_opts o = {synth_preset_find("tiny"), 1, 42};
    struct err e;
    err_init(&e);
    CHECK_INT(synth_write(&o, a, &e), 0);
    CHECK_INT(synth_write(&o, b, &e), 0);
    o.seed = 43;
    CHECK_INT(synth_write(&o, c, &e), 0);
    struct buf x, y, z;
    CHECK(read_all(a, &x) && read_all(b, &y) && read_all(c, &z));
    CHECK(x.len == y.len && memcmp(x.data, y.data, x.len) == 0);
    CHECK(x.len == z.len && memcmp(x.data, z.data, x.len) != 0);

    struct gguf_file f;
    CHECK_INT(gguf_open(a, &f, &e), 0);
    uint64_t u;
    double d;
    struct gguf_str s;
    CHECK(gguf_get_u64(&f, "llama.block_count", &u) == 0 && u == 2);
    CHECK(gguf_get_u64(&f, "llama.attention.head_count_kv", &u) == 0 && u == 2);
    CHECK(gguf_get_u64(&f, "llama.vocab_size", &u) == 0 && u == 512);
    CHECK(gguf_get_f64(&f, "llama.rope.freq_base", &d) == 0 && d == 10000.0);
    CHECK(gguf_get_str(&f, "tokenizer.ggml.pre", &s) == 0 && gguf_str_eq(s, "smollm"));
    CHECK(gguf_get_u64(&f, "tokenizer.ggml.bos_token_id", &u) == 0 && u == 1);
    const struct gguf_tensor *t = gguf_find_tensor(&f, "blk.1.ffn_down.weight");
    CHECK(t && t->type == 1 && t->ne[0] == 128 && t->ne[1] == 64);
    t = gguf_find_tensor(&f, "output_norm.weight");
    float g;
    CHECK(t && t->type == 0);
    if (t) {
        memcpy(&g, t->data, 4);
        CHECK_NEAR(g, 1.0, 0.07);
    }
    CHECK(gguf_find_tensor(&f, "output.weight") == NULL);
    gguf_close(&f);
    o.type = Q_Q4_K; /* 256-element blocks do not divide 64 */
    err_init(&e);
    CHECK_INT(synth_write(&o, c, &e), -1);
    CHECK_INT(e.code, FP_ERR_UNSUPPORTED);
    CHECK_STR(e.msg, "synth: q4_k blocks of 256 do not divide the tiny preset's width 64");
    o.type = Q_Q8_1; /* an activation type */
    err_init(&e);
    CHECK_INT(synth_write(&o, c, &e), -1);
    CHECK_INT(e.code, FP_ERR_UNSUPPORTED);
    buf_release(&x);
    buf_release(&y);
    buf_release(&z);
    unlink(a);
    unlink(b);
    unlink(c);
    free(a);
    free(b);
    free(c);
}

/*
 * For each weight type: the file's weights dequantize (times the NVFP4
 * ".scale" tensor) back to the generated values within that type's
 * quantization error, the embedding is Q8_0 for quantized types, and the
 * NVFP4 scale is the tensor's amax / (6 * 448).
 */
TEST(quantized_files_hold_the_generated_weights)
{
    const struct {
        uint32_t type;
        double max_rms; /* of the error, relative to sigma */
    } cases[] = {{Q_F16, 0.0005}, {Q_Q8_0, 0.01}, {Q_Q4_1, 0.12}, {Q_MXFP4, 0.2}, {Q_NVFP4, 0.15}};
    char *path = tmp_path("q");
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct synth_opts o = {synth_preset_find("tiny"), cases[c].type, 5};
        struct err e;
        err_init(&e);
        CHECK_INT(synth_write(&o, path, &e), 0);
        struct gguf_file f;
        CHECK_INT(gguf_open(path, &f, &e), 0);
        struct spec *s;
        size_t n = plan(&o, &s);
        CHECK_INT(f.n_tensors, n);
        const struct gguf_tensor *emb = gguf_find_tensor(&f, "token_embd.weight");
        CHECK(emb && emb->type == (cases[c].type == Q_F16 ? Q_F16 : Q_Q8_0));
        const struct gguf_tensor *t = gguf_find_tensor(&f, "blk.1.ffn_down.weight");
        const struct gguf_tensor *sc = gguf_find_tensor(&f, "blk.1.ffn_down.scale");
        CHECK(t && t->type == cases[c].type);
        CHECK((sc != NULL) == (cases[c].type == Q_NVFP4));
        const struct spec *sp = NULL;
        for (size_t i = 0; i < n; i++)
            if (strcmp(s[i].name, "blk.1.ffn_down.weight") == 0)
                sp = &s[i];
        if (t && sp) {
            uint64_t rng = sp->seed, cnt = t->ne[0] * t->ne[1];
            float *want = xmalloc(cnt * sizeof(float)), *got = xmalloc(cnt * sizeof(float));
            gen_values(sp, &rng, want, cnt);
            float s2 = 1.0f;
            if (sc) {
                memcpy(&s2, sc->data, 4);
                CHECK_NEAR(s2, q_nvfp4_tensor_scale(want, (int64_t)cnt), 1e-9);
                CHECK(sc->type == Q_F32 && sc->n_dims == 1 && sc->ne[0] == 1);
            }
            size_t rb = q_row_bytes(t->type, (int64_t)t->ne[0]);
            double err2 = 0;
            for (uint64_t r = 0; r < t->ne[1]; r++)
                q_dequant_row(t->type, (const uint8_t *)t->data + r * rb, got + r * t->ne[0],
                              (int64_t)t->ne[0]);
            for (uint64_t i = 0; i < cnt; i++)
                err2 += (got[i] * s2 - want[i]) * (got[i] * s2 - want[i]);
            double rms = sqrt(err2 / (double)cnt) / SIGMA;
            CHECK_MSG(rms < cases[c].max_rms && rms > cases[c].max_rms / 100,
                      "%s: rms error %.4f sigma", gguf_type_name(cases[c].type), rms);
            free(want);
            free(got);
        }
        free(s);
        gguf_close(&f);
    }
    unlink(path);
    free(path);
}

TEST_MAIN()
