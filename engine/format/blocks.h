/*
 * format/blocks.h: the one definition of every quantized block layout the
 * engine computes with (ggml's, docs/formats.md §1.5; little-endian), with
 * the checks that pin their sizes and field offsets. format/quant.c
 * quantizes and dequantizes through these structs, the CPU kernels
 * (cpu/) decode them, and the CUDA decoders (cuda/quant.cuh) read fields
 * at offsetof() of them, so a layout is written down once. Also the E2M1
 * and block-scale decoders every backend shares, and the size of the type
 * id space the kernel tables index. Plain C that nvcc compiles too.
 */
#ifndef ENGINE_FORMAT_BLOCKS_H
#define ENGINE_FORMAT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define BLK_ASSERT(cond, what) static_assert(cond, what)
#else
#define BLK_ASSERT(cond, what) _Static_assert(cond, what)
#endif

/* Type ids below this are what kernel tables index (ggml type ids up to
 * Q_NVFP4). */
#define QK_NTYPES 41

/* ---- ggml block layouts (docs/formats.md §1.5; little-endian) ---- */

struct blk_q4_0 {
    uint16_t d;     /* f16 scale */
    uint8_t qs[16]; /* low nibble: element j, high nibble: element j + 16 */
};
struct blk_q4_1 {
    uint16_t d, m; /* f16 scale and minimum */
    uint8_t qs[16];
};
struct blk_q5_0 {
    uint16_t d;
    uint8_t qh[4]; /* bit j: fifth bit of element j */
    uint8_t qs[16];
};
struct blk_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct blk_q8_0 {
    uint16_t d;
    int8_t qs[32];
};
struct blk_q4_k {
    uint16_t d, dmin;   /* f16 super-block scales */
    uint8_t scales[12]; /* 8 x (6-bit scale, 6-bit min), packed */
    uint8_t qs[128];    /* per 64 elements: low nibbles 0..31, high nibbles 32..63 */
};
struct blk_q6_k {
    uint8_t ql[128];   /* low 4 bits */
    uint8_t qh[64];    /* high 2 bits */
    int8_t scales[16]; /* one per 16 elements */
    uint16_t d;
};
struct blk_mxfp4 {
    uint8_t e;      /* E8M0 shared exponent */
    uint8_t qs[16]; /* E2M1 codes, split-half like Q4_0 */
};
struct blk_nvfp4 {
    uint8_t d[4];   /* UE4M3 scale of each 16-element sub-block */
    uint8_t qs[32]; /* sub-block s: qs[8s + j] low = element 16s + j, high = 16s + j + 8 */
};

BLK_ASSERT(sizeof(struct blk_q4_0) == 18, "q4_0 block");
BLK_ASSERT(sizeof(struct blk_q4_1) == 20, "q4_1 block");
BLK_ASSERT(sizeof(struct blk_q5_0) == 22, "q5_0 block");
BLK_ASSERT(sizeof(struct blk_q5_1) == 24, "q5_1 block");
BLK_ASSERT(sizeof(struct blk_q8_0) == 34, "q8_0 block");
BLK_ASSERT(sizeof(struct blk_q4_k) == 144, "q4_k block");
BLK_ASSERT(sizeof(struct blk_q6_k) == 210, "q6_k block");
BLK_ASSERT(sizeof(struct blk_mxfp4) == 17, "mxfp4 block");
BLK_ASSERT(sizeof(struct blk_nvfp4) == 36, "nvfp4 block");

/* ggml's kvalues_mxfp4: E2M1 values doubled so they are integers; the
 * block-scale decoders below return half the scale to compensate. */
extern const int8_t qk_e2m1_x2[16];

/* E8M0 scale / 2, exactly as ggml_e8m0_to_fp32_half (0 and 1 go subnormal). */
static inline float qk_e8m0_half(uint8_t e)
{
    union {
        uint32_t u;
        float f;
    } v = {.u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23};
    return v.f;
}

/* UE4M3 scale / 2, exactly as ggml_ue4m3_to_fp32: 0x00 and 0x7F give 0, bit 7
 * is ignored, exponent 0 is subnormal (m * 2^-9). */
static inline float qk_ue4m3_half(uint8_t x)
{
    if (x == 0 || x == 0x7F)
        return 0.0f;
    uint32_t e = (x >> 3) & 0xF, m = x & 7;
    if (e == 0)
        return (float)m * 0x1p-10f;
    union {
        uint32_t u;
        float f;
    } v = {.u = ((e + 119) << 23) | (m << 20)};
    return v.f;
}

/* Field offsets the CUDA decoders read at (cuda/quant.cuh). */
BLK_ASSERT(offsetof(struct blk_q4_1, qs) == 4, "q4_1 qs");
BLK_ASSERT(offsetof(struct blk_q5_0, qs) == 6, "q5_0 qs");
BLK_ASSERT(offsetof(struct blk_q5_1, qs) == 8, "q5_1 qs");
BLK_ASSERT(offsetof(struct blk_q4_k, qs) == 16, "q4_k qs");
BLK_ASSERT(offsetof(struct blk_q6_k, d) == 208, "q6_k d");
BLK_ASSERT(offsetof(struct blk_nvfp4, qs) == 4, "nvfp4 qs");

#endif
