/*
 * cpu/ops_avx2: AVX2 + FMA + F16C versions of the forward-pass kernels
 * (see ops.h). Compiled with -mavx2 -mfma -mf16c; selected only when the
 * CPU has them. Scores take a tile of 16 keys per pass (two vectors of
 * positions, q[d] broadcast), so no horizontal sums are needed.
 */
#include "ops.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <string.h>

#include "isa.h"
#include "ops_x86.h"

/* The attention chunk for G heads (a compile-time constant after inlining
 * where it matters) and head dimension hd (a multiple of 8). */
static inline __attribute__((always_inline)) void chunk_g(const float *q, const int G, const int hd,
                                                          const void *k, const void *v, int f32,
                                                          int n, float scale, float *scores,
                                                          float *part)
{
    int ns = (n + OPS_KTILE - 1) / OPS_KTILE * OPS_KTILE; /* scores stride per head */
    const __m256 vscale = _mm256_set1_ps(scale);
    for (int t0 = 0; t0 < n; t0 += OPS_KTILE) {
        __m256 acc[4][2];
        for (int h = 0; h < G; h++)
            acc[h][0] = acc[h][1] = _mm256_setzero_ps();
        size_t base = (size_t)t0 * hd; /* tile t0 / 16 starts at t0 * hd */
        for (int d = 0; d < hd; d++) {
            __m256 k0 = load8(k, f32, base + (size_t)d * OPS_KTILE);
            __m256 k1 = load8(k, f32, base + (size_t)d * OPS_KTILE + 8);
            for (int h = 0; h < G; h++) {
                __m256 qd = _mm256_broadcast_ss(q + (size_t)h * hd + d);
                acc[h][0] = _mm256_fmadd_ps(qd, k0, acc[h][0]);
                acc[h][1] = _mm256_fmadd_ps(qd, k1, acc[h][1]);
            }
        }
        for (int h = 0; h < G; h++) {
            _mm256_storeu_ps(scores + h * ns + t0, _mm256_mul_ps(acc[h][0], vscale));
            _mm256_storeu_ps(scores + h * ns + t0 + 8, _mm256_mul_ps(acc[h][1], vscale));
        }
    }
    for (int h = 0; h < G; h++) {
        float *sc = scores + h * ns, *p = part + (size_t)h * (hd + 2);
        softmax_part(sc, n, p);
        /* V: this head's outputs in registers 8 dims at a time. */
        for (int d0 = 0; d0 < hd; d0 += 64) {
            int nd = hd - d0 < 64 ? (hd - d0) / 8 : 8;
            __m256 o[8];
            for (int j = 0; j < 8; j++)
                o[j] = _mm256_setzero_ps();
            for (int t = 0; t < n; t++) {
                __m256 w = _mm256_broadcast_ss(sc + t);
                size_t vi = (size_t)t * hd + d0;
                for (int j = 0; j < nd; j++)
                    o[j] = _mm256_fmadd_ps(w, load8(v, f32, vi + 8 * j), o[j]);
            }
            for (int j = 0; j < nd; j++)
                _mm256_storeu_ps(p + 2 + d0 + 8 * j, o[j]);
        }
    }
}

static void chunk_any(const float *q, int g, int hd, const void *k, const void *v, int f32, int n,
                      float scale, float *scores, float *part)
{
    /* Groups of up to 4 heads; the common sizes get constant G. */
    for (int h0 = 0; h0 < g; h0 += 4) {
        int G = g - h0 < 4 ? g - h0 : 4;
        const float *qh = q + (size_t)h0 * hd;
        float *ph = part + (size_t)h0 * (hd + 2);
        if (hd == 64 && G == 3) /* SmolLM2 and most small llamas */
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

static void attn_chunk_avx2(const float *q, int g, int hd, const uint16_t *k, const uint16_t *v,
                            int n, float scale, float *scores, float *part)
{
    if (hd % 8 != 0)
        cpu_ops_portable()->attn_chunk(q, g, hd, k, v, n, scale, scores, part);
    else
        chunk_any(q, g, hd, k, v, 0, n, scale, scores, part);
}

static void attn_chunk_f32_avx2(const float *q, int g, int hd, const float *k, const float *v,
                                int n, float scale, float *scores, float *part)
{
    if (hd % 8 != 0)
        cpu_ops_portable()->attn_chunk_f32(q, g, hd, k, v, n, scale, scores, part);
    else
        chunk_any(q, g, hd, k, v, 1, n, scale, scores, part);
}

void ops_avx2_silu_mul(float *gate, const float *up, int n)
{
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(gate + i);
        __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++)
        gate[i] = gate[i] / (1.0f + ops_exp(0.0f - gate[i])) * up[i];
}

void ops_avx2_to_f16(const float *src, uint16_t *dst, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = (uint16_t)_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

static const struct cpu_ops avx2 = {"avx2", attn_chunk_avx2, attn_chunk_f32_avx2, ops_avx2_silu_mul,
                                    ops_avx2_to_f16};

/* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does
 * not know the "f16c" feature name, gcc's does; cpuid works for both. */
static int has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

const struct cpu_ops *cpu_ops_avx2(void)
{
    __builtin_cpu_init();
    if (!isa_withheld("avx2") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        has_f16c())
        return &avx2;
    return NULL;
}

#else
#include <stddef.h>

const struct cpu_ops *cpu_ops_avx2(void)
{
    return NULL; /* not an x86 build */
}
#endif
