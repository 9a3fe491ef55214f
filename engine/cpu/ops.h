/*
 * cpu/ops: the forward pass's non-matmul kernels that need SIMD (attention
 * over the K/V cache, SiLU, f32 -> f16), as a table chosen once at run
 * time: AVX-512, AVX2+F16C, or portable. Matmuls are quant.h's.
 *
 * K cache layout. Keys are stored in tiles of OPS_KTILE positions, each
 * tile dimension-major: key (t, d) of a block is at
 *     (t / OPS_KTILE) * OPS_KTILE * hd + d * OPS_KTILE + t % OPS_KTILE,
 * so a score is OPS_KTILE keys at once (one vector of positions per
 * dimension, q[d] broadcast) with no horizontal sums, as calm does. Values
 * stay position-major: (t, d) at t * hd + d.
 *
 * Every table gives the same bits: the arithmetic below is the contract,
 * ops.c spells it out in scalar C (fmaf is exactly one rounding on every
 * platform, so no -ffp-contract setting changes it) and the SIMD tables
 * compute the same operations in the same order, lane for lane.
 *   score[h][t] = fma chain over d = 0..hd-1 (from 0) of q[h][d] * k[t][d],
 *                 then times scale
 *   max         = the scores in position order (x > max ? x : max)
 *   e[t]        = ops_exp(score - max)
 *   sum         = eight lane sums over the first n - n % 8 positions (lane
 *                 t % 8, in position order), combined as ((l0 + l4) +
 *                 (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the last n % 8
 *                 added in order
 *   out[h][d]   = fma chain over t = 0..n-1 (from 0) of e[t] * v[t][d]
 *   silu_mul    = g / (1 + ops_exp(0 - g)) * up
 * ops_exp is our own exponential, not libm's expf, whose bits differ
 * between C libraries and cannot be computed eight lanes at a time.
 */
#ifndef ENGINE_CPU_OPS_H
#define ENGINE_CPU_OPS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define OPS_KTILE 16

/* Offset of key (t, d) in a tiled block with head dimension hd. */
static inline size_t ops_k_index(int t, int d, int hd)
{
    return (size_t)(t / OPS_KTILE) * OPS_KTILE * (size_t)hd + (size_t)d * OPS_KTILE +
           (size_t)(t % OPS_KTILE);
}

/* e^x, Cephes-style: range reduction by ln 2 in two fused steps and a
 * degree-6 polynomial, about 2 ulp; x clamped to [-87.3, 88.3] first (NaN
 * becomes -87.3). exp256 in ops_x86.h is the same operations eight lanes
 * at a time (x > lo ? x : lo is maxps, nearbyintf is round-to-nearest-even). */
static inline float ops_exp(float x)
{
    x = x > -87.3f ? x : -87.3f;
    x = x < 88.3f ? x : 88.3f;
    float fx = nearbyintf(x * 1.44269504088896341f);
    float r = fmaf(-fx, 0.693359375f, x);
    r = fmaf(-fx, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r + 1.0f);
    uint32_t e = (uint32_t)((int32_t)fx + 127) << 23; /* fx in [-126, 127] */
    float two_fx;
    memcpy(&two_fx, &e, sizeof(two_fx));
    return p * two_fx;
}

struct cpu_ops {
    const char *name; /* "avx512", "avx2", "portable" */
    /*
     * Attention of g query heads against n (<= MODEL_ATTN_CHUNK) positions
     * of one KV head. q: (g, hd) f32; k: the chunk's tiles (layout above;
     * the chunk starts on a tile), v: (n, hd) rows, both f16; scale: the
     * score scale (1/sqrt(hd)). scores: scratch of g * round_up(n, 16)
     * floats. Writes part[h * (hd + 2) + ...] = {max score, sum of
     * exp(score - max), sum of exp(score - max) * v (hd)} for each head
     * h < g. Key lanes past n in the last tile are read but ignored.
     */
    void (*attn_chunk)(const float *q, int g, int hd, const uint16_t *k, const uint16_t *v, int n,
                       float scale, float *scores, float *part);
    /* The same with an f32 cache (--kv f32). */
    void (*attn_chunk_f32)(const float *q, int g, int hd, const float *k, const float *v, int n,
                           float scale, float *scores, float *part);
    /* gate[i] = silu(gate[i]) * up[i] for i < n. */
    void (*silu_mul)(float *gate, const float *up, int n);
    /* dst[i] = f16(src[i]), round to nearest even. */
    void (*to_f16)(const float *src, uint16_t *dst, int n);
};

/* The best table for this CPU (AVX-512, then AVX2+F16C+FMA, then portable). */
const struct cpu_ops *cpu_ops_select(void);
/* The table that goes with a matmul kernel table's ISA (enum q_isa; the
 * best one for Q_ISA_AUTO), so that --isa avx2 runs the whole forward pass
 * as an AVX2-only CPU would. */
const struct cpu_ops *cpu_ops_for_isa(int isa);
/* The portable table (tests compare the others with it). */
const struct cpu_ops *cpu_ops_portable(void);
/* The AVX2 table, or NULL when the CPU lacks AVX2/F16C/FMA. */
const struct cpu_ops *cpu_ops_avx2(void);
/* The AVX-512 table, or NULL when the CPU lacks AVX-512F/F16C/FMA. */
const struct cpu_ops *cpu_ops_avx512(void);

#endif
