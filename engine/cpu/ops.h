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
 */
#ifndef ENGINE_CPU_OPS_H
#define ENGINE_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#define OPS_KTILE 16

/* Offset of key (t, d) in a tiled block with head dimension hd. */
static inline size_t ops_k_index(int t, int d, int hd)
{
    return (size_t)(t / OPS_KTILE) * OPS_KTILE * (size_t)hd + (size_t)d * OPS_KTILE +
           (size_t)(t % OPS_KTILE);
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
