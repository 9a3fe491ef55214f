/*
 * matmul_avx2: the AVX2 + FMA + F16C kernel table. Weights are decoded 32
 * elements per ymm (FP4 through a vpshufb lookup); the integer dot uses the
 * sign trick (|w| as u8 times sign-adjusted activations, vpmaddubsw, then
 * vpmaddwd), which is exact for every weight type, Q8_0 included. The 16
 * float lanes of the portable kernel live in two ymm registers (elements
 * 0..31 and 32..63 of every 64), so results are bit-identical to matmul.c.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu/qk.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* One split-half nibble block (16 bytes) as 32 values 0..15 in natural order. */
ALWAYS_INLINE __m256i nib32(const uint8_t *qs)
{
    __m128i x = _mm_loadu_si128((const __m128i *)qs);
    __m256i y = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
    return _mm256_and_si256(y, _mm256_set1_epi8(0x0F));
}

/* Fifth bits of a Q5 block as 0x10 bytes in natural order. */
ALWAYS_INLINE __m256i q5_high(const uint8_t *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    /* byte j takes bit j: replicate each of the 4 mask bytes over 8 bytes, test its bit */
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

ALWAYS_INLINE void put32(struct qk_dec *d, int64_t i, __m256i w, float s)
{
    _mm256_storeu_si256((__m256i *)(d->w + i), w);
    _mm256_storeu_ps(d->dw + i / 4, _mm256_set1_ps(s));
}

/* Zero the second half of a trailing odd 32-block group. */
ALWAYS_INLINE void pad_odd(struct qk_dec *d, int64_t nb)
{
    if (nb % 2) {
        _mm256_storeu_si256((__m256i *)(d->w + 32 * nb), _mm256_setzero_si256());
        _mm256_storeu_ps(d->dw + 8 * nb, _mm256_setzero_ps());
        d->mw[nb] = 0.0f;
    }
}

static void dec_q4_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q4_0 *b = (const struct blk_q4_0 *)row + e0 / 32;
    const int64_t nb = n / 32;
    for (int64_t k = 0; k < nb; k++)
        put32(d, 32 * k, _mm256_sub_epi8(nib32(b[k].qs), _mm256_set1_epi8(8)), h2f(b[k].d));
    pad_odd(d, nb);
}

static void dec_q4_1(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q4_1 *b = (const struct blk_q4_1 *)row + e0 / 32;
    const int64_t nb = n / 32;
    for (int64_t k = 0; k < nb; k++) {
        put32(d, 32 * k, nib32(b[k].qs), h2f(b[k].d));
        d->mw[k] = h2f(b[k].m);
    }
    pad_odd(d, nb);
}

static void dec_q5_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q5_0 *b = (const struct blk_q5_0 *)row + e0 / 32;
    const int64_t nb = n / 32;
    for (int64_t k = 0; k < nb; k++) {
        __m256i w = _mm256_or_si256(nib32(b[k].qs), q5_high(b[k].qh));
        put32(d, 32 * k, _mm256_sub_epi8(w, _mm256_set1_epi8(16)), h2f(b[k].d));
    }
    pad_odd(d, nb);
}

static void dec_q5_1(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q5_1 *b = (const struct blk_q5_1 *)row + e0 / 32;
    const int64_t nb = n / 32;
    for (int64_t k = 0; k < nb; k++) {
        put32(d, 32 * k, _mm256_or_si256(nib32(b[k].qs), q5_high(b[k].qh)), h2f(b[k].d));
        d->mw[k] = h2f(b[k].m);
    }
    pad_odd(d, nb);
}

static void dec_q8_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q8_0 *b = (const struct blk_q8_0 *)row + e0 / 32;
    const int64_t nb = n / 32;
    for (int64_t k = 0; k < nb; k++)
        put32(d, 32 * k, _mm256_loadu_si256((const __m256i *)b[k].qs), h2f(b[k].d));
    pad_odd(d, nb);
}

static void dec_mxfp4(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_mxfp4 *b = (const struct blk_mxfp4 *)row + e0 / 32;
    const int64_t nb = n / 32;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qk_e2m1_x2));
    for (int64_t k = 0; k < nb; k++)
        put32(d, 32 * k, _mm256_shuffle_epi8(lut, nib32(b[k].qs)), qk_e8m0_half(b[k].e));
    pad_odd(d, nb);
}

static void dec_nvfp4(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_nvfp4 *b = (const struct blk_nvfp4 *)row + e0 / 64;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qk_e2m1_x2));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t k = 0; k < n / 64; k++) {
        for (int h = 0; h < 2; h++) {
            /* 16 bytes = sub-blocks 2h and 2h+1: per 8 bytes, low nibbles then high */
            __m128i x = _mm_loadu_si128((const __m128i *)(b[k].qs + 16 * h));
            __m128i lo = _mm_unpacklo_epi64(x, _mm_srli_epi16(x, 4));
            __m128i hi = _mm_unpackhi_epi64(x, _mm_srli_epi16(x, 4));
            __m256i z = _mm256_and_si256(_mm256_set_m128i(hi, lo), m4);
            int64_t i = 64 * k + 32 * h;
            _mm256_storeu_si256((__m256i *)(d->w + i), _mm256_shuffle_epi8(lut, z));
            __m128 s0 = _mm_set1_ps(qk_ue4m3_half(b[k].d[2 * h]));
            __m128 s1 = _mm_set1_ps(qk_ue4m3_half(b[k].d[2 * h + 1]));
            _mm256_storeu_ps(d->dw + i / 4, _mm256_set_m128(s1, s0));
        }
    }
}

static void dec_q4_k(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q4_k *b = (const struct blk_q4_k *)row + e0 / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t k = 0; k < n / 256; k++) {
        float dd = h2f(b[k].d), dmin = h2f(b[k].dmin);
        const uint8_t *s6 = b[k].scales;
        for (int s = 0; s < 8; s++) {
            int sc = s < 4 ? s6[s] & 63 : (s6[s + 4] & 0xF) | ((s6[s - 4] >> 6) << 4);
            int m = s < 4 ? s6[s + 4] & 63 : (s6[s + 4] >> 4) | ((s6[s] >> 6) << 4);
            __m256i y = _mm256_loadu_si256((const __m256i *)(b[k].qs + 32 * (s / 2)));
            __m256i w =
                s % 2 ? _mm256_and_si256(_mm256_srli_epi16(y, 4), m4) : _mm256_and_si256(y, m4);
            put32(d, 256 * k + 32 * s, w, dd * (float)sc);
            d->mw[8 * k + s] = -(dmin * (float)m);
        }
    }
}

static void dec_q6_k(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q6_k *b = (const struct blk_q6_k *)row + e0 / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i off = _mm256_set1_epi8(32);
    for (int64_t k = 0; k < n / 256; k++) {
        float dd = h2f(b[k].d);
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = b[k].ql + 64 * half, *qh = b[k].qh + 32 * half;
            __m256i A = _mm256_loadu_si256((const __m256i *)ql);
            __m256i B = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i H = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(A, m4),
                                _mm256_and_si256(_mm256_slli_epi16(H, 4), m2)),
                _mm256_or_si256(_mm256_and_si256(B, m4),
                                _mm256_and_si256(_mm256_slli_epi16(H, 2), m2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4),
                                _mm256_and_si256(H, m2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(H, 2), m2)),
            };
            const int8_t *sc = b[k].scales + 8 * half;
            for (int g = 0; g < 4; g++) {
                int64_t i = 256 * k + 128 * half + 32 * g;
                _mm256_storeu_si256((__m256i *)(d->w + i), _mm256_sub_epi8(q[g], off));
                __m128 s0 = _mm_set1_ps(dd * (float)sc[2 * g]);
                __m128 s1 = _mm_set1_ps(dd * (float)sc[2 * g + 1]);
                _mm256_storeu_ps(d->dw + i / 4, _mm256_set_m128(s1, s0));
            }
        }
    }
}

static void dec_f16(const void *row, int64_t e0, int64_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)row + e0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++)
        out[i] = h2f(h[i]);
    for (; i < qk_round_up(n, 16); i++)
        out[i] = 0.0f;
}

static void dec_bf16(const void *row, int64_t e0, int64_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)row + e0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++)
        out[i] = q_bf16_to_f32(h[i]);
    for (; i < qk_round_up(n, 16); i++)
        out[i] = 0.0f;
}

/* ---- dot kernels: one weight row, up to two activation rows at a time ---- */

ALWAYS_INLINE void dotq_tile(const struct qk_dec *dec, int64_t npad, int64_t e0,
                             const struct q_act *a, int64_t b, const int NB, float *acc)
{
    __m256 vacc[2][2];
    const uint8_t *aq[2];
    const float *ad[2];
    for (int t = 0; t < NB; t++) {
        aq[t] = qk_act_q(a, b + t) + e0;
        ad[t] = qk_act_da(a, b + t) + e0 / 4;
        vacc[t][0] = _mm256_loadu_ps(acc + t * 16);
        vacc[t][1] = _mm256_loadu_ps(acc + t * 16 + 8);
    }
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < npad; i += 32) {
        const int h = (int)((i / 32) % 2);
        __m256i w = _mm256_loadu_si256((const __m256i *)(dec->w + i));
        __m256i aw = _mm256_abs_epi8(w);
        __m256 dw = _mm256_loadu_ps(dec->dw + i / 4);
        for (int t = 0; t < NB; t++) {
            __m256i x = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(aq[t] + i)), flip);
            __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w));
            __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
            __m256 sc = _mm256_mul_ps(dw, _mm256_loadu_ps(ad[t] + i / 4));
            vacc[t][h] = _mm256_fmadd_ps(s, sc, vacc[t][h]);
        }
    }
    for (int t = 0; t < NB; t++) {
        _mm256_storeu_ps(acc + t * 16, vacc[t][0]);
        _mm256_storeu_ps(acc + t * 16 + 8, vacc[t][1]);
    }
}

/* The min term over 32-blocks: lane k % 16, zeros past the end. */
static void dot_min(const float *mw, const float *sa, int64_t nblk, float *macc)
{
    __m256 m0 = _mm256_loadu_ps(macc), m1 = _mm256_loadu_ps(macc + 8);
    for (int64_t k = 0; k < nblk; k += 16) {
        float w[16] = {0}, s[16] = {0};
        int64_t c = nblk - k < 16 ? nblk - k : 16;
        memcpy(w, mw + k, (size_t)c * sizeof(float));
        memcpy(s, sa + k, (size_t)c * sizeof(float));
        m0 = _mm256_fmadd_ps(_mm256_loadu_ps(w), _mm256_loadu_ps(s), m0);
        m1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 8), _mm256_loadu_ps(s + 8), m1);
    }
    _mm256_storeu_ps(macc, m0);
    _mm256_storeu_ps(macc + 8, m1);
}

static void dot_q(const struct qk_dec *dec, int nr, int64_t npad, int64_t e0, bool has_min,
                  const struct q_act *a, int64_t b0, int nb, float *acc, float *macc)
{
    for (int r = 0; r < nr; r++) {
        for (int t = 0; t < nb; t += 2) {
            float *ac = acc + (r * QK_T + t) * 16;
            if (nb - t >= 2)
                dotq_tile(&dec[r], npad, e0, a, b0 + t, 2, ac);
            else
                dotq_tile(&dec[r], npad, e0, a, b0 + t, 1, ac);
        }
        if (has_min)
            for (int t = 0; t < nb; t++)
                dot_min(dec[r].mw, qk_act_sa(a, b0 + t) + e0 / 32, npad / 32,
                        macc + (r * QK_T + t) * 16);
    }
}

ALWAYS_INLINE void dotf_tile(const float *w, int64_t n, int64_t e0, const struct q_act *a,
                             int64_t b, const int NB, float *acc)
{
    __m256 vacc[2][2];
    const float *x[2];
    for (int t = 0; t < NB; t++) {
        x[t] = qk_act_f(a, b + t) + e0;
        vacc[t][0] = _mm256_loadu_ps(acc + t * 16);
        vacc[t][1] = _mm256_loadu_ps(acc + t * 16 + 8);
    }
    for (int64_t i = 0; i < n; i += 16) {
        __m256 w0, w1;
        if (n - i >= 16) {
            w0 = _mm256_loadu_ps(w + i);
            w1 = _mm256_loadu_ps(w + i + 8);
        } else {
            float tmp[16] = {0};
            memcpy(tmp, w + i, (size_t)(n - i) * sizeof(float));
            w0 = _mm256_loadu_ps(tmp);
            w1 = _mm256_loadu_ps(tmp + 8);
        }
        for (int t = 0; t < NB; t++) {
            vacc[t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), vacc[t][0]);
            vacc[t][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[t] + i + 8), vacc[t][1]);
        }
    }
    for (int t = 0; t < NB; t++) {
        _mm256_storeu_ps(acc + t * 16, vacc[t][0]);
        _mm256_storeu_ps(acc + t * 16 + 8, vacc[t][1]);
    }
}

static void dot_f(const float *const *w, int nr, int64_t n, int64_t e0, const struct q_act *a,
                  int64_t b0, int nb, float *acc)
{
    for (int r = 0; r < nr; r++) {
        for (int t = 0; t < nb; t += 2) {
            float *ac = acc + (r * QK_T + t) * 16;
            if (nb - t >= 2)
                dotf_tile(w[r], n, e0, a, b0 + t, 2, ac);
            else
                dotf_tile(w[r], n, e0, a, b0 + t, 1, ac);
        }
    }
}

/* ---- activation quantization (bit-identical to qk_ref_act_q8) ---- */

static void act_q8(struct q_act *a, const float *x, int64_t ldx, int64_t r0, int64_t r1)
{
    const int64_t pad = qk_act_pad(Q_Q8_1, a->cols);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * ldx;
        uint8_t *q = (uint8_t *)qk_act_q(a, r);
        float *da = (float *)qk_act_da(a, r), *sa = (float *)qk_act_sa(a, r);
        for (int64_t k = 0; k < a->cols / 32; k++, xr += 32) {
            __m256 v[4];
            __m256 mx = _mm256_setzero_ps();
            for (int j = 0; j < 4; j++) {
                v[j] = _mm256_loadu_ps(xr + 8 * j);
                mx = _mm256_max_ps(mx, _mm256_and_ps(v[j], absmask));
            }
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            float amax = _mm_cvtss_f32(m4);
            float id = amax != 0.0f ? 127.0f / amax : 0.0f;
            float d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
            __m256 vid = _mm256_set1_ps(id);
            __m256i iv[4], sum = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                iv[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
                iv[j] = _mm256_min_epi32(_mm256_max_epi32(iv[j], lo), hi);
                sum = _mm256_add_epi32(sum, iv[j]);
            }
            /* int32 -> int8 (in range, so the saturating packs are exact), restore order */
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]),
                                           _mm256_packs_epi32(iv[2], iv[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(q + 32 * k),
                                _mm256_xor_si256(p, _mm256_set1_epi8((char)0x80)));
            __m128i s4 =
                _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
            _mm256_storeu_ps(da + 8 * k, _mm256_set1_ps(d));
            sa[k] = d * (float)_mm_cvtsi128_si32(s4);
        }
        memset(q + a->cols, 128, (size_t)(pad - a->cols));
        memset(da + a->cols / 4, 0, (size_t)(pad - a->cols) / 4 * sizeof(float));
        memset(sa + a->cols / 32, 0, (size_t)(pad - a->cols) / 32 * sizeof(float));
    }
}

const struct q_kernels qk_avx2 = {
    .name = "avx2",
    .isa = Q_ISA_AVX2,
    .decode =
        {
            [Q_Q4_0] = dec_q4_0,
            [Q_Q4_1] = dec_q4_1,
            [Q_Q5_0] = dec_q5_0,
            [Q_Q5_1] = dec_q5_1,
            [Q_Q8_0] = dec_q8_0,
            [Q_Q4_K] = dec_q4_k,
            [Q_Q6_K] = dec_q6_k,
            [Q_MXFP4] = dec_mxfp4,
            [Q_NVFP4] = dec_nvfp4,
        },
    .decode_f = {[Q_F16] = dec_f16, [Q_BF16] = dec_bf16},
    .dot_q = dot_q,
    .dot_f = dot_f,
    .act_q8 = act_q8,
};
