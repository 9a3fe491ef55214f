/*
 * cpu/ops_avx2: AVX2 + FMA + F16C versions of the forward-pass kernels
 * (see ops.h). Compiled with -mavx2 -mfma -mf16c; selected only when the
 * CPU has them. The exponential is a Cephes-style polynomial, accurate to
 * about 2 ulp, which is what softmax and SiLU need.
 */
#include "ops.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

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

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline void load_f16_row(const uint16_t *src, float *dst, int hd)
{
    for (int d = 0; d < hd; d += 8)
        _mm256_store_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + d))));
}

static inline void load_row(const void *src, int f32, int t, int hd, float *dst)
{
    if (f32)
        memcpy(dst, (const float *)src + (size_t)t * hd, sizeof(float) * (size_t)hd);
    else
        load_f16_row((const uint16_t *)src + (size_t)t * hd, dst, hd);
}

/* hd is a multiple of 8 (the callers fall back to the portable kernel). */
static inline void attn_chunk_any(const float *q, int g, int hd, const void *k, const void *v,
                                  int f32, int n, float scale, float *scores, float *part)
{
    _Alignas(32) float buf[1024];
    for (int t = 0; t < n; t++) {
        load_row(k, f32, t, hd, buf);
        for (int h = 0; h < g; h++) {
            const float *qh = q + (size_t)h * hd;
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
            int d = 0;
            for (; d + 16 <= hd; d += 16) {
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d), _mm256_load_ps(buf + d), a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d + 8), _mm256_load_ps(buf + d + 8), a1);
            }
            if (d < hd)
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d), _mm256_load_ps(buf + d), a0);
            scores[h * n + t] = hsum(_mm256_add_ps(a0, a1)) * scale;
        }
    }
    for (int h = 0; h < g; h++) {
        float *sc = scores + h * n, *p = part + (size_t)h * (hd + 2);
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
        float sum = hsum(vs);
        for (; t < n; t++) {
            sc[t] = expf(sc[t] - mx);
            sum += sc[t];
        }
        p[0] = mx;
        p[1] = sum;
        memset(p + 2, 0, sizeof(float) * (size_t)hd);
    }
    for (int t = 0; t < n; t++) {
        load_row(v, f32, t, hd, buf);
        for (int h = 0; h < g; h++) {
            __m256 w = _mm256_set1_ps(scores[h * n + t]);
            float *o = part + (size_t)h * (hd + 2) + 2;
            for (int d = 0; d < hd; d += 8)
                _mm256_storeu_ps(
                    o + d, _mm256_fmadd_ps(w, _mm256_load_ps(buf + d), _mm256_loadu_ps(o + d)));
        }
    }
}

static void attn_chunk_avx2(const float *q, int g, int hd, const uint16_t *k, const uint16_t *v,
                            int n, float scale, float *scores, float *part)
{
    if (hd % 8 != 0)
        cpu_ops_portable()->attn_chunk(q, g, hd, k, v, n, scale, scores, part);
    else
        attn_chunk_any(q, g, hd, k, v, 0, n, scale, scores, part);
}

static void attn_chunk_f32_avx2(const float *q, int g, int hd, const float *k, const float *v,
                                int n, float scale, float *scores, float *part)
{
    if (hd % 8 != 0)
        cpu_ops_portable()->attn_chunk_f32(q, g, hd, k, v, n, scale, scores, part);
    else
        attn_chunk_any(q, g, hd, k, v, 1, n, scale, scores, part);
}

static void silu_mul_avx2(float *gate, const float *up, int n)
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
        gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void to_f16_avx2(const float *src, uint16_t *dst, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = (uint16_t)_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

static const struct cpu_ops avx2 = {"avx2", attn_chunk_avx2, attn_chunk_f32_avx2, silu_mul_avx2,
                                    to_f16_avx2};

const struct cpu_ops *cpu_ops_avx2(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
        return &avx2;
    return NULL;
}
