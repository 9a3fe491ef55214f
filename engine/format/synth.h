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

/* A model shape (the llama.* hyperparameters). */
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
};

/* The preset called name ("tiny", "smollm2-135m", "llama-1b"), or NULL. */
const struct synth_preset *synth_preset_find(const char *name);
/* Preset names for messages and --help: "tiny|smollm2-135m|llama-1b". */
const char *synth_preset_names(void);

struct synth_opts {
    const struct synth_preset *preset;
    uint32_t type; /* ggml type of the seven per-layer weight matrices */
    uint64_t seed;
};

/*
 * Write the model to path (atomically). Weights are N(0, 0.02) from a
 * generator seeded by seed and the tensor's name (norm weights 1 + that
 * noise); the token embedding is the weight type when that is f32 or f16
 * and Q8_0 otherwise; norms are F32; there is no output.weight (tied, as
 * in SmolLM2). NVFP4 weights carry llama.cpp's per-tensor F32 scale as
 * "<name>.scale" ([1]), which multiplies the matmul output. The same
 * options always give a byte-identical file. Returns 0, or -1 with err
 * set (FP_ERR_UNSUPPORTED for a type synth cannot produce, FP_ERR_IO).
 */
int synth_write(const struct synth_opts *o, const char *path, struct err *err);

#endif
