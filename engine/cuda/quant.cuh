/*
 * cuda/quant.cuh: device decoders for every weight type. Quantized types
 * are read in units of 16 consecutive elements of a row (the NVFP4 and
 * Q6_K scale granularity): 16 int8 values in element order plus a scale d
 * and an offset m, element i = q_i * d + m. The GEMV feeds q to dp4a
 * against int8 activations; the tensor-core path and the embedding turn
 * it into floats. F32, F16 and BF16 are read element by element. Block
 * layouts: format/blocks.h (fields read at their offsetof, AT below;
 * docs/formats.md §1.5); the reference for every value
 * is q_dequant_row in engine/format/quant.c, which unit_value reproduces bit for
 * bit (explicit roundings, no contraction into fma). Everything here also
 * compiles for the host, so the decoders are tested on machines without a
 * GPU (selftest.cu, tests/unit/engine_cudadec.c).
 */
#ifndef ENGINE_CUDA_QUANT_CUH
#define ENGINE_CUDA_QUANT_CUH

#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "format/blocks.h"
#include "format/quant.h"
}

/* Byte offset of field F in block struct S (format/blocks.h). */
#define AT(S, F) offsetof(struct S, F)

#define QD __host__ __device__ __forceinline__

/* ---- the few intrinsics used below, with host versions of the same
 * semantics (per-byte wrap-around subtraction; byte select from the 8
 * bytes y:x by 3-bit selectors; IEEE single roundings) ---- */

QD uint32_t vsub4(uint32_t a, uint32_t b)
{
#ifdef __CUDA_ARCH__
    return __vsub4(a, b);
#else
    uint32_t r = 0;
    for (int i = 0; i < 32; i += 8)
        r |= ((a >> i) - (b >> i) & 0xFFu) << i;
    return r;
#endif
}
QD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
#ifdef __CUDA_ARCH__
    return __byte_perm(x, y, s);
#else
    uint64_t v = (uint64_t)y << 32 | x;
    uint32_t r = 0;
    for (int n = 0; n < 4; n++)
        r |= (uint32_t)(v >> (8 * (s >> (4 * n) & 7)) & 0xFFu) << (8 * n);
    return r;
#endif
}
QD float bits_float(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
#endif
}
QD float mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b; /* host code is built without FMA contraction */
#endif
}
QD float add_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

/* 16 elements of a row: element i = int8 byte i of q * d + m. */
struct unit16 {
    int q[4]; /* bytes in element order, 4 per word (dp4a operands) */
    float d;  /* scale */
    float m;  /* offset (0 for types without a min) */
};

/* ---- loads at the alignment a block layout guarantees (rows start
 * 256-byte aligned; blocks of 17, 18, 22, 34 or 210 bytes do not keep
 * 4-byte alignment) ---- */

QD float f16_at(const uint8_t *p)
{
    return __half2float(__ushort_as_half(*(const unsigned short *)p));
}
QD uint32_t u32_a1(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
QD uint32_t u32_a2(const uint8_t *p)
{
    const uint16_t *h = (const uint16_t *)p;
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}
QD uint32_t u32_a4(const uint8_t *p)
{
    return *(const uint32_t *)p;
}

/* Four E2M1 codes (the low nibble of each byte, high nibbles zero) to
 * ggml's doubled values {0, 1, 2, 3, 4, 6, 8, 12} with sign, as int8 bytes:
 * two byte permutes over a 16-entry table, picked per byte by the sign bit.
 * Selector nibbles keep bit 3 clear (prmt would sign-replicate). */
QD int e2m1_x2(uint32_t codes)
{
    uint32_t sel =
        (codes & 0x7u) | (codes >> 4 & 0x70u) | (codes >> 8 & 0x700u) | (codes >> 12 & 0x7000u);
    uint32_t pos = byte_perm(0x03020100u, 0x0C080604u, sel); /* 0 1 2 3 | 4 6 8 12 */
    uint32_t neg = byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, sel); /* negated */
    uint32_t sign = (codes >> 3 & 0x01010101u) * 0xFFu;
    return (int)((pos & ~sign) | (neg & sign));
}

/* E8M0 scale / 2 (ggml_e8m0_to_fp32_half; 0 and 1 are subnormal). */
QD float e8m0_half(uint8_t e)
{
    return e < 2 ? bits_float(0x00200000u << e) : bits_float((uint32_t)(e - 1) << 23);
}

/* UE4M3 scale / 2 (ggml_ue4m3_to_fp32): 0x00 and 0x7F give 0, bit 7 is
 * ignored, exponent 0 is subnormal. */
QD float ue4m3_half(uint8_t x)
{
    if (x == 0 || x == 0x7F)
        return 0.0f;
    uint32_t e = x >> 3 & 0xF, m = x & 7;
    if (e == 0)
        return (float)m * 0x1p-10f;
    return bits_float((e + 119) << 23 | m << 20);
}

/* Five bits per element: the nibbles of nib (one per byte) with bit 4 of
 * each byte taken from 4 consecutive bits of h. */
QD uint32_t with_bit4(uint32_t nib, uint32_t h4)
{
    return nib | (h4 & 1) << 4 | (h4 & 2) << 11 | (h4 & 4) << 18 | (h4 & 8) << 25;
}

/* ---- quantized types: qt<T>::unit(row, u, o) decodes elements
 * [16u, 16u + 16) of a row ---- */

template <uint32_t T> struct qt;

template <> struct qt<Q_Q4_0> {
    static constexpr int block = 32, bytes = sizeof(struct blk_q4_0);
    static constexpr bool has_min = false;
    QD static void unit(const uint8_t *row, int u, unit16 &o)
    {
        const uint8_t *b = row + (size_t)(u >> 1) * bytes;
        int sh = (u & 1) * 4; /* elements 16..31 are the high nibbles */
        o.d = f16_at(b);
        o.m = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++)
            o.q[i] =
                (int)vsub4(u32_a2(b + AT(blk_q4_0, qs) + 4 * i) >> sh & 0x0F0F0F0Fu, 0x08080808u);
    }
};

template <> struct qt<Q_Q4_1> {
    static constexpr int block = 32, bytes = sizeof(struct blk_q4_1);
    static constexpr bool has_min = true;
    QD static void unit(const uint8_t *row, int u, unit16 &o)
    {
        const uint8_t *b = row + (size_t)(u >> 1) * bytes;
        int sh = (u & 1) * 4;
        o.d = f16_at(b);
        o.m = f16_at(b + AT(blk_q4_1, m));
#pragma unroll
        for (int i = 0; i < 4; i++)
            o.q[i] = (int)(u32_a4(b + AT(blk_q4_1, qs) + 4 * i) >> sh & 0x0F0F0F0Fu);
    }
};

template <> struct qt<Q_Q5_0> {
    static constexpr int block = 32, bytes = sizeof(struct blk_q5_0);
    static constexpr bool has_min = false;
    QD static void unit(const uint8_t *row, int u, unit16 &o)
    {
        const uint8_t *b = row + (size_t)(u >> 1) * bytes;
        int sh = (u & 1) * 4;
        uint32_t h =
            u32_a2(b + AT(blk_q5_0, qh)) >> ((u & 1) * 16); /* bit j: fifth bit of element j */
        o.d = f16_at(b);
        o.m = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t v = with_bit4(u32_a2(b + AT(blk_q5_0, qs) + 4 * i) >> sh & 0x0F0F0F0Fu,
                                   h >> (4 * i) & 0xF);
            o.q[i] = (int)vsub4(v, 0x10101010u);
        }
    }
};

template <> struct qt<Q_Q5_1> {
    static constexpr int block = 32, bytes = sizeof(struct blk_q5_1);
    static constexpr bool has_min = true;
    QD static void unit(const uint8_t *row, int u, unit16 &o)
    {
        const uint8_t *b = row + (size_t)(u >> 1) * bytes;
        int sh = (u & 1) * 4;
        uint32_t h = u32_a4(b + AT(blk_q5_1, qh)) >> ((u & 1) * 16);
        o.d = f16_at(b);
        o.m = f16_at(b + AT(blk_q5_1, m));
#pragma unroll
        for (int i = 0; i < 4; i++)
            o.q[i] = (int)with_bit4(u32_a4(b + AT(blk_q5_1, qs) + 4 * i) >> sh & 0x0F0F0F0Fu,
                                    h >> (4 * i) & 0xF);
    }
};

template <> struct qt<Q_Q8_0> {
    static constexpr int block = 32, bytes = sizeof(struct blk_q8_0);
    static constexpr bool has_min = false;
    QD static void unit(const uint8_t *row, int u, unit16 &o)
    {
        const uint8_t *b = row + (size_t)(u >> 1) * bytes;
        o.d = f16_at(b);
        o.m = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++)
            o.q[i] = (int)u32_a2(b + AT(blk_q8_0, qs) + 16 * (u & 1) + 4 * i);
    }
};

/* Q4_K: 8 sub-blocks of 32 with 6-bit scales and mins; unit u of a
 * super-block is half of sub-block j = u / 2, whose elements are the low
 * (j even) or high (j odd) nibbles of qs[32 (j / 2) ..]. */
template <> struct qt<Q_Q4_K> {
    static constexpr int block = 256, bytes = sizeof(struct blk_q4_k);
    static constexpr bool has_min = true;
    QD static void unit(const uint8_t *row, int u, unit16 &o)
    {
        const uint8_t *b = row + (size_t)(u >> 4) * bytes;
        int j = (u & 15) >> 1, half = u & 1;
        const uint8_t *s = b + AT(blk_q4_k, scales);
        int sc, mn;
        if (j < 4) {
            sc = s[j] & 63;
            mn = s[j + 4] & 63;
        } else {
            sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
            mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
        }
        o.d = mul_rn(f16_at(b), (float)sc);
        o.m = -mul_rn(f16_at(b + AT(blk_q4_k, dmin)), (float)mn);
        /* 16-byte aligned: rows are, and 144, 16, 32 and 16 are multiples of 16. */
        uint4 w = *(const uint4 *)(b + AT(blk_q4_k, qs) + 32 * (j >> 1) + 16 * half);
        int sh = (j & 1) * 4;
        o.q[0] = (int)(w.x >> sh & 0x0F0F0F0Fu);
        o.q[1] = (int)(w.y >> sh & 0x0F0F0F0Fu);
        o.q[2] = (int)(w.z >> sh & 0x0F0F0F0Fu);
        o.q[3] = (int)(w.w >> sh & 0x0F0F0F0Fu);
    }
};

/* Q6_K: two halves of 128 elements, each four regions of 32: region r
 * takes the low (r < 2) or high nibbles of ql[32 (r & 1) + l], bits 2r of
 * qh[l], and scale sc[2r + l / 16] (l < 32 within the region). */
template <> struct qt<Q_Q6_K> {
    static constexpr int block = 256, bytes = sizeof(struct blk_q6_k);
    static constexpr bool has_min = false;
    QD static void unit(const uint8_t *row, int u, unit16 &o)
    {
        const uint8_t *b = row + (size_t)(u >> 4) * bytes;
        int uu = u & 15, hf = uu >> 3, e = 16 * (uu & 7), region = e >> 5, l0 = e & 31;
        const uint8_t *ql = b + AT(blk_q6_k, ql) + 64 * hf + 32 * (region & 1) + l0;
        const uint8_t *qh = b + AT(blk_q6_k, qh) + 32 * hf + l0;
        int nsh = (region >> 1) * 4, hsh = 2 * region;
        int8_t sc = (int8_t)b[AT(blk_q6_k, scales) + 8 * hf + 2 * region + (l0 >> 4)];
        o.d = mul_rn(f16_at(b + AT(blk_q6_k, d)), (float)sc);
        o.m = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t lo = u32_a2(ql + 4 * i) >> nsh & 0x0F0F0F0Fu;
            uint32_t hi = (u32_a2(qh + 4 * i) >> hsh & 0x03030303u) << 4;
            o.q[i] = (int)vsub4(lo | hi, 0x20202020u);
        }
    }
};

template <> struct qt<Q_MXFP4> {
    static constexpr int block = 32, bytes = sizeof(struct blk_mxfp4);
    static constexpr bool has_min = false;
    QD static void unit(const uint8_t *row, int u, unit16 &o)
    {
        const uint8_t *b = row + (size_t)(u >> 1) * bytes;
        int sh = (u & 1) * 4;
        o.d = e8m0_half(b[AT(blk_mxfp4, e)]);
        o.m = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++)
            o.q[i] = e2m1_x2(u32_a1(b + AT(blk_mxfp4, qs) + 4 * i) >> sh & 0x0F0F0F0Fu);
    }
};

/* NVFP4: 64-element blocks of four 16-element sub-blocks; unit u is
 * sub-block u % 4: low nibbles of qs[8s .. 8s + 8) then their high nibbles.
 * The per-tensor scale is applied to the matmul output (cu_mat.scale). */
template <> struct qt<Q_NVFP4> {
    static constexpr int block = 64, bytes = sizeof(struct blk_nvfp4);
    static constexpr bool has_min = false;
    QD static void unit(const uint8_t *row, int u, unit16 &o)
    {
        const uint8_t *b = row + (size_t)(u >> 2) * bytes;
        int s = u & 3;
        uint32_t w0 = u32_a4(b + AT(blk_nvfp4, qs) + 8 * s);
        uint32_t w1 = u32_a4(b + AT(blk_nvfp4, qs) + 4 + 8 * s);
        o.d = ue4m3_half(b[AT(blk_nvfp4, d) + s]);
        o.m = 0.0f;
        o.q[0] = e2m1_x2(w0 & 0x0F0F0F0Fu);
        o.q[1] = e2m1_x2(w1 & 0x0F0F0F0Fu);
        o.q[2] = e2m1_x2(w0 >> 4 & 0x0F0F0F0Fu);
        o.q[3] = e2m1_x2(w1 >> 4 & 0x0F0F0F0Fu);
    }
};

/* Element i (< 16, a compile-time constant after unrolling) of a unit as
 * q_dequant_row computes it: (float)q * d, then + m for types with a min. */
template <uint32_t T> QD float unit_value(const unit16 &o, int i)
{
    float v = mul_rn((float)(int8_t)(o.q[i >> 2] >> (8 * (i & 3))), o.d);
    return qt<T>::has_min ? add_rn(v, o.m) : v;
}

/* ---- float types: ft<T>::at(row, i) is element i; at8 reads elements
 * [i, i + 8) with i % 8 == 0 from a row whose length is a multiple of 8
 * (so 16-byte aligned) ---- */

template <uint32_t T> struct ft;

template <> struct ft<Q_F32> {
    QD static float at(const uint8_t *row, int i)
    {
        return ((const float *)row)[i];
    }
    QD static void at8(const uint8_t *row, int i, float *v)
    {
        float4 a = *(const float4 *)(row + 4 * (size_t)i),
               b = *(const float4 *)(row + 4 * (size_t)i + 16);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
        v[7] = b.w;
    }
};

template <> struct ft<Q_F16> {
    QD static float at(const uint8_t *row, int i)
    {
        return f16_at(row + 2 * (size_t)i);
    }
    QD static void at8(const uint8_t *row, int i, float *v)
    {
        uint4 w = *(const uint4 *)(row + 2 * (size_t)i);
        const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            v[2 * k] = __half2float(__ushort_as_half((unsigned short)(ws[k] & 0xFFFFu)));
            v[2 * k + 1] = __half2float(__ushort_as_half((unsigned short)(ws[k] >> 16)));
        }
    }
};

template <> struct ft<Q_BF16> {
    QD static float at(const uint8_t *row, int i)
    {
        return bits_float((uint32_t)((const uint16_t *)row)[i] << 16);
    }
    QD static void at8(const uint8_t *row, int i, float *v)
    {
        uint4 w = *(const uint4 *)(row + 2 * (size_t)i);
        const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            v[2 * k] = bits_float(ws[k] << 16);
            v[2 * k + 1] = bits_float(ws[k] & 0xFFFF0000u);
        }
    }
};

/* True for the types read with ft<> rather than qt<>. */
__host__ __device__ constexpr bool is_float_type(uint32_t t)
{
    return t == Q_F32 || t == Q_F16 || t == Q_BF16;
}

/* Every weight type with a device decoder, for the switches that pick a
 * kernel template per type: CU_WEIGHT_TYPES(CASE) expands CASE(Q_F32) ... */
// clang-format off
#define CU_WEIGHT_TYPES(X) \
    X(Q_F32) X(Q_F16) X(Q_BF16) X(Q_Q4_0) X(Q_Q4_1) X(Q_Q5_0) X(Q_Q5_1) X(Q_Q8_0) X(Q_Q4_K) \
    X(Q_Q6_K) X(Q_MXFP4) X(Q_NVFP4)
// clang-format on

#endif
