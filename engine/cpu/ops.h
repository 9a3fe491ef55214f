/*
 * cpu/ops: the forward pass's non-matmul kernels that need SIMD (attention
 * over f16 K/V, SiLU, f32 -> f16), as a table chosen once at run time: an
 * AVX2+F16C version and a portable one. Matmuls are quant.h's.
 */
#ifndef ENGINE_CPU_OPS_H
#define ENGINE_CPU_OPS_H

#include <stdint.h>

struct cpu_ops {
    const char *name; /* "avx2", "portable" */
    /*
     * Attention of g query heads against n (<= MODEL_ATTN_CHUNK) positions
     * of one KV head. q: (g, hd) f32; k, v: (n, hd) f16 rows; scale: the
     * score scale (1/sqrt(hd)). scores: scratch of g * n floats. Writes
     * part[h * (hd + 2) + ...] = {max score, sum of exp(score - max),
     * sum of exp(score - max) * v (hd)} for each head h < g.
     */
    void (*attn_chunk)(const float *q, int g, int hd, const uint16_t *k, const uint16_t *v, int n,
                       float scale, float *scores, float *part);
    /* The same with f32 K/V rows (--kv f32). */
    void (*attn_chunk_f32)(const float *q, int g, int hd, const float *k, const float *v, int n,
                           float scale, float *scores, float *part);
    /* gate[i] = silu(gate[i]) * up[i] for i < n. */
    void (*silu_mul)(float *gate, const float *up, int n);
    /* dst[i] = f16(src[i]), round to nearest even. */
    void (*to_f16)(const float *src, uint16_t *dst, int n);
};

/* The best table for this CPU (AVX2+F16C+FMA when present). */
const struct cpu_ops *cpu_ops_select(void);
/* The portable table (tests compare it with the selected one). */
const struct cpu_ops *cpu_ops_portable(void);
/* The AVX2 table, or NULL when the CPU lacks AVX2/F16C/FMA. */
const struct cpu_ops *cpu_ops_avx2(void);

#endif
