/*
 * synth: seeded random-weight llama models of a given shape, written as
 * GGUF files that fp4serve and llama.cpp both load. Each carries a small
 * but valid GPT-2 byte-level BPE tokenizer (pre "smollm"), so the whole
 * path from text to tokens to logits runs without any download.
 */
#ifndef ENGINE_SYNTH_H
#define ENGINE_SYNTH_H

#include <stdint.h>

#include "err.h"

/* A model shape (the <arch>.* hyperparameters). */
struct synth_preset {
    const char *name;
    uint32_t n_layer;
    uint32_t n_embd;    /* model width */
    uint32_t n_head;    /* query heads; head dim = n_embd / n_head */
    uint32_t n_head_kv; /* key/value heads (grouped-query attention) */
    uint32_t n_ff;      /* feed-forward width */
    uint32_t n_vocab;   /* tokens, special ones included */
    uint32_t n_ctx;     /* llama.context_length */
    float rope_base;    /* llama.rope.freq_base */
    float rms_eps;      /* llama.attention.layer_norm_rms_epsilon */
    uint32_t head_dim;  /* 0: n_embd / n_head; else written as attention.key_length */
    uint32_t n_expert;  /* qwen3moe: experts per layer (0: dense) */
    uint32_t n_expert_used;
    uint32_t n_ff_exp;  /* one expert's FFN width */
    float sigma;        /* weight standard deviation (0: 0.02) */
    float embd_sigma;   /* token embedding's (0: sigma) */
    float router_sigma; /* ffn_gate_inp's (0: sigma) */
    float qk_gain;      /* qwen3: mean of attn_q_norm / attn_k_norm (0: 1), sharper attention */
    const char *arch;   /* general.architecture: "qwen3", "qwen3moe" or "gpt-oss"; NULL =
                           "llama" */
    /* gpt-oss */
    uint32_t n_swa;       /* attention.sliding_window (on the even layers) */
    float yarn_factor;    /* rope.scaling.factor (YaRN) */
    uint32_t yarn_orig;   /* rope.scaling.original_context_length */
    float bias_sigma;     /* attention and router biases' standard deviation */
    float exp_bias_sigma; /* expert gate/up biases' (large enough to reach the clamp) */
    float sink_sigma;     /* attn_sinks' */
};

/* The preset called name ("tiny", "smollm2-135m", "llama-1b", "qwen3-tiny",
 * "qwen3moe-tiny", "qwen3moe-small", "gpt-oss-tiny"), or NULL. */
const struct synth_preset *synth_preset_find(const char *name);
/* Preset names for messages and --help. */
const char *synth_preset_names(void);
/* p's architecture name ("llama" when p->arch is NULL). */
const char *synth_preset_arch(const struct synth_preset *p);
/* The default preset of an architecture ("llama" -> tiny, "qwen3" ->
 * qwen3-tiny, "qwen3moe" -> qwen3moe-tiny, "gpt-oss" -> gpt-oss-tiny), or
 * NULL for an unknown one. */
const struct synth_preset *synth_preset_for_arch(const char *arch);

struct synth_opts {
    const struct synth_preset *preset;
    uint32_t type; /* ggml type of the seven per-layer weight matrices */
    uint64_t seed;
};

/*
 * Write the model to path (atomically). Weights are N(0, sigma) from a
 * generator seeded by seed and the tensor's name (norm weights 1 + that
 * noise); the token embedding is the weight type when that is f32 or f16
 * and Q8_0 otherwise; norms are F32; there is no output.weight (tied, as
 * in SmolLM2). NVFP4 weights carry llama.cpp's per-tensor F32 scale as
 * "<name>.scale" ([1], or [n_expert] for a 3-D expert tensor: one per
 * expert), which multiplies the matmul output. qwen3 adds the per-head
 * attn_q_norm / attn_k_norm; qwen3moe replaces the dense FFN with an F32
 * router ffn_gate_inp and the 3-D ffn_{gate,up,down}_exps; gpt-oss adds
 * F32 biases to the attention projections, the router and the experts,
 * attn_sinks, post_attention_norm for ffn_norm and an untied output.weight,
 * with YaRN and sliding-window metadata. The same
 * options always give a byte-identical file. Returns 0, or -1 with err
 * set (FP_ERR_UNSUPPORTED for a type synth cannot produce, FP_ERR_IO).
 */
int synth_write(const struct synth_opts *o, const char *path, struct err *err);

#endif
