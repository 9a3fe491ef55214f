/*
 * cpu/ops: portable versions of the forward-pass kernels and the run-time
 * selection (see ops.h). These are the reference the SIMD versions are
 * tested against.
 */
#include "ops.h"

#include <math.h>
#include <string.h>

#include "cpu/matmul.h"

#include "format/quant.h"

/* n values from an f16 or f32 array at offset i, as f32. */
static void load_f32(const void *src, int f32, size_t i, int n, float *dst)
{
    if (f32) {
        memcpy(dst, (const float *)src + i, sizeof(float) * (size_t)n);
        return;
    }
    for (int j = 0; j < n; j++)
        dst[j] = q_f16_to_f32(((const uint16_t *)src)[i + (size_t)j]);
}

/* sc[0..n) <- ops_exp(sc - max); p[0] = max, p[1] = the sum in ops.h's
 * order: eight lane sums, combined pairwise as an 8-wide horizontal add
 * does, then the tail. */
static void softmax_part(float *sc, int n, float *p)
{
    float mx = -INFINITY, lane[8] = {0};
    for (int t = 0; t < n; t++)
        mx = sc[t] > mx ? sc[t] : mx;
    int t = 0;
    for (; t + 8 <= n; t += 8)
        for (int j = 0; j < 8; j++) {
            sc[t + j] = ops_exp(sc[t + j] - mx);
            lane[j] += sc[t + j];
        }
    float sum =
        ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    for (; t < n; t++) {
        sc[t] = ops_exp(sc[t] - mx);
        sum += sc[t];
    }
    p[0] = mx;
    p[1] = sum;
}

/* Plain loops over the same layout the SIMD kernels use, with ops.h's
 * arithmetic: fused multiply-adds in d order for the scores, in t order for
 * the outputs. */
static void attn_chunk_any(const float *q, int g, int hd, const void *k, const void *v, int f32,
                           int n, float scale, float *scores, float *part)
{
    float buf[1024]; /* one tile dimension row, or one value row: hd <= 1024 */
    int ns = (n + OPS_KTILE - 1) / OPS_KTILE * OPS_KTILE;
    for (int t0 = 0; t0 < n; t0 += OPS_KTILE) {
        float acc[8][OPS_KTILE];
        for (int h0 = 0; h0 < g; h0 += 8) {
            int G = g - h0 < 8 ? g - h0 : 8;
            memset(acc, 0, sizeof(acc));
            for (int d = 0; d < hd; d++) {
                load_f32(k, f32, (size_t)t0 * hd + (size_t)d * OPS_KTILE, OPS_KTILE, buf);
                for (int h = 0; h < G; h++) {
                    float qd = q[(size_t)(h0 + h) * hd + d];
                    for (int j = 0; j < OPS_KTILE; j++)
                        acc[h][j] = fmaf(qd, buf[j], acc[h][j]);
                }
            }
            for (int h = 0; h < G; h++)
                for (int j = 0; j < OPS_KTILE; j++)
                    scores[(h0 + h) * ns + t0 + j] = acc[h][j] * scale;
        }
    }
    for (int h = 0; h < g; h++) {
        float *p = part + (size_t)h * (hd + 2);
        softmax_part(scores + h * ns, n, p);
        memset(p + 2, 0, sizeof(float) * (size_t)hd);
    }
    for (int t = 0; t < n; t++) {
        load_f32(v, f32, (size_t)t * hd, hd, buf);
        for (int h = 0; h < g; h++) {
            float w = scores[h * ns + t], *o = part + (size_t)h * (hd + 2) + 2;
            for (int d = 0; d < hd; d++)
                o[d] = fmaf(w, buf[d], o[d]);
        }
    }
}

static void attn_chunk_portable(const float *q, int g, int hd, const uint16_t *k, const uint16_t *v,
                                int n, float scale, float *scores, float *part)
{
    attn_chunk_any(q, g, hd, k, v, 0, n, scale, scores, part);
}

static void attn_chunk_f32_portable(const float *q, int g, int hd, const float *k, const float *v,
                                    int n, float scale, float *scores, float *part)
{
    attn_chunk_any(q, g, hd, k, v, 1, n, scale, scores, part);
}

static void silu_mul_portable(float *gate, const float *up, int n)
{
    for (int i = 0; i < n; i++)
        gate[i] = gate[i] / (1.0f + ops_exp(0.0f - gate[i])) * up[i];
}

static void to_f16_portable(const float *src, uint16_t *dst, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = q_f32_to_f16(src[i]);
}

static const struct cpu_ops portable = {"portable", attn_chunk_portable, attn_chunk_f32_portable,
                                        silu_mul_portable, to_f16_portable};

const struct cpu_ops *cpu_ops_portable(void)
{
    return &portable;
}

const struct cpu_ops *cpu_ops_for_isa(int isa)
{
    const struct cpu_ops *o = isa == Q_ISA_PORTABLE ? &portable
                              : isa == Q_ISA_AVX2   ? cpu_ops_avx2()
                              : isa == Q_ISA_AVX512 ? cpu_ops_avx512()
                                                    : NULL;
    return o ? o : cpu_ops_select();
}

const struct cpu_ops *cpu_ops_select(void)
{
    const struct cpu_ops *o = cpu_ops_avx512();
    if (!o)
        o = cpu_ops_avx2();
    return o ? o : &portable;
}
