/*
 * model: loads a llama GGUF into model_config / model_weights, requantizes
 * the linear weights when asked (--quant), validates steps and hands them
 * to the backend. The forward pass itself is in engine/model/backend_cpu.c.
 */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"
#include "log.h"
#include "xalloc.h"

#include "model/backend.h"
#include "model/threadpool.h"

#include "cpu/matmul.h"

/* Sanity bounds on hyperparameters: beyond these a file is corrupt, not big. */
#define MAX_EMBD   65536
#define MAX_LAYERS 1024
#define MAX_HEADS  1024
#define MAX_FF     1048576
#define MAX_VOCAB  4194304

static int get_int(const struct gguf_file *f, const char *key, int def, bool required, int *out,
                   struct err *err)
{
    uint64_t v;
    if (gguf_get_u64(f, key, &v) != 0) {
        if (required || gguf_find_kv(f, key))
            return err_set(err, FP_ERR_FORMAT, "metadata '%s' is %s", key,
                           gguf_find_kv(f, key) ? "not an unsigned integer" : "missing"),
                   -1;
        *out = def;
        return 0;
    }
    if (v > 0x7fffffff)
        return err_set(err, FP_ERR_FORMAT, "metadata '%s' = %llu is out of range", key,
                       (unsigned long long)v),
               -1;
    *out = (int)v;
    return 0;
}

static int get_float(const struct gguf_file *f, const char *key, float def, float *out,
                     struct err *err)
{
    double v;
    if (gguf_get_f64(f, key, &v) != 0) {
        if (gguf_find_kv(f, key))
            return err_set(err, FP_ERR_FORMAT, "metadata '%s' is not a number", key), -1;
        *out = def;
        return 0;
    }
    if (!isfinite(v) || v <= 0)
        return err_set(err, FP_ERR_FORMAT, "metadata '%s' = %g must be positive", key, v), -1;
    *out = (float)v;
    return 0;
}

/* A range check that names the key. */
static int check_range(int v, int lo, int hi, const char *what, struct err *err)
{
    if (v < lo || v > hi)
        return err_set(err, FP_ERR_FORMAT, "metadata '%s' = %d is outside [%d, %d]", what, v, lo,
                       hi),
               -1;
    return 0;
}

/* The architectures by their general.architecture names. */
static const struct {
    const char *name;
    enum model_arch arch;
    bool qk_norm, rope_neox, moe, oai;
} archs[] = {
    {"llama", ARCH_LLAMA, false, false, false, false},
    {"qwen3", ARCH_QWEN3, true, true, false, false},
    {"qwen3moe", ARCH_QWEN3MOE, true, true, true, false},
    {"gpt-oss", ARCH_GPT_OSS, false, true, true, true},
};

const char *model_arch_name(enum model_arch a)
{
    for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
        if (archs[i].arch == a)
            return archs[i].name;
    return "?";
}

/* RoPE scaling: none, or YaRN with llama.cpp's defaults (ext_factor 1,
 * beta_fast 32, beta_slow 1, and the cos/sin magnitude 1 + 0.1 ln(factor),
 * computed in float in the order llama.cpp and ggml compute it). */
static int read_rope_scaling(const struct gguf_file *f, const char *arch, struct model_config *c,
                             struct err *err)
{
    char key[96];
#define KS(x) (snprintf(key, sizeof(key), "%s.rope.scaling.%s", arch, x), key)
    c->rope_freq_scale = 1.0f;
    c->yarn_ext_factor = 0.0f;
    c->yarn_mscale = 1.0f;
    c->yarn_beta_fast = 32.0f;
    c->yarn_beta_slow = 1.0f;
    c->n_ctx_orig = c->n_ctx_train;
    struct gguf_str scaling;
    if (gguf_get_str(f, KS("type"), &scaling) != 0 || gguf_str_eq(scaling, "none"))
        return 0;
    if (!gguf_str_eq(scaling, "yarn"))
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "rope scaling '%.*s' is not supported (none or yarn)",
                       (int)(scaling.len > 32 ? 32 : scaling.len), scaling.p),
               -1;
    float factor = 1.0f, attn_factor = 1.0f;
    if (get_float(f, KS("factor"), 1.0f, &factor, err) ||
        get_float(f, KS("attn_factor"), 1.0f, &attn_factor, err) ||
        get_int(f, KS("original_context_length"), c->n_ctx_train, false, &c->n_ctx_orig, err) ||
        check_range(c->n_ctx_orig, 1, 1 << 24, KS("original_context_length"), err))
        return -1;
    if (gguf_find_kv(f, KS("yarn_log_multiplier")))
        return err_set(err, FP_ERR_UNSUPPORTED, "metadata '%s' is not supported", key), -1;
#undef KS
    c->rope_freq_scale = 1.0f / factor;
    c->yarn_ext_factor = 1.0f;
    float fac = 1.0f / c->rope_freq_scale;
    float af = fac <= 1.0f ? 1.0f : 0.1f * logf(fac) + 1.0f;
    af *= 1.0f / (1.0f + 0.1f * logf(fac));
    af *= attn_factor;
    c->yarn_mscale = af * (1.0f + 0.1f * logf(1.0f / c->rope_freq_scale));
    return 0;
}

int model_read_config(const struct gguf_file *f, struct model_config *c, struct err *err)
{
    struct gguf_str arch;
    memset(c, 0, sizeof(*c));
    if (gguf_get_str(f, "general.architecture", &arch) != 0)
        return err_set(err, FP_ERR_FORMAT, "metadata 'general.architecture' is missing"), -1;
    size_t ai = 0, n_archs = sizeof(archs) / sizeof(archs[0]);
    while (ai < n_archs && !gguf_str_eq(arch, archs[ai].name))
        ai++;
    if (ai == n_archs)
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "architecture '%.*s' is not supported (this engine runs llama, qwen3, "
                       "qwen3moe and gpt-oss)",
                       (int)(arch.len > 64 ? 64 : arch.len), arch.p),
               -1;
    c->arch = archs[ai].arch;
    c->qk_norm = archs[ai].qk_norm;
    c->rope_neox = archs[ai].rope_neox;
    /* Every hyperparameter key is "<architecture>.<name>"; K(name) spells it
     * (two buffers, so a message can name two keys). */
    char kb[2][96];
    int kn = 0;
#define K(x) (snprintf(kb[kn ^= 1], sizeof(kb[0]), "%s.%s", archs[ai].name, x), kb[kn])
    int key_len, val_len;
    if (get_int(f, K("embedding_length"), 0, true, &c->n_embd, err) ||
        check_range(c->n_embd, 1, MAX_EMBD, K("embedding_length"), err) ||
        get_int(f, K("block_count"), 0, true, &c->n_layer, err) ||
        check_range(c->n_layer, 1, MAX_LAYERS, K("block_count"), err) ||
        get_int(f, K("feed_forward_length"), 0, !archs[ai].moe, &c->n_ff, err) ||
        check_range(c->n_ff, archs[ai].moe ? 0 : 1, MAX_FF, K("feed_forward_length"), err) ||
        get_int(f, K("attention.head_count"), 0, true, &c->n_head, err) ||
        check_range(c->n_head, 1, MAX_HEADS, K("attention.head_count"), err))
        return -1;
    if (get_int(f, K("attention.head_count_kv"), c->n_head, false, &c->n_head_kv, err) ||
        check_range(c->n_head_kv, 1, c->n_head, K("attention.head_count_kv"), err))
        return -1;
    if (c->n_head % c->n_head_kv != 0)
        return err_set(err, FP_ERR_FORMAT,
                       "metadata: head_count %d is not a multiple of head_count_kv %d", c->n_head,
                       c->n_head_kv),
               -1;
    if (c->n_embd % c->n_head != 0 && !gguf_find_kv(f, K("attention.key_length")))
        return err_set(err, FP_ERR_FORMAT,
                       "metadata: embedding_length %d is not a multiple of head_count %d",
                       c->n_embd, c->n_head),
               -1;
    int hd = c->n_embd / c->n_head;
    if (get_int(f, K("attention.key_length"), hd, false, &key_len, err) ||
        get_int(f, K("attention.value_length"), key_len, false, &val_len, err))
        return -1;
    if (key_len != val_len)
        return err_set(err, FP_ERR_UNSUPPORTED, "key_length %d != value_length %d is not supported",
                       key_len, val_len),
               -1;
    if (check_range(key_len, 2, 1024, K("attention.key_length"), err))
        return -1;
    if (key_len % 2 != 0)
        return err_set(err, FP_ERR_FORMAT, "metadata: head dimension %d is odd", key_len), -1;
    c->head_dim = key_len;
    c->q_dim = c->n_head * c->head_dim;
    c->kv_dim = c->n_head_kv * c->head_dim;
    if (get_int(f, K("context_length"), 2048, false, &c->n_ctx_train, err) ||
        check_range(c->n_ctx_train, 1, 1 << 24, K("context_length"), err))
        return -1;
    if (get_int(f, K("rope.dimension_count"), c->head_dim, false, &c->n_rot, err) ||
        check_range(c->n_rot, 2, c->head_dim, K("rope.dimension_count"), err))
        return -1;
    if (c->n_rot % 2 != 0)
        return err_set(err, FP_ERR_FORMAT, "metadata: rope.dimension_count %d is odd", c->n_rot),
               -1;
    if (get_float(f, K("rope.freq_base"), 10000.0f, &c->rope_base, err) ||
        get_float(f, K("attention.layer_norm_rms_epsilon"), 1e-5f, &c->rms_eps, err))
        return -1;
    if (read_rope_scaling(f, archs[ai].name, c, err))
        return -1;
    c->oai = archs[ai].oai;
    if (c->oai && c->n_rot != c->head_dim) /* llama.cpp scales its scores by 1/sqrt(n_rot) */
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "metadata '%s' = %d: partial rotary heads are not supported",
                       K("rope.dimension_count"), c->n_rot),
               -1;
    if (c->oai) {
        float base_swa = c->rope_base;
        if (get_int(f, K("attention.sliding_window"), 0, true, &c->n_swa, err) ||
            check_range(c->n_swa, 1, 1 << 24, K("attention.sliding_window"), err) ||
            get_int(f, K("attention.sliding_window_pattern"), 2, false, &c->swa_every, err) ||
            check_range(c->swa_every, 0, MAX_LAYERS, K("attention.sliding_window_pattern"), err) ||
            get_float(f, K("rope.freq_base_swa"), c->rope_base, &base_swa, err))
            return -1;
        if (base_swa != c->rope_base)
            return err_set(err, FP_ERR_UNSUPPORTED,
                           "metadata '%s' = %g differs from rope.freq_base (not supported)",
                           K("rope.freq_base_swa"), base_swa),
                   -1;
    }
    if (archs[ai].moe) {
        if (get_int(f, K("expert_count"), 0, true, &c->n_expert, err) ||
            check_range(c->n_expert, 1, MODEL_MAX_EXPERTS, K("expert_count"), err) ||
            get_int(f, K("expert_used_count"), 0, true, &c->n_expert_used, err) ||
            check_range(c->n_expert_used, 1, c->n_expert, K("expert_used_count"), err) ||
            get_int(f, K("expert_feed_forward_length"), 0, true, &c->n_ff_exp, err) ||
            check_range(c->n_ff_exp, 1, MAX_FF, K("expert_feed_forward_length"), err))
            return -1;
        /* the widest FFN activation a step holds (per gathered row) */
        if (c->n_ff < c->n_ff_exp)
            c->n_ff = c->n_ff_exp;
    }
    /* Vocabulary: llama.vocab_size, else the tokenizer's list, else the embedding. */
    const struct gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    int vocab = 0;
    if (get_int(f, K("vocab_size"), 0, false, &vocab, err))
        return -1;
    const struct gguf_kv *toks = gguf_find_kv(f, "tokenizer.ggml.tokens");
    if (vocab == 0 && toks && toks->type == GGUF_T_ARR && toks->arr_n <= MAX_VOCAB)
        vocab = (int)toks->arr_n;
    if (vocab == 0 && emb && emb->ne[1] <= MAX_VOCAB)
        vocab = (int)emb->ne[1];
    if (check_range(vocab, 1, MAX_VOCAB, K("vocab_size"), err))
        return -1;
#undef K
    /* The tokenizer may have fewer tokens (an embedding padded past it),
     * never more: its ids would index past the embedding and the logits. */
    if (toks && toks->type == GGUF_T_ARR && toks->arr_n > (uint64_t)vocab)
        return err_set(err, FP_ERR_FORMAT,
                       "tokenizer.ggml.tokens has %llu tokens, more than the model's vocabulary "
                       "of %d",
                       (unsigned long long)toks->arr_n, vocab),
               -1;
    c->n_vocab = vocab;
    return 0;
}

/* ---- tensors ---- */

/* A weight tensor's type must have matmul kernels, and its rows must be
 * whole blocks of that type. */
static int check_weight_type(const struct gguf_tensor *t, const char *name, int64_t cols,
                             struct err *err)
{
    const struct q_type_info *qi = q_info(t->type);
    if (!qi || !qi->weights)
        return err_set(err, FP_ERR_UNSUPPORTED, "tensor '%s': type %s (%u) is not supported", name,
                       qi ? qi->name : "unknown", t->type),
               -1;
    if (cols % qi->block != 0)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s': %lld columns is not a multiple of %s's %u",
                       name, (long long)cols, qi->name, qi->block),
               -1;
    return 0;
}

/* Bind a 2-D weight tensor `name` of GGUF shape [cols, rows]. */
static int bind_matrix(const struct gguf_file *f, const char *name, int64_t cols, int64_t rows,
                       struct q_matrix *m, struct err *err)
{
    const struct gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s' is missing", name), -1;
    if (t->n_dims > 2 || t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s' has shape [%llu, %llu], want [%lld, %lld]",
                       name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                       (long long)cols, (long long)rows),
               -1;
    if (check_weight_type(t, name, cols, err) != 0)
        return -1;
    m->type = t->type;
    m->rows = rows;
    m->cols = cols;
    m->data = t->data;
    m->row_bytes = q_row_bytes(t->type, cols);
    m->scale = 1.0f;
    if (m->row_bytes * (uint64_t)rows > t->nbytes)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s' is shorter than its shape", name), -1;
    /* NVFP4 files keep the per-tensor scale in a separate F32 tensor. */
    char sname[GGUF_MAX_NAME + 8];
    size_t len = strlen(name);
    if (len > 7 && strcmp(name + len - 7, ".weight") == 0) {
        snprintf(sname, sizeof(sname), "%.*s.scale", (int)(len - 7), name);
        const struct gguf_tensor *s = gguf_find_tensor(f, sname);
        if (s) {
            if (s->type != Q_F32 || s->nbytes < 4)
                return err_set(err, FP_ERR_FORMAT, "tensor '%s' is not an F32 scalar", sname), -1;
            memcpy(&m->scale, s->data, 4);
            if (!isfinite(m->scale))
                return err_set(err, FP_ERR_FORMAT, "tensor '%s' is not finite", sname), -1;
        }
    }
    return 0;
}

/* Bind a vector of ne0 floats (ne1 = 0), or a [ne0, ne1] table of them
 * (gpt-oss's per-expert biases); F16/BF16 are converted into *owned_at. */
static int bind_vec(const struct gguf_file *f, const char *name, int ne0, int ne1,
                    const float **out, float **owned_at, struct err *err)
{
    const struct gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s' is missing", name), -1;
    if (t->n_dims != (ne1 ? 2u : 1u) || t->ne[0] != (uint64_t)ne0 ||
        (ne1 && t->ne[1] != (uint64_t)ne1))
        return err_set(err, FP_ERR_FORMAT, "tensor '%s' has shape [%llu, %llu], want [%d, %d]",
                       name, (unsigned long long)t->ne[0],
                       (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 1), ne0, ne1 ? ne1 : 1),
               -1;
    int n = ne0 * (ne1 ? ne1 : 1);
    if (t->type == Q_F32) {
        *out = t->data;
        return 0;
    }
    if (t->type != Q_F16 && t->type != Q_BF16)
        return err_set(err, FP_ERR_UNSUPPORTED,
                       "tensor '%s': norms and biases must be F32, F16 or BF16", name),
               -1;
    const uint16_t *h = t->data;
    float *dst = *owned_at;
    for (int i = 0; i < n; i++) {
        uint16_t v;
        memcpy(&v, h + i, 2);
        dst[i] = t->type == Q_F16 ? q_f16_to_f32(v) : q_bf16_to_f32(v);
    }
    *out = dst;
    *owned_at += n;
    return 0;
}

static int bind_norm(const struct gguf_file *f, const char *name, int n, const float **out,
                     float **owned_at, struct err *err)
{
    return bind_vec(f, name, n, 0, out, owned_at, err);
}

/* Tensors we recognise but do not run: refuse them rather than ignore them
 * (gpt-oss's biases are bound, the others' are not). */
static int refuse_extras(const struct gguf_file *f, bool biases, struct err *err)
{
    static const char *const suffixes[] = {"rope_freqs.weight", ".bias", NULL};
    for (size_t i = 0; i < f->n_tensors; i++) {
        const char *name = f->tensors[i].name;
        size_t len = strlen(name);
        for (int s = 0; suffixes[s] && (s == 0 || !biases); s++) {
            size_t sl = strlen(suffixes[s]);
            if (len >= sl && strcmp(name + len - sl, suffixes[s]) == 0)
                return err_set(err, FP_ERR_UNSUPPORTED,
                               "tensor '%s' is not supported (biases and rope scaling factors)",
                               name),
                       -1;
        }
    }
    return 0;
}

/* Bind the 3-D expert tensor `name` of GGUF shape [cols, rows, n_expert]
 * as n_expert matrices out[0..n_expert). NVFP4 files keep one F32 scale
 * per expert in "<base>.scale" ([n_expert]). */
static int bind_experts(const struct gguf_file *f, const char *name, int64_t cols, int64_t rows,
                        int n_expert, struct q_matrix *out, struct err *err)
{
    const struct gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s' is missing", name), -1;
    if (t->n_dims != 3 || t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows ||
        t->ne[2] != (uint64_t)n_expert)
        return err_set(err, FP_ERR_FORMAT,
                       "tensor '%s' has shape [%llu, %llu, %llu], want [%lld, %lld, %d]", name,
                       (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                       (unsigned long long)t->ne[2], (long long)cols, (long long)rows, n_expert),
               -1;
    if (check_weight_type(t, name, cols, err) != 0)
        return -1;
    size_t row_bytes = q_row_bytes(t->type, cols), per = row_bytes * (size_t)rows;
    if ((uint64_t)per * (uint64_t)n_expert > t->nbytes)
        return err_set(err, FP_ERR_FORMAT, "tensor '%s' is shorter than its shape", name), -1;
    const float *scales = NULL;
    char sname[GGUF_MAX_NAME + 8];
    size_t len = strlen(name);
    snprintf(sname, sizeof(sname), "%.*s.scale", (int)(len - 7), name);
    const struct gguf_tensor *s = gguf_find_tensor(f, sname);
    if (s) {
        if (s->type != Q_F32 || s->nbytes < 4 * (uint64_t)n_expert)
            return err_set(err, FP_ERR_FORMAT, "tensor '%s' is not %d F32 scales", sname, n_expert),
                   -1;
        scales = s->data;
    }
    for (int e = 0; e < n_expert; e++) {
        struct q_matrix *m = &out[e];
        m->type = t->type;
        m->rows = rows;
        m->cols = cols;
        m->data = (const uint8_t *)t->data + (size_t)e * per;
        m->row_bytes = row_bytes;
        m->scale = 1.0f;
        if (scales) {
            memcpy(&m->scale, scales + e, 4);
            if (!isfinite(m->scale))
                return err_set(err, FP_ERR_FORMAT, "tensor '%s' is not finite", sname), -1;
        }
    }
    return 0;
}

static int bind_weights(struct model *m, struct err *err)
{
    const struct gguf_file *f = &m->file;
    const struct model_config *c = &m->cfg;
    struct model_weights *w = &m->w;
    int E = c->n_expert;
    w->layers = xcalloc((size_t)c->n_layer, sizeof(*w->layers));
    if (E > 0)
        w->exps = xcalloc((size_t)c->n_layer * 3 * (size_t)E, sizeof(*w->exps));
    /* Room for every norm in f32 in case the file stores them in F16/BF16. */
    size_t per_layer = (size_t)c->head_dim * 2;
    if (c->oai) /* biases and sinks */
        per_layer += (size_t)c->q_dim + 2 * (size_t)c->kv_dim + (size_t)c->n_embd +
                     (size_t)c->n_head + (size_t)E * (1 + 2 * (size_t)c->n_ff_exp + c->n_embd);
    w->f32_owned = xmalloc(sizeof(float) * ((size_t)c->n_embd * (2 * (size_t)c->n_layer + 1) +
                                            per_layer * (size_t)c->n_layer));
    float *owned_at = w->f32_owned;
    if (refuse_extras(f, c->oai, err))
        return -1;
    if (bind_matrix(f, "token_embd.weight", c->n_embd, c->n_vocab, &w->tok_embd, err) ||
        bind_norm(f, "output_norm.weight", c->n_embd, &w->output_norm, &owned_at, err))
        return -1;
    if (gguf_find_tensor(f, "output.weight")) {
        if (bind_matrix(f, "output.weight", c->n_embd, c->n_vocab, &w->output, err))
            return -1;
        w->tied = false;
    } else {
        w->output = w->tok_embd;
        w->tied = true;
    }
    char name[GGUF_MAX_NAME];
    for (int l = 0; l < c->n_layer; l++) {
        struct model_layer *L = &w->layers[l];
#define NAME(s) (snprintf(name, sizeof(name), "blk.%d.%s", l, s), name)
        /* gpt-oss calls the FFN's input norm post_attention_norm */
        const char *ffn_norm = c->oai ? "post_attention_norm.weight" : "ffn_norm.weight";
        if (bind_norm(f, NAME("attn_norm.weight"), c->n_embd, &L->attn_norm, &owned_at, err) ||
            bind_norm(f, NAME(ffn_norm), c->n_embd, &L->ffn_norm, &owned_at, err) ||
            bind_matrix(f, NAME("attn_q.weight"), c->n_embd, c->q_dim, &L->wq, err) ||
            bind_matrix(f, NAME("attn_k.weight"), c->n_embd, c->kv_dim, &L->wk, err) ||
            bind_matrix(f, NAME("attn_v.weight"), c->n_embd, c->kv_dim, &L->wv, err) ||
            bind_matrix(f, NAME("attn_output.weight"), c->q_dim, c->n_embd, &L->wo, err))
            return -1;
        if (c->qk_norm &&
            (bind_norm(f, NAME("attn_q_norm.weight"), c->head_dim, &L->q_norm, &owned_at, err) ||
             bind_norm(f, NAME("attn_k_norm.weight"), c->head_dim, &L->k_norm, &owned_at, err)))
            return -1;
        if (c->oai &&
            (bind_vec(f, NAME("attn_q.bias"), c->q_dim, 0, &L->bq, &owned_at, err) ||
             bind_vec(f, NAME("attn_k.bias"), c->kv_dim, 0, &L->bk, &owned_at, err) ||
             bind_vec(f, NAME("attn_v.bias"), c->kv_dim, 0, &L->bv, &owned_at, err) ||
             bind_vec(f, NAME("attn_output.bias"), c->n_embd, 0, &L->bo, &owned_at, err) ||
             bind_vec(f, NAME("attn_sinks.weight"), c->n_head, 0, &L->sinks, &owned_at, err) ||
             bind_vec(f, NAME("ffn_gate_inp.bias"), E, 0, &L->router_b, &owned_at, err) ||
             bind_vec(f, NAME("ffn_gate_exps.bias"), c->n_ff_exp, E, &L->gate_b, &owned_at, err) ||
             bind_vec(f, NAME("ffn_up_exps.bias"), c->n_ff_exp, E, &L->up_b, &owned_at, err) ||
             bind_vec(f, NAME("ffn_down_exps.bias"), c->n_embd, E, &L->down_b, &owned_at, err)))
            return -1;
        L->swa = c->n_swa > 0 && (c->swa_every == 0 || l % c->swa_every < c->swa_every - 1);
        if (E == 0) {
            if (bind_matrix(f, NAME("ffn_gate.weight"), c->n_embd, c->n_ff, &L->w_gate, err) ||
                bind_matrix(f, NAME("ffn_up.weight"), c->n_embd, c->n_ff, &L->w_up, err) ||
                bind_matrix(f, NAME("ffn_down.weight"), c->n_ff, c->n_embd, &L->w_down, err))
                return -1;
            continue;
        }
        L->exps = w->exps + (size_t)l * 3 * (size_t)E;
        if (bind_matrix(f, NAME("ffn_gate_inp.weight"), c->n_embd, E, &L->router, err) ||
            bind_experts(f, NAME("ffn_gate_exps.weight"), c->n_embd, c->n_ff_exp, E, L->exps,
                         err) ||
            bind_experts(f, NAME("ffn_up_exps.weight"), c->n_embd, c->n_ff_exp, E, L->exps + E,
                         err) ||
            bind_experts(f, NAME("ffn_down_exps.weight"), c->n_ff_exp, c->n_embd, E,
                         L->exps + 2 * E, err))
            return -1;
#undef NAME
    }
    return 0;
}

/* The layer matrices in a fixed order, for loops over all of them. */
static struct q_matrix *layer_matrix(struct model_layer *L, int i)
{
    struct q_matrix *all[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return all[i];
}

static size_t matrix_bytes(const struct q_matrix *q)
{
    return q->row_bytes * (size_t)q->rows;
}

static void count_bytes(struct model *m)
{
    m->w.linear_bytes = 0;
    m->w.expert_bytes = 0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        for (int i = 0; i < 7; i++)
            m->w.linear_bytes += matrix_bytes(layer_matrix(&m->w.layers[l], i));
        m->w.linear_bytes += matrix_bytes(&m->w.layers[l].router);
        for (int e = 0; e < m->cfg.n_expert; e++)
            m->w.expert_bytes += model_expert_bytes(m, l, e);
    }
    m->w.head_bytes = matrix_bytes(&m->w.output);
}

size_t model_expert_bytes(const struct model *m, int l, int e)
{
    int E = m->cfg.n_expert;
    if (E == 0)
        return 0;
    const struct q_matrix *x = m->w.layers[l].exps;
    return matrix_bytes(&x[e]) + matrix_bytes(&x[E + e]) + matrix_bytes(&x[2 * E + e]);
}

/* ---- requantization ---- */

struct requant_job {
    const struct q_matrix *src;
    uint32_t dst_type;
    void *dst;
    size_t dst_row_bytes;
    const struct q_quant_opts *qo;
    float *tmp; /* (threads, cols) */
};

static void requant_rows(void *varg, int ith, int nth)
{
    struct requant_job *j = varg;
    int64_t rows = j->src->rows, cols = j->src->cols;
    int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    float *tmp = j->tmp + (size_t)ith * (size_t)cols;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *s = (const uint8_t *)j->src->data + (size_t)r * j->src->row_bytes;
        q_dequant_row(j->src->type, s, tmp, cols);
        if (j->src->scale != 1.0f)
            for (int64_t i = 0; i < cols; i++)
                tmp[i] *= j->src->scale;
        q_quant_row(j->dst_type, tmp, (uint8_t *)j->dst + (size_t)r * j->dst_row_bytes, cols,
                    j->qo);
    }
}

int model_requant_matrix(const struct q_matrix *src, uint32_t dst_type, void *dst,
                         struct q_matrix *out, tp_pool *pool)
{
    return model_requant_matrix_opts(src, dst_type, dst, out, pool, NULL);
}

int model_requant_matrix_opts(const struct q_matrix *src, uint32_t dst_type, void *dst,
                              struct q_matrix *out, tp_pool *pool, const struct q_quant_opts *opts)
{
    struct q_quant_opts qo = {0};
    if (opts)
        qo.mxfp4_search = opts->mxfp4_search;
    float scale = 1.0f;
    int64_t rows = src->rows, cols = src->cols;
    if (dst_type == Q_NVFP4) {
        /* The per-tensor scale needs the whole tensor: dequantize it once. */
        float *all = xmalloc(sizeof(float) * (size_t)rows * (size_t)cols);
        for (int64_t r = 0; r < rows; r++) {
            q_dequant_row(src->type, (const uint8_t *)src->data + (size_t)r * src->row_bytes,
                          all + (size_t)r * (size_t)cols, cols);
            if (src->scale != 1.0f)
                for (int64_t i = 0; i < cols; i++)
                    all[(size_t)r * (size_t)cols + (size_t)i] *= src->scale;
        }
        scale = q_nvfp4_tensor_scale(all, rows * cols);
        free(all);
        qo.nvfp4_tensor_scale = scale;
    }
    int nth = pool ? tp_threads(pool) : 1;
    struct requant_job j = {src, dst_type,
                            dst, q_row_bytes(dst_type, cols),
                            &qo, xmalloc(sizeof(float) * (size_t)nth * (size_t)cols)};
    if (pool)
        tp_run(pool, requant_rows, &j);
    else
        requant_rows(&j, 0, 1);
    free(j.tmp);
    out->type = dst_type;
    out->rows = rows;
    out->cols = cols;
    out->data = dst;
    out->row_bytes = j.dst_row_bytes;
    out->scale = dst_type == Q_NVFP4 ? scale : 1.0f;
    return 0;
}

/* Requantize what opts ask for. Matrices whose columns do not fit the
 * target's block size keep their type (and are named in the log). */
static int requantize(struct model *m, struct err *err)
{
    if (!m->opts.quant_set)
        return 0;
    uint32_t lin = (uint32_t)m->opts.quant;
    uint32_t head = m->opts.head_same ? lin : Q_Q8_0;
    const struct q_type_info *li = q_info(lin), *hi = q_info(head);
    if (!li || !li->weights)
        return err_set(err, FP_ERR_USAGE, "--quant: type %u is not a weight type", lin), -1;
    /* Plan: the list of (matrix, target) pairs that change. */
    int n_layer = m->cfg.n_layer;
    int per_layer = 7 + 3 * m->cfg.n_expert; /* the experts too (the router stays) */
    size_t cap = (size_t)n_layer * (size_t)per_layer + 2, n = 0;
    struct q_matrix **mats = xcalloc(cap, sizeof(*mats));
    uint32_t *targets = xcalloc(cap, sizeof(*targets));
    size_t before = 0, after = 0;
    int kept_odd = 0;
    for (int l = 0; l < n_layer; l++)
        for (int i = 0; i < per_layer; i++) {
            struct model_layer *L = &m->w.layers[l];
            struct q_matrix *q = i < 7 ? layer_matrix(L, i) : &L->exps[i - 7];
            if (q->rows == 0) /* a MoE layer has no dense FFN */
                continue;
            before += matrix_bytes(q);
            if (q->type == lin || q->cols % li->block != 0) {
                kept_odd += q->type != lin;
                after += matrix_bytes(q);
                continue;
            }
            mats[n] = q;
            targets[n++] = lin;
            after += q_row_bytes(lin, q->cols) * (size_t)q->rows;
        }
    struct q_matrix *heads[2] = {&m->w.tok_embd, m->w.tied ? NULL : &m->w.output};
    for (int i = 0; i < 2; i++) {
        struct q_matrix *q = heads[i];
        if (!q)
            continue;
        before += matrix_bytes(q);
        if (q->type == head || q->cols % hi->block != 0) {
            after += matrix_bytes(q);
            continue;
        }
        mats[n] = q;
        targets[n++] = head;
        after += q_row_bytes(head, q->cols) * (size_t)q->rows;
    }
    /* One buffer for all requantized data, each tensor 64-byte aligned. */
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total +=
            (q_row_bytes(targets[i], mats[i]->cols) * (size_t)mats[i]->rows + 63) & ~(size_t)63;
    m->w.owned = total ? xaligned_alloc(64, total) : NULL;
    m->w.owned_bytes = total;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        struct q_matrix out;
        model_requant_matrix(mats[i], targets[i], (uint8_t *)m->w.owned + off, &out, m->pool);
        off += (matrix_bytes(&out) + 63) & ~(size_t)63;
        *mats[i] = out;
    }
    if (m->w.tied)
        m->w.output = m->w.tok_embd;
    snprintf(m->quant_note, sizeof(m->quant_note),
             "requantized %zu tensors to %s (head %s): %.1f -> %.1f MB%s", n, li->name, hi->name,
             before / 1e6, after / 1e6,
             kept_odd ? " (some kept: columns not a block multiple)" : "");
    log_info("%s", m->quant_note);
    free(mats);
    free(targets);
    return 0;
}

int model_opts_parse(struct model_opts *o, const char *quant, const char *head, const char *decode,
                     const char *attention, struct err *err)
{
    if (quant && strcmp(quant, "native") == 0) {
        o->quant_set = false;
        o->quant = -1;
    } else if (quant) {
        /* the types requantization is made and measured for; others (f16,
         * q4_k ...) would keep rows they cannot hold and still be named */
        int t = q_type_from_name(quant);
        if (t != Q_Q8_0 && t != Q_MXFP4 && t != Q_NVFP4)
            return err_set(err, FP_ERR_USAGE,
                           "--quant: unknown type '%s' (expected native, q8_0, mxfp4 or nvfp4)",
                           quant),
                   -1;
        o->quant = t;
        o->quant_set = true;
    }
    /* a misspelt device is the flag's fault, not the model file's (whose
     * path model_new puts before load errors) */
    if (o->device && strcmp(o->device, "cpu") != 0 && strcmp(o->device, "cuda") != 0)
        return err_set(err, FP_ERR_USAGE, "--device: unknown device '%s' (expected cpu or cuda)",
                       o->device),
               -1;
    if (head && strcmp(head, "same") == 0)
        o->head_same = true;
    else if (head && strcmp(head, "q8_0") == 0)
        o->head_same = false;
    else if (head)
        return err_set(err, FP_ERR_USAGE, "--head: unknown value '%s' (expected q8_0 or same)",
                       head),
               -1;
    if (decode && strcmp(decode, "batched") == 0)
        o->decode = MODEL_DECODE_BATCHED;
    else if (decode && strcmp(decode, "per-request") == 0)
        o->decode = MODEL_DECODE_PER_REQUEST;
    else if (decode)
        return err_set(err, FP_ERR_USAGE,
                       "--decode: unknown mode '%s' (expected batched or per-request)", decode),
               -1;
    if (attention && strcmp(attention, "split") == 0)
        o->attention = MODEL_ATTN_SPLIT;
    else if (attention && strcmp(attention, "serial") == 0)
        o->attention = MODEL_ATTN_SERIAL;
    else if (attention)
        return err_set(err, FP_ERR_USAGE,
                       "--attention: unknown mode '%s' (expected split or serial)", attention),
               -1;
    return 0;
}

/* ---- lifecycle ---- */

static void resolve_opts(struct model *m, const struct model_opts *o)
{
    m->opts = *o;
    m->max_batch = o->max_batch > 0 ? o->max_batch : 1;
    m->ctx = o->ctx > 0 ? o->ctx : (m->cfg.n_ctx_train < 2048 ? m->cfg.n_ctx_train : 2048);
    m->max_rows =
        o->max_step_tokens > 0 ? o->max_step_tokens : (m->max_batch > 256 ? m->max_batch : 256);
    if (m->max_rows < m->max_batch)
        m->max_rows = m->max_batch;
    m->max_logit_rows = o->max_logit_rows > 0 ? o->max_logit_rows : m->max_batch;
    if (m->opts.quant_set && m->opts.quant < 0)
        m->opts.quant_set = false;
}

struct model *model_from_gguf(struct gguf_file *f, const struct model_opts *opts, struct err *err)
{
    struct model *m = xcalloc(1, sizeof(*m));
    m->file = *f;
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    struct model_opts defaults = {0};
    if (model_read_config(&m->file, &m->cfg, err))
        goto fail;
    resolve_opts(m, opts ? opts : &defaults);
    /* a longer context is allowed (the KV cache is ours to size) but the
     * positions past the training context were never trained: say so */
    if (m->ctx > m->cfg.n_ctx_train)
        log_warn("--ctx %d is above the model's training context of %d tokens; positions past "
                 "%d are untrained and output there may degrade",
                 m->ctx, m->cfg.n_ctx_train, m->cfg.n_ctx_train);
    if (m->ctx > 1 << 20 || m->max_batch > 4096 || m->max_rows > 1 << 16) {
        err_set(err, FP_ERR_RESOURCE, "ctx %d x max_batch %d x step rows %d is beyond the limits",
                m->ctx, m->max_batch, m->max_rows);
        goto fail;
    }
    int isa = q_isa_from_name(m->opts.isa ? m->opts.isa : "auto");
    if (isa < 0) {
        err_set(err, FP_ERR_USAGE,
                "--isa: unknown kernels '%s' (expected auto, avx512, avx2, neon or "
                "portable)",
                m->opts.isa);
        goto fail;
    }
    m->kern = q_kernels_select((enum q_isa)isa);
    if (!m->kern) {
        err_set(err, FP_ERR_DEVICE, "--isa %s: this CPU lacks the instructions it needs%s",
                m->opts.isa,
                getenv("FP4SERVE_ISA_DISABLE") ? " (or FP4SERVE_ISA_DISABLE withholds them)" : "");
        goto fail;
    }
    m->be = backend_find(m->opts.device, err);
    if (!m->be)
        goto fail;
    if (bind_weights(m, err))
        goto fail;
    m->pool = tp_new(m->opts.threads);
    if (requantize(m, err))
        goto fail;
    count_bytes(m);
    m->slot_len = xcalloc((size_t)m->max_batch, sizeof(*m->slot_len));
    if (m->be->prepare(m, err))
        goto fail;
    return m;
fail:
    model_free(m);
    return NULL;
}

struct model *model_new(const char *path, const struct model_opts *opts, struct err *err)
{
    struct gguf_file f;
    if (gguf_open(path, &f, err) != 0)
        return NULL;
    struct model *m = model_from_gguf(&f, opts, err);
    if (!m)
        err_prefix(err, "%s", path);
    return m;
}

void model_free(struct model *m)
{
    if (!m)
        return;
    if (m->be)
        m->be->release(m);
    tp_free(m->pool);
    free(m->w.layers);
    free(m->w.exps);
    free(m->w.owned);
    free(m->w.f32_owned);
    free(m->slot_len);
    gguf_close(&m->file);
    free(m);
}

/* ---- steps ---- */

int model_step(struct model *m, struct model_seq *seqs, int n, struct err *err)
{
    if (n <= 0 || n > m->max_batch)
        return err_set(err, FP_ERR_USAGE, "step of %d sequences (max_batch is %d)", n,
                       m->max_batch),
               -1;
    int rows = 0, logit_rows = 0;
    for (int i = 0; i < n; i++) {
        struct model_seq *s = &seqs[i];
        s->out = NULL;
        if (s->slot < 0 || s->slot >= m->max_batch)
            return err_set(err, FP_ERR_USAGE, "sequence %d: slot %d is outside [0, %d)", i, s->slot,
                           m->max_batch),
                   -1;
        for (int j = 0; j < i; j++)
            if (seqs[j].slot == s->slot)
                return err_set(err, FP_ERR_USAGE, "sequences %d and %d share slot %d", j, i,
                               s->slot),
                       -1;
        if (s->n_tokens < 1 || !s->tokens)
            return err_set(err, FP_ERR_USAGE, "sequence %d has no tokens", i), -1;
        if (s->pos < 0 || s->pos > m->slot_len[s->slot])
            return err_set(err, FP_ERR_USAGE,
                           "sequence %d: position %d is past slot %d's length %d", i, s->pos,
                           s->slot, m->slot_len[s->slot]),
                   -1;
        if ((int64_t)s->pos + s->n_tokens > m->ctx)
            return err_set(err, FP_ERR_RESOURCE,
                           "sequence %d: positions up to %lld do not fit the context of %d", i,
                           (long long)s->pos + s->n_tokens, m->ctx),
                   -1;
        rows += s->n_tokens; /* <= max_rows + ctx: checked every sequence, cannot overflow */
        if (rows > m->max_rows)
            return err_set(err, FP_ERR_RESOURCE,
                           "step of %d+ tokens exceeds the %d rows of a step (at sequence %d)",
                           rows, m->max_rows, i),
                   -1;
        for (int t = 0; t < s->n_tokens; t++)
            if (s->tokens[t] < 0 || s->tokens[t] >= m->cfg.n_vocab)
                return err_set(err, FP_ERR_USAGE, "sequence %d: token id %d is outside [0, %d)", i,
                               s->tokens[t], m->cfg.n_vocab),
                       -1;
        if (s->hidden && !m->be->hidden_out)
            return err_set(err, FP_ERR_UNSUPPORTED,
                           "sequence %d asks for hidden states, which the %s backend does not "
                           "give (embeddings need --device cpu)",
                           i, m->be->name),
                   -1;
        logit_rows += s->logits == MODEL_LOGITS_ALL    ? s->n_tokens
                      : s->logits == MODEL_LOGITS_LAST ? 1
                                                       : 0;
    }
    if (logit_rows > m->max_logit_rows)
        return err_set(err, FP_ERR_RESOURCE,
                       "step asks for %d logits rows, more than the %d allocated", logit_rows,
                       m->max_logit_rows),
               -1;
    memset(&m->last, 0, sizeof(m->last));
    m->last_experts = 0;
    m->last_expert_bytes = 0;
    if (m->opts.decode == MODEL_DECODE_PER_REQUEST) {
        /* The pathology on purpose: each sequence gets its own pass, so the
         * weights are read once per sequence. Logits rows are placed one
         * after the other by giving each pass its own offset. */
        int row0 = 0;
        for (int i = 0; i < n; i++) {
            m->be->forward(m, &seqs[i], 1, row0);
            row0 += seqs[i].logits == MODEL_LOGITS_ALL    ? seqs[i].n_tokens
                    : seqs[i].logits == MODEL_LOGITS_LAST ? 1
                                                          : 0;
        }
        m->last_passes = n;
    } else {
        m->be->forward(m, seqs, n, 0);
        m->last_passes = 1;
    }
    for (int i = 0; i < n; i++)
        m->slot_len[seqs[i].slot] = seqs[i].pos + seqs[i].n_tokens;
    m->total.attn_ns += m->last.attn_ns;
    m->total.matmul_ns += m->last.matmul_ns;
    m->total.other_ns += m->last.other_ns;
    m->steps++;
    return 0;
}

void model_slot_free(struct model *m, int slot)
{
    if (slot >= 0 && slot < m->max_batch)
        m->slot_len[slot] = 0;
}

int model_slot_len(const struct model *m, int slot)
{
    return slot >= 0 && slot < m->max_batch ? m->slot_len[slot] : 0;
}

void model_slot_trim(struct model *m, int slot, int n)
{
    if (slot >= 0 && slot < m->max_batch && n >= 0 && n < m->slot_len[slot])
        m->slot_len[slot] = n;
}

bool model_can_copy_kv(const struct model *m)
{
    return m->be && m->be->kv_copy;
}

int model_slot_copy(struct model *m, int src, int dst, int n, struct err *err)
{
    if (src < 0 || src >= m->max_batch || dst < 0 || dst >= m->max_batch || src == dst)
        return err_set(err, FP_ERR_USAGE, "KV copy from slot %d to slot %d: bad slots", src, dst),
               -1;
    if (n < 0 || n > m->slot_len[src])
        return err_set(err, FP_ERR_USAGE, "KV copy of %d positions: slot %d holds %d", n, src,
                       m->slot_len[src]),
               -1;
    if (!model_can_copy_kv(m))
        return err_set(err, FP_ERR_UNSUPPORTED, "backend '%s' cannot copy KV between slots",
                       m->be ? m->be->name : "?"),
               -1;
    if (n > 0)
        m->be->kv_copy(m, src, dst, n);
    m->slot_len[dst] = n;
    return 0;
}

size_t model_weight_bytes_per_step(const struct model *m)
{
    return m->w.linear_bytes + m->w.head_bytes + m->w.expert_bytes;
}

size_t model_last_weight_bytes(const struct model *m)
{
    return (m->w.linear_bytes + m->w.head_bytes) * (size_t)m->last_passes +
           (size_t)m->last_expert_bytes;
}

double model_flops_per_token(const struct model *m)
{
    const struct model_config *c = &m->cfg;
    /* gate, up and down (of each expert a token runs), and the router */
    double ffn = c->n_expert ? ((double)c->n_ff_exp * c->n_expert_used * 3 + c->n_expert)
                             : (double)c->n_ff * 3;
    double layer = (double)c->q_dim * c->n_embd * 2    /* wq, wo */
                   + (double)c->kv_dim * c->n_embd * 2 /* wk, wv */
                   + ffn * c->n_embd;
    return 2.0 * (layer * c->n_layer + (double)c->n_vocab * c->n_embd);
}

double model_attn_flops_per_position(const struct model *m)
{
    return 4.0 * m->cfg.q_dim * m->cfg.n_layer;
}
