/*
 * model: the llama architecture (docs/formats.md §2)
 * loaded from GGUF, with the engine API the scheduler drives: a KV cache
 * of max_batch slots x ctx positions allocated at load, and model_step,
 * which runs one forward pass over a batch made of several sequences (a
 * decode token or a prefill chunk each) and returns their logits.
 *
 * Data layout follows llama2.c: model_config (hyperparameters),
 * model_weights (views into the GGUF mapping, or requantized copies) and
 * run_state (every buffer of the forward pass, sized at load, so a step
 * never allocates).
 *
 * Scheduler's view, one step:
 *     struct model_seq s[n] = {{.slot, .pos, .n_tokens, .tokens, .logits}...};
 *     model_step(m, s, n, &err);      // s[i].out -> logits row(s) of seq i
 * A slot's cache holds positions [0, len); a seq must start at pos <= len
 * (pos < len rewinds, dropping the tail) and after the step len = pos +
 * n_tokens. model_slot_free(m, slot) forgets a slot (len = 0).
 *
 * Determinism: the result for a row depends only on its token, its
 * position and its slot's cache, never on the other rows of the step, on
 * --decode, --attention or the thread count (fixed reduction orders; see
 * engine/model/backend_cpu.c).
 */
#ifndef ENGINE_MODEL_H
#define ENGINE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#include "cpu/matmul.h"
#include "format/gguf.h"
#include "format/quant.h"

struct backend;
struct cpu_ops;
typedef struct tp_pool tp_pool;

/* KV positions per attention chunk: the fixed grid on which every
 * attention reduction is split and recombined (split and serial alike). */
#define MODEL_ATTN_CHUNK 64
/* Prepared-activation buffers of the run state (see run_state.act). */
#define MODEL_N_ACT 7

/* The architectures fp4serve runs (docs/formats.md §2). */
enum model_arch {
    ARCH_LLAMA = 0,    /* llama: adjacent-pair RoPE, dense SwiGLU FFN */
    ARCH_QWEN3 = 1,    /* qwen3: + per-head RMSNorm on Q and K, half-split (NEOX) RoPE */
    ARCH_QWEN3MOE = 2, /* qwen3moe: qwen3 attention, mixture-of-experts FFN */
    ARCH_GPT_OSS = 3,  /* gpt-oss: biases, attention sinks, sliding window on alternate
                          layers, YaRN, top-k softmax-of-chosen router, clamped SwiGLU */
};

/* Hyperparameters (section 2.1), checked at load. */
struct model_config {
    enum model_arch arch;
    bool qk_norm;      /* per-head RMSNorm of Q and K before RoPE (qwen3*) */
    bool rope_neox;    /* rotate (x[i], x[i + n_rot/2]) instead of (x[2i], x[2i+1]) */
    int n_expert;      /* experts per MoE layer (0: dense FFN) */
    int n_expert_used; /* experts each token runs (top-k) */
    int n_ff_exp;      /* hidden size of one expert's FFN */
    int n_embd;        /* hidden size (576 for SmolLM2-135M) */
    int n_layer;       /* transformer blocks (30) */
    int n_head;        /* query heads (9) */
    int n_head_kv;     /* key/value heads (3); n_head % n_head_kv == 0 */
    int head_dim;      /* per head (64); n_head * head_dim = q_dim */
    int q_dim;         /* n_head * head_dim */
    int kv_dim;        /* n_head_kv * head_dim */
    int n_ff;          /* FFN hidden size (1536) */
    int n_vocab;       /* rows of token_embd (49152) */
    int n_ctx_train;   /* llama.context_length (8192) */
    int n_rot;         /* llama.rope.dimension_count, rotated dims per head (= head_dim) */
    float rope_base;   /* llama.rope.freq_base (1e5 for SmolLM2) */
    float rms_eps;     /* llama.attention.layer_norm_rms_epsilon (1e-5) */
    /* RoPE scaling (rope.scaling.type yarn; docs/formats.md §2.9). freq_scale 1 = none. */
    float rope_freq_scale; /* 1 / rope.scaling.factor */
    float yarn_ext_factor; /* 1 with YaRN, else 0 */
    float yarn_mscale;     /* cos/sin multiplier (1 + 0.1 ln factor with YaRN) */
    float yarn_beta_fast;  /* 32 */
    float yarn_beta_slow;  /* 1 */
    int n_ctx_orig;        /* rope.scaling.original_context_length (n_ctx_train) */
    /* gpt-oss */
    bool oai;      /* biases, sinks, softmax over the chosen experts, clamped SwiGLU */
    int n_swa;     /* attention.sliding_window: keys (pos - n_swa, pos] (0: none) */
    int swa_every; /* attention.sliding_window_pattern (2): layer l is windowed when
                      l % swa_every < swa_every - 1 (so the even layers), every layer
                      when 0 */
};

/* One block's weights. Matrices are [rows = output dim, cols = input dim]
 * in GGUF order (ne0 = cols is the reduction dimension). */
struct model_layer {
    const float *attn_norm; /* (n_embd) */
    const float *ffn_norm;  /* (n_embd) */
    struct q_matrix wq;     /* (q_dim, n_embd) */
    struct q_matrix wk;     /* (kv_dim, n_embd) */
    struct q_matrix wv;     /* (kv_dim, n_embd) */
    struct q_matrix wo;     /* (n_embd, q_dim) */
    struct q_matrix w_gate; /* (n_ff, n_embd) */
    struct q_matrix w_up;   /* (n_ff, n_embd) */
    struct q_matrix w_down; /* (n_embd, n_ff) */
    const float *q_norm;    /* (head_dim) qwen3 per-head RMSNorm of Q, or NULL */
    const float *k_norm;    /* (head_dim) same for K */
    struct q_matrix router; /* MoE: (n_expert, n_embd) ffn_gate_inp */
    struct q_matrix *exps;  /* MoE: (3 * n_expert) slices of ffn_{gate,up,down}_exps,
                               gate e at [e], up at [n_expert + e], down at [2 n_expert + e];
                               points into model_weights.exps (owned there) */
    /* gpt-oss (NULL otherwise): biases added after their matmul, F32 */
    const float *bq, *bk, *bv, *bo; /* (q_dim), (kv_dim), (kv_dim), (n_embd) */
    const float *sinks;             /* (n_head) sink logit joining each head's softmax */
    const float *router_b;          /* (n_expert) */
    const float *gate_b, *up_b;     /* (n_expert, n_ff_exp) */
    const float *down_b;            /* (n_expert, n_embd) */
    bool swa;                       /* this layer attends to the last n_swa positions only */
};

struct model_weights {
    struct q_matrix tok_embd;   /* (n_vocab, n_embd); rows looked up by token id */
    struct q_matrix output;     /* (n_vocab, n_embd); == tok_embd when tied */
    const float *output_norm;   /* (n_embd) */
    struct model_layer *layers; /* (n_layer), owned */
    bool tied;                  /* output.weight absent: token_embd is the head */
    void *owned;                /* requantized tensor data (NULL when native), owned */
    size_t owned_bytes;
    float *f32_owned;      /* norms converted from F16/BF16 files, owned */
    struct q_matrix *exps; /* (n_layer * 3 * n_expert) expert slices, owned (NULL: dense) */
    size_t linear_bytes;   /* bytes of the per-layer matrices read every step (experts excluded) */
    size_t expert_bytes;   /* bytes of every expert of every layer (0: dense) */
    size_t head_bytes;     /* bytes of the output head */
};

enum model_decode {
    MODEL_DECODE_BATCHED = 0,     /* one pass over all sequences of a step */
    MODEL_DECODE_PER_REQUEST = 1, /* one pass per sequence (weights read N times) */
};

enum model_attention {
    MODEL_ATTN_SPLIT = 0,  /* decode rows: KV chunks spread over workers, then combined */
    MODEL_ATTN_SERIAL = 1, /* one worker walks a (row, kv head)'s whole range */
};

enum model_logits {
    MODEL_LOGITS_NONE = 0, /* no logits (a prefill chunk that is not the last) */
    MODEL_LOGITS_LAST = 1, /* logits of the sequence's last token */
    MODEL_LOGITS_ALL = 2,  /* logits of every token (perplexity) */
};

/* Load-time choices. Zero-initialised fields take the defaults. */
struct model_opts {
    int threads;         /* 0 = online cores */
    int max_batch;       /* KV slots (sequences in flight); 0 = 1 */
    int ctx;             /* positions per slot; 0 = min(n_ctx_train, 2048) */
    int max_step_tokens; /* rows one step may carry; 0 = max(max_batch, 256) */
    int max_logit_rows;  /* logits rows one step may return; 0 = max_batch */
    int quant;           /* -1 or 0 = native; else a q_type for every linear weight */
    bool quant_set;      /* quant holds a requested type (so 0 = Q_F32 is expressible) */
    bool head_same;      /* requantize the head to `quant` too (default: Q8_0) */
    bool kv_f32;         /* K/V cache in f32 (default f16: half the memory and traffic) */
    enum model_decode decode;
    enum model_attention attention;
    const char *device; /* "cpu" (default) or "cuda" */
    const char *isa;    /* CPU kernels: "auto" (default: the best the CPU has), "avx512",
                           "avx2", "neon" or "portable" */
};

/* Per-step timers: wall time of thread 0 per phase, barrier waits
 * included, so the three add up to the step. matmul = the quantized
 * matmuls (with the residual adds and SwiGLU fused into them) and the
 * down projection's activation preparation; attention = scores, softmax,
 * V sums, the split combine and the output projection's activation
 * preparation; other = embedding, RMSNorms with their activation
 * preparation, RoPE and K/V writes. */
struct model_timers {
    uint64_t attn_ns;
    uint64_t matmul_ns;
    uint64_t other_ns;
};

/* One sequence's part of a step. */
struct model_seq {
    int slot;              /* KV slot in [0, max_batch) */
    int pos;               /* position of tokens[0]; <= the slot's current length */
    int n_tokens;          /* 1 (decode) or k (prefill chunk), >= 1 */
    const int32_t *tokens; /* (n_tokens) ids < n_vocab */
    enum model_logits logits;
    float *out;    /* set by model_step: (1 or n_tokens, n_vocab) logits inside the
                      model's buffer, valid until the next step; NULL if none */
    float *hidden; /* NULL, or caller-owned (n_tokens, n_embd): filled with the final
                      hidden state of each token (after the output norm, what the head
                      reads; embeddings). Backends with hidden_out only (the CPU's) */
};

/* Every buffer of the CPU forward pass, sized at load (rows = max_step_tokens). */
struct run_state {
    float *x;          /* (rows, n_embd) residual stream */
    float *xb;         /* (rows, n_embd) normalised input of a matmul */
    float *q;          /* (rows, q_dim) queries, then RoPE'd */
    float *k;          /* (rows, kv_dim) new keys */
    float *v;          /* (rows, kv_dim) new values */
    float *att;        /* (rows, q_dim) attention output */
    float *y;          /* (rows, n_embd) matmul output before the residual add */
    float *hb;         /* (rows, n_ff) gate, then silu(gate) * up; MoE: (rows *
                          n_expert_used, n_ff_exp) too */
    float *hb2;        /* (rows, n_ff) up; same size as hb */
    float *moe_y;      /* MoE: (rows * n_expert_used, n_embd) expert outputs */
    float *moe_xg;     /* MoE: (rows * n_expert_used, n_embd) inputs gathered by expert */
    float *moe_logits; /* MoE: (rows, n_expert) router logits */
    int *moe_grow;     /* MoE: (rows * n_expert_used) row of each gathered row */
    int *moe_fill;     /* MoE: (n_expert) grouping cursor */
    int *moe_exp;      /* MoE: (rows * n_expert_used) chosen experts, rank order */
    float *moe_w;      /* MoE: (rows * n_expert_used) their weights */
    int *moe_pos;      /* MoE: (rows * n_expert_used) gathered index of (row, rank) */
    int *moe_off;      /* MoE: (n_expert + 1) first gathered index of each expert */
    float *logits;     /* (max_logit_rows, n_vocab) */
    struct q_act act[MODEL_N_ACT]; /* prepared activations (rows, max(n_embd, q_dim, n_ff)):
                            the q/k/v inputs (3, one per distinct weight type), the output
                            projection's, the gate/up inputs (2) and the down input */
    void *k_cache;                 /* (n_layer, max_batch, n_head_kv, ctx_pad, head_dim) f16, or f32
                                      (--kv f32); positions in tiles of 16, dimension-major (cpu/ops.h) */
    void *v_cache;                 /* same shape and type as k_cache */
    size_t kv_elem;                /* bytes per cache element: 2 (f16) or 4 (f32) */
    int ctx_pad;                   /* ctx rounded up to whole key tiles (cpu/ops.h OPS_KTILE) */
    size_t kv_bytes;               /* both caches */
    float *att_part;               /* (max_batch, n_head_kv, n_chunks, group, head_dim + 2) split
                                      partials: [max, sum, out(head_dim)] per chunk and query head */
    float *scratch;                /* (threads, scratch_floats): scores and fold accumulators */
    size_t scratch_floats;         /* per thread: group * (MODEL_ATTN_CHUNK + 2 * (head_dim + 2)) */
    const struct cpu_ops *ops;     /* SIMD kernels for attention, SiLU, f16 */
    float *rope_cos;               /* (ctx, n_rot / 2) */
    float *rope_sin;               /* (ctx, n_rot / 2) */
    /* Per-step plan, filled by the forward pass before the threads start. */
    int *row_seq;                  /* (rows) index of the row's sequence in the step */
    int *row_pos;                  /* (rows) position of the row */
    int *row_slot;                 /* (rows) KV slot of the row */
    int32_t *row_tok;              /* (rows) token id */
    int *out_row;                  /* (max_logit_rows) row index whose logits are wanted */
    int *dec_row;                  /* (rows) split partial index of a decode row, or -1 */
    struct model_attn_item *items; /* (max items) attention work list; a second list of
                                      sliding-window layers' items follows (gpt-oss) */
    double *item_cost;             /* (max items) prefix sums of the work estimate (both lists) */
    size_t max_items;
    int n_chunks; /* ceil(ctx / MODEL_ATTN_CHUNK) */
};

/* A unit of attention work: one row (or one row's chunk) against one KV head. */
struct model_attn_item {
    int row;   /* row in the step */
    int kvh;   /* KV head */
    int chunk; /* chunk index for a split item, -1 = walk every chunk (serial) */
};

struct model {
    struct model_config cfg;
    struct model_weights w;
    struct gguf_file file;  /* the mapping the native weights point into */
    struct model_opts opts; /* as resolved (defaults filled in) */
    int max_batch, ctx, max_rows, max_logit_rows;
    const struct backend *be;
    const struct q_kernels *kern; /* CPU matmul kernels */
    tp_pool *pool;
    struct run_state rs;
    void *be_state;             /* a non-CPU backend's own state */
    int *slot_len;              /* (max_batch) positions held per slot */
    struct model_timers last;   /* the last step */
    struct model_timers total;  /* since load */
    uint64_t steps;             /* model_step calls that ran */
    uint64_t last_experts;      /* (layer, expert) pairs whose weights the last step read,
                                 * summed over its passes (0 for a dense model) */
    uint64_t last_expert_bytes; /* bytes of expert weights the last step read */
    uint64_t *expert_rows;      /* (n_layer, n_expert) rows routed to each expert since load,
                                 * a row once per expert it chose: the router's spread (CPU
                                 * backend; NULL otherwise or for a dense model), owned */
    int last_passes;            /* forward passes over the weights in the last step: 1
                                 * batched, one per sequence in per-request decode */
    size_t kv_bytes;            /* K/V cache bytes the backend allocated */
    char quant_note[160];       /* one line: what was requantized, or "" */
};

/*
 * Load path (a llama GGUF), requantize as opts ask, and allocate the run
 * state and KV cache. Returns a model, or NULL with err set: FP_ERR_IO
 * (unreadable), FP_ERR_FORMAT (missing tensor, bad shape or metadata),
 * FP_ERR_UNSUPPORTED (not llama, tensor type without a kernel),
 * FP_ERR_RESOURCE (cache too large), FP_ERR_DEVICE (no such backend).
 * Logs one line per requantization and the KV cache size.
 */
struct model *model_new(const char *path, const struct model_opts *opts, struct err *err);
/* Same from an already opened file; the model takes ownership of *f
 * (closed by model_free, also on failure). */
struct model *model_from_gguf(struct gguf_file *f, const struct model_opts *opts, struct err *err);
void model_free(struct model *m);

/* Fill o's quant, head, decode and attention fields from their command-line
 * spellings (any may be NULL: keep o's value). quant: native|q8_0|mxfp4|
 * nvfp4 or any weight type name; head: q8_0|same; decode: batched|
 * per-request; attention: split|serial. -1 with FP_ERR_USAGE on a bad name. */
int model_opts_parse(struct model_opts *o, const char *quant, const char *head, const char *decode,
                     const char *attention, struct err *err);

/* Most experts a MoE layer may have. */
#define MODEL_MAX_EXPERTS 256

/* "llama", "qwen3", "qwen3moe", "gpt-oss". */
const char *model_arch_name(enum model_arch a);

/* Read and check the hyperparameters of f (section 2.1 defaults). */
int model_read_config(const struct gguf_file *f, struct model_config *c, struct err *err);

/*
 * Run one step over seqs[0..n). Validates everything first (slots in range
 * and distinct, pos <= slot length, pos + n_tokens <= ctx, token ids, row
 * and logits budgets) and then runs nothing on error: -1 with err set to
 * FP_ERR_USAGE or FP_ERR_RESOURCE and a message naming the sequence.
 * Returns 0 and sets seqs[i].out on success.
 * Never allocates. One step at a time: the model is not thread-safe, so
 * one scheduler thread owns it (the step itself runs on the pool).
 */
int model_step(struct model *m, struct model_seq *seqs, int n, struct err *err);

/* Forget a slot's cache (its length becomes 0). */
void model_slot_free(struct model *m, int slot);
/* Positions the slot holds. */
int model_slot_len(const struct model *m, int slot);
/* Forget a slot's positions from n on (its length becomes min(length, n)). */
void model_slot_trim(struct model *m, int slot, int n);
/* Whether the backend can copy K/V between slots (model_slot_copy). */
bool model_can_copy_kv(const struct model *m);
/* Make dst hold src's positions [0, n) (n <= src's length, src != dst):
 * dst's length becomes n. -1 with err set (FP_ERR_USAGE for bad slots or
 * n, FP_ERR_UNSUPPORTED when the backend cannot copy); dst untouched then. */
int model_slot_copy(struct model *m, int src, int dst, int n, struct err *err);

/* Requantize one matrix into dst (q_row_bytes(dst_type, cols) * rows
 * bytes, caller-owned): each row is dequantized (times src->scale) and
 * quantized with q_quant_row; NVFP4 gets the per-tensor scale of the whole
 * matrix (q_nvfp4_tensor_scale), returned in out->scale. Rows are split
 * over pool's threads when pool is not NULL. *out describes dst. */
int model_requant_matrix(const struct q_matrix *src, uint32_t dst_type, void *dst,
                         struct q_matrix *out, tp_pool *pool);
/* The same with quantizer options (opts may be NULL = defaults); only
 * opts->mxfp4_search is used: the NVFP4 tensor scale is always derived
 * from the whole matrix. `fp4serve quantize --mxfp4-search` uses this. */
int model_requant_matrix_opts(const struct q_matrix *src, uint32_t dst_type, void *dst,
                              struct q_matrix *out, tp_pool *pool, const struct q_quant_opts *opts);

/* Bytes of weights one batched step reads: every layer matrix and the head
 * (embedding rows excluded). For a MoE model the experts are counted as if
 * every one were read (the bound a large batch reaches); the bytes a step
 * really read are model_last_weight_bytes. */
size_t model_weight_bytes_per_step(const struct model *m);
/* Bytes of weights the last step read: the dense matrices and the head once
 * per pass, plus the experts it touched (m->last_expert_bytes). */
size_t model_last_weight_bytes(const struct model *m);
/* Bytes of expert e's three matrices in layer l (0 for a dense model). */
size_t model_expert_bytes(const struct model *m, int l, int e);
/* FLOPs of the matmuls for one token: 2 x the parameters of every layer
 * matrix and the head (a multiply and an add per weight). */
double model_flops_per_token(const struct model *m);
/* Attention FLOPs per token per position of context it attends to: q.k and
 * the weighted sum of v, 2 x 2 x q_dim per layer. */
double model_attn_flops_per_position(const struct model *m);

#endif
