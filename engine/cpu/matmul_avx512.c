/*
 * matmul_avx512: the AVX-512 kernel table (F, BW, VL, DQ and VNNI). Weights
 * are decoded 64 elements per zmm (FP4 and Q4 nibbles through a vpshufb
 * lookup or a mask), activations are biased u8, and vpdpbusd forms the
 * integer lane sums; the -128 * sum(w) correction is taken per weight chunk,
 * so it is amortized over the batch. Float operations match matmul.c's
 * portable kernels lane for lane, so results are bit-identical to them.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu/qk.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* [s0 x 8 lanes, s1 x 8 lanes] */
ALWAYS_INLINE __m512 lanes2(float s0, float s1)
{
    return _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
}

ALWAYS_INLINE float h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* Two split-half nibble blocks (16 bytes each) as 64 values 0..15 in natural
 * order: [low nibbles of A, high of A, low of B, high of B]. */
ALWAYS_INLINE __m512i nib_pair(const uint8_t *qs0, const uint8_t *qs1)
{
    __m512i x = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qs0));
    x = _mm512_mask_broadcast_i32x4(x, 0xFF00, _mm_loadu_si128((const __m128i *)qs1));
    x = _mm512_srlv_epi64(x, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
    return _mm512_and_si512(x, _mm512_set1_epi8(0x0F));
}

/* Fifth bits of two Q5 blocks (32 bits each) as 0x10 bytes in natural order. */
ALWAYS_INLINE __m512i q5_high(const uint8_t *qh0, const uint8_t *qh1)
{
    uint32_t h0, h1;
    memcpy(&h0, qh0, 4);
    memcpy(&h1, qh1, 4);
    __m512i m = _mm512_movm_epi8(h0 | (uint64_t)h1 << 32);
    return _mm512_and_si512(m, _mm512_set1_epi8(0x10));
}

/* Store one decoded 64-element group; when only the first block (32
 * elements) is real, the rest is zeroed. */
ALWAYS_INLINE void put64(struct qk_dec *d, int64_t i, __m512i w, __m512 dw, bool half)
{
    if (half) {
        w = _mm512_maskz_mov_epi8(0xFFFFFFFFull, w);
        dw = _mm512_maskz_mov_ps(0x00FF, dw);
    }
    _mm512_storeu_si512(d->w + i, w);
    _mm512_storeu_ps(d->dw + i / 4, dw);
}

static void dec_q4_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q4_0 *b = (const struct blk_q4_0 *)row + e0 / 32;
    const int64_t nb = n / 32;
    const __m512i eight = _mm512_set1_epi8(8);
    for (int64_t k = 0; k < nb; k += 2) {
        bool half = k + 1 == nb;
        const struct blk_q4_0 *b1 = half ? b + k : b + k + 1;
        __m512i w = _mm512_sub_epi8(nib_pair(b[k].qs, b1->qs), eight);
        put64(d, 32 * k, w, lanes2(h2f(b[k].d), h2f(b1->d)), half);
    }
}

static void dec_q4_1(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q4_1 *b = (const struct blk_q4_1 *)row + e0 / 32;
    const int64_t nb = n / 32;
    for (int64_t k = 0; k < nb; k += 2) {
        bool half = k + 1 == nb;
        const struct blk_q4_1 *b1 = half ? b + k : b + k + 1;
        put64(d, 32 * k, nib_pair(b[k].qs, b1->qs), lanes2(h2f(b[k].d), h2f(b1->d)), half);
        d->mw[k] = h2f(b[k].m);
        d->mw[k + 1] = half ? 0.0f : h2f(b1->m);
    }
}

static void dec_q5_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q5_0 *b = (const struct blk_q5_0 *)row + e0 / 32;
    const int64_t nb = n / 32;
    const __m512i sixteen = _mm512_set1_epi8(16);
    for (int64_t k = 0; k < nb; k += 2) {
        bool half = k + 1 == nb;
        const struct blk_q5_0 *b1 = half ? b + k : b + k + 1;
        __m512i w = _mm512_or_si512(nib_pair(b[k].qs, b1->qs), q5_high(b[k].qh, b1->qh));
        put64(d, 32 * k, _mm512_sub_epi8(w, sixteen), lanes2(h2f(b[k].d), h2f(b1->d)), half);
    }
}

static void dec_q5_1(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q5_1 *b = (const struct blk_q5_1 *)row + e0 / 32;
    const int64_t nb = n / 32;
    for (int64_t k = 0; k < nb; k += 2) {
        bool half = k + 1 == nb;
        const struct blk_q5_1 *b1 = half ? b + k : b + k + 1;
        __m512i w = _mm512_or_si512(nib_pair(b[k].qs, b1->qs), q5_high(b[k].qh, b1->qh));
        put64(d, 32 * k, w, lanes2(h2f(b[k].d), h2f(b1->d)), half);
        d->mw[k] = h2f(b[k].m);
        d->mw[k + 1] = half ? 0.0f : h2f(b1->m);
    }
}

static void dec_q8_0(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q8_0 *b = (const struct blk_q8_0 *)row + e0 / 32;
    const int64_t nb = n / 32;
    for (int64_t k = 0; k < nb; k += 2) {
        bool half = k + 1 == nb;
        const struct blk_q8_0 *b1 = half ? b + k : b + k + 1;
        __m512i w =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[k].qs)),
                               _mm256_loadu_si256((const __m256i *)b1->qs), 1);
        put64(d, 32 * k, w, lanes2(h2f(b[k].d), h2f(b1->d)), half);
    }
}

static void dec_mxfp4(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_mxfp4 *b = (const struct blk_mxfp4 *)row + e0 / 32;
    const int64_t nb = n / 32;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qk_e2m1_x2));
    for (int64_t k = 0; k < nb; k += 2) {
        bool half = k + 1 == nb;
        const struct blk_mxfp4 *b1 = half ? b + k : b + k + 1;
        __m512i w = _mm512_shuffle_epi8(lut, nib_pair(b[k].qs, b1->qs));
        put64(d, 32 * k, w, lanes2(qk_e8m0_half(b[k].e), qk_e8m0_half(b1->e)), half);
    }
}

/* Four UE4M3 bytes -> their half values (qk_ue4m3_half), each on 4 lanes. */
ALWAYS_INLINE __m512 ue4m3_lanes(const uint8_t *d)
{
    uint32_t v;
    memcpy(&v, d, 4);
    __m128i x = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)v));
    __m128i e = _mm_and_si128(_mm_srli_epi32(x, 3), _mm_set1_epi32(0xF));
    __m128i m = _mm_and_si128(x, _mm_set1_epi32(7));
    __m128i normal = _mm_or_si128(_mm_slli_epi32(_mm_add_epi32(e, _mm_set1_epi32(119)), 23),
                                  _mm_slli_epi32(m, 20));
    __m128 sub = _mm_mul_ps(_mm_cvtepi32_ps(m), _mm_set1_ps(0x1p-10f));
    __mmask8 is_sub = _mm_cmpeq_epi32_mask(e, _mm_setzero_si128());
    __mmask8 is_zero = _mm_cmpeq_epi32_mask(x, _mm_setzero_si128()) |
                       _mm_cmpeq_epi32_mask(x, _mm_set1_epi32(0x7F));
    __m128 s = _mm_mask_mov_ps(_mm_castsi128_ps(normal), is_sub, sub);
    s = _mm_mask_mov_ps(s, is_zero, _mm_setzero_ps());
    const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s));
}

static void dec_nvfp4(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_nvfp4 *b = (const struct blk_nvfp4 *)row + e0 / 64;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qk_e2m1_x2));
    const __m512i dup = _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i shift = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);
    for (int64_t k = 0; k < n / 64; k++) {
        __m256i y = _mm256_loadu_si256((const __m256i *)b[k].qs);
        __m512i z = _mm512_permutexvar_epi64(dup, _mm512_castsi256_si512(y));
        z = _mm512_and_si512(_mm512_srlv_epi64(z, shift), _mm512_set1_epi8(0x0F));
        put64(d, 64 * k, _mm512_shuffle_epi8(lut, z), ue4m3_lanes(b[k].d), false);
    }
}

static void dec_q4_k(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q4_k *b = (const struct blk_q4_k *)row + e0 / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t k = 0; k < n / 256; k++) {
        float dd = h2f(b[k].d), dmin = h2f(b[k].dmin), scale[8];
        const uint8_t *s6 = b[k].scales;
        for (int s = 0; s < 8; s++) {
            int sc = s < 4 ? s6[s] & 63 : (s6[s + 4] & 0xF) | ((s6[s - 4] >> 6) << 4);
            int m = s < 4 ? s6[s + 4] & 63 : (s6[s + 4] >> 4) | ((s6[s] >> 6) << 4);
            scale[s] = dd * (float)sc;
            d->mw[8 * k + s] = -(dmin * (float)m);
        }
        for (int c = 0; c < 4; c++) {
            __m256i y = _mm256_loadu_si256((const __m256i *)(b[k].qs + 32 * c));
            __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(y, m4)),
                                           _mm256_and_si256(_mm256_srli_epi16(y, 4), m4), 1);
            put64(d, 256 * k + 64 * c, w, lanes2(scale[2 * c], scale[2 * c + 1]), false);
        }
    }
}

static void dec_q6_k(const void *row, int64_t e0, int64_t n, struct qk_dec *d)
{
    const struct blk_q6_k *b = (const struct blk_q6_k *)row + e0 / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m512i off = _mm512_set1_epi8(32);
    const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    for (int64_t k = 0; k < n / 256; k++) {
        float dd = h2f(b[k].d);
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = b[k].ql + 64 * half, *qh = b[k].qh + 32 * half;
            __m256i A = _mm256_loadu_si256((const __m256i *)ql);
            __m256i B = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i H = _mm256_loadu_si256((const __m256i *)qh);
            /* the two high bits of each group, moved to bit positions 4..5 */
            __m256i h0 = _mm256_and_si256(_mm256_slli_epi16(H, 4), m2);
            __m256i h1 = _mm256_and_si256(_mm256_slli_epi16(H, 2), m2);
            __m256i h2 = _mm256_and_si256(H, m2);
            __m256i h3 = _mm256_and_si256(_mm256_srli_epi16(H, 2), m2);
            __m256i q0 = _mm256_or_si256(_mm256_and_si256(A, m4), h0);
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(B, m4), h1);
            __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4), h2);
            __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4), h3);
            __m512i w01 = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
            __m512i w23 = _mm512_inserti64x4(_mm512_castsi256_si512(q2), q3, 1);
            const int8_t *sc = b[k].scales + 8 * half;
            __m128 s0 = _mm_set_ps(dd * sc[3], dd * sc[2], dd * sc[1], dd * sc[0]);
            __m128 s1 = _mm_set_ps(dd * sc[7], dd * sc[6], dd * sc[5], dd * sc[4]);
            int64_t i = 256 * k + 128 * half;
            put64(d, i, _mm512_sub_epi8(w01, off),
                  _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s0)), false);
            put64(d, i + 64, _mm512_sub_epi8(w23, off),
                  _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s1)), false);
        }
    }
}

static void dec_f16(const void *row, int64_t e0, int64_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)row + e0;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m256i v = _mm256_maskz_loadu_epi16(m, h + i);
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(v));
    }
}

static void dec_bf16(const void *row, int64_t e0, int64_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)row + e0;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h + i));
        _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
}

/* ---- dot kernels ---- */

ALWAYS_INLINE void dotq_tile(const struct qk_dec *dec, const int NR, int64_t npad, int64_t e0,
                             bool has_min, const struct q_act *a, int64_t b0, const int NB,
                             float *acc, float *macc)
{
    __m512 vacc[QK_R][QK_T];
    const uint8_t *aq[QK_T];
    const float *ad[QK_T];
    for (int t = 0; t < NB; t++) {
        aq[t] = qk_act_q(a, b0 + t) + e0;
        ad[t] = qk_act_da(a, b0 + t) + e0 / 4;
        for (int r = 0; r < NR; r++)
            vacc[r][t] = _mm512_loadu_ps(acc + (r * QK_T + t) * 16);
    }
    const __m512i bias = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    for (int64_t i = 0; i < npad; i += 64) {
        __m512i w[QK_R], nc[QK_R];
        __m512 dw[QK_R];
        for (int r = 0; r < NR; r++) {
            w[r] = _mm512_loadu_si512(dec[r].w + i);
            nc[r] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, w[r]));
            dw[r] = _mm512_loadu_ps(dec[r].dw + i / 4);
        }
        for (int t = 0; t < NB; t++) {
            __m512i x = _mm512_loadu_si512(aq[t] + i);
            __m512 da = _mm512_loadu_ps(ad[t] + i / 4);
            for (int r = 0; r < NR; r++) {
                __m512i s = _mm512_dpbusd_epi32(nc[r], x, w[r]);
                vacc[r][t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], da), vacc[r][t]);
            }
        }
    }
    for (int t = 0; t < NB; t++)
        for (int r = 0; r < NR; r++)
            _mm512_storeu_ps(acc + (r * QK_T + t) * 16, vacc[r][t]);
    if (!has_min)
        return;
    const int64_t nblk = npad / 32;
    for (int t = 0; t < NB; t++) {
        const float *sa = qk_act_sa(a, b0 + t) + e0 / 32;
        for (int r = 0; r < NR; r++) {
            float *mc = macc + (r * QK_T + t) * 16;
            __m512 m = _mm512_loadu_ps(mc);
            for (int64_t k = 0; k < nblk; k += 16) {
                __mmask16 mask = nblk - k >= 16 ? 0xFFFF : (__mmask16)((1u << (nblk - k)) - 1);
                m = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, dec[r].mw + k),
                                    _mm512_maskz_loadu_ps(mask, sa + k), m);
            }
            _mm512_storeu_ps(mc, m);
        }
    }
}

#define DOTQ_CASE(nr, nb)                                                                          \
    case (nr)*16 + (nb):                                                                           \
        dotq_tile(dec, nr, npad, e0, has_min, a, b0, nb, acc, macc);                               \
        break;

static void dot_q(const struct qk_dec *dec, int nr, int64_t npad, int64_t e0, bool has_min,
                  const struct q_act *a, int64_t b0, int nb, float *acc, float *macc)
{
    switch (nr * 16 + nb) {
        DOTQ_CASE(1, 1)
        DOTQ_CASE(1, 2)
        DOTQ_CASE(1, 3)
        DOTQ_CASE(1, 4)
        DOTQ_CASE(1, 5)
        DOTQ_CASE(1, 6)
        DOTQ_CASE(1, 7)
        DOTQ_CASE(1, 8)
        DOTQ_CASE(2, 1)
        DOTQ_CASE(2, 2)
        DOTQ_CASE(2, 3)
        DOTQ_CASE(2, 4)
        DOTQ_CASE(2, 5)
        DOTQ_CASE(2, 6)
        DOTQ_CASE(2, 7)
        DOTQ_CASE(2, 8)
    default:
        break;
    }
}

ALWAYS_INLINE void dotf_tile(const float *const *w, const int NR, int64_t n, int64_t e0,
                             const struct q_act *a, int64_t b0, const int NB, float *acc)
{
    __m512 vacc[QK_R][QK_T];
    const float *x[QK_T];
    for (int t = 0; t < NB; t++) {
        x[t] = qk_act_f(a, b0 + t) + e0;
        for (int r = 0; r < NR; r++)
            vacc[r][t] = _mm512_loadu_ps(acc + (r * QK_T + t) * 16);
    }
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 wv[QK_R];
        for (int r = 0; r < NR; r++)
            wv[r] = _mm512_maskz_loadu_ps(m, w[r] + i);
        for (int t = 0; t < NB; t++) {
            __m512 xv = _mm512_loadu_ps(x[t] + i);
            for (int r = 0; r < NR; r++)
                vacc[r][t] = _mm512_fmadd_ps(wv[r], xv, vacc[r][t]);
        }
    }
    for (int t = 0; t < NB; t++)
        for (int r = 0; r < NR; r++)
            _mm512_storeu_ps(acc + (r * QK_T + t) * 16, vacc[r][t]);
}

#define DOTF_CASE(nr, nb)                                                                          \
    case (nr)*16 + (nb):                                                                           \
        dotf_tile(w, nr, n, e0, a, b0, nb, acc);                                                   \
        break;

static void dot_f(const float *const *w, int nr, int64_t n, int64_t e0, const struct q_act *a,
                  int64_t b0, int nb, float *acc)
{
    switch (nr * 16 + nb) {
        DOTF_CASE(1, 1)
        DOTF_CASE(1, 2)
        DOTF_CASE(1, 3)
        DOTF_CASE(1, 4)
        DOTF_CASE(1, 5)
        DOTF_CASE(1, 6)
        DOTF_CASE(1, 7)
        DOTF_CASE(1, 8)
        DOTF_CASE(2, 1)
        DOTF_CASE(2, 2)
        DOTF_CASE(2, 3)
        DOTF_CASE(2, 4)
        DOTF_CASE(2, 5)
        DOTF_CASE(2, 6)
        DOTF_CASE(2, 7)
        DOTF_CASE(2, 8)
    default:
        break;
    }
}

/* ---- activation quantization (bit-identical to qk_ref_act_q8) ---- */

static void act_q8(struct q_act *a, const float *x, int64_t ldx, int64_t r0, int64_t r1)
{
    const int64_t pad = qk_act_pad(Q_Q8_1, a->cols);
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    const __m512i b128 = _mm512_set1_epi32(128);
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * ldx;
        uint8_t *q = (uint8_t *)qk_act_q(a, r);
        float *da = (float *)qk_act_da(a, r), *sa = (float *)qk_act_sa(a, r);
        for (int64_t k = 0; k < a->cols / 32; k++, xr += 32) {
            __m512 v0 = _mm512_loadu_ps(xr), v1 = _mm512_loadu_ps(xr + 16);
            __m512 mx = _mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask));
            float amax = _mm512_reduce_max_ps(mx);
            float id = amax != 0.0f ? 127.0f / amax : 0.0f;
            float d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
            __m512 vid = _mm512_set1_ps(id);
            __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
            __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
            i0 = _mm512_min_epi32(_mm512_max_epi32(i0, lo), hi);
            i1 = _mm512_min_epi32(_mm512_max_epi32(i1, lo), hi);
            int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
            _mm_storeu_si128((__m128i *)(q + 32 * k),
                             _mm512_cvtepi32_epi8(_mm512_add_epi32(i0, b128)));
            _mm_storeu_si128((__m128i *)(q + 32 * k + 16),
                             _mm512_cvtepi32_epi8(_mm512_add_epi32(i1, b128)));
            _mm256_storeu_ps(da + 8 * k, _mm256_set1_ps(d));
            sa[k] = d * (float)sum;
        }
        memset(q + a->cols, 128, (size_t)(pad - a->cols));
        memset(da + a->cols / 4, 0, (size_t)(pad - a->cols) / 4 * sizeof(float));
        memset(sa + a->cols / 32, 0, (size_t)(pad - a->cols) / 32 * sizeof(float));
    }
}

const struct q_kernels qk_avx512 = {
    .name = "avx512",
    .isa = Q_ISA_AVX512,
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
