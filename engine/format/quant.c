/*
 * quant: the ggml tensor-type table, the scalar codecs (E2M1, E8M0, E4M3,
 * f16, bf16), row dequantization, row quantization from f32, and the
 * activation buffers that q_matmul consumes. Block layouts and formulas
 * follow docs/formats.md §1.5 and §3; the kernels are in cpu/.
 */
#include "format/quant.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xalloc.h"

#include "format/blocks.h"

/* ---- type table ----
 *
 * Block sizes and bytes follow ggml (gguf-py constants.py GGML_QUANT_SIZES);
 * a reader can size every tensor of a file, including types we do not run.
 */

/* Every ggml type id with its block geometry, so a GGUF reader can size any
 * tensor; `weights` marks the ones this engine computes with. */
static const struct q_type_info type_table[QK_NTYPES + 2] = {
    [Q_F32] = {"f32", 1, 4, true},       [Q_F16] = {"f16", 1, 2, true},
    [Q_Q4_0] = {"q4_0", 32, 18, true},   [Q_Q4_1] = {"q4_1", 32, 20, true},
    [Q_Q5_0] = {"q5_0", 32, 22, true},   [Q_Q5_1] = {"q5_1", 32, 24, true},
    [Q_Q8_0] = {"q8_0", 32, 34, true},   [Q_Q8_1] = {"q8_1", 32, 36, false},
    [10] = {"q2_k", 256, 84, false},     [11] = {"q3_k", 256, 110, false},
    [Q_Q4_K] = {"q4_k", 256, 144, true}, [13] = {"q5_k", 256, 176, false},
    [Q_Q6_K] = {"q6_k", 256, 210, true}, [Q_Q8_K] = {"q8_k", 256, 292, false},
    [16] = {"iq2_xxs", 256, 66, false},  [17] = {"iq2_xs", 256, 74, false},
    [18] = {"iq3_xxs", 256, 98, false},  [19] = {"iq1_s", 256, 50, false},
    [20] = {"iq4_nl", 32, 18, false},    [21] = {"iq3_s", 256, 110, false},
    [22] = {"iq2_s", 256, 82, false},    [23] = {"iq4_xs", 256, 136, false},
    [24] = {"i8", 1, 1, false},          [25] = {"i16", 1, 2, false},
    [26] = {"i32", 1, 4, false},         [27] = {"i64", 1, 8, false},
    [28] = {"f64", 1, 8, false},         [29] = {"iq1_m", 256, 56, false},
    [Q_BF16] = {"bf16", 1, 2, true},     [34] = {"tq1_0", 256, 54, false},
    [35] = {"tq2_0", 256, 66, false},    [Q_MXFP4] = {"mxfp4", 32, 17, true},
    [Q_NVFP4] = {"nvfp4", 64, 36, true}, [41] = {"q1_0", 128, 18, false},
    [42] = {"q2_0", 64, 18, false},
};
#define N_TYPE_TABLE (sizeof(type_table) / sizeof(type_table[0]))

const struct q_type_info *q_info(uint32_t type)
{
    if (type >= N_TYPE_TABLE || !type_table[type].name)
        return NULL;
    return &type_table[type];
}

int q_type_from_name(const char *name)
{
    for (size_t i = 0; i < N_TYPE_TABLE; i++)
        if (type_table[i].name && strcasecmp(type_table[i].name, name) == 0)
            return (int)i;
    return -1;
}

size_t q_row_bytes(uint32_t type, int64_t n)
{
    const struct q_type_info *ti = q_info(type);
    assert(ti && n % ti->block == 0);
    return (size_t)(n / ti->block) * ti->bytes;
}

/* ---- scalar codecs ----
 *
 * Written from the formats' definitions with integer bit manipulation, so
 * they are exact and independent of the FPU's rounding mode (except
 * round_even, which relies on the default round-to-nearest-even). The block
 * decoders of ggml (E8M0 / 2, UE4M3 / 2) live in format/blocks.h.
 */

const int8_t qk_e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}
static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Round to the nearest integer, ties to even, for |x| < 2^22 (the default
 * rounding of cvtps2dq, so SIMD code reproduces it exactly). */
static float round_even(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    return x >= 0 ? (x + magic) - magic : -((-x + magic) - magic);
}

float q_e2m1_to_f32(uint8_t code)
{
    float v = (float)qk_e2m1_x2[code & 7] * 0.5f;
    return code & 8 ? -v : v;
}

/* E2M1 code for a quantizer: like q_f32_to_e2m1, but a value that rounds to
 * zero gets code 0 (+0), never 8 (-0), so requantizing dequantized data (where
 * -0 reads as 0, as in ggml) gives the same bytes. */
static uint8_t e2m1_code(float x)
{
    uint8_t c = q_f32_to_e2m1(x);
    return (c & 7) ? c : 0;
}

uint8_t q_f32_to_e2m1(float x)
{
    if (isnan(x))
        return 0;
    float a = fabsf(x);
    /* Midpoints between neighbours; at a tie the even code (mantissa bit 0) wins. */
    uint8_t m = a <= 0.25f   ? 0
                : a < 0.75f  ? 1
                : a <= 1.25f ? 2
                : a < 1.75f  ? 3
                : a <= 2.5f  ? 4
                : a < 3.5f   ? 5
                : a <= 5.0f  ? 6
                             : 7;
    return (uint8_t)(m | (signbit(x) ? 8 : 0));
}

float q_e8m0_to_f32(uint8_t e)
{
    if (e == 0xFF)
        return NAN;
    return e == 0 ? bits_f32(0x00400000u) : bits_f32((uint32_t)e << 23);
}

float q_e4m3_to_f32(uint8_t x)
{
    uint32_t e = (x >> 3) & 0xF, m = x & 7;
    float v;
    if (e == 15 && m == 7)
        return NAN;
    v = e == 0 ? (float)m * 0x1p-9f : bits_f32(((e + 120) << 23) | (m << 20));
    return x & 0x80 ? -v : v;
}

uint8_t q_f32_to_e4m3(float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    float a = fabsf(x);
    uint8_t code;
    if (isnan(x))
        return 0x7F;
    if (a >= 448.0f) {
        code = 0x7E;
    } else if (a < 0x1p-6f) {
        /* subnormal: multiples of 2^-9 (rounding up to 8 gives the min normal) */
        code = (uint8_t)round_even(a * 512.0f);
    } else {
        uint32_t u = f32_bits(a);
        u += 0x7FFFF + ((u >> 20) & 1); /* round the mantissa to 3 bits, ties to even */
        uint32_t e = (u >> 23) - 120, m = (u >> 20) & 7;
        code = e > 15 || (e == 15 && m == 7) ? 0x7E : (uint8_t)((e << 3) | m);
    }
    return (uint8_t)(code | sign);
}

float q_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    if (e == 0x1F)
        return bits_f32(sign | 0x7F800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t q_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    u &= 0x7FFFFFFFu;
    if (u > 0x7F800000u)
        return sign | 0x7E00; /* NaN */
    if (u >= 0x477FF000u)
        return sign | 0x7C00; /* rounds to infinity */
    if (u < 0x38800000u)      /* below the f16 normal range: multiples of 2^-24 */
        return sign | (uint16_t)round_even(bits_f32(u) * 0x1p24f);
    uint32_t h = ((u >> 23) - 112) << 10 | ((u >> 13) & 0x3FF);
    uint32_t rem = u & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return sign | (uint16_t)h;
}

float q_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t q_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x40); /* keep NaN a NaN */
    u += 0x7FFF + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float f16(uint16_t h)
{
    return q_f16_to_f32(h);
}
static float f16_round(float f)
{
    return q_f16_to_f32(q_f32_to_f16(f));
}

/* ---- row dequantization (the same float operations as ggml's dequantize_row_*) ----
 *
 * Each case follows docs/formats.md §1.5 literally, operation for
 * operation, so values match llama.cpp's dequantization bit for bit.
 */

static void get_scale_min_k4(int j, const uint8_t *s, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

void q_dequant_row(uint32_t type, const void *src, float *y, int64_t n)
{
    const struct q_type_info *ti = q_info(type);
    assert(ti && ti->weights && n % ti->block == 0);
    int64_t nb = n / ti->block;
    switch (type) {
    case Q_F32:
        memcpy(y, src, (size_t)n * sizeof(float));
        break;
    case Q_F16:
        for (int64_t i = 0; i < n; i++)
            y[i] = f16(((const uint16_t *)src)[i]);
        break;
    case Q_BF16:
        for (int64_t i = 0; i < n; i++)
            y[i] = q_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case Q_Q4_0:
        for (int64_t i = 0; i < nb; i++, y += 32) {
            const struct blk_q4_0 *b = (const struct blk_q4_0 *)src + i;
            float d = f16(b->d);
            for (int j = 0; j < 16; j++) {
                y[j] = (float)((b->qs[j] & 0xF) - 8) * d;
                y[j + 16] = (float)((b->qs[j] >> 4) - 8) * d;
            }
        }
        break;
    case Q_Q4_1:
        for (int64_t i = 0; i < nb; i++, y += 32) {
            const struct blk_q4_1 *b = (const struct blk_q4_1 *)src + i;
            float d = f16(b->d), m = f16(b->m);
            for (int j = 0; j < 16; j++) {
                y[j] = (float)(b->qs[j] & 0xF) * d + m;
                y[j + 16] = (float)(b->qs[j] >> 4) * d + m;
            }
        }
        break;
    case Q_Q5_0:
        for (int64_t i = 0; i < nb; i++, y += 32) {
            const struct blk_q5_0 *b = (const struct blk_q5_0 *)src + i;
            float d = f16(b->d);
            uint32_t qh;
            memcpy(&qh, b->qh, 4);
            for (int j = 0; j < 16; j++) {
                int lo = (b->qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
                int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
                y[j] = (float)(lo - 16) * d;
                y[j + 16] = (float)(hi - 16) * d;
            }
        }
        break;
    case Q_Q5_1:
        for (int64_t i = 0; i < nb; i++, y += 32) {
            const struct blk_q5_1 *b = (const struct blk_q5_1 *)src + i;
            float d = f16(b->d), m = f16(b->m);
            uint32_t qh;
            memcpy(&qh, b->qh, 4);
            for (int j = 0; j < 16; j++) {
                int lo = (b->qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
                int hi = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
                y[j] = (float)lo * d + m;
                y[j + 16] = (float)hi * d + m;
            }
        }
        break;
    case Q_Q8_0:
        for (int64_t i = 0; i < nb; i++, y += 32) {
            const struct blk_q8_0 *b = (const struct blk_q8_0 *)src + i;
            float d = f16(b->d);
            for (int j = 0; j < 32; j++)
                y[j] = (float)b->qs[j] * d;
        }
        break;
    case Q_Q4_K:
        for (int64_t i = 0; i < nb; i++) {
            const struct blk_q4_k *b = (const struct blk_q4_k *)src + i;
            float d = f16(b->d), dmin = f16(b->dmin);
            const uint8_t *q = b->qs;
            for (int c = 0; c < 4; c++, q += 32) {
                uint8_t sc, m;
                get_scale_min_k4(2 * c, b->scales, &sc, &m);
                float d1 = d * sc, m1 = dmin * m;
                get_scale_min_k4(2 * c + 1, b->scales, &sc, &m);
                float d2 = d * sc, m2 = dmin * m;
                for (int l = 0; l < 32; l++)
                    *y++ = d1 * (float)(q[l] & 0xF) - m1;
                for (int l = 0; l < 32; l++)
                    *y++ = d2 * (float)(q[l] >> 4) - m2;
            }
        }
        break;
    case Q_Q6_K:
        for (int64_t i = 0; i < nb; i++) {
            const struct blk_q6_k *b = (const struct blk_q6_k *)src + i;
            float d = f16(b->d);
            const uint8_t *ql = b->ql, *qh = b->qh;
            const int8_t *sc = b->scales;
            for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = (int)((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                    int q2 = (int)((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                    int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                    int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                    y[l] = d * sc[is] * (float)q1;
                    y[l + 32] = d * sc[is + 2] * (float)q2;
                    y[l + 64] = d * sc[is + 4] * (float)q3;
                    y[l + 96] = d * sc[is + 6] * (float)q4;
                }
            }
        }
        break;
    case Q_MXFP4:
        for (int64_t i = 0; i < nb; i++, y += 32) {
            const struct blk_mxfp4 *b = (const struct blk_mxfp4 *)src + i;
            float d = qk_e8m0_half(b->e);
            for (int j = 0; j < 16; j++) {
                y[j] = (float)qk_e2m1_x2[b->qs[j] & 0xF] * d;
                y[j + 16] = (float)qk_e2m1_x2[b->qs[j] >> 4] * d;
            }
        }
        break;
    case Q_NVFP4:
        for (int64_t i = 0; i < nb; i++) {
            const struct blk_nvfp4 *b = (const struct blk_nvfp4 *)src + i;
            for (int s = 0; s < 4; s++, y += 16) {
                float d = qk_ue4m3_half(b->d[s]);
                for (int j = 0; j < 8; j++) {
                    y[j] = (float)qk_e2m1_x2[b->qs[8 * s + j] & 0xF] * d;
                    y[j + 8] = (float)qk_e2m1_x2[b->qs[8 * s + j] >> 4] * d;
                }
            }
        }
        break;
    default:
        assert(!"unreachable: type without dequantization");
    }
}

/* ---- row quantization ----
 *
 * Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 reproduce ggml's reference quantizers
 * (quantize_row_*_ref): the same scale formula, the same truncating casts.
 * The K-quants use simpler quantizers of our own (the format is ggml's; the
 * bytes differ from llama-quantize's iterative search). MXFP4 and NVFP4
 * follow the OCP and NVIDIA recipes (docs/formats.md §3.2, §3.3, §3.5).
 */

/* Largest |x| over n values, and the value that has it (sign kept: ggml's
 * Q4_0/Q5_0/Q6_K map that value to the most negative code, which has one
 * more step than the positive side). */
static float abs_max(const float *x, int n, float *signed_max)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (signed_max)
        *signed_max = max;
    return amax;
}

/* ggml's quantize_row_q4_0_ref: d = max / -8, q = min(15, (int)(x/d + 8.5)). */
static void quant_q4_0(const float *x, struct blk_q4_0 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32, b++) {
        float max;
        abs_max(x, 32, &max);
        float d = max / -8, id = d != 0.0f ? 1.0f / d : 0.0f;
        b->d = q_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int lo = (int)(int8_t)(x[j] * id + 8.5f), hi = (int)(int8_t)(x[j + 16] * id + 8.5f);
            lo = lo < 15 ? lo : 15;
            hi = hi < 15 ? hi : 15;
            b->qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

/* ggml's quantize_row_q4_1_ref: d = (max - min) / 15, m = min,
 * q = min(15, (int)((x - min)/d + 0.5)). */
static void quant_q4_1(const float *x, struct blk_q4_1 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32, b++) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < 32; j++) {
            min = x[j] < min ? x[j] : min;
            max = x[j] > max ? x[j] : max;
        }
        float d = (max - min) / 15, id = d != 0.0f ? 1.0f / d : 0.0f;
        b->d = q_f32_to_f16(d);
        b->m = q_f32_to_f16(min);
        for (int j = 0; j < 16; j++) {
            int lo = (int)(int8_t)((x[j] - min) * id + 0.5f);
            int hi = (int)(int8_t)((x[j + 16] - min) * id + 0.5f);
            lo = lo < 15 ? lo : 15;
            hi = hi < 15 ? hi : 15;
            b->qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

/* ggml's quantize_row_q5_0_ref: d = max / -16, q = min(31, (int)(x/d + 16.5)). */
static void quant_q5_0(const float *x, struct blk_q5_0 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32, b++) {
        float max;
        abs_max(x, 32, &max);
        float d = max / -16, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        b->d = q_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int lo = (int)(int8_t)(x[j] * id + 16.5f), hi = (int)(int8_t)(x[j + 16] * id + 16.5f);
            lo = lo < 31 ? lo : 31;
            hi = hi < 31 ? hi : 31;
            b->qs[j] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
            qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
        }
        memcpy(b->qh, &qh, 4);
    }
}

/* ggml's quantize_row_q5_1_ref: d = (max - min) / 31, m = min. */
static void quant_q5_1(const float *x, struct blk_q5_1 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32, b++) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < 32; j++) {
            min = x[j] < min ? x[j] : min;
            max = x[j] > max ? x[j] : max;
        }
        float d = (max - min) / 31, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        b->d = q_f32_to_f16(d);
        b->m = q_f32_to_f16(min);
        for (int j = 0; j < 16; j++) {
            int lo = (int)(uint8_t)((x[j] - min) * id + 0.5f);
            int hi = (int)(uint8_t)((x[j + 16] - min) * id + 0.5f);
            b->qs[j] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
            qh |= (uint32_t)((lo >> 4) & 1) << j | (uint32_t)((hi >> 4) & 1) << (j + 16);
        }
        memcpy(b->qh, &qh, 4);
    }
}

/* ggml's quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d). */
static void quant_q8_0(const float *x, struct blk_q8_0 *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 32, b++) {
        float d = abs_max(x, 32, NULL) / 127, id = d != 0.0f ? 1.0f / d : 0.0f;
        b->d = q_f32_to_f16(d);
        for (int j = 0; j < 32; j++)
            b->qs[j] = (int8_t)roundf(x[j] * id);
    }
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/*
 * Q4_K (our quantizer; llama-quantize searches scales iteratively, so its
 * bytes differ while the format is the same): per 32-element sub-block the
 * range [min(0, lo), hi] gives scale and min, both stored as 6-bit multiples
 * of the f16 super-block scales d and dmin; elements are then rounded with
 * the stored scales.
 */
static void quant_q4_k(const float *x, struct blk_q4_k *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 256, b++) {
        float scale[8], mins[8], max_scale = 0, max_min = 0;
        uint8_t sc[8], mq[8];
        for (int s = 0; s < 8; s++) {
            float lo = 0, hi = -FLT_MAX;
            for (int j = 0; j < 32; j++) {
                lo = x[32 * s + j] < lo ? x[32 * s + j] : lo;
                hi = x[32 * s + j] > hi ? x[32 * s + j] : hi;
            }
            scale[s] = (hi - lo) / 15;
            mins[s] = -lo;
            max_scale = scale[s] > max_scale ? scale[s] : max_scale;
            max_min = mins[s] > max_min ? mins[s] : max_min;
        }
        float d = max_scale / 63, dmin = max_min / 63;
        b->d = q_f32_to_f16(d);
        b->dmin = q_f32_to_f16(dmin);
        d = f16(b->d);
        dmin = f16(b->dmin);
        for (int s = 0; s < 8; s++) {
            sc[s] = (uint8_t)(d > 0 ? clampi((int)round_even(scale[s] / d), 0, 63) : 0);
            mq[s] = (uint8_t)(dmin > 0 ? clampi((int)round_even(mins[s] / dmin), 0, 63) : 0);
        }
        for (int j = 0; j < 4; j++) {
            b->scales[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
            b->scales[j + 4] = (uint8_t)((mq[j] & 63) | (mq[j + 4] >> 4) << 6);
            b->scales[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (mq[j + 4] & 0xF) << 4);
        }
        for (int c = 0; c < 4; c++) {
            for (int half = 0; half < 2; half++) {
                int s = 2 * c + half;
                float ds = d * sc[s], ms = dmin * mq[s];
                for (int l = 0; l < 32; l++) {
                    int q = ds > 0 ? clampi((int)round_even((x[32 * s + l] + ms) / ds), 0, 15) : 0;
                    if (half == 0)
                        b->qs[32 * c + l] = (uint8_t)q;
                    else
                        b->qs[32 * c + l] |= (uint8_t)(q << 4);
                }
            }
        }
    }
}

/*
 * Q6_K (our quantizer): per 16-element sub-block the signed value of largest
 * magnitude maps to -32; the sub-block scales are int8 multiples of the f16
 * super-block scale d; elements are rounded with the stored scales.
 */
static void quant_q6_k(const float *x, struct blk_q6_k *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 256, b++) {
        float scale[16], max_abs_scale = 0;
        int q[256];
        for (int s = 0; s < 16; s++) {
            float max;
            abs_max(x + 16 * s, 16, &max);
            scale[s] = max / -32;
            max_abs_scale = fabsf(scale[s]) > max_abs_scale ? fabsf(scale[s]) : max_abs_scale;
        }
        b->d = q_f32_to_f16(max_abs_scale / 127);
        float d = f16(b->d);
        for (int s = 0; s < 16; s++) {
            int sc = d > 0 ? clampi((int)round_even(scale[s] / d), -128, 127) : 0;
            float ds = d * sc;
            b->scales[s] = (int8_t)sc;
            for (int j = 0; j < 16; j++)
                q[16 * s + j] =
                    (ds != 0 ? clampi((int)round_even(x[16 * s + j] / ds), -32, 31) : 0) + 32;
        }
        for (int half = 0; half < 2; half++) {
            const int *qq = q + 128 * half;
            uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((qq[l] & 0xF) | (qq[l + 64] & 0xF) << 4);
                ql[l + 32] = (uint8_t)((qq[l + 32] & 0xF) | (qq[l + 96] & 0xF) << 4);
                qh[l] = (uint8_t)((qq[l] >> 4) | (qq[l + 32] >> 4) << 2 | (qq[l + 64] >> 4) << 4 |
                                  (qq[l + 96] >> 4) << 6);
            }
        }
    }
}

/* E2M1 codes of x[j] * inv (32 values), and their squared error against x
 * when decoded with scale s (the undoubled E8M0 value). */
static double mxfp4_codes(const float *x, float inv, float s, uint8_t *codes)
{
    double err = 0;
    for (int j = 0; j < 32; j++) {
        codes[j] = e2m1_code(x[j] * inv);
        double e = (double)x[j] - (double)q_e2m1_to_f32(codes[j]) * s;
        err += e * e;
    }
    return err;
}

/*
 * MXFP4, the OCP recipe: shared exponent floor(log2(amax)) - 2 (so amax / 2^e
 * lies in [4, 8)), elements rounded to E2M1, ties to even, saturating at 6.
 * With search, exponents e-1 and e+1 are tried too and the lowest block MSE
 * wins (ties to the smaller exponent); the result is then put in canonical
 * form (the smallest exponent giving the same values), which makes
 * quantize(dequantize(q)) == q.
 */
static void quant_mxfp4(const float *x, struct blk_mxfp4 *b, int64_t nb, bool search)
{
    for (int64_t i = 0; i < nb; i++, x += 32, b++) {
        float amax = abs_max(x, 32, NULL);
        uint8_t codes[32], best_codes[32];
        int e = 0;
        if (amax > 0 && isfinite(amax)) {
            int k;
            frexpf(amax, &k); /* amax = f * 2^k, f in [0.5, 1): floor(log2 amax) = k - 1 */
            e = clampi(k - 1 - 2 + 127, 0, 254);
        }
        int lo = search ? e - 1 : e, hi = search ? e + 1 : e, best = -1;
        double best_err = INFINITY;
        for (int c = lo; c <= hi; c++) {
            if (c < 0 || c > 254)
                continue;
            float s = ldexpf(1.0f, c - 127), inv = ldexpf(1.0f, 127 - c);
            double err = mxfp4_codes(x, inv, s, codes);
            if (best < 0 || err < best_err) {
                best = c;
                best_err = err;
                memcpy(best_codes, codes, sizeof(codes));
            }
        }
        /* canonical form: halve the exponent while every value can double (|v| <= 3) */
        for (;;) {
            int maxm = 0;
            for (int j = 0; j < 32; j++)
                maxm = (best_codes[j] & 7) > maxm ? (best_codes[j] & 7) : maxm;
            if (best == 0 || maxm > 5 || maxm == 0)
                break;
            static const uint8_t twice[6] = {0, 2, 4, 5, 6, 7};
            for (int j = 0; j < 32; j++)
                best_codes[j] = (uint8_t)((best_codes[j] & 8) | twice[best_codes[j] & 7]);
            best--;
        }
        b->e = (uint8_t)best;
        for (int j = 0; j < 16; j++)
            b->qs[j] = (uint8_t)(best_codes[j] | best_codes[j + 16] << 4);
    }
}

/* amax / (6 * 448): the largest block scale then lands on E4M3's maximum, so
 * the 8-bit scales use their whole range (docs/formats.md §3.3: without it, scales
 * of typical weights fall near E4M3's subnormals). */
float q_nvfp4_tensor_scale(const float *x, int64_t n)
{
    float amax = 0;
    for (int64_t i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    return amax > 0 && isfinite(amax) ? amax / (6.0f * 448.0f) : 1.0f;
}

/*
 * NVFP4 with a per-tensor scale s2: each 16-element sub-block gets the E4M3
 * scale rne(amax / (6 * s2)); elements are rne(x / (scale * s2)) in E2M1. The
 * block stores only the E4M3 bytes, so dequantization gives values / s2; the
 * caller multiplies by s2 (q_matrix.scale), as llama.cpp's graph does.
 */
static void quant_nvfp4(const float *x, struct blk_nvfp4 *b, int64_t nb, float s2)
{
    for (int64_t i = 0; i < nb; i++, b++) {
        for (int s = 0; s < 4; s++, x += 16) {
            float amax = abs_max(x, 16, NULL);
            uint8_t sb = q_f32_to_e4m3(amax / (6.0f * s2));
            float scale = q_e4m3_to_f32(sb) * s2;
            b->d[s] = sb;
            for (int j = 0; j < 8; j++) {
                uint8_t lo = scale > 0 ? e2m1_code(x[j] / scale) : 0;
                uint8_t hi = scale > 0 ? e2m1_code(x[j + 8] / scale) : 0;
                b->qs[8 * s + j] = (uint8_t)(lo | hi << 4);
            }
        }
    }
}

void q_quant_row(uint32_t type, const float *src, void *dst, int64_t n,
                 const struct q_quant_opts *opts)
{
    const struct q_type_info *ti = q_info(type);
    assert(ti && ti->weights && n % ti->block == 0);
    int64_t nb = n / ti->block;
    switch (type) {
    case Q_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case Q_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = q_f32_to_f16(src[i]);
        break;
    case Q_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = q_f32_to_bf16(src[i]);
        break;
    case Q_Q4_0:
        quant_q4_0(src, dst, nb);
        break;
    case Q_Q4_1:
        quant_q4_1(src, dst, nb);
        break;
    case Q_Q5_0:
        quant_q5_0(src, dst, nb);
        break;
    case Q_Q5_1:
        quant_q5_1(src, dst, nb);
        break;
    case Q_Q8_0:
        quant_q8_0(src, dst, nb);
        break;
    case Q_Q4_K:
        quant_q4_k(src, dst, nb);
        break;
    case Q_Q6_K:
        quant_q6_k(src, dst, nb);
        break;
    case Q_MXFP4:
        quant_mxfp4(src, dst, nb, opts && opts->mxfp4_search);
        break;
    case Q_NVFP4: {
        float s2 = opts && opts->nvfp4_tensor_scale > 0 ? opts->nvfp4_tensor_scale
                                                        : q_nvfp4_tensor_scale(src, n);
        quant_nvfp4(src, dst, nb, s2);
        break;
    }
    default:
        assert(!"unreachable: type without quantization");
    }
}

/* The roundings above, for the activation quantizer (cpu/act.c), which
 * must round exactly as the weight quantizers do. */
float q_round_even(float x)
{
    return round_even(x);
}
float q_f16_round(float f)
{
    return f16_round(f);
}
float q_abs_max(const float *x, int n)
{
    return abs_max(x, n, NULL);
}
