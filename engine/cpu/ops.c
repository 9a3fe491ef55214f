/*
 * cpu/ops: portable versions of the forward-pass kernels and the run-time
 * selection (see ops.h). These are the reference the SIMD versions are
 * tested against.
 */
#include "ops.h"

#include <math.h>
#include <string.h>

#include "quant.h"

/* Row t of a K or V block, as f32, into dst. */
static void load_row(const void *src, int f32, int t, int hd, float *dst)
{
    if (f32) {
        memcpy(dst, (const float *)src + (size_t)t * hd, sizeof(float) * (size_t)hd);
        return;
    }
    for (int d = 0; d < hd; d++)
        dst[d] = q_f16_to_f32(((const uint16_t *)src)[(size_t)t * hd + d]);
}

static void attn_chunk_any(const float *q, int g, int hd, const void *k, const void *v, int f32,
                           int n, float scale, float *scores, float *part)
{
    float kv[1024]; /* head_dim <= 1024 (checked at load) */
    for (int t = 0; t < n; t++) {
        load_row(k, f32, t, hd, kv);
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
        load_row(v, f32, t, hd, kv);
        for (int h = 0; h < g; h++) {
            float w = scores[h * n + t], *o = part + (size_t)h * (hd + 2) + 2;
            for (int d = 0; d < hd; d++)
                o[d] += w * kv[d];
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
        gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
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

const struct cpu_ops *cpu_ops_select(void)
{
    const struct cpu_ops *o = cpu_ops_avx2();
    return o ? o : &portable;
}
