/*
 * cpu/ops: portable versions of the forward-pass kernels and the run-time
 * selection (see ops.h). These are the reference the SIMD versions are
 * tested against.
 */
#include "ops.h"

#include <math.h>
#include <string.h>

#include "quant.h"

static void attn_chunk_portable(const float *q, int g, int hd, const uint16_t *k, const uint16_t *v,
                                int n, float scale, float *scores, float *part)
{
    float kv[1024]; /* head_dim <= 1024 (checked at load) */
    for (int t = 0; t < n; t++) {
        for (int d = 0; d < hd; d++)
            kv[d] = q_f16_to_f32(k[(size_t)t * hd + d]);
        for (int h = 0; h < g; h++) {
            const float *qh = q + (size_t)h * hd;
            float s = 0;
            for (int d = 0; d < hd; d++)
                s += qh[d] * kv[d];
            scores[h * n + t] = s * scale;
        }
    }
    for (int h = 0; h < g; h++) {
        float *sc = scores + h * n, *p = part + (size_t)h * (hd + 2);
        float mx = -INFINITY, sum = 0;
        for (int t = 0; t < n; t++)
            mx = sc[t] > mx ? sc[t] : mx;
        for (int t = 0; t < n; t++) {
            sc[t] = expf(sc[t] - mx);
            sum += sc[t];
        }
        p[0] = mx;
        p[1] = sum;
        memset(p + 2, 0, sizeof(float) * (size_t)hd);
    }
    for (int t = 0; t < n; t++) {
        for (int d = 0; d < hd; d++)
            kv[d] = q_f16_to_f32(v[(size_t)t * hd + d]);
        for (int h = 0; h < g; h++) {
            float w = scores[h * n + t], *o = part + (size_t)h * (hd + 2) + 2;
            for (int d = 0; d < hd; d++)
                o[d] += w * kv[d];
        }
    }
}

static void silu_mul_portable(float *gate, const float *up, int n)
{
    for (int i = 0; i < n; i++)
        gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void to_f16_portable(const float *src, uint16_t *dst, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = q_f32_to_f16(src[i]);
}

static const struct cpu_ops portable = {"portable", attn_chunk_portable, silu_mul_portable,
                                        to_f16_portable};

const struct cpu_ops *cpu_ops_portable(void)
{
    return &portable;
}

const struct cpu_ops *cpu_ops_select(void)
{
    const struct cpu_ops *o = cpu_ops_avx2();
    return o ? o : &portable;
}
