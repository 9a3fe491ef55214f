/*
 * cpu/ops_avx512: AVX-512 version of the attention chunk (see ops.h): a
 * 16-key tile is one vector per dimension, and the V sums of up to four
 * heads stay in registers while each value row is converted once. SiLU
 * and f16 conversion reuse the AVX2 table's. Compiled with AVX-512 flags;
 * selected only when the CPU has AVX-512F.
 */
#include "ops.h"

#if defined(__x86_64__) || defined(__i386__)
#include <string.h>

#include "isa.h"
#include "ops_x86.h"

static inline __m512 load16(const void *src, int f32, size_t i)
{
    if (f32)
        return _mm512_loadu_ps((const float *)src + i);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)src + i)));
}

/* G heads (<= 4) and head dimension HD (a multiple of 16), both constants
 * after inlining in the common cases. */
static inline __attribute__((always_inline)) void chunk_g(const float *q, const int G, const int HD,
                                                          const void *k, const void *v, int f32,
                                                          int n, float scale, float *scores,
                                                          float *part)
{
    int ns = (n + OPS_KTILE - 1) / OPS_KTILE * OPS_KTILE;
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int t0 = 0; t0 < n; t0 += OPS_KTILE) {
        __m512 acc[4];
        for (int h = 0; h < G; h++)
            acc[h] = _mm512_setzero_ps();
        size_t base = (size_t)t0 * HD;
        for (int d = 0; d < HD; d++) {
            __m512 kd = load16(k, f32, base + (size_t)d * OPS_KTILE);
            for (int h = 0; h < G; h++)
                acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[(size_t)h * HD + d]), kd, acc[h]);
        }
        for (int h = 0; h < G; h++)
            _mm512_storeu_ps(scores + h * ns + t0, _mm512_mul_ps(acc[h], vscale));
    }
    for (int h = 0; h < G; h++)
        softmax_part(scores + h * ns, n, part + (size_t)h * (HD + 2));
    /* V: 64 dimensions at a time, all heads' sums in registers. */
    for (int d0 = 0; d0 < HD; d0 += 64) {
        int nd = HD - d0 < 64 ? (HD - d0) / 16 : 4;
        __m512 o[4][4];
        for (int h = 0; h < G; h++)
            for (int j = 0; j < 4; j++)
                o[h][j] = _mm512_setzero_ps();
        for (int t = 0; t < n; t++) {
            __m512 vr[4];
            for (int j = 0; j < nd; j++)
                vr[j] = load16(v, f32, (size_t)t * HD + d0 + 16 * j);
            for (int h = 0; h < G; h++) {
                __m512 w = _mm512_set1_ps(scores[h * ns + t]);
                for (int j = 0; j < nd; j++)
                    o[h][j] = _mm512_fmadd_ps(w, vr[j], o[h][j]);
            }
        }
        for (int h = 0; h < G; h++)
            for (int j = 0; j < nd; j++)
                _mm512_storeu_ps(part + (size_t)h * (HD + 2) + 2 + d0 + 16 * j, o[h][j]);
    }
}

static void chunk_any(const float *q, int g, int hd, const void *k, const void *v, int f32, int n,
                      float scale, float *scores, float *part)
{
    for (int h0 = 0; h0 < g; h0 += 4) {
        int G = g - h0 < 4 ? g - h0 : 4;
        const float *qh = q + (size_t)h0 * hd;
        float *ph = part + (size_t)h0 * (hd + 2);
        if (hd == 64 && G == 3)
            chunk_g(qh, 3, 64, k, v, f32, n, scale, scores, ph);
        else if (hd == 64 && G == 4)
            chunk_g(qh, 4, 64, k, v, f32, n, scale, scores, ph);
        else if (G == 4)
            chunk_g(qh, 4, hd, k, v, f32, n, scale, scores, ph);
        else if (G == 3)
            chunk_g(qh, 3, hd, k, v, f32, n, scale, scores, ph);
        else if (G == 2)
            chunk_g(qh, 2, hd, k, v, f32, n, scale, scores, ph);
        else
            chunk_g(qh, 1, hd, k, v, f32, n, scale, scores, ph);
    }
}

static void attn_chunk_avx512(const float *q, int g, int hd, const uint16_t *k, const uint16_t *v,
                              int n, float scale, float *scores, float *part)
{
    if (hd % 16 != 0)
        cpu_ops_avx2()->attn_chunk(q, g, hd, k, v, n, scale, scores, part);
    else
        chunk_any(q, g, hd, k, v, 0, n, scale, scores, part);
}

static void attn_chunk_f32_avx512(const float *q, int g, int hd, const float *k, const float *v,
                                  int n, float scale, float *scores, float *part)
{
    if (hd % 16 != 0)
        cpu_ops_avx2()->attn_chunk_f32(q, g, hd, k, v, n, scale, scores, part);
    else
        chunk_any(q, g, hd, k, v, 1, n, scale, scores, part);
}

static const struct cpu_ops avx512 = {"avx512", attn_chunk_avx512, attn_chunk_f32_avx512,
                                      ops_avx2_silu_mul, ops_avx2_to_f16};

const struct cpu_ops *cpu_ops_avx512(void)
{
    __builtin_cpu_init();
    if (!cpu_ops_avx2() || isa_withheld("avx512") || !__builtin_cpu_supports("avx512f"))
        return NULL;
    return &avx512;
}

#else
#include <stddef.h>

const struct cpu_ops *cpu_ops_avx512(void)
{
    return NULL; /* not an x86 build */
}
#endif
