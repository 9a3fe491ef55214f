/*
 * quant: ggml tensor types (docs/formats.md §1.4-1.5 and §3): the type
 * table, scalar codecs, row dequantization, quantization from f32, and a
 * weight matrix's description. Block layouts are format/blocks.h; the CPU
 * kernels that multiply matrices with activations are cpu/matmul.h.
 */
#ifndef ENGINE_QUANT_H
#define ENGINE_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids (include/ggml.h enum ggml_type). */
enum q_type {
    Q_F32 = 0,
    Q_F16 = 1,
    Q_Q4_0 = 2,
    Q_Q4_1 = 3,
    Q_Q5_0 = 6,
    Q_Q5_1 = 7,
    Q_Q8_0 = 8,
    Q_Q8_1 = 9,
    Q_Q4_K = 12,
    Q_Q6_K = 14,
    Q_Q8_K = 15,
    Q_BF16 = 30,
    Q_MXFP4 = 39,
    Q_NVFP4 = 40,
};

struct q_type_info {
    const char *name; /* "q4_1", "mxfp4", ... (lower case, as in --quant) */
    uint32_t block;   /* elements per block */
    uint32_t bytes;   /* bytes per block */
    bool weights;     /* supported as a weight type by this engine */
};

/* Info for a ggml type id, or NULL if the id is unknown to this engine. */
const struct q_type_info *q_info(uint32_t type);
/* Type id for a name such as "q8_0" or "nvfp4" (case-insensitive), or -1. */
int q_type_from_name(const char *name);
/* Bytes of one row of n elements (n must be a multiple of the block size). */
size_t q_row_bytes(uint32_t type, int64_t n);

/* Dequantize one row of n elements (multiple of the block) into dst, with
 * the same float operations as ggml's dequantize_row_*. NVFP4 rows come out
 * without the per-tensor scale (multiply by it, as q_matrix.scale does). */
void q_dequant_row(uint32_t type, const void *src, float *dst, int64_t n);

struct q_quant_opts {
    int mxfp4_search;         /* MXFP4: also try scale exponents e-1 and e+1, keep the lowest MSE */
    float nvfp4_tensor_scale; /* NVFP4: the per-tensor FP32 scale s2 = amax/(6*448);
                                 0 = derive from this row alone */
};

/* Quantize one row of n f32 values into dst (q_row_bytes(type, n) bytes).
 * Supported for every weight type. opts may be NULL (defaults). */
void q_quant_row(uint32_t type, const float *src, void *dst, int64_t n,
                 const struct q_quant_opts *opts);

/* NVFP4 per-tensor scale for a whole tensor: amax / (6 * 448), 1 if all zero. */
float q_nvfp4_tensor_scale(const float *x, int64_t n);

/* ---- scalar codecs (exact; tested at their edges) ---- */
float q_e2m1_to_f32(uint8_t code); /* 4-bit code -> value in {0, +-0.5, ..., +-6} */
uint8_t q_f32_to_e2m1(float x);    /* nearest, ties to even; saturates at +-6 */
float q_e8m0_to_f32(uint8_t e);    /* 2^(e-127); NaN for 0xFF */
float q_e4m3_to_f32(uint8_t x);    /* bias 7, max 448, 0x7F/0xFF = NaN; bit 7 = sign */
uint8_t q_f32_to_e4m3(float x);    /* round to nearest even, saturate at 448, NaN -> 0x7F */
float q_f16_to_f32(uint16_t h);
uint16_t q_f32_to_f16(float f); /* round to nearest even */
float q_bf16_to_f32(uint16_t h);
uint16_t q_f32_to_bf16(float f); /* round to nearest even */
/* The weight quantizers' roundings, shared with the activation quantizer
 * (cpu/act.c) so both round alike: nearest integer with ties to even for
 * |x| < 2^22 (cvtps2dq's default), a float through f16 and back, and the
 * largest |x[j]| of n values. */
float q_round_even(float x);
float q_f16_round(float f);
float q_abs_max(const float *x, int n);

/* ---- matrix x activations ---- */

/* A weight matrix in GGUF order: `rows` rows of `cols` elements each (cols =
 * ne[0], the reduction dimension), stored contiguously. */
struct q_matrix {
    uint32_t type;
    int64_t rows, cols;
    const void *data;
    size_t row_bytes;
    float scale; /* multiplies every output (NVFP4's per-tensor scale); 1 otherwise
                    (0 is read as 1, so a zero-initialized struct is safe) */
};

#endif
