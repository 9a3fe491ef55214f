/*
 * Unit tests for engine/model/quantize (`fp4serve quantize`) on the synthetic
 * tiny model written at test time: offline == requantized at load (logits
 * bit for bit, MXFP4 and NVFP4, default and --head same), the output's
 * tensor types, names, NVFP4 scale tensors and metadata, the file-level
 * quantize -> dequantize -> quantize round trip, NVFP4 input scales folded
 * in, weights kept for their shape, and the refusals.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "fp4.h"
#include "test.h"
#include "testtmp.h"
#include "xalloc.h"

#include "format/gguf.h"
#include "format/quant.h"
#include "format/synth.h"
#include "model/model.h"
#include "model/quantize.h"

/* The tiny synthetic model (f16 weights, tied head), written once. */
static const char *tiny_model(void)
{
    static char *path;
    if (!path) {
        path = test_tmp_path("tiny.gguf");
        struct err err;
        err_init(&err);
        struct synth_opts o = {synth_preset_find("tiny"), Q_F16, 1};
        if (synth_write(&o, path, &err) != 0) {
            fprintf(stderr, "synth: %s\n", err.msg);
            abort();
        }
    }
    return path;
}

static int quantize(const char *in, const char *out, uint32_t type, bool head_same, bool search,
                    struct qz_stats *st)
{
    struct err err;
    err_init(&err);
    struct qz_opts o = {.type = type, .head_same = head_same, .mxfp4_search = search, .threads = 2};
    int rc = qz_quantize_file(in, out, &o, st, &err);
    if (rc != 0)
        fprintf(stderr, "quantize: %s\n", err.msg);
    return rc;
}

static struct model *load(const char *path, const char *quant, const char *head)
{
    struct err err;
    err_init(&err);
    struct model_opts o = {.threads = 2, .max_batch = 1, .ctx = 64, .max_logit_rows = 64};
    if (model_opts_parse(&o, quant, head, NULL, NULL, &err) != 0)
        return NULL;
    struct model *m = model_new(path, &o, &err);
    if (!m)
        fprintf(stderr, "load %s: %s\n", path, err.msg);
    return m;
}

/* Logits of every position of three prompts, concatenated (caller frees). */
static float *logits_of(struct model *m, size_t *n_out)
{
    static const int32_t prompts[3][12] = {
        {119, 260, 304, 108, 314, 304, 292, 322, 100, 353, 261, 272},
        {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
        {511, 3, 400, 42, 42, 42, 17, 250, 128, 64, 32, 1},
    };
    int V = m->cfg.n_vocab;
    float *all = xmalloc(sizeof(float) * 3 * 12 * (size_t)V);
    struct err err;
    err_init(&err);
    for (int p = 0; p < 3; p++) {
        model_slot_free(m, 0);
        struct model_seq s = {0, 0, 12, prompts[p], MODEL_LOGITS_ALL, NULL};
        if (model_step(m, &s, 1, &err) != 0) {
            fprintf(stderr, "step: %s\n", err.msg);
            abort();
        }
        memcpy(all + (size_t)p * 12 * V, s.out, sizeof(float) * 12 * (size_t)V);
    }
    *n_out = 3 * 12 * (size_t)V;
    return all;
}

/* Offline file and load-time requantization give the same logits bit for bit. */
static void check_same_logits(const char *file, const char *quant, const char *head)
{
    struct model *a = load(file, NULL, NULL);
    struct model *b = load(tiny_model(), quant, head);
    CHECK(a && b);
    if (!a || !b)
        goto out;
    size_t na, nb;
    float *la = logits_of(a, &na), *lb = logits_of(b, &nb);
    CHECK_INT(na, nb);
    CHECK_MSG(memcmp(la, lb, na * sizeof(float)) == 0, "%s (head %s): logits differ", quant,
              head ? head : "q8_0");
    /* and the weights really are requantized: not the f16 model's logits */
    struct model *native = load(tiny_model(), NULL, NULL);
    size_t nn;
    float *ln = logits_of(native, &nn);
    CHECK(memcmp(la, ln, na * sizeof(float)) != 0);
    free(ln);
    model_free(native);
    free(la);
    free(lb);
out:
    model_free(a);
    model_free(b);
}

TEST(offline_equals_load_time_bit_for_bit)
{
    static const char *const types[] = {"mxfp4", "nvfp4"};
    for (int i = 0; i < 2; i++) {
        uint32_t t = (uint32_t)q_type_from_name(types[i]);
        char *out = test_tmp_path(types[i]);
        char *out_same = xasprintf("%s-same", out);
        CHECK_INT(quantize(tiny_model(), out, t, false, false, NULL), 0);
        check_same_logits(out, types[i], NULL);
        CHECK_INT(quantize(tiny_model(), out_same, t, true, false, NULL), 0);
        check_same_logits(out_same, types[i], "same");
        free(out);
        free(out_same);
    }
}

/* The output's tensors: linear weights in the target type, token_embd Q8_0,
 * norms F32 and unchanged, NVFP4 scales named like llama.cpp's and equal to
 * the whole-matrix amax / (6 * 448) of the source. */
TEST(tensor_types_scales_and_metadata)
{
    char *out = test_tmp_path("nv-struct.gguf");
    struct qz_stats st;
    CHECK_INT(quantize(tiny_model(), out, Q_NVFP4, false, false, &st), 0);
    CHECK_INT(st.n_requant, 15); /* 14 linear + token_embd f16 -> q8_0 */
    CHECK_INT(st.n_scales, 14);
    CHECK_INT(st.n_tensors, 20 + 14);
    CHECK_INT(st.file_type, 39);
    struct gguf_file in, f;
    struct err err;
    err_init(&err);
    CHECK_INT(gguf_open(tiny_model(), &in, &err), 0);
    CHECK_INT(gguf_open(out, &f, &err), 0);
    CHECK_INT(f.n_tensors, 34);
    uint64_t ft = 0;
    CHECK_INT(gguf_get_u64(&f, "general.file_type", &ft), 0);
    CHECK_INT(ft, 39);
    /* every other key is copied: same count, same architecture and tokens */
    CHECK_INT(f.n_kv, in.n_kv + (gguf_find_kv(&in, "general.file_type") ? 0 : 1));
    const struct gguf_kv *tk = gguf_find_kv(&f, "tokenizer.ggml.tokens");
    CHECK(tk && tk->arr_n == 512);
    for (size_t i = 0; i < in.n_tensors; i++) {
        const struct gguf_tensor *a = &in.tensors[i], *b = gguf_find_tensor(&f, a->name);
        CHECK_MSG(b != NULL, "tensor '%s' missing", a->name);
        if (!b)
            continue;
        CHECK(b->ne[0] == a->ne[0] && b->ne[1] == a->ne[1] && b->n_dims == a->n_dims);
        if (a->n_dims == 1) {
            CHECK_INT(b->type, Q_F32);
            CHECK(b->nbytes == a->nbytes && memcmp(a->data, b->data, a->nbytes) == 0);
            continue;
        }
        if (strcmp(a->name, "token_embd.weight") == 0) {
            CHECK_INT(b->type, Q_Q8_0);
            continue;
        }
        CHECK_MSG(b->type == Q_NVFP4, "'%s' is type %u", a->name, b->type);
        /* blk.N.attn_q.weight -> blk.N.attn_q.scale, F32 [1] */
        char sname[GGUF_MAX_NAME];
        snprintf(sname, sizeof(sname), "%.*s.scale", (int)(strlen(a->name) - 7), a->name);
        const struct gguf_tensor *s = gguf_find_tensor(&f, sname);
        CHECK_MSG(s && s->type == Q_F32 && s->n_dims == 1 && s->ne[0] == 1, "'%s'", sname);
        if (!s)
            continue;
        int64_t n = (int64_t)(a->ne[0] * a->ne[1]);
        float *x = xmalloc(sizeof(float) * (size_t)n), want, got;
        q_dequant_row(a->type, a->data, x, n);
        want = q_nvfp4_tensor_scale(x, n);
        memcpy(&got, s->data, 4);
        CHECK_MSG(got == want && got > 0, "'%s' = %g, want %g", sname, got, want);
        free(x);
    }
    gguf_close(&in);
    gguf_close(&f);
    free(out);
}

static bool files_equal(const char *a, const char *b)
{
    struct buf x, y;
    struct err err;
    err_init(&err);
    buf_init(&x, (size_t)1 << 30);
    buf_init(&y, (size_t)1 << 30);
    bool eq = file_read_all(a, &x, &err, 1) == 0 && file_read_all(b, &y, &err, 1) == 0 &&
              x.len == y.len && memcmp(x.data, y.data, x.len) == 0;
    buf_release(&x);
    buf_release(&y);
    return eq;
}

/* quantize -> dequantize (to f32) -> quantize gives the same file, byte for byte. */
TEST(round_trip_is_stable_at_file_level)
{
    static const struct {
        const char *name;
        uint32_t type;
        bool search, head_same;
    } cases[] = {
        {"mx", Q_MXFP4, false, false},
        {"nv", Q_NVFP4, false, false},
        {"mxs", Q_MXFP4, true, false},
        {"nvh", Q_NVFP4, false, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *q1 = test_tmp_path(cases[i].name), *deq = xasprintf("%s.f32", q1),
             *q2 = xasprintf("%s.again", q1);
        struct qz_stats st;
        CHECK_INT(
            quantize(tiny_model(), q1, cases[i].type, cases[i].head_same, cases[i].search, NULL),
            0);
        CHECK_INT(quantize(q1, deq, Q_F32, cases[i].head_same, false, &st), 0);
        CHECK_INT(st.n_scales, 0);
        CHECK_INT(st.file_type, 0);
        CHECK_INT(quantize(deq, q2, cases[i].type, cases[i].head_same, cases[i].search, NULL), 0);
        CHECK_MSG(files_equal(q1, q2), "case %s: round trip changed the file", cases[i].name);
        CHECK(!files_equal(q1, deq));
        free(q1);
        free(deq);
        free(q2);
    }
}

/* An NVFP4 input: its scales are folded into the values and dropped when
 * the weights move to another type; requantizing at load does the same. */
TEST(nvfp4_input_scales_folded_in)
{
    char *nv = test_tmp_path("in-nv.gguf"), *mx = test_tmp_path("nv-to-mx.gguf");
    CHECK_INT(quantize(tiny_model(), nv, Q_NVFP4, false, false, NULL), 0);
    struct qz_stats st;
    CHECK_INT(quantize(nv, mx, Q_MXFP4, false, false, &st), 0);
    CHECK_INT(st.n_requant, 14);
    CHECK_INT(st.n_kept, 1); /* token_embd is Q8_0 already */
    CHECK_INT(st.n_tensors, 20);
    struct gguf_file f;
    struct err err;
    err_init(&err);
    CHECK_INT(gguf_open(mx, &f, &err), 0);
    for (size_t i = 0; i < f.n_tensors; i++)
        CHECK_MSG(!strstr(f.tensors[i].name, ".scale"), "'%s' left", f.tensors[i].name);
    gguf_close(&f);
    struct model *a = load(mx, NULL, NULL), *b = load(nv, "mxfp4", NULL);
    CHECK(a && b);
    if (a && b) {
        size_t na, nb;
        float *la = logits_of(a, &na), *lb = logits_of(b, &nb);
        CHECK(na == nb && memcmp(la, lb, na * sizeof(float)) == 0);
        free(la);
        free(lb);
    }
    model_free(a);
    model_free(b);
    free(nv);
    free(mx);
}

/* A hand-made file: a 2-D weight whose columns are not a multiple of 64
 * stays as it is for NVFP4 (and is named), one that fits is converted, a
 * 3-D expert tensor is converted expert by expert (one NVFP4 scale per
 * expert), a MoE router stays, and other tensors (1-D, non-weights) are
 * copied byte for byte. */
TEST(odd_shapes_kept_and_others_copied)
{
    char *in = test_tmp_path("odd.gguf"), *out = test_tmp_path("odd-nv.gguf");
    gguf_writer *w = gguf_writer_new(32);
    gguf_w_str(w, "general.architecture", "llama");
    float a[96 * 4], b[64 * 4], c[8], d[64 * 2 * 2];
    for (size_t i = 0; i < sizeof(a) / 4; i++)
        a[i] = (float)i / 100.0f - 1.0f;
    for (size_t i = 0; i < sizeof(b) / 4; i++)
        b[i] = sinf((float)i);
    for (size_t i = 0; i < sizeof(c) / 4; i++)
        c[i] = (float)i;
    for (size_t i = 0; i < sizeof(d) / 4; i++)
        d[i] = cosf((float)i);
    gguf_w_tensor(w, "blk.0.attn_q.weight", 2, (uint64_t[]){96, 4}, Q_F32, a, sizeof(a));
    gguf_w_tensor(w, "blk.0.attn_k.weight", 2, (uint64_t[]){64, 4}, Q_F32, b, sizeof(b));
    gguf_w_tensor(w, "blk.0.attn_norm.weight", 1, (uint64_t[]){8}, Q_F32, c, sizeof(c));
    gguf_w_tensor(w, "blk.0.exps.weight", 3, (uint64_t[]){64, 2, 2}, Q_F32, d, sizeof(d));
    gguf_w_tensor(w, "blk.0.ffn_gate_inp.weight", 2, (uint64_t[]){64, 4}, Q_F32, b, sizeof(b));
    struct err err;
    err_init(&err);
    CHECK_INT(gguf_writer_save(w, in, &err), 0);
    gguf_writer_free(w);
    struct qz_stats st;
    CHECK_INT(quantize(in, out, Q_NVFP4, false, false, &st), 0);
    CHECK_STR(st.kept_first, "blk.0.attn_q.weight");
    CHECK_INT(st.n_requant, 2);
    CHECK_INT(st.n_kept, 2); /* attn_q (shape) and the router */
    struct gguf_file f;
    CHECK_INT(gguf_open(out, &f, &err), 0);
    const struct gguf_tensor *t = gguf_find_tensor(&f, "blk.0.attn_q.weight");
    CHECK(t && t->type == Q_F32 && memcmp(t->data, a, sizeof(a)) == 0);
    t = gguf_find_tensor(&f, "blk.0.attn_k.weight");
    CHECK(t && t->type == Q_NVFP4);
    CHECK(gguf_find_tensor(&f, "blk.0.attn_k.scale") != NULL);
    CHECK(gguf_find_tensor(&f, "blk.0.attn_q.scale") == NULL);
    t = gguf_find_tensor(&f, "blk.0.exps.weight");
    CHECK(t && t->type == Q_NVFP4 && t->n_dims == 3 && t->ne[2] == 2);
    t = gguf_find_tensor(&f, "blk.0.exps.scale");
    CHECK(t && t->type == Q_F32 && t->n_dims == 1 && t->ne[0] == 2);
    /* each expert's values survive within NVFP4's error, with its own scale */
    if (t) {
        float sc[2];
        memcpy(sc, t->data, sizeof(sc));
        CHECK(sc[0] > 0 && sc[1] > 0);
        const struct gguf_tensor *x = gguf_find_tensor(&f, "blk.0.exps.weight");
        float back[64];
        for (int e = 0; e < 2; e++) {
            /* row 0 of expert e */
            size_t off = (size_t)e * 2 * q_row_bytes(Q_NVFP4, 64);
            q_dequant_row(Q_NVFP4, (const uint8_t *)x->data + off, back, 64);
            for (int i = 0; i < 64; i++)
                CHECK_NEAR(back[i] * sc[e], d[e * 128 + i], 0.17); /* half the 2/3..1 gap */
        }
    }
    t = gguf_find_tensor(&f, "blk.0.ffn_gate_inp.weight");
    CHECK(t && t->type == Q_F32 && memcmp(t->data, b, sizeof(b)) == 0);
    t = gguf_find_tensor(&f, "blk.0.attn_norm.weight");
    CHECK(t && memcmp(t->data, c, sizeof(c)) == 0);
    gguf_close(&f);
    free(in);
    free(out);
}

TEST(refusals)
{
    struct err err;
    err_init(&err);
    struct qz_opts o = {.type = Q_MXFP4, .threads = 1};
    CHECK_INT(qz_quantize_file(tiny_model(), tiny_model(), &o, NULL, &err), -1);
    CHECK_INT(err.code, FP_ERR_USAGE);
    CHECK(strstr(err.msg, "would overwrite the input") != NULL);
    err_init(&err);
    char *missing = test_tmp_path("no-such.gguf"), *out = test_tmp_path("x.gguf");
    CHECK_INT(qz_quantize_file(missing, out, &o, NULL, &err), -1);
    CHECK_INT(err.code, FP_ERR_IO);
    err_init(&err);
    char *bad_dir = test_tmp_path("no/such/dir/x.gguf");
    CHECK_INT(qz_quantize_file(tiny_model(), bad_dir, &o, NULL, &err), -1);
    CHECK_INT(err.code, FP_ERR_IO);
    err_init(&err);
    o.type = Q_Q4_K; /* not a --type target */
    CHECK_INT(qz_quantize_file(tiny_model(), out, &o, NULL, &err), -1);
    CHECK_INT(err.code, FP_ERR_USAGE);
    CHECK(access(out, F_OK) != 0);
    /* a corrupt input: the header of the tiny model cut short */
    err_init(&err);
    char *cut = test_tmp_path("cut.gguf");
    struct buf b;
    buf_init(&b, (size_t)1 << 26);
    CHECK_INT(file_read_all(tiny_model(), &b, &err, 1), 0);
    CHECK_INT(file_write_atomic(cut, b.data, 200, &err, 1), 0);
    buf_release(&b);
    o.type = Q_NVFP4;
    CHECK_INT(qz_quantize_file(cut, out, &o, NULL, &err), -1);
    CHECK_INT(err.code, FP_ERR_FORMAT);
    CHECK(access(out, F_OK) != 0);
    /* the type table */
    CHECK(qz_type_find("mxfp4") && qz_type_find("mxfp4")->llama_ftype == 38);
    CHECK(qz_type_find("nvfp4") && qz_type_find("nvfp4")->llama_ftype == 39);
    CHECK(qz_type_find("q4_k") == NULL);
    free(missing);
    free(out);
    free(bad_dir);
    free(cut);
}

TEST_MAIN()
