/*
 * synth: seeded random-weight llama models (see synth.h). Three parts: the
 * preset table, a deterministic vocabulary (byte-level BPE merges learnt
 * from a built-in paragraph, then extended by a fixed rule up to the
 * preset's size), and the tensors, generated one at a time while the
 * writer streams the file so that a 1B model never sits in memory whole.
 */
#include "format/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"
#include "rng.h"
#include "xalloc.h"

#include "format/gguf.h"
#include "format/quant.h"

/* ---- presets ---- */

static const struct synth_preset presets[] = {
    /* small enough to commit reference outputs for */
    {"tiny", 2, 64, 4, 2, 128, 512, 256, 10000.0f, 1e-5f},
    /* SmolLM2-135M's shape (docs/formats.md §2.6) */
    {"smollm2-135m", 30, 576, 9, 3, 1536, 49152, 8192, 100000.0f, 1e-5f},
    /* a ~1.04B llama: 16 x 60.8M per layer + 65.5M embedding */
    {"llama-1b", 16, 2048, 32, 8, 8192, 32000, 4096, 10000.0f, 1e-5f},
    /* Qwen3's layout in small: head_dim 64 > n_embd / n_head (key_length
     * written). Weights large enough that the layers, not the tied
     * embedding alone, decide the next token (greedy output does not
     * repeat), logits spread so that >90% of top-1 margins exceed 0.1 nats,
     * and Q/K norm gains of 3.5 so attention is sharp, not a running mean */
    {"qwen3-tiny", 4, 128, 4, 2, 256, 2048, 1024, 1000000.0f, 1e-6f, .head_dim = 64, .sigma = 0.12f,
     .embd_sigma = 0.4f, .qk_gain = 3.5f, .arch = "qwen3"},
    /* the same attention, 16 experts of width 64, 4 per token */
    {"qwen3moe-tiny", 4, 128, 4, 2, 0, 2048, 1024, 1000000.0f, 1e-6f, .head_dim = 64,
     .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 64, .sigma = 0.12f, .embd_sigma = 0.4f,
     .router_sigma = 0.15f, .qk_gain = 3.5f, .arch = "qwen3moe"},
    /* a MoE whose experts dominate the bytes (32 x 8 layers, 4 per token,
     * ~100M expert weights): the batching experiment's model */
    {"qwen3moe-small", 8, 512, 8, 4, 0, 4096, 2048, 1000000.0f, 1e-6f, .head_dim = 64,
     .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 256, .sigma = 0.06f, .embd_sigma = 0.2f,
     .router_sigma = 0.08f, .qk_gain = 3.5f, .arch = "qwen3moe"},
    /* gpt-oss's layout in small: 16 experts of width 128, 4 per token; a
     * window of 20 on the even layers (not a multiple of the 16-key tile,
     * and short enough that a 64-token test crosses it), YaRN x8 from 512
     * positions (pairs below, inside and above the ramp); expert biases
     * wide enough that the SwiGLU clamp at 7 is reached */
    {"gpt-oss-tiny",
     4,
     128,
     4,
     2,
     0,
     2048,
     4096,
     150000.0f,
     1e-5f,
     .head_dim = 64,
     .n_expert = 16,
     .n_expert_used = 4,
     .n_ff_exp = 128,
     .sigma = 0.12f,
     .embd_sigma = 0.4f,
     .router_sigma = 0.15f,
     .arch = "gpt-oss",
     .n_swa = 20,
     .yarn_factor = 8.0f,
     .yarn_orig = 512,
     .bias_sigma = 0.1f,
     .exp_bias_sigma = 2.0f,
     .sink_sigma = 1.0f},
};
#define N_PRESETS (sizeof(presets) / sizeof(presets[0]))

const struct synth_preset *synth_preset_find(const char *name)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

const char *synth_preset_names(void)
{
    return "tiny|smollm2-135m|llama-1b|qwen3-tiny|qwen3moe-tiny|qwen3moe-small|gpt-oss-tiny";
}

const char *synth_preset_arch(const struct synth_preset *p)
{
    return p->arch ? p->arch : "llama";
}

const struct synth_preset *synth_preset_for_arch(const char *arch)
{
    static const char *const defaults[][2] = {{"llama", "tiny"},
                                              {"qwen3", "qwen3-tiny"},
                                              {"qwen3moe", "qwen3moe-tiny"},
                                              {"gpt-oss", "gpt-oss-tiny"}};
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
        if (strcmp(defaults[i][0], arch) == 0)
            return synth_preset_find(defaults[i][1]);
    return NULL;
}

/* ---- random numbers ---- */

/*
 * A normal deviate with standard deviation sigma, from one 64-bit draw:
 * the sum of its four 16-bit quarters (Irwin-Hall, n = 4) is close to
 * normal within +-3.46 sigma. Only integer sums and IEEE arithmetic are
 * involved, so the values, and hence the files, are the same on every
 * machine (libm's log and cos, as in Box-Muller, need not be).
 */
static float gauss(uint64_t *s, double sigma)
{
    static const double sd = 37837.22626042; /* sqrt((65536^2 - 1) / 3) */
    uint64_t r = rng_next(s);
    uint32_t sum = (uint32_t)(r & 0xffff) + (uint32_t)(r >> 16 & 0xffff) +
                   (uint32_t)(r >> 32 & 0xffff) + (uint32_t)(r >> 48);
    return (float)(((double)sum - 131070.0) * (sigma / sd));
}

/* ---- vocabulary ---- */

/* The special tokens, first in the vocabulary (SmolLM2's ids). */
static const char *const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
#define N_SPECIAL  3
#define BYTE_TOKEN ((size_t)3) /* id of the token for byte 0; byte b is BYTE_TOKEN + b */

/* Token types (tokenizer.ggml.token_type). */
enum { TT_NORMAL = 1, TT_CONTROL = 3 };

/* Text the first merges are learnt from (original prose). */
static const char corpus[] =
    "The river ran past the old mill and the long wall of the garden. In the morning "
    "the light came in over the hills, and the people of the town went down to the "
    "water to see the boats come in. There were fishing boats and a ferry, and on the "
    "other side there was a station where the trains stopped twice a day. The children "
    "would wait on the bridge and count the cars, and then run home to tell their "
    "mothers how many there had been. It was a quiet place, but not a dull one: there "
    "was always something to watch, something to mend, something to carry from one "
    "house to another. When the weather turned, the wind came off the sea and the "
    "rain fell for days, and everyone stayed inside and read, or talked, or slept. "
    "Then the sun returned and the streets filled again with the sound of voices, "
    "carts and bells. The teacher said that a good question is worth more than a "
    "quick answer, and the children wrote that down in their books. What does the "
    "engine do when the model is large and the batch is small? It reads every weight "
    "once for each step, and the time it takes depends on the memory, not on the "
    "number of requests that share the step. Serving many requests together is "
    "therefore nearly free, until the cache grows and the attention starts to cost "
    "more than the weights.\n";

struct vocab {
    char **tok;    /* owned token texts, byte-level encoded; index = id */
    int32_t *type; /* token types */
    size_t n, cap;
    char **merges; /* owned "A B" strings; index = rank */
    size_t n_merges, cap_merges;
    size_t *slots;  /* hash set over tok: id + 1, 0 = empty */
    size_t n_slots; /* a power of two, kept at most half full */
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Slot index for text: where it is, or the empty slot where it would go. */
static size_t vocab_slot(const struct vocab *v, const char *text)
{
    size_t i = (size_t)hash_str(text) & (v->n_slots - 1);
    while (v->slots[i] && strcmp(v->tok[v->slots[i] - 1], text) != 0)
        i = (i + 1) & (v->n_slots - 1);
    return i;
}

static bool vocab_has(const struct vocab *v, const char *text)
{
    return v->slots[vocab_slot(v, text)] != 0;
}

/* Append a token (text is taken over); the caller checked it is new. */
static void vocab_add(struct vocab *v, char *text, int32_t type)
{
    if (2 * (v->n + 1) > v->n_slots) {
        free(v->slots);
        v->n_slots = v->n_slots ? v->n_slots * 2 : 1024;
        v->slots = xcalloc(v->n_slots, sizeof(*v->slots));
        for (size_t i = 0; i < v->n; i++)
            v->slots[vocab_slot(v, v->tok[i])] = i + 1;
    }
    XGROW(v->tok, v->cap, v->n + 1);
    v->type = xrealloc(v->type, v->cap * sizeof(*v->type));
    v->tok[v->n] = text;
    v->type[v->n] = type;
    v->slots[vocab_slot(v, text)] = ++v->n;
}

/* Record the merge of tokens a and b, adding their concatenation as a
 * token unless it is already one. */
static void vocab_merge(struct vocab *v, size_t a, size_t b)
{
    XGROW(v->merges, v->cap_merges, v->n_merges + 1);
    v->merges[v->n_merges++] = xasprintf("%s %s", v->tok[a], v->tok[b]);
    char *joined = xasprintf("%s%s", v->tok[a], v->tok[b]);
    if (vocab_has(v, joined))
        free(joined);
    else
        vocab_add(v, joined, TT_NORMAL);
}

static void vocab_release(struct vocab *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->tok[i]);
    for (size_t i = 0; i < v->n_merges; i++)
        free(v->merges[i]);
    free(v->tok);
    free(v->type);
    free(v->merges);
    free(v->slots);
}

/* GPT-2's byte-to-character map: printable Latin-1 bytes stand for
 * themselves, the others for U+0100 onwards in byte order. Writes the
 * UTF-8 of byte b's character to out (3 bytes with the NUL). */
static void byte_symbol(unsigned b, char out[3])
{
    unsigned cp = b, shift = 0;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) {
        for (unsigned k = 0; k < b; k++)
            shift += !((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || k >= 174);
        cp = 256 + shift;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = '\0';
    } else {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = '\0';
    }
}

/* A word of the corpus as token ids, with how often it occurs. */
struct word {
    size_t *ids;
    size_t n;
    unsigned count;
};

static bool is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_space(char c)
{
    return c == ' ' || c == '\n';
}

/* Split the corpus roughly as the GPT-2 pattern does (a space joins the
 * word after it; digits stand alone, as the smollm pre-tokenizer has
 * them) and collect the distinct words with their counts. */
static size_t corpus_words(struct word **out)
{
    struct word *w = NULL;
    size_t n = 0, cap = 0, len = sizeof(corpus) - 1;
    for (size_t i = 0; i < len;) {
        size_t start = i;
        if (corpus[i] == ' ' && i + 1 < len && !is_space(corpus[i + 1]))
            i++;
        char c = corpus[i];
        if (is_letter(c))
            while (i < len && is_letter(corpus[i]))
                i++;
        else if (c >= '0' && c <= '9')
            i++;
        else if (is_space(c))
            while (i < len && is_space(corpus[i]))
                i++;
        else
            while (i < len && !is_letter(corpus[i]) && !is_space(corpus[i]))
                i++;
        size_t k = 0;
        for (; k < n; k++)
            if (w[k].n == i - start) {
                size_t j = 0;
                while (j < w[k].n && w[k].ids[j] == BYTE_TOKEN + (unsigned char)corpus[start + j])
                    j++;
                if (j == w[k].n)
                    break;
            }
        if (k < n) {
            w[k].count++;
            continue;
        }
        XGROW(w, cap, n + 1);
        w[n].n = i - start;
        w[n].count = 1;
        w[n].ids = xmalloc(w[n].n * sizeof(size_t));
        for (size_t j = 0; j < w[n].n; j++)
            w[n].ids[j] = BYTE_TOKEN + (unsigned char)corpus[start + j];
        n++;
    }
    *out = w;
    return n;
}

struct pair {
    size_t a, b;    /* token ids */
    unsigned count; /* occurrences, weighted by word counts */
};

static int pair_cmp(const void *x, const void *y)
{
    const struct pair *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

/* The most frequent adjacent pair in the words (ties: the lowest ids);
 * its count is 0 when no word has two symbols left. */
static struct pair best_pair(const struct word *w, size_t n_words)
{
    struct pair best = {0, 0, 0}, *all = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < n_words; i++)
        for (size_t j = 0; j + 1 < w[i].n; j++) {
            XGROW(all, cap, n + 1);
            all[n++] = (struct pair){w[i].ids[j], w[i].ids[j + 1], w[i].count};
        }
    if (n)
        qsort(all, n, sizeof(*all), pair_cmp);
    for (size_t i = 0; i < n;) {
        struct pair p = all[i++];
        while (i < n && all[i].a == p.a && all[i].b == p.b)
            p.count += all[i++].count;
        if (p.count > best.count) /* sorted by ids, so the first wins ties */
            best = p;
    }
    free(all);
    return best;
}

/* Learn merges from the corpus, most frequent pair first, while some pair
 * occurs at least twice and the vocabulary has room. */
static void learn_merges(struct vocab *v, size_t target)
{
    struct word *w;
    size_t n_words = corpus_words(&w);
    while (v->n < target) {
        struct pair p = best_pair(w, n_words);
        if (p.count < 2)
            break;
        vocab_merge(v, p.a, p.b);
        char *joined = xasprintf("%s%s", v->tok[p.a], v->tok[p.b]);
        size_t id = v->slots[vocab_slot(v, joined)] - 1;
        free(joined);
        for (size_t i = 0; i < n_words; i++) {
            size_t o = 0;
            for (size_t j = 0; j < w[i].n; j++) {
                bool hit = j + 1 < w[i].n && w[i].ids[j] == p.a && w[i].ids[j + 1] == p.b;
                w[i].ids[o++] = hit ? id : w[i].ids[j];
                j += hit;
            }
            w[i].n = o;
        }
    }
    for (size_t i = 0; i < n_words; i++)
        free(w[i].ids);
    free(w);
}

/* Letters, optionally after one leading space symbol (U+0120, "Ġ"). */
static bool extendable(const char *t)
{
    if ((unsigned char)t[0] == 0xc4 && (unsigned char)t[1] == 0xa0)
        t += 2;
    for (; *t; t++)
        if (!is_letter(*t))
            return false;
    return true;
}

/* Fill the vocabulary to target with merges (token, letter), walking the
 * token list in id order (it grows as we go, so it never runs dry). */
static void extend_merges(struct vocab *v, size_t target)
{
    static const char letters[] = "etaoinsrhldcumfpgwybvkxjqz";
    for (size_t i = BYTE_TOKEN; v->n < target; i++) {
        if (!extendable(v->tok[i]))
            continue;
        for (const char *c = letters; *c && v->n < target; c++) {
            char *joined = xasprintf("%s%c", v->tok[i], *c);
            bool fresh = !vocab_has(v, joined);
            free(joined);
            if (fresh)
                vocab_merge(v, i, BYTE_TOKEN + (unsigned char)*c);
        }
    }
}

static void build_vocab(struct vocab *v, size_t target)
{
    memset(v, 0, sizeof(*v));
    for (size_t i = 0; i < N_SPECIAL; i++)
        vocab_add(v, xstrdup(specials[i]), TT_CONTROL);
    for (unsigned b = 0; b < 256; b++) {
        char sym[3];
        byte_symbol(b, sym);
        vocab_add(v, xstrdup(sym), TT_NORMAL);
    }
    learn_merges(v, target);
    extend_merges(v, target);
}

/* ---- tensors ---- */

enum kind {
    K_WEIGHT, /* N(0, sigma) */
    K_NORM,   /* 1 + N(0, 0.02), F32 */
    K_SCALE,  /* NVFP4 scale of the tensor before it, F32 [1] (one per expert: [n_expert]) */
    K_BIAS,   /* N(0, sigma), F32, 1-D (2-D [n, n_expert] for experts) */
};

#define MAX_SLICES 256 /* experts of a 3-D tensor */

/* One tensor of the plan; the writer's fill callback gets a pointer. */
struct spec {
    char name[GGUF_MAX_NAME];
    enum kind kind;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[3];      /* ne[0] contiguous; ne[2] = 1 but for expert tensors */
    uint64_t seed;       /* of this tensor's generator */
    double sigma;        /* K_WEIGHT's standard deviation */
    float mean;          /* K_NORM's mean (1 but for a qk_gain) */
    struct spec *weight; /* K_SCALE: the NVFP4 weight it scales */
    float *scale;        /* NVFP4: s2 of each slice (ne[2]), set when it is filled; owned */
};

#define SIGMA 0.02

/* Generate n values of the tensor into x, continuing generator *rng. */
static void gen_values(const struct spec *s, uint64_t *rng, float *x, uint64_t n)
{
    double sigma = s->kind == K_NORM || s->sigma <= 0 ? SIGMA : s->sigma;
    float mean = s->kind == K_NORM ? (s->mean > 0 ? s->mean : 1.0f) : 0.0f;
    for (uint64_t i = 0; i < n; i++)
        x[i] = mean + gauss(rng, sigma);
}

/*
 * The writer's fill callback: generate the tensor and encode it row by row
 * with quant.h's reference quantizers. NVFP4 needs the whole tensor's amax
 * first (its per-tensor scale s2), so it is generated in one piece; s2 is
 * kept for the ".scale" tensor that the writer fills next.
 */
static int fill(void *ctx, void *dst, uint64_t nbytes, struct err *err)
{
    struct spec *s = ctx;
    (void)nbytes;
    (void)err;
    if (s->kind == K_SCALE) {
        memcpy(dst, s->weight->scale, 4 * s->weight->ne[2]); /* little-endian host, as GGUF */
        return 0;
    }
    uint64_t rng = s->seed, n = s->ne[0] * s->ne[1];
    int64_t ne0 = (int64_t)s->ne[0];
    size_t row_bytes = q_row_bytes(s->type, ne0);
    for (uint64_t e = 0; e < s->ne[2]; e++) { /* each expert (one slice for 2-D) */
        uint8_t *out = (uint8_t *)dst + e * s->ne[1] * row_bytes;
        if (s->type == Q_F32) {
            gen_values(s, &rng, (float *)out, n);
        } else if (s->type == Q_NVFP4) {
            float *x = xmalloc(n * sizeof(float));
            gen_values(s, &rng, x, n);
            s->scale[e] = q_nvfp4_tensor_scale(x, (int64_t)n);
            struct q_quant_opts qo = {.nvfp4_tensor_scale = s->scale[e]};
            for (uint64_t r = 0; r < s->ne[1]; r++)
                q_quant_row(s->type, x + r * s->ne[0], out + r * row_bytes, ne0, &qo);
            free(x);
        } else {
            float *row = xmalloc(s->ne[0] * sizeof(float));
            for (uint64_t r = 0; r < s->ne[1]; r++) {
                gen_values(s, &rng, row, s->ne[0]);
                q_quant_row(s->type, row, out + r * row_bytes, ne0, NULL);
            }
            free(row);
        }
    }
    return 0;
}

/* The plan: every tensor in file order. Returns the count; *out owned
 * (each NVFP4 weight's scale array too: free with plan_free). */
static size_t plan(const struct synth_opts *o, struct spec **out)
{
    const struct synth_preset *p = o->preset;
    uint64_t hd = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    uint64_t q_dim = hd * p->n_head, kv_dim = hd * p->n_head_kv;
    bool oai = p->arch && strcmp(p->arch, "gpt-oss") == 0;
    bool qwen = p->arch != NULL && !oai, moe = p->n_expert > 0;
    double sigma = p->sigma > 0 ? p->sigma : SIGMA;
    /* f32/f16 as asked, else Q8_0 (llama.cpp keeps a tied head at 8 bits) */
    uint32_t embd_type = o->type == Q_F32 || o->type == Q_F16 ? o->type : Q_Q8_0;
    enum { DENSE = 1, MOE = 2, QWEN = 4, ALL = 8, OAI = 16, NOT_OAI = 32 };
    const struct {
        const char *name;
        enum kind kind;
        uint64_t ne0, ne1, ne2; /* [in, out, experts] */
        int when;
        bool f32;     /* kept F32 whatever the weight type (the router) */
        double sigma; /* K_BIAS's */
    } layer[] = {
        {"attn_norm", K_NORM, p->n_embd, 1, 1, ALL},
        {"attn_q", K_WEIGHT, p->n_embd, q_dim, 1, ALL},
        {"attn_k", K_WEIGHT, p->n_embd, kv_dim, 1, ALL},
        {"attn_v", K_WEIGHT, p->n_embd, kv_dim, 1, ALL},
        {"attn_output", K_WEIGHT, q_dim, p->n_embd, 1, ALL},
        {"attn_q.bias", K_BIAS, q_dim, 1, 1, OAI, true, p->bias_sigma},
        {"attn_k.bias", K_BIAS, kv_dim, 1, 1, OAI, true, p->bias_sigma},
        {"attn_v.bias", K_BIAS, kv_dim, 1, 1, OAI, true, p->bias_sigma},
        {"attn_output.bias", K_BIAS, p->n_embd, 1, 1, OAI, true, p->bias_sigma},
        {"attn_sinks", K_BIAS, p->n_head, 1, 1, OAI, true, p->sink_sigma},
        {"attn_q_norm", K_NORM, hd, 1, 1, QWEN},
        {"attn_k_norm", K_NORM, hd, 1, 1, QWEN},
        {"ffn_norm", K_NORM, p->n_embd, 1, 1, NOT_OAI},
        {"post_attention_norm", K_NORM, p->n_embd, 1, 1, OAI},
        {"ffn_gate_inp.bias", K_BIAS, p->n_expert, 1, 1, OAI, true, p->bias_sigma},
        {"ffn_gate_exps.bias", K_BIAS, p->n_ff_exp, p->n_expert, 1, OAI, true, p->exp_bias_sigma},
        {"ffn_up_exps.bias", K_BIAS, p->n_ff_exp, p->n_expert, 1, OAI, true, p->exp_bias_sigma},
        {"ffn_down_exps.bias", K_BIAS, p->n_embd, p->n_expert, 1, OAI, true, p->bias_sigma},
        {"ffn_gate", K_WEIGHT, p->n_embd, p->n_ff, 1, DENSE},
        {"ffn_up", K_WEIGHT, p->n_embd, p->n_ff, 1, DENSE},
        {"ffn_down", K_WEIGHT, p->n_ff, p->n_embd, 1, DENSE},
        {"ffn_gate_inp", K_WEIGHT, p->n_embd, p->n_expert, 1, MOE, true},
        {"ffn_gate_exps", K_WEIGHT, p->n_embd, p->n_ff_exp, p->n_expert, MOE},
        {"ffn_up_exps", K_WEIGHT, p->n_embd, p->n_ff_exp, p->n_expert, MOE},
        {"ffn_down_exps", K_WEIGHT, p->n_ff_exp, p->n_embd, p->n_expert, MOE},
    };
    size_t n_layer_t = sizeof(layer) / sizeof(layer[0]);
    size_t cap = 3 + p->n_layer * n_layer_t * 2, n = 0;
    struct spec *s = xcalloc(cap, sizeof(*s));

    s[n++] = (struct spec){.name = "token_embd.weight",
                           .kind = K_WEIGHT,
                           .type = embd_type,
                           .n_dims = 2,
                           .ne = {p->n_embd, p->n_vocab, 1},
                           .sigma = p->embd_sigma > 0 ? p->embd_sigma : sigma};
    for (uint32_t l = 0; l < p->n_layer; l++)
        for (size_t k = 0; k < n_layer_t; k++) {
            int when = layer[k].when;
            if (!(when == ALL || (when == DENSE && !moe) || (when == MOE && moe) ||
                  (when == QWEN && qwen) || (when == OAI && oai) || (when == NOT_OAI && !oai)))
                continue;
            struct spec *t = &s[n++];
            bool dotted = strchr(layer[k].name, '.') != NULL; /* "x.bias" */
            snprintf(t->name, sizeof(t->name), "blk.%u.%s%s", l, layer[k].name,
                     dotted ? "" : ".weight");
            t->kind = layer[k].kind;
            t->type = t->kind == K_NORM || layer[k].f32 ? 0 : o->type;
            t->n_dims = t->kind == K_NORM   ? 1
                        : t->kind == K_BIAS ? (layer[k].ne1 > 1 ? 2 : 1)
                        : layer[k].ne2 > 1  ? 3
                                            : 2;
            t->ne[0] = layer[k].ne0;
            t->ne[1] = layer[k].ne1;
            t->ne[2] = layer[k].ne2;
            t->sigma = t->kind == K_BIAS                     ? layer[k].sigma
                       : layer[k].f32 && p->router_sigma > 0 ? p->router_sigma
                                                             : sigma;
            if (layer[k].when == QWEN && p->qk_gain > 0)
                t->mean = p->qk_gain;
            if (t->kind == K_WEIGHT && t->type == Q_NVFP4) { /* NVFP4: llama.cpp's scale2 */
                t->scale = xcalloc(t->ne[2], sizeof(float));
                struct spec *sc = &s[n++];
                *sc = (struct spec){.kind = K_SCALE,
                                    .type = 0,
                                    .n_dims = 1,
                                    .ne = {t->n_dims == 3 ? t->ne[2] : 1, 1, 1},
                                    .weight = t};
                snprintf(sc->name, sizeof(sc->name), "blk.%u.%s.scale", l, layer[k].name);
            }
        }
    s[n++] = (struct spec){.name = "output_norm.weight",
                           .kind = K_NORM,
                           .type = 0,
                           .n_dims = 1,
                           .ne = {p->n_embd, 1, 1}};
    if (oai) /* llama.cpp's gpt-oss wants its own head */
        s[n++] = (struct spec){.name = "output.weight",
                               .kind = K_WEIGHT,
                               .type = embd_type,
                               .n_dims = 2,
                               .ne = {p->n_embd, p->n_vocab, 1},
                               .sigma = p->embd_sigma > 0 ? p->embd_sigma : sigma};
    /* Each tensor's generator depends on the seed and its name only, so
     * adding or reordering tensors leaves the others' values unchanged. */
    for (size_t i = 0; i < n; i++) {
        uint64_t st = o->seed ^ hash_str(s[i].name);
        s[i].seed = rng_next(&st);
    }
    *out = s;
    return n;
}

static void plan_free(struct spec *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(s[i].scale);
    free(s);
}

/* LlamaFileType for general.file_type (gguf-py constants.py). */
static uint32_t file_type(uint32_t type)
{
    switch (type) {
    case Q_F32:
        return 0; /* ALL_F32 */
    case Q_F16:
        return 1; /* MOSTLY_F16 */
    case Q_Q4_0:
        return 2; /* MOSTLY_Q4_0 */
    case Q_Q4_1:
        return 3; /* MOSTLY_Q4_1 */
    case Q_Q8_0:
        return 7; /* MOSTLY_Q8_0 */
    case Q_MXFP4:
        return 38; /* MOSTLY_MXFP4_MOE, the only MXFP4 file type */
    case Q_NVFP4:
        return 39; /* MOSTLY_NVFP4 */
    default:
        return 0; /* other types are not offered by synth */
    }
}

/* ChatML, as SmolLM2's instruct models use it (without the default
 * system prompt). */
static const char chat_template[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

static void write_meta(gguf_writer *w, const struct synth_opts *o, const struct vocab *v)
{
    const struct synth_preset *p = o->preset;
    char *name = xasprintf("fp4serve synth %s %s seed %llu", p->name, gguf_type_name(o->type),
                           (unsigned long long)o->seed);
    char key[96];
#define K(x) (snprintf(key, sizeof(key), "%s.%s", synth_preset_arch(p), x), key)
    uint32_t hd = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    gguf_w_str(w, "general.architecture", synth_preset_arch(p));
    gguf_w_str(w, "general.name", name);
    gguf_w_u32(w, "general.file_type", file_type(o->type));
    gguf_w_u32(w, "general.quantization_version", 2);
    gguf_w_u32(w, K("block_count"), p->n_layer);
    gguf_w_u32(w, K("context_length"), p->n_ctx);
    gguf_w_u32(w, K("embedding_length"), p->n_embd);
    gguf_w_u32(w, K("feed_forward_length"), p->n_ff);
    gguf_w_u32(w, K("attention.head_count"), p->n_head);
    gguf_w_u32(w, K("attention.head_count_kv"), p->n_head_kv);
    if (p->head_dim) {
        gguf_w_u32(w, K("attention.key_length"), hd);
        gguf_w_u32(w, K("attention.value_length"), hd);
    }
    gguf_w_f32(w, K("rope.freq_base"), p->rope_base);
    gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), p->rms_eps);
    if (p->n_expert) {
        gguf_w_u32(w, K("expert_count"), p->n_expert);
        gguf_w_u32(w, K("expert_used_count"), p->n_expert_used);
        gguf_w_u32(w, K("expert_feed_forward_length"), p->n_ff_exp);
    }
    if (p->n_swa) {
        gguf_w_u32(w, K("attention.sliding_window"), p->n_swa);
        gguf_w_str(w, K("rope.scaling.type"), "yarn");
        gguf_w_f32(w, K("rope.scaling.factor"), p->yarn_factor);
        gguf_w_u32(w, K("rope.scaling.original_context_length"), p->yarn_orig);
    }
    gguf_w_u32(w, K("vocab_size"), p->n_vocab);
    gguf_w_u32(w, K("rope.dimension_count"), hd);
#undef K
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "smollm");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tok, v->n);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v->type, v->n);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, v->n_merges);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_w_u32(w, "tokenizer.ggml.padding_token_id", 2);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", false);
    gguf_w_str(w, "tokenizer.chat_template", chat_template);
    free(name);
}

int synth_write(const struct synth_opts *o, const char *path, struct err *err)
{
    const struct q_type_info *ti = q_info(o->type);
    uint32_t dims[] = {o->preset->n_embd, o->preset->n_ff ? o->preset->n_ff : o->preset->n_ff_exp};
    if (!ti || !ti->weights)
        return err_set(err, FP_ERR_UNSUPPORTED, "synth: cannot write weights of type %s",
                       gguf_type_name(o->type)),
               -1;
    for (size_t i = 0; i < 2; i++)
        if (dims[i] % ti->block)
            return err_set(err, FP_ERR_UNSUPPORTED,
                           "synth: %s blocks of %u do not divide the %s preset's width %u",
                           ti->name, ti->block, o->preset->name, dims[i]),
                   -1;
    struct vocab v;
    build_vocab(&v, o->preset->n_vocab);
    struct spec *specs;
    size_t n = plan(o, &specs);
    gguf_writer *w = gguf_writer_new(GGUF_DEFAULT_ALIGNMENT);
    write_meta(w, o, &v);
    for (size_t i = 0; i < n; i++)
        gguf_w_tensor_fill(w, specs[i].name, specs[i].n_dims, specs[i].ne, specs[i].type, fill,
                           &specs[i]);
    int rc = gguf_writer_save(w, path, err);
    gguf_writer_free(w);
    plan_free(specs, n);
    vocab_release(&v);
    return rc;
}
