/*
 * cpu/ops_x86: inline helpers shared by ops_avx2.c and ops_avx512.c (both
 * compiled with AVX2, FMA and F16C): an 8-wide exponential and the
 * softmax step of an attention chunk. Included, not compiled alone.
 */
#ifndef ENGINE_CPU_OPS_X86_H
#define ENGINE_CPU_OPS_X86_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "ops.h"

/* The AVX2 SiLU and f16 conversion (ops_avx2.c), shared with the AVX-512 table. */
void ops_avx2_silu_mul(float *gate, const float *up, int n);
void ops_avx2_to_f16(const float *src, uint16_t *dst, int n);

/* ops_exp (ops.h) eight lanes at a time: the same operations, so the same
 * bits. */
static inline __m256 exp256(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* sc[0..n) <- ops_exp(sc - max); p[0] = max, p[1] = the sum in ops.h's
 * order (hsum256 combines the lanes as it states). */
static inline void softmax_part(float *sc, int n, float *p)
{
    float mx = -INFINITY;
    for (int t = 0; t < n; t++)
        mx = sc[t] > mx ? sc[t] : mx;
    __m256 vm = _mm256_set1_ps(mx), vs = _mm256_setzero_ps();
    int t = 0;
    for (; t + 8 <= n; t += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(sc + t), vm));
        _mm256_storeu_ps(sc + t, e);
        vs = _mm256_add_ps(vs, e);
    }
    float sum = hsum256(vs);
    for (; t < n; t++) {
        sc[t] = ops_exp(sc[t] - mx);
        sum += sc[t];
    }
    p[0] = mx;
    p[1] = sum;
}

/* 8 floats from an f16 or f32 array. */
static inline __m256 load8(const void *src, int f32, size_t i)
{
    if (f32)
        return _mm256_loadu_ps((const float *)src + i);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + i)));
}

#endif
