/*
 * quantize: offline requantization of a GGUF model (`fp4serve quantize`).
 * Every 2-D linear weight becomes the target type, the embedding/output
 * head becomes Q8_0 (or the target with head_same), everything else is
 * copied; the metadata is copied with general.file_type set to llama.cpp's
 * value for the target. The arithmetic is the loader's own
 * (model_requant_matrix), so a file written here and the same file
 * requantized at load (`--quant`) hold bit-identical weights.
 *
 * NVFP4 files follow llama.cpp's convention for the per-tensor FP32 scale:
 * a separate F32 tensor "<base>.scale" of shape [1] beside "<base>.weight"
 * (e.g. blk.0.attn_q.scale), which multiplies the matmul output
 * (llama.cpp: build_lora_mm's ggml_mul with the *_s tensor).
 */
#ifndef ENGINE_QUANTIZE_H
#define ENGINE_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct qz_opts {
    uint32_t type;     /* target ggml type of every 2-D linear weight (qz_type_find) */
    bool head_same;    /* token_embd/output to `type` too; default false = Q8_0 */
    bool mxfp4_search; /* MXFP4: best of exponents e-1, e, e+1 per block (lowest MSE) */
    int threads;       /* requantization threads; 0 = online cores */
};

/* What a run did, for the command's summary line and for tests. */
struct qz_stats {
    size_t n_tensors;    /* tensors written (scale tensors included) */
    size_t n_requant;    /* tensors whose type changed */
    size_t n_kept;       /* 2-D weights kept: already the type, or columns not a block multiple */
    size_t n_scales;     /* NVFP4 per-tensor scale tensors written */
    uint64_t bytes_in;   /* tensor data bytes of the input */
    uint64_t bytes_out;  /* tensor data bytes of the output */
    int64_t file_type;   /* general.file_type written, or -1 when none was */
    char kept_first[64]; /* name of the first tensor kept for its shape, or "" */
};

/* A target type that `--type` accepts. */
struct qz_type {
    const char *name;    /* "mxfp4", ... (the --type spelling) */
    uint32_t type;       /* ggml type id */
    int32_t llama_ftype; /* llama.cpp's LLAMA_FTYPE_MOSTLY_* for general.file_type, -1 = none */
};

/* The --type entry for name (case-sensitive), or NULL. */
const struct qz_type *qz_type_find(const char *name);
/* The --type entry for a ggml type id, or NULL. */
const struct qz_type *qz_type_of(uint32_t type);
/* "mxfp4|nvfp4|..." for messages and --help. */
const char *qz_type_names(void);

/*
 * Read in_path (a llama GGUF), requantize as o asks and write out_path
 * atomically (a temporary file renamed over it; on failure nothing is left
 * behind and out_path is untouched). out_path must not name the input.
 * Tensors are produced one at a time while the file streams out, so memory
 * stays near one tensor's f32 copy. st may be NULL. Returns 0, or -1 with
 * err set: FP_ERR_IO (unreadable input, unwritable output), FP_ERR_FORMAT
 * (corrupt input), FP_ERR_USAGE (bad options, same path twice).
 */
int qz_quantize_file(const char *in_path, const char *out_path, const struct qz_opts *o,
                     struct qz_stats *st, struct err *err);

#endif
